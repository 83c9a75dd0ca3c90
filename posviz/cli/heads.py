"""`posviz heads SOURCE`: how each attention head reads position, from the layers' weights
alone (a model on the Hub by name, a GGUF file, or a safetensors checkpoint with its
config.json beside it: one file, a sharded checkpoint's index, or their folder), by each
layer's step of `posviz.pipeline.HEADS_STEPS`.

``--layer N`` (default 0) prints one layer; ``--layers all|N|A-B|i,j,k`` every layer named,
read one at a time (`posviz.depth`), with ``layer K/N`` progress lines on stderr and, as JSON,
one object whose ``layers`` lists the per-layer objects ``--layer N --json`` prints and whose
``depth`` summarises them. The bytes to fetch are said on stderr before any is fetched; every
refusal is a `posviz._params.Refused` (exit 2, one line)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from posviz import depth, pipeline
from posviz._params import Refused, bounds_of
from posviz.heads import LABELS
from posviz.hub.cache import cache_limit
from posviz.models import attention
from posviz.models.attention import LayerPlan
from posviz.records import HEADS_POSITIONS, heads_record

__all__ = ["add_parser"]


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The `heads` subcommand."""
    heads = commands.add_parser(
        "heads",
        help="how each attention head reads position, from its layer's weights",
        description="Per-head position numbers of attention layers, from their query/key "
        "weights alone: a learned table's positional kernels and attention patterns, a rotary "
        "model's usage of each frequency pair, ALiBi's and T5's per-head bias; each number "
        "beside its null (rows permuted across heads). Only the layers' q/k rows, their norms "
        "and (learned tables) the position table are read, one layer at a time.",
    )
    heads.add_argument(
        "source",
        metavar="SOURCE",
        help="hf:REPO[@REVISION][:QUANT|FILE] (a GGUF repo's quantization: only that file is "
        "read); a .gguf file; or a checkpoint with its config.json beside it: a .safetensors "
        "file, a sharded one's model.safetensors.index.json, or their folder",
    )
    which = heads.add_mutually_exclusive_group()
    which.add_argument("--layer", type=int, metavar="N", help="one layer (default 0)")
    which.add_argument(
        "--layers",
        metavar="L",
        help=f"several layers: {depth.LAYERS_SYNTAX} (e.g. 0-3,7), read one at a time",
    )
    heads.add_argument(
        "--positions",
        type=int,
        default=HEADS_POSITIONS,
        metavar="N",
        help=f"rows of each kernel and offsets of each profile printed in the JSON (default "
        f"{HEADS_POSITIONS}: its positions_printed); the numbers use every position "
        "(positions_analysed)",
    )
    heads.add_argument(
        "--n-positions",
        type=int,
        metavar="N",
        help="learned tables, ALiBi and T5: positions the kernels span (default: the table's "
        "own, at most 2,048; ALiBi and T5 512)",
    )
    heads.add_argument(
        "--context", type=int, metavar="L", help="rotary: the rule's sequence length"
    )
    heads.add_argument("--draws", type=int, metavar="K", help="null draws (default: the core's)")
    heads.add_argument("--seed", type=int, metavar="S", help="seed of the null (default 0)")
    heads.add_argument("--json", action="store_true", help="print one JSON object")
    heads.set_defaults(run=run)


def _params(args: argparse.Namespace, kind: str, where: str) -> dict[str, Any]:
    """The settings asked, checked against the step's bounds before anything is fetched."""
    params: dict[str, Any] = {}
    if args.context is not None:
        if kind != "rotary":
            msg = f"--context is a rotary rule's setting; {where} is {kind.replace('_', ' ')}."
            raise Refused(msg)
        params["context"] = args.context
    if args.n_positions is not None:
        if kind == "rotary":
            msg = f"--n-positions spans kernels; {where} is rotary (no kernels)."
            raise Refused(msg)
        params["n_positions"] = args.n_positions
    if args.draws is not None:
        params["n_draws"] = args.draws
    if args.seed is not None:
        params["seed"] = args.seed
    step = pipeline.HEADS_STEPS[kind]
    cores = [pipeline.STEPS[step.__name__].core]
    if kind == "rotary":  # its context is the rule's (rotary_frequencies')
        cores.append(pipeline.STEPS[pipeline.rotary_frequencies.__name__].core)
    for core in cores:
        for name, bound in bounds_of(core).items():
            if name in params:
                bound.check(name, params[name])
    bounds_of(heads_record)["positions"].check("--positions", args.positions)
    return params


