"""The `posviz` command: a table's headline numbers, its full report, or the app opened on it."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypedDict

from posviz import _settings, models
from posviz._params import MAX_RESULT_BYTES, Refused, quoted, refusal_text
from posviz._version import __version__
from posviz.cli import diff, heads, plan, schemes
from posviz.embedding import Embedding
from posviz.io import INDEX_SUFFIX, TensorInfo, list_tensors, suggest_trim
from posviz.models import remote, weights
from posviz.records import N_SINGULAR_VALUES, table_record
from posviz.source import Cut, HubRef, LocalPath, parse_source
from posviz.spectrum import NO_VARIANCE, THRESHOLDS, Spectrum, spectrum

if TYPE_CHECKING:
    from posviz.collection import Collection

__all__ = ["build_parser", "main"]

#: The environment variable naming the table `posviz serve` opens (read by posviz.ui.state).

EXAMPLES = """examples:
  posviz serve model.safetensors               the app in a browser, opened on that table
  posviz serve hf:openai-community/gpt2 --port 8502 --host 0.0.0.0
  posviz summary wpe.npy --json                headline numbers as one JSON object
  posviz summary hf:meta-llama/Llama-3.1-8B    a rotary model: frequencies, scaling, its table
  posviz summary config.json --positions 4096  any model's position scheme from its config
  posviz report vit.safetensors --drop-prefix 1 -o report.html
  posviz heads hf:openai-community/gpt2 --json  per-head position numbers of layer 0
  posviz rerun spectrum_metrics.json           recompute an export's numbers and compare
  posviz diff config.json model-Q4_K_M.gguf     where two sources of a model's positions part
  posviz plan config.json --target 16384       every rope scaling rule to a longer context
"""


def build_parser() -> argparse.ArgumentParser:
    """The `posviz` parser; each subcommand sets ``run(args) -> exit code``."""
    parser = argparse.ArgumentParser(
        prog="posviz",
        description="Analyse a transformer position-embedding table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"posviz {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    table = argparse.ArgumentParser(add_help=False)  # how every command picks its table
    table.add_argument(
        "path",
        metavar="PATH",
        nargs="+",
        help=".npy, .npz, .safetensors, .gguf, .csv/.tsv/.txt, or a model on the Hugging Face Hub: "
        "hf:REPO[@REVISION] (only its headers and the one tensor are downloaded); several: a "
        "collection, ordered by the training step their names carry (step1000, checkpoint-2000)",
    )
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
    schemes.add_arguments(summary)
    summary.set_defaults(run=_summary, run_many=_collection_summary)
    report = commands.add_parser(
        "report",
        parents=[table],
        help="standalone HTML report of every analysis (opens offline)",
        description="Write a standalone HTML report of the table read from PATH.",
    )
    report.add_argument("-o", "--output", required=True, metavar="FILE", help="HTML to write")
    report.add_argument(
        "--seed", type=int, help="seed of controls and probes (default: the analyses' own, 0)"
    )
    report.set_defaults(run=_report, run_many=_collection_report)
    rerun = commands.add_parser(
        "rerun",
        help="recompute the numbers of an export (JSON, CSV, summary --json, report) and compare",
        description="Read the table an export's provenance names again (checking its sha256), "
        "recompute each analysis with the export's params, and print every number exported "
        "beside the number recomputed. Exit 0: all equal; 1: some differ; 2: the table is "
        "missing or its bytes changed.",
    )
    rerun.add_argument("export", metavar="EXPORT", help="a posviz export: .json, .csv or .html")
    rerun.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="PATH",
        help="the table's file when not where the provenance says (twice for a comparison)",
    )
    rerun.set_defaults(run=_rerun)
    heads.add_parser(commands)
    serve = commands.add_parser(
        "serve",
        help="start the app, opened on a table (PATH or hf:REPO_ID[@REVISION])",
        description="Start the posviz app, opened on the table given (checked first); any "
        "other option is passed to `streamlit run` (e.g. --server.maxUploadSize=200).",
    )
    serve.add_argument(
        "table",
        nargs="?",
        metavar="PATH | hf:REPO_ID[@REV]",
        help="table to open (default: the app's simulated table)",
    )
    serve.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)"
    )
    serve.set_defaults(run=_serve)
    diff.add_parser(commands)
    plan.add_parser(commands)
    return parser


#: Characters printed as escapes: C0 and C1 controls (but newline and tab) and DEL, which a
#: terminal obeys (a tensor's or a Hub file's name could clear the screen or set its title),
#: and the bidirectional overrides, which reorder what a line shows.
_ESCAPED = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    if chr(c) not in "\n\t"
}


class _Printable(io.TextIOBase):
    """A text stream that writes `_ESCAPED` characters as escapes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text.translate(_ESCAPED))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 when the file is refused). What it
    prints goes through `_Printable`: names read from files and the Hub are printed escaped."""
    with (
        contextlib.redirect_stdout(_Printable(sys.stdout)),
        contextlib.redirect_stderr(_Printable(sys.stderr)),
    ):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args, passed_on = parser.parse_known_args(argv)  # `serve` passes them to Streamlit
    if passed_on and args.command != "serve":
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    args.streamlit_options = passed_on
    run = args.run
    # One PATH: a table; several: many.
    if args.command not in ("serve", "rerun", "heads", "diff", "plan"):
        if len(args.path) > 1:
            run = args.run_many
        else:
            (args.path,) = args.path
    try:
        return run(args)
    except Refused as exc:  # a file, a config value, a setting: refused with a message
        detail = getattr(exc, "detail", "")  # the Hub's technical cause, when it has one
        # One line, whatever a name in it holds; then the code it gives to run, if any.
        return _refused(args, refusal_text(exc) + (f"\n  ({detail})" if detail else ""))
    except MemoryError:  # what no size check foresaw: still a message, not a traceback
        return _refused(
            args,
            f"this needs more memory than the machine has (the limit per result is "
            f"{MAX_RESULT_BYTES // 2**20} MiB); choose smaller settings.",
        )
    except RecursionError:
        return _refused(args, "the input is nested too deeply to read.")


def _refused(args: argparse.Namespace, message: str) -> int:
    """Print a refusal as one line on stderr (then the code it gives to run, if any); exit code
    2."""
    print(f"posviz {args.command}: {message}", file=sys.stderr)
    return 2


class _Centring(TypedDict, total=False):
    center: bool


def _centring(args: argparse.Namespace) -> _Centring:
    """The centring asked for: the core's default unless --no-center."""
    return {"center": False} if args.no_center else {}


