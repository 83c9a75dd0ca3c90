"""Time and peak memory of issue 45's big inputs through `posviz`, each a new interpreter as a
user runs it, on this checkout or another (the one before the fixes).

    python benchmarks/hostile.py [--checkout PATH] [--limit SECONDS] [CASE ...]

The inputs are tests/hostile.py's (made here in a temporary folder): a 64 MiB rope_freqs and
32 MiB LongRoPE factors where the rotary width gives 64 and 48 pairs (finding 1), 64 MiB
headers of 5 million one-element arrays and of 8 million empty strings (3), 1,024 heads of
width 1 over 2,048 positions and GPT-Neo's attention_types repeated 10**8 times (5), a Hub
whose answer's headers arrive a byte every 2 s (6, the fake Hub of the tests in this process),
and a rerun of an export naming the 64 MiB header (13). Each run prints its wall time, the
child's peak resident memory (ru_maxrss) and its exit code with the last line it said; a run
past `--limit` is killed and said so ("> limit").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests import fakehub, hostile  # noqa: E402 -- after the path: the tests' helpers


def cases(folder: Path) -> dict[str, list[str]]:
    """Each big input, as the argv that runs it."""
    big = folder / "big"
    hostile.write_big(big)
    neo = hostile.heads_checkpoint(
        folder / "neo", "gpt_neo", {"attention_types": [[["global", "local"], 10**8]]}
    )
    named = {"config": str(big / "nested_arrays.gguf"), "sha256": "0" * 64}
    export = {"analysis": "scheme_record", "params": {}, "provenance": named}
    (folder / "export.json").write_text(json.dumps(export))
    return {
        "0 posviz --version": ["--version"],  # the floor: an interpreter and its imports
        "1 rope_freqs 64 MiB": ["summary", str(big / "rope_freqs_64mib.gguf")],
        "1 LongRoPE 2 x 32 MiB": ["summary", str(big / "longrope_64mib.gguf")],
        "3 5M nested arrays": ["summary", str(big / "nested_arrays.gguf")],
        "3 8M empty strings": ["summary", str(big / "empty_strings.gguf")],
        "5 1,024 heads x 2,048": ["heads", str(big / "wide_heads" / "model.safetensors")],
        "5 attention_types x 1e8": ["heads", str(neo)],
        "6 headers a byte / 2 s": ["summary", "hf:test/slow-headers"],
        "13 rerun naming 5M arrays": ["rerun", str(folder / "export.json")],
    }


def run(checkout: Path, argv: list[str], limit: float, env: dict[str, str]) -> str:
    """One run of ``posviz argv`` from `checkout` under /usr/bin/time (a small parent: a child
    of this process would count its memory, copied at the fork, as its own): wall time, peak
    resident memory, exit code, the refusal's line."""
    command = [sys.executable, "-c", "import sys; from posviz.cli import main; "
               "sys.exit(main(sys.argv[1:]))", *argv]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        measured = Path(tmp) / "time"
        timed = ["/usr/bin/time", "-f", "%e %M", "-o", str(measured), *command]
        try:
            done = subprocess.run(
                timed, cwd=checkout, env=env, capture_output=True, text=True, timeout=limit
            )
        except subprocess.TimeoutExpired:
            return f"{f'> {limit:.0f} s (killed)':>20}"
        seconds, kilobytes = measured.read_text().split()[-2:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("posviz ")]
    said = (lines or done.stdout.strip().splitlines() or [""])[-1]
    peak = f"{int(kilobytes) / 1024:,.0f} MB"
    return f"{float(seconds):>18.1f} s  {peak:>9}  exit {done.returncode}  {said[:150]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="posviz to run (default: this)")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds a run may take")
    parser.add_argument("case", nargs="*", help="cases to run (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        folder = Path(tmp)
        hub = next(fakehub.running(folder, patch))  # HF_ENDPOINT and caches set in os.environ
        hub.add("test/slow-headers", {"config.json": b"{}"}, slow_headers=2.0)
        env = {**os.environ, "PYTHONPATH": str(args.checkout)}
        for name, argv in cases(folder).items():
            if args.case and not any(c in name for c in args.case):
                continue
            print(f"{name:<26}{run(args.checkout, argv, args.limit, env)}", flush=True)


if __name__ == "__main__":
    main()
