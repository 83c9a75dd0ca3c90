"""What every refusal of the `posviz` command must look like (issue 37): exit 2, one line on
stderr naming what is wrong, no traceback, and the memory it took on the way under the budget
of one result."""

from __future__ import annotations

import tracemalloc

import pytest

from posviz._params import MAX_RESULT_BYTES
from posviz.cli import main

#: The code a pickle named model.pt is refused with, to convert it (the CLI prints it under the
#: refusal's line, a page shows it as a code block).
SNIPPET = (
    "import torch\n"
    "from safetensors.torch import save_file\n"
    "\n"
    "state = torch.load('model.pt', weights_only=True)\n"
    "save_file({k: v.contiguous() for k, v in state.items()}, 'model.safetensors')"
)


def refused(capsys: pytest.CaptureFixture[str], *argv: str, told: int = 0) -> str:
    """Run ``posviz argv``; assert it was refused as every refusal is; return its line.
    `told`: lines the command says on stderr before (what `heads` will read)."""
    capsys.readouterr()
    tracemalloc.start()
    try:
        code = main(list(argv))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert code == 2, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()[told:]
    assert len(lines) == 1, err[-2000:]
    assert lines[0].startswith(f"posviz {argv[0]}: ")
    assert len(lines[0]) < 600  # nothing echoed whole
    assert peak < MAX_RESULT_BYTES, f"peak {peak / 2**20:.0f} MiB"
    return lines[0]