def _summary(args: argparse.Namespace) -> int:
    done = schemes.summary(args)  # a config.json, or a Hub model without a learned table
    if done is not None:
        return done
    table = _load(args)
    result = spectrum(table.values, **_centring(args))
    if args.json:
        record = {"scheme": "learned_absolute", **table_record(table, result)}
        print(json.dumps(record, allow_nan=False))
    else:
        print(_describe(table, result, hint=_trim_hint(args, table)))
    return 0


def _told(step: str, done: int, total: int) -> None:
    """The report's progress on stderr (stdout stays the result): the step and what is left."""
    print(f"report: {step} (step {done + 1} of {total})", file=sys.stderr, flush=True)


def _report(args: argparse.Namespace) -> int:
    from posviz.report import build_report  # plotly and every analysis: not for `summary`

    table = _load(args)
    html = build_report(table, **_centring(args), seed=args.seed, progress=_told)
    with open(args.output, "w", encoding="utf-8") as out:
        out.write(html)
    print(
        f"wrote {args.output} ({len(html) / 2**20:.1f} MiB): {table.name}, {table.describe_rows()}"
    )
    return 0


def _rerun(args: argparse.Namespace) -> int:
    from posviz.recompute import read_export, rerun  # the pipeline: not for `summary`

    export = read_export(args.export)
    result = rerun(
        export,
        tables=args.table,
        base=Path(args.export).parent,
        tell=lambda line: print(f"posviz rerun: {line}", file=sys.stderr, flush=True),
    )
    for check in result.checks:
        verdict = "equal" if check.equal else "DIFFERS"
        print(
            f"{check.analysis} {check.name}: exported {quoted(check.exported)}, "
            f"recomputed {quoted(check.recomputed)}  {verdict}"
        )
    differing = len(result.differing)
    print(
        f"{len(result.checks) - differing} of {len(result.checks)} numbers recomputed exactly "
        f"from {', '.join(result.sources)}" + (f"; {differing} differ" if differing else "")
    )
    return 1 if differing else 0


def _serve(args: argparse.Namespace) -> int:
    if args.table:
        source = parse_source(args.table)
        if isinstance(source, LocalPath):  # the server may run elsewhere
            source = LocalPath(os.path.abspath(source.path))
        table = models.load(source)  # a refused file fails here, not in the browser
        _settings.serve_table(str(source))
        print(f"posviz serve: {table.name}, {table.shape[0]} x {table.shape[1]}, {table.source}")
    # Options given later win in Streamlit's parser: the user's passed-on ones override these.
    options = [f"--server.port={args.port}", f"--server.address={args.host}"]
    command = [sys.executable, "-m", "streamlit", "run", str(_app_path()), *options]
    command += args.streamlit_options
    if os.name == "nt":  # no exec on Windows: wait for the server instead
        return subprocess.call(command)
    sys.stdout.flush()
    # The server replaces this process (signals reach it directly), so nothing here imports
    # Streamlit: only posviz.ui does.
    os.execv(sys.executable, command)


def _app_path() -> Path:
    """app.py: packed into posviz/_app in a wheel, at the top of a clone."""
    package = Path(__file__).parents[1]
    packed = package / "_app" / "app.py"
    return packed if packed.exists() else package.parent / "app.py"


def _load(args: argparse.Namespace) -> Embedding:
    """The table PATH names: a file, or a model on the Hub (hf:REPO[@REVISION])."""
    cut = Cut(args.tensor, args.drop_prefix)
    opened = getattr(args, "opened", None)
    if opened is not None:  # its config.json was read for the scheme: not again
        return remote.load_model(remote.open_model_at(opened), cut)
    return models.load(args.path, cut)


