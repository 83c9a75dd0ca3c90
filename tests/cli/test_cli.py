"""posviz.cli: `python -m posviz summary` against the numbers of a sinusoidal table."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from posviz.cli import main
from posviz.embedding import MIN_POSITIONS
from posviz.simulate import sinusoidal_table, vit_grid
from posviz.spectrum import NO_VARIANCE
from tests import ROOT
from tests.corpus import HOSTILE_WORDS, hostile_files
from tests.refusals import SNIPPET

#: The summary's JSON: the scheme, what made the numbers, the table's provenance, the numbers.
KEYS = ["scheme", "analysis", "params", "provenance", "numbers"]
NUMBERS = [
    "k50",
    "k80",
    "k90",
    "k95",
    "k99",
    "effective_rank",
    "stable_rank",
    "participation_ratio",
    "n_above_noise",
    "noise_threshold",
    "gavish_donoho_threshold",
    "resolution_floor",
    "singular_values",
]


@pytest.fixture(scope="module")
def sinusoid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "sinusoid.npy"
    np.save(path, sinusoidal_table(512, 768))
    return path


def summary_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["summary", *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    return json.loads(out)


@pytest.mark.parametrize(
    ("flags", "ks", "ranks"),
    [
        ([], [11, 56, 90, 111, 133], [120.96, 6.80, 24.12]),
        (["--no-center"], [2, 27, 65, 96, 129], [108.98, 2.37, 5.20]),
    ],
    ids=["centred", "not-centred"],
)
def test_summary_json_matches_the_sinusoid_oracle(
    capsys: pytest.CaptureFixture[str],
    sinusoid: Path,
    flags: list[str],
    ks: list[int],
    ranks: list[float],
) -> None:
    record = summary_json(capsys, str(sinusoid), *flags)
    assert list(record) == KEYS
    assert list(record["numbers"]) == NUMBERS
    assert record["params"] == {"center": "--no-center" not in flags}
    assert (
        record["provenance"]["shape"],
        record["provenance"]["dtype"],
        record["provenance"]["tensor"],
    ) == ([512, 768], "float64", "sinusoid")
    assert [record["numbers"][f"k{level}"] for level in (50, 80, 90, 95, 99)] == ks
    assert [
        round(record["numbers"][key], 2)
        for key in ("effective_rank", "stable_rank", "participation_ratio")
    ] == ranks
    table = sinusoidal_table(512, 768)
    if "--no-center" not in flags:
        table -= table.mean(axis=0)
    singular = np.linalg.svd(table, compute_uv=False)  # independent of the Gram route
    np.testing.assert_allclose(record["numbers"]["singular_values"], singular[:10], rtol=1e-10)


def test_summary_text_states_the_numbers_and_the_centring(
    capsys: pytest.CaptureFixture[str], sinusoid: Path
) -> None:
    assert main(["summary", str(sinusoid)]) == 0
    out = capsys.readouterr().out
    assert "mean row subtracted first (PCA)" in out
    assert "11 / 56 / 90 / 111 / 133 components" in out
    assert "effective rank        120.96" in out
    assert "participation ratio   24.12" in out
    assert main(["summary", str(sinusoid), "--no-center"]) == 0
    out = capsys.readouterr().out
    assert "not centred" in out
    assert "stable rank           2.37" in out


def test_summary_hints_and_drops_a_class_token(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    vit = vit_grid(14, 14, 64)
    np.save(tmp_path / "vit.npy", np.concatenate([vit.prefix, vit.values])[None])
    assert main(["summary", str(tmp_path / "vit.npy")]) == 0
    assert "1 class token + 14x14 patch grid; pass --drop-prefix 1" in capsys.readouterr().out
    record = summary_json(capsys, str(tmp_path / "vit.npy"), "--drop-prefix", "1")
    assert record["provenance"]["shape"] == [196, 64]


def test_summary_reads_the_named_tensor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    np.savez(tmp_path / "m.npz", wpe=sinusoidal_table(16, 4), wte=np.eye(12))
    assert summary_json(capsys, str(tmp_path / "m.npz"))["provenance"]["tensor"] == "wpe"
    record = summary_json(capsys, str(tmp_path / "m.npz"), "--tensor", "wte")
    assert (
        record["provenance"]["tensor"],
        record["provenance"]["shape"],
        record["numbers"]["k99"],
    ) == ("wte", [12, 12], 11)


def test_refused_file_exits_2_with_the_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    files = hostile_files(tmp_path)
    assert main(["summary", str(files["nan.npy"]), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("posviz summary: nan.npy: ")
    assert "NaN/Inf values (first at row 2, column 3)" in captured.err


def test_a_pickle_refusal_prints_its_conversion_under_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Formerly the conversion was run into the one line with the message, as "\\n"s.
    (tmp_path / "model.pt").write_bytes(b"\x80\x04K\x01.")
    assert main(["summary", str(tmp_path / "model.pt")]) == 2
    line, *code = capsys.readouterr().err.rstrip("\n").split("\n")
    assert line.startswith("posviz summary: model.pt is pickle-based")
    assert line.endswith("then load that:")
    assert all(row.startswith("    ") for row in code if row)
    snippet = textwrap.dedent("\n".join(code))
    assert snippet == SNIPPET
    compile(snippet, "<snippet>", "exec")


def test_python_dash_m_posviz(sinusoid: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "posviz", "summary", str(sinusoid), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["numbers"]["k50"] == 11


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hostile_files(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("name", sorted(HOSTILE_WORDS))
def test_every_hostile_file_exits_2_without_a_traceback(
    name: str, capsys: pytest.CaptureFixture[str], hostile: dict[str, Path]
) -> None:
    # Formerly: a list or dict as dtype, or a boolean in shape, printed a traceback (exit 1).
    assert main(["summary", str(hostile[name]), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert HOSTILE_WORDS[name].lower() in captured.err.lower()


def test_summary_json_is_strict_json_with_null_for_undefined_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Formerly: a table without variance printed bare NaN, which is not JSON.
    np.save(tmp_path / "flat.npy", np.ones((MIN_POSITIONS, 3), dtype=np.float32))
    assert main(["summary", str(tmp_path / "flat.npy"), "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(constant: str) -> None:
        raise AssertionError(constant)

    record = json.loads(out, parse_constant=refuse)
    assert record["numbers"]["stable_rank"] is None
    assert record["numbers"]["k90"] is None
    assert record["undefined"] == NO_VARIANCE
    assert main(["summary", str(tmp_path / "flat.npy")]) == 0
    text = capsys.readouterr().out
    assert "stable rank           undefined" in text
    assert NO_VARIANCE in text
    assert "nan" not in text.lower()


def test_summary_of_a_fifo_exits_2_at_once(tmp_path, capsys):
    from tests.io.test_io import fifo, finishes, release

    pipe = fifo(tmp_path / "wpe.npy")
    try:
        code = finishes(lambda: main(["summary", str(pipe)]))
    finally:
        release(pipe)
    assert code == 2
    assert "wpe.npy is not a regular file" in capsys.readouterr().err
