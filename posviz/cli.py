"""A position table's headline numbers or its full report, from `python -m posviz`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from posviz.embedding import Embedding, LoadError
from posviz.io import list_tensors, load, suggest_trim
from posviz.spectrum import THRESHOLDS, Spectrum, spectrum

__all__ = ["build_parser", "main"]

#: Singular values printed and exported.
N_SINGULAR_VALUES = 10


def build_parser() -> argparse.ArgumentParser:
    """The `posviz` parser; each subcommand sets ``run(args) -> exit code``."""
    parser = argparse.ArgumentParser(
        prog="posviz", description="Analyse a transformer position-embedding table."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    table = argparse.ArgumentParser(add_help=False)  # how every command picks its table
    table.add_argument("path", metavar="PATH", help=".npy, .npz, .safetensors, .csv/.tsv/.txt")
    table.add_argument("--tensor", metavar="NAME", help="tensor to read (default: detected)")
    table.add_argument(
        "--drop-prefix",
        type=int,
        default=0,
        metavar="K",
        help="drop the first K rows (class tokens, reserved rows) before analysis",
    )
    table.add_argument(
        "--no-center", action="store_true", help="do not subtract the mean row first (no PCA)"
    )
    summary = commands.add_parser(
        "summary",
        parents=[table],
        help="spectrum summary: components for 50-99%% variance, effective ranks",
        description="Singular-value summary of a position table read from PATH.",
    )
    summary.add_argument("--json", action="store_true", help="print one JSON object")
    summary.set_defaults(run=_summary)
    report = commands.add_parser(
        "report",
        parents=[table],
        help="standalone HTML report of every analysis (opens offline)",
        description="Write a standalone HTML report of the table read from PATH.",
    )
    report.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML to write")
    report.add_argument("--seed", type=int, default=0, help="seed of controls and probes")
    report.set_defaults(run=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 when the file is refused)."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except LoadError as exc:
        print(f"posviz {args.command}: {exc}", file=sys.stderr)
        return 2


def _summary(args: argparse.Namespace) -> int:
    table = load(args.path, tensor=args.tensor, row_start=args.drop_prefix)
    result = spectrum(table.values, center=not args.no_center)
    if args.json:
        record = {"shape": list(table.shape), "dtype": table.dtype, "tensor": table.name}
        record |= result.metrics()
        record["singular_values"] = result.singular_values[:N_SINGULAR_VALUES].tolist()
        print(json.dumps(record))
    else:
        print(_describe(table, result, hint=_trim_hint(args, table)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from posviz.report import build_report  # plotly and every analysis: not for `summary`

    table = load(args.path, tensor=args.tensor, row_start=args.drop_prefix)
    html = build_report(table, center=not args.no_center, seed=args.seed)
    with open(args.output, "w", encoding="utf-8") as out:
        out.write(html)
    print(
        f"wrote {args.output} ({len(html) / 2**20:.1f} MiB): {table.name}, {table.describe_rows()}"
    )
    return 0


def _trim_hint(args: argparse.Namespace, table: Embedding) -> str:
    """A --drop-prefix suggestion when the rows look like they start with non-positions."""
    if args.drop_prefix:
        return ""
    (info,) = [i for i in list_tensors(args.path) if i.name == table.name]
    trim = suggest_trim(info.name, info.shape)
    if not trim.row_start:
        return ""
    return f"hint: {trim.reason}; pass --drop-prefix {trim.row_start} to analyse positions only."


def _describe(table: Embedding, result: Spectrum, *, hint: str) -> str:
    metrics = result.metrics()
    levels = "/".join(f"{round(t * 100)}" for t in THRESHOLDS)
    ks = " / ".join(str(metrics[f"k{round(t * 100)}"]) for t in THRESHOLDS)
    centring = (
        "mean row subtracted first (PCA); --no-center to skip"
        if result.centered
        else "not centred (--no-center): raw table"
    )
    values = "  ".join(f"{v:.4g}" for v in result.singular_values[:N_SINGULAR_VALUES])
    rows = {
        "source": table.source,
        "tensor": f"{table.name} (stored as {table.dtype} in a {Path(table.source).suffix} file)",
        "shape": f"{table.shape[0]} x {table.shape[1]}, {table.describe_rows()}",
        "centring": centring,
        f"k at {levels}%": f"{ks} components",
        "effective rank": f"{metrics['effective_rank']:.2f}",
        "stable rank": f"{metrics['stable_rank']:.2f}",
        "participation ratio": f"{metrics['participation_ratio']:.2f}",
        "above noise": f"{metrics['n_above_noise']} components, σ > "
        f"{metrics['noise_threshold']:.4g} (Gavish & Donoho 2014: ω(β)·median σ)",
        "singular values": values,
    }
    lines = [f"{label:<22}{value}" for label, value in rows.items()]
    return "\n".join([*lines, hint] if hint else lines)