def _told(what: str, plans: tuple[LayerPlan, ...], nbytes: int, waiting: int, remote: bool) -> None:
    n_tensors = len({(r.name, r.rows) for p in plans for r in p.reads})
    plan = plans[0]
    print(
        f"heads: {what} ({plan.family}, {plan.kind}): {n_tensors} tensors, {nbytes:,} bytes"
        + (f", {waiting:,} to fetch" if remote else ", read from disk"),
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    model = attention.open_source(args.source)
    opened = attention.open_model(model)
    if args.layers is not None:
        return _many(args, opened)
    plan = opened.plan(0 if args.layer is None else args.layer)
    params = _params(args, plan.kind, f"layer {plan.layer}")
    depth.check_heads(plan, shown=args.positions, **params)  # before a weight is read
    waiting = sum(r.nbytes for r in plan.reads if opened.remote and not opened.cached(r))
    _told(f"layer {plan.layer} of {opened.label}", (plan,), plan.nbytes, waiting, opened.remote)
    layer = attention.read_planned(opened, plan)
    result = pipeline.call(pipeline.HEADS_STEPS[plan.kind], layer, **params)
    record = heads_record(layer, result, positions=args.positions)
    print(json.dumps(record, allow_nan=False) if args.json else _describe(record))
    return 0


def _many(args: argparse.Namespace, opened: attention.Opened) -> int:
    plan = depth.plan_depth(opened, args.layers)
    params = _params(args, plan.kind, f"{plan.model} ({plan.family})")
    for each_plan in plan.plans:  # before a weight is read
        depth.check_heads(each_plan, shown=args.positions, **params)
    asked = plan.read
    what = f"layers {_span(asked)} of {plan.model}"
    _told(what, plan.plans, plan.nbytes, plan.to_fetch, plan.remote)
    if not plan.cache_holds:
        print(
            f"heads: the Hub cache holds {cache_limit():,} bytes (POSVIZ_HUB_CACHE_SIZE), fewer "
            "than these layers' rows: a second run fetches again what it let go",
            file=sys.stderr,
            flush=True,
        )
    for layer, why in plan.skipped.items():
        print(f"heads: layer {layer} skipped: {why}", file=sys.stderr, flush=True)
    records: list[dict[str, Any]] = []

    def each(heads: depth.LayerHeads) -> None:
        print(
            f"layer {heads.position + 1}/{len(asked)}: layer {heads.index}, "
            f"{heads.bytes_fetched:,} bytes fetched",
            file=sys.stderr,
            flush=True,
        )
        records.append(heads.record(args.positions))

    found = depth.collect(plan, each=each, **params)
    record = depth.layers_record(found, records)
    print(json.dumps(record, allow_nan=False) if args.json else _describe_depth(record))
    return 0


def _span(layers: tuple[int, ...]) -> str:
    """0 … 11 for a run of layers, else the list."""
    if len(layers) > 2 and layers == tuple(range(layers[0], layers[-1] + 1)):
        return f"{layers[0]} … {layers[-1]}"
    return ", ".join(map(str, layers))


def _legend(definitions: dict[str, str]) -> list[str]:
    """What each column is, one line each."""
    labels = "; ".join(
        f"{label}: {name} ≥ {threshold:g}"
        for label, (name, threshold) in LABELS.items()
        if name in definitions
    )
    return [
        "columns:",
        *(f"  {name}: {text}" for name, text in definitions.items()),
        f"  label: the first that holds, its number above every null draw: {labels}",
    ]


def _value(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4g}"


def _describe(record: dict) -> str:
    """One layer: its shape, a line per head (label and numbers), the null, the legend."""
    names = list(record["definitions"])
    widths = [max(len(n), 10) for n in names]
    lines = [
        f"{record['family']} layer {record['layer']} ({record['scheme']}): {record['n_heads']} "
        f"heads, {record['n_kv_heads']} key heads, head_dim {record['head_dim']}; "
        f"{record['bytes_fetched']:,} bytes fetched",
        *record["notes"],
        "head  label           "
        + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True)),
    ]
    for head in record["heads"]:
        values = "  ".join(f"{_value(head[n]):>{w}}" for n, w in zip(names, widths, strict=True))
        lines.append(f"{head['head']:>4}  {(head['label'] or '-'):<15} {values}")
    spread = record["null"]["spread"]
    if spread:
        lines.append(
            "null max " + "  ".join(f"{n}: {spread[n]['max']:.4g}" for n in names if n in spread)
        )
    return "\n".join([*lines, *_legend(record["definitions"])])


def _describe_depth(record: dict) -> str:
    """Every layer: a row of each number's largest value over its heads and the layer's null
    max, the heads labelled; then the legend."""
    summary = record["depth"]
    definitions = record["layers"][0]["definitions"]
    names = list(definitions)
    widths = [max(len(n), 17) for n in names]
    lines = [
        f"{record['family']} ({record['scheme']}) {record['model']}: layers "
        f"{_span(tuple(summary['layers']))} of {record['n_layers']}; "
        f"{record['bytes_fetched']:,} bytes fetched",
        "each number: its largest value over the layer's heads / the layer's null max",
        "layer  labelled  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True)),
    ]
    labelled: dict[int, list[str]] = {}
    for label, found in summary["labels"].items():
        for layer, head in found["heads"]:
            labelled.setdefault(layer, []).append(f"head {head} {label}")
    for row, layer in enumerate(summary["layers"]):
        cells = []
        for name, width in zip(names, widths, strict=True):
            got = summary["numbers"][name]
            cells.append(
                f"{_value(got['max'][row]) + ' / ' + _value(got['null_max'][row]):>{width}}"
            )
        lines.append(f"{layer:>5}  {len(labelled.get(layer, [])):>8}  " + "  ".join(cells))
    for layer, why in summary["skipped"].items():
        lines.append(f"{layer:>5}  skipped: {why}")
    lines += [f"layer {layer}: {', '.join(heads)}" for layer, heads in sorted(labelled.items())]
    return "\n".join([*lines, *_legend(definitions)])
