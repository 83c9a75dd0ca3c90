"""`posviz summary` of a model's position scheme: from a config.json file, a known model's
(``preset:NAME``), from the Hub by name, from a safetensors checkpoint with its config.json
beside it, or from a GGUF file's metadata, reading only what the scheme needs (config.json for
rotary and ALiBi; the bias tensors for T5; the relative table for DeBERTa; a stored inv_freq
buffer when asked to check it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from posviz import hub
from posviz.models import weights
from posviz.models.weights import read_config
from posviz.records import scheme_record
from posviz.rows import row_offsets
from posviz.schemes._values import given
from posviz.schemes.config import Scheme, position_scheme
from posviz.schemes.layers import layer_table
from posviz.source import HubRef, LocalPath, Preset, parse_source

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
        help="rotary models on the Hub or in a local checkpoint: also read the safetensors "
        "headers and a stored rotary_emb.inv_freq buffer, and compare it with config.json's",
    )


def is_config(path: str) -> bool:
    """Whether PATH names a config.json (any .json file) rather than weights."""
    return path.lower().endswith(".json")


def summary(args: argparse.Namespace) -> int | None:
    """Print the scheme record of PATH and return 0, or None when PATH is to be analysed as a
    position table as before (a weights file; a Hub model with a learned table)."""
    path = args.path
    source = parse_source(path)
    if isinstance(source, LocalPath) and Path(path).is_dir():  # a model folder: its weights
        path = str(weights.weights_in(path))
        source = LocalPath(path)
    gguf = path.lower().endswith(".gguf")
    named = isinstance(source, HubRef | Preset)
    if not (named or is_config(path) or weights.config_beside(path) or gguf):
        return None
    config, provenance, opened = read_config(source)
    scheme = position_scheme(config)
    if opened is not None and scheme.kind == "learned_absolute":
        if isinstance(opened, hub.ConfigFile):
            args.opened = opened  # the table is read at the commit config.json was read at
        return None
    record = scheme_record(
        scheme,
        provenance,
        opened,
        context=args.context,
        positions=args.positions,
        center=not args.no_center,
        check_inv_freq=args.check_inv_freq,
    )
    if args.json:
        print(json.dumps(record, allow_nan=False))
    else:
        print(_describe(record, scheme))
    return 0


#: What a null of a scheme's record means, said in the text (the JSON keeps null).
_UNSET = {
    "original_context": "not given (config.json names no pre-training context)",
    "rotating_pairs": "all",
    "stored_inv_freq": "not read (--check-inv-freq compares it)",
    "context": "not in config.json (max_position_embeddings)",
}


def _describe(record: dict[str, Any], scheme: Scheme) -> str:
    """The record in a few lines for people: lists and nested records shortened, a flat one (the
    provenance) whole, each null said in words (the settings' as their defaults), the layers
    in one sentence, DeBERTa's rows by their offsets."""
    lines = []
    for key, value in record.items():
        if value is None:
            value = _UNSET.get(key, "none")
        elif key == "params":
            value = ", ".join(f"{k} {'default' if v is None else v}" for k, v in value.items())
        elif key == "layers":
            value = layer_table(scheme.layers).describe()
        elif key == "row_offsets":
            spec = given(scheme.relative_table, "DeBERTa's relative table")
            offsets = row_offsets(
                position_buckets=spec.position_buckets,
                max_relative_positions=spec.max_relative_positions,
            )
            value = f"{'; '.join(offsets.text()[:4])}; … {len(value)} rows"
        elif isinstance(value, list) and len(value) > 8:
            head = ", ".join(_short(v) for v in value[:4])
            value = f"[{head}, … {len(value)} values]"
        elif isinstance(value, dict) and not any(
            isinstance(v, list | dict) for v in value.values()
        ):
            # Flat (a provenance: its sha256 and revision are what a reader cites): whole.
            lines.append(key)
            lines += [f"  {k:<30}{_short(v)}" for k, v in value.items()]
            continue
        elif isinstance(value, dict):  # nested (bands, a table's record): --json prints it
            value = json.dumps(value, default=str, ensure_ascii=False)
            value = value if len(value) < 200 else value[:197] + "…"
        lines.append(f"{key:<32}{_short(value)}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