def _tensors(path: str) -> list[TensorInfo]:
    """The tensors PATH holds, from headers only (a model folder's weights, a sharded
    checkpoint's shards); none for a table made, not read (a simulation)."""
    source = parse_source(path)
    if isinstance(source, HubRef):
        return remote.open_model(source).infos
    if not isinstance(source, LocalPath):
        return []
    found = Path(source.path)
    found = weights.weights_in(found) if found.is_dir() else found
    if found.name.endswith(INDEX_SUFFIX):
        return list(weights.open_checkpoint(found).infos.values())
    return list_tensors(found)


def _trim_hint(args: argparse.Namespace, table: Embedding) -> str:
    """A --drop-prefix suggestion when the rows look like they start with non-positions."""
    infos = [] if args.drop_prefix else _tensors(args.path)
    if not infos:
        return ""
    # A single-array file's table is named after the file, not after its one array.
    (info,) = infos if len(infos) == 1 else [i for i in infos if i.name == table.name]
    trim = suggest_trim(info.name, info.shape)
    if not trim.row_start:
        return ""
    return f"hint: {trim.reason}; pass --drop-prefix {trim.row_start} to analyse positions only."


def _describe(table: Embedding, result: Spectrum, *, hint: str) -> str:
    metrics = {k: "undefined" if v is None else v for k, v in result.metrics().items()}
    ranks = {
        k: metrics[k] if isinstance(metrics[k], str) else f"{metrics[k]:.2f}"
        for k in ("effective_rank", "stable_rank", "participation_ratio")
    }
    levels = "/".join(f"{round(t * 100)}" for t in THRESHOLDS)
    ks = " / ".join(str(metrics[f"k{round(t * 100)}"]) for t in THRESHOLDS)
    centring = (
        "mean row subtracted first (PCA); --no-center to skip"
        if result.params["center"]
        else "not centred (--no-center): raw table"
    )
    values = "  ".join(f"{v:.4g}" for v in result.singular_values[:N_SINGULAR_VALUES])
    rows = {
        "source": table.source,
        "tensor": f"{table.name} (stored as {table.dtype} in a {Path(table.source).suffix} file)",
        "shape": f"{table.shape[0]} x {table.shape[1]}, {table.describe_rows()}",
        "centring": centring,
        f"k at {levels}%": f"{ks} components",
        "effective rank": ranks["effective_rank"],
        "stable rank": ranks["stable_rank"],
        "participation ratio": ranks["participation_ratio"],
        "above noise": f"{metrics['n_above_noise']} components, σ > "
        f"{metrics['noise_threshold']:.4g} (Gavish & Donoho 2014's ω(β)·median σ, or the "
        "resolution floor when larger)",
        "singular values": values,
    }
    lines = [f"{label:<22}{value}" for label, value in rows.items()]
    notes = [hint] * bool(hint) + [f"undefined: {NO_VARIANCE}"] * (not result.has_variance)
    return "\n".join([*lines, *notes])


def _collection(args: argparse.Namespace) -> Collection:
    """The collection of every PATH; a refused one is listed with its reason."""
    from posviz.collection import analyse, member  # every analysis: not for one table

    members = [
        member(path, partial(models.load, path, Cut(args.tensor, args.drop_prefix)))
        for path in args.path
    ]
    return analyse(members, **_centring(args))


def _cell(value: object) -> str:
    """A collection's value as the text prints it: "undefined" where a table has none (no
    variance), floats to 6 significant digits (a count as a whole number)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undefined"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _collection_summary(args: argparse.Namespace) -> int:
    c = _collection(args)
    if not args.json:
        frame = c.shown_table()  # the step as text: "-" where a label names none
        frame = frame[frame["error"].isna()].drop(columns="error").set_index("label")
        print(frame.map(_cell).T.to_string())
        if any(s and not s.spectrum.has_variance for s in c.summaries):
            print(f"undefined: {NO_VARIANCE}")
        for m in c.members:
            if m.error:
                print(f"refused {m.label}: {m.error}")
        return 0
    records = c.records()
    for record, summary in zip(records, c.summaries, strict=True):
        values = summary.spectrum.singular_values[:N_SINGULAR_VALUES] if summary else None
        record["singular_values"] = None if values is None else values.tolist()
        for key, value in record.items():
            if isinstance(value, float) and not math.isfinite(value):
                record[key] = None  # NaN is not JSON
    print(json.dumps({**c.header(), "records": records}))
    return 0


def _collection_report(args: argparse.Namespace) -> int:
    from posviz.report import build_collection_report

    c = _collection(args)
    html = build_collection_report(c)
    with open(args.output, "w", encoding="utf-8") as out:
        out.write(html)
    refused = len(c.members) - len(c.loaded)
    size = len(html) / 2**20
    print(f"wrote {args.output} ({size:.1f} MiB): {len(c.loaded)} tables, {refused} refused")
    return 0
