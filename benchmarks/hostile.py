"""Time and peak memory of issue 45's big inputs through `posviz`, each a new interpreter as a
user runs it, on this checkout or another (the one before the fixes).

    python benchmarks/hostile.py [--checkout PATH] [--limit SECONDS] [CASE ...]

The inputs are tests/hostile.py's (made here in a temporary folder): a 64 MiB rope_freqs and
32 MiB LongRoPE factors where the rotary width gives 64 and 48 pairs (finding 1), 64 MiB
headers of 5 million one-element arrays and of 8 million empty strings (3), 1,024 heads of
width 1 over 2,048 positions and GPT-Neo's attention_types repeated 10**8 times (5), a Hub
whose answer's headers arrive a byte every 2 s (6, the fake Hub of the tests in this process),
and a rerun of an export naming the 64 MiB header (13). Each run prints its wall time, its
peak resident memory (VmHWM, sampled) and its exit code with the line it said; a run past
`--limit` is killed with its process group and said so ("> limit", the memory so far).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
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


def _high_water(pid: int) -> int:
    """The process' peak resident memory so far (VmHWM, bytes); 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(found[0]) * 1024 if found else 0


def run(checkout: Path, argv: list[str], limit: float, env: dict[str, str]) -> str:
    """One run of ``posviz argv`` from `checkout`: wall time, peak resident memory (VmHWM,
    read every 20 ms: the high-water mark of the interpreter itself, which a fork's counters
    would mix with this process'), exit code, the refusal's line. Past `limit` its whole
    process group is killed and said so."""
    command = [sys.executable, "-c", "import sys; from posviz.cli import main; "
               "sys.exit(main(sys.argv[1:]))", *argv]  # fmt: skip
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        child = subprocess.Popen(
            command, cwd=checkout, env=env, stdout=out, stderr=err, start_new_session=True
        )
        peak = 0
        while child.poll() is None:
            peak = max(peak, _high_water(child.pid))
            if time.monotonic() - started > limit:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return f"{f'> {limit:.0f} s (killed)':>20}  {peak / 2**20:>7,.0f} MB so far"
            time.sleep(0.02)
        elapsed = time.monotonic() - started
        err.seek(0)
        out.seek(0)
        lines = [line for line in err.read().splitlines() if line.startswith("posviz ")]
        said = (lines or out.read().strip().splitlines() or [""])[-1]
    return f"{elapsed:>18.1f} s  {peak / 2**20:>7,.0f} MB  exit {child.returncode}  {said[:150]}"


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
