"""`posviz summary` of a model's position scheme: from a config.json file, or from the Hub by
name, fetching only what the scheme needs (config.json for rotary and ALiBi; the bias tensors
for T5; the relative table for DeBERTa; a stored inv_freq buffer when asked to check it)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from posviz import hub, scheme_hub
from posviz.embedding import LoadError
from posviz.rotary import MAX_TABLE_POSITIONS
from posviz.scheme import MAX_CONFIG_BYTES, Scheme, parse_config, position_scheme
from posviz.scheme_summary import (
    alibi_record,
    finite,
    other_layer_types,
    relative_bias_record,
    rotary_record,
    scheme_head,
    table_record,
)
from posviz.simulate import sinusoidal
from posviz.spectrum import spectrum

__all__ = ["add_arguments", "summary"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The scheme options of `posviz summary`."""
    parser.add_argument(
        "--positions",
        type=int,
        metavar="N",
        help="rows of a rotary model's position table (default: its original context, at "
        "most 8192)",
    )
    parser.add_argument(
        "--context",
        type=int,
        metavar="L",
        help="sequence length a rotary scaling rule is applied at (default: "
        "max_position_embeddings)",
    )
    parser.add_argument(
        "--check-inv-freq",
        action="store_true",
        help="hf: rotary models: also read the safetensors headers and a stored "
        "rotary_emb.inv_freq buffer, and compare it with config.json's",
    )


def is_config(path: str) -> bool:
    """Whether PATH names a config.json (any .json file) rather than weights."""
    return path.lower().endswith(".json")


def summary(args: argparse.Namespace) -> int | None:
    """Print the scheme record of PATH and return 0, or None when PATH is to be analysed as a
    position table as before (a weights file; a Hub model with a learned table)."""
    path = args.path
    if is_config(path):
        data = _read_config_file(Path(path))
        config = parse_config(data, what=path)
        source = f"{path} · sha256 {hashlib.sha256(data).hexdigest()}"
        scheme = position_scheme(config)
        record = _record(scheme, args, source=source, model=None)
    elif hub.is_hub_ref(path):
        ref = hub.parse_ref(path)
        opened = hub.open_config(ref.repo, ref.revision)
        scheme = position_scheme(opened.config)
        if scheme.kind == "learned_absolute":
            args.opened = opened  # the table is read at the commit config.json was read at
            return None
        record = _record(scheme, args, source=opened.source, model=opened)
    else:
        return None
    record = finite(record)
    if args.json:
        print(json.dumps(record, allow_nan=False))
    else:
        print(_describe(record))
    return 0


def _read_config_file(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:  # refused before it is read
            msg = f"{path} is {size:,} bytes; a model config is a few kB (limit "
            msg += f"{MAX_CONFIG_BYTES:,}). Check that this is the model's config.json."
            raise LoadError(msg)
        return path.read_bytes()
    except OSError as exc:
        msg = f"Cannot read {path}: {exc.strerror or exc}."
        raise LoadError(msg) from exc


def _record(
    scheme: Scheme, args: argparse.Namespace, *, source: str, model: hub.ConfigFile | None
) -> dict[str, Any]:
    record = scheme_head(scheme, source=source)
    center = not args.no_center
    if scheme.kind == "rotary":
        main, *others = scheme.rotary
        stored = (
            scheme_hub.stored_inv_freq(model) if model is not None and args.check_inv_freq else None
        )
        record |= rotary_record(
            main,
            context=args.context,
            positions=args.positions,
            center=center,
            source=source,
            stored_inv_freq=stored,
        )
        if others:
            record["other_layer_types"] = other_layer_types(tuple(others))
    elif scheme.kind == "alibi":
        record |= alibi_record(scheme.alibi.n_heads, alibi_bias_max=scheme.alibi.alibi_bias_max)
    elif scheme.kind == "relative_bias":
        weights = scheme_hub.bias_tensors(model) if model is not None else {}
        record |= relative_bias_record(scheme.relative_bias, weights)
    elif scheme.kind == "relative_table":
        spec = scheme.relative_table
        record |= {"span": spec.span, "hidden_size": spec.hidden_size}
        record["absolute_table_too"] = spec.absolute_too
        if model is not None:
            table, span = scheme_hub.relative_embeddings(model)
            record["relative_positions"] = span
            record["table"] = table_record(table, spectrum(table.values, center=center))
    elif scheme.kind == "sinusoidal" and scheme.width and scheme.context:
        rows = args.positions or min(scheme.context, MAX_TABLE_POSITIONS)
        table = sinusoidal(rows, scheme.width)  # built from its formula: rarely stored
        record |= {"rows": rows, "params": {"positions": rows}}
        record["table"] = table_record(table, spectrum(table.values, center=center))
    record["context"] = record.get("context", scheme.context)
    return record


def _describe(record: dict[str, Any]) -> str:
    """The record in a few lines for people; lists shortened."""
    lines = []
    for key, value in record.items():
        if isinstance(value, list) and len(value) > 8:
            head = ", ".join(_short(v) for v in value[:4])
            value = f"[{head}, … {len(value)} values]"
        elif isinstance(value, dict):
            value = json.dumps(value, default=str, ensure_ascii=False)
            value = value if len(value) < 200 else value[:197] + "…"
        lines.append(f"{key:<32}{_short(value)}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
