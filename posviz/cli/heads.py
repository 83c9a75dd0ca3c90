"""`posviz heads SOURCE`: how each attention head of one layer reads position, from that
layer's weights alone (a model on the Hub by name, or a safetensors checkpoint with its
config.json beside it: one file, a sharded checkpoint's index, or their folder), by the layer's
step of `posviz.pipeline.HEADS_STEPS`. The bytes to fetch are said on stderr before any is
fetched; every refusal is a `posviz._params.Refused` (exit 2, one line)."""

from __future__ import annotations

import argparse
import json
import sys

from posviz import pipeline
from posviz._params import Refused, bounds_of
from posviz.models import attention
from posviz.records import HEADS_POSITIONS, heads_record

__all__ = ["add_parser"]


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The `heads` subcommand."""
    heads = commands.add_parser(
        "heads",
        help="how each attention head of one layer reads position, from its weights",
        description="Per-head position numbers of one attention layer, from its query/key "
        "weights alone: a learned table's positional kernels and attention patterns, a rotary "
        "model's usage of each frequency pair, ALiBi's and T5's per-head bias; each number "
        "beside its null (rows permuted across heads). Only the layer's q/k rows, its norms "
        "and (learned tables) the position table are read.",
    )
    heads.add_argument(
        "source",
        metavar="SOURCE",
        help="hf:REPO[@REVISION]; or a checkpoint with its config.json beside it: a "
        ".safetensors file, a sharded one's model.safetensors.index.json, or their folder",
    )
    heads.add_argument("--layer", type=int, default=0, metavar="N", help="layer (default 0)")
    heads.add_argument(
        "--positions",
        type=int,
        default=HEADS_POSITIONS,
        metavar="N",
        help=f"rows of each kernel and offsets of each profile printed (default "
        f"{HEADS_POSITIONS}); the numbers use every position",
    )
    heads.add_argument(
        "--context", type=int, metavar="L", help="rotary: the rule's sequence length"
    )
    heads.add_argument("--draws", type=int, metavar="K", help="null draws (default: the core's)")
    heads.add_argument("--seed", type=int, metavar="S", help="seed of the null (default 0)")
    heads.add_argument("--json", action="store_true", help="print one JSON object")
    heads.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    model = attention.open_source(args.source)
    opened = attention.open_model(model)
    plan = attention.plan_layer(opened.config, opened.tensors, layer=args.layer, label=opened.label)
    params = {}
    if args.context is not None:
        if plan.kind != "rotary":
            msg = f"--context is a rotary rule's setting; layer {plan.layer} is {plan.kind}."
            raise Refused(msg)
        params["context"] = args.context
    if args.draws is not None:
        params["n_draws"] = args.draws
    if args.seed is not None:
        params["seed"] = args.seed
    step = pipeline.HEADS_STEPS[plan.kind]
    cores = [pipeline.STEPS[step.__name__].core]
    if plan.kind == "rotary":  # its context is the rule's (rotary_frequencies')
        cores.append(pipeline.STEPS["rotary_frequencies"].core)
    for core in cores:  # checked before anything is said or fetched
        for name, bound in bounds_of(core).items():
            if name in params:
                bound.check(name, params[name])
    bounds_of(heads_record)["positions"].check("--positions", args.positions)
    waiting = sum(r.nbytes for r in plan.reads if opened.remote and not opened.cached(r))
    print(
        f"heads: layer {plan.layer} of {opened.label} ({plan.family}, {plan.kind}): "
        f"{len(plan.reads)} tensors, {plan.nbytes:,} bytes"
        + (f", {waiting:,} to fetch" if opened.remote else ", read from disk"),
        file=sys.stderr,
        flush=True,
    )
    layer = attention.read_planned(opened, plan)
    result = pipeline.call(step, layer, **params)
    record = heads_record(layer, result, positions=args.positions)
    if args.json:
        print(json.dumps(record, allow_nan=False))
    else:
        print(_describe(record))
    return 0


def _describe(record: dict) -> str:
    """The layer and a line per head: label and numbers."""
    names = list(record["definitions"])
    lines = [
        f"{record['family']} layer {record['layer']} ({record['scheme']}): {record['n_heads']} "
        f"heads, {record['n_kv_heads']} key heads, head_dim {record['head_dim']}; "
        f"{record['bytes_fetched']:,} bytes fetched",
        *record["notes"],
        "head  label            " + "  ".join(f"{n[:18]:>18}" for n in names),
    ]
    for head in record["heads"]:
        values = "  ".join(
            f"{head[n]:>18.4g}" if head[n] is not None else f"{'undefined':>18}" for n in names
        )
        lines.append(f"{head['head']:>4}  {(head['label'] or '-'):<16} {values}")
    spread = record["null"]["spread"]
    if spread:
        lines.append(
            "null max " + "  ".join(f"{n}: {spread[n]['max']:.4g}" for n in names if n in spread)
        )
    return "\n".join(lines)
