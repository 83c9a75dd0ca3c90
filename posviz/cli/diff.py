"""`posviz diff A B`: where two sources of one model's rotary positions part (config.json, a
GGUF, a Hub model, or a runtime's inv_freq / cos-sin dump). Exit 0: they agree within the
tolerance; 1: they differ; 2: a source cannot be read."""

from __future__ import annotations

import argparse
import json
from typing import Any

from posviz.models.sources import compare, read_side
from posviz.schemes.diff import ANGLE_LIMIT, FIELDS, LAYOUTS, NUMBERS, SchemeDiff, cell

__all__ = ["add_parser"]

EXAMPLES = """examples:
  posviz diff config.json Llama-3.1-8B-Q4_K_M.gguf          transformers' config against a GGUF
  posviz diff hf:meta-llama/Llama-3.1-8B hf:bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M
  posviz diff config.json inv_freq.npy                       a runtime's frequencies
  posviz diff config.json cos_sin.safetensors --layout-b interleaved --context 131072
"""


def add_parser(commands: Any) -> None:
    """The `diff` subcommand."""
    parser = commands.add_parser(
        "diff",
        help="where two sources of one model's rotary positions part (exit 1 when they do)",
        description="Compare two sources of one model's positions: a config.json, a GGUF, a "
        "Hub model (hf:REPO[@REV][:FILE.gguf|:QUANT]) or a runtime's dump (an inv_freq vector, "
        "or a cos/sin table: one array [cos | sin], or tensors named cos and sin). Every field "
        "side by side, the first that differs, inv_freq pair by pair, and the cos/sin table "
        "position by position. Exit 0: they agree within the tolerance; 1: they differ; 2: a "
        "source cannot be read.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A", help="first source")
    parser.add_argument("b", metavar="B", help="second source")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=1e-6,
        help="largest relative difference that agrees (default 1e-6: float32's rounding)",
    )
    parser.add_argument(
        "--context",
        type=int,
        metavar="L",
        help="sequence length both rules are applied at (default: A's max_position_embeddings; "
        "LongRoPE's long factors beyond its original context)",
    )
    parser.add_argument(
        "--positions",
        type=int,
        metavar="N",
        help="positions 0..N-1 of the cos/sin tables compared (default: a dump's own, else the "
        "shorter context, at most 32768)",
    )
    for side in ("a", "b"):
        parser.add_argument(
            f"--layout-{side}",
            choices=list(LAYOUTS),
            default="half-split",
            help=f"column order of {side.upper()} when it is a cos/sin dump (default half-split)",
        )
        parser.add_argument(
            f"--first-position-{side}",
            type=int,
            default=0,
            metavar="P",
            help=f"the position of the first row of {side.upper()} when it is a table dump",
        )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    a = read_side(args.a, layout=args.layout_a, first_position=args.first_position_a)
    b = read_side(args.b, layout=args.layout_b, first_position=args.first_position_b)
    diff = compare(a, b, context=args.context, tolerance=args.tolerance, positions=args.positions)
    if args.json:
        print(json.dumps(diff.record(), allow_nan=False))
    else:
        print(describe(diff, args.a, args.b))
    return 0 if diff.agree else 1


def describe(diff: SchemeDiff, a: str, b: str) -> str:
    """The comparison for people: the fields side by side, then the numbers, then the verdict."""
    tolerance = diff.params["tolerance"]
    lines = [f"A  {a}", f"B  {b}", ""]
    width = max(len(f["field"]) for f in diff.fields) + 2
    cells = [(cell(f["a"]), cell(f["b"])) for f in diff.fields]
    column = max([len(x) for pair in cells for x in pair] + [8]) + 2
    lines.append(f"{'field':<{width}}{'A':<{column}}{'B':<{column}}")
    for f, (x, y) in zip(diff.fields, cells, strict=True):
        verdict = {True: "same", False: "DIFFERS", None: "-"}[f["same"]]
        lines.append(f"{f['field']:<{width}}{x:<{column}}{y:<{column}}{verdict}")
    lines.append("")
    largest = diff.inv_freq_max_relative_difference
    if largest is None:
        lines.append("inv_freq: the widths differ, pairs not compared")
    else:
        pairs = _ranges(diff.pairs_differing) or "none"
        n = min(diff.a.n_pairs, diff.b.n_pairs)
        tables = [name for name, s in (("A", diff.a), ("B", diff.b)) if s.kind == "table"]
        note = (
            f" ({' and '.join(tables)}'s recovered from the table; pairs judged by their angles)"
            if tables
            else ""
        )
        lines.append(
            f"inv_freq: largest relative difference {largest:.3g} over {n} pairs "
            f"(tolerance {tolerance:g}){note}; pairs differing: {pairs}"
        )
    first, last = int(diff.positions[0]), int(diff.positions[-1])
    over = diff.first_position_over_0_01_rad
    unit = diff.a.attention_factor is None or diff.b.attention_factor is None
    lines.append(
        f"cos/sin over positions {first}..{last}"
        + (" (unit rotations: one side states no attention factor)" if unit else "")
        + ": largest absolute difference "
        f"{diff.table_max_abs_difference:.3g}; the angle error first passes {ANGLE_LIMIT} rad "
        f"at {'no position' if over is None else f'position {over}'} "
        f"(largest {float(diff.angle_error.max()):.3g} rad)"
    )
    lines += [f"hint: {hint}" for hint in diff.hints]
    rule = f"rules applied at sequence length {diff.params['context']}"
    if diff.agree:
        lines.append(f"agree within {tolerance:g} ({rule}): exit 0")
    else:
        what = {**FIELDS, **NUMBERS}.get(diff.first_difference or "", "")
        lines.append(
            f"DIFFER: first at {diff.first_difference}"
            + (f" ({what})" if what else "")
            + f"; {rule}: exit 1"
        )
    return "\n".join(lines)


def _ranges(values: list[int]) -> str:
    """0, 1, 2, 5 -> '0-2, 5' (pairs differing, briefly).

    >>> _ranges([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
    """
    parts: list[str] = []
    for v in values:
        if parts and int(parts[-1].split("-")[-1]) == v - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{v}"
        else:
            parts.append(str(v))
    return ", ".join(parts)
