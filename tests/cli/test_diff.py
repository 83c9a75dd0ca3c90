"""`posviz diff A B`: exit 0 when the sources agree, 1 when they differ, 2 when one cannot be
read; --json prints the issue's keys with both provenances, and `posviz rerun` reads both
sources again and recomputes every number of it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posviz.cli import main
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import rotary_frequencies
from tests import ggufs
from tests.schemes.test_diff import RECORD_KEYS, float32_table

LLAMA = PRESETS["meta-llama/Llama-3.1-8B"]


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    return str(path)


def diff_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["diff", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def reruns(capsys, record: dict, folder: Path) -> str:
    """`posviz rerun` of the record (saved in `folder`): exit 0, every number checked."""
    export = folder / "diff.json"
    export.write_text(json.dumps(record))
    code = main(["rerun", str(export)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "DIFFERS" not in out.out
    return out.out


def test_a_gguf_agrees_with_its_config(config, tmp_path, capsys) -> None:
    gguf = str(ggufs.llama31(tmp_path / "llama.gguf"))
    code, record = diff_json(capsys, config, gguf)
    assert code == 0
    assert set(record) == RECORD_KEYS
    assert record["agree"] is True
    assert record["first_difference"] is None
    assert record["inv_freq_max_relative_difference"] == 0.0
    assert record["pairs_differing"] == []
    assert [f["field"] for f in record["fields"]][:4] == [
        "theta",
        "rotary_dim",
        "layout",
        "rope_type",
    ]
    assert {"field", "a", "b", "same"} == set(record["fields"][0])
    assert record["analysis"] == "scheme_diff"
    assert [p["config"] for p in record["provenance"]] == [config, gguf]
    assert record["params"] == {"tolerance": 1e-06, "positions": None, "context": 131072}
    reruns(capsys, record, tmp_path)
    # An edited number is caught: the sources are read again, not the record trusted.
    record["inv_freq_max_relative_difference"] = 1e-3
    export = tmp_path / "edited.json"
    export.write_text(json.dumps(record))
    assert main(["rerun", str(export)]) == 1
    assert "inv_freq_max_relative_difference" in capsys.readouterr().out
    assert main(["diff", config, gguf]) == 0
    out = capsys.readouterr().out
    assert "agree within 1e-06" in out
    assert "theta              500000      500000      same" in out


def test_a_wrong_gguf_differs_with_exit_1(config, tmp_path, capsys) -> None:
    wrong = str(ggufs.llama31(tmp_path / "llama.gguf", theta=1e6))
    code, record = diff_json(capsys, config, wrong)
    assert code == 1
    assert record["first_difference"] == "theta"
    assert record["first_position_over_0_01_rad"] == 1
    assert main(["diff", config, wrong]) == 1
    assert "DIFFER: first at theta" in capsys.readouterr().out


def test_a_table_dump_in_the_layout_it_names(config, tmp_path, capsys) -> None:
    spec = position_scheme(LLAMA).rotary[0]
    table = float32_table(rotary_frequencies(spec).inv_freq, 2048)
    interleaved = np.empty_like(table)
    interleaved[:, 0::2], interleaved[:, 1::2] = table[:, :64], table[:, 64:]
    path = tmp_path / "runtime.csv"
    np.savetxt(path, interleaved, delimiter=",")
    assert main(["diff", config, str(path)]) == 1  # read as half-split: wrong
    assert "its layout is probably interleaved" in capsys.readouterr().out
    code, record = diff_json(capsys, config, str(path), "--layout-b", "interleaved")
    assert code == 0
    assert record["provenance"][1]["layout"] == "interleaved"
    reruns(capsys, record, tmp_path)  # read again in the layout it names
    np.savetxt(path, table, delimiter=",")  # the dump changed since: refused, exit 2
    export = tmp_path / "diff.json"
    assert main(["rerun", str(export)]) == 2
    assert "sha256 differs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("b", "words"),
    [
        ("missing.json", "missing.json is not a file"),
        ("preset:bigscience/bloom", "not rotary embeddings"),
        ("hostile.gguf", "claims"),
    ],
)
def test_an_unreadable_source_exits_2(config, tmp_path, monkeypatch, capsys, b, words) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hostile.gguf").write_bytes(ggufs.header(2**50, 0))
    assert main(["diff", config, b]) == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (["--positions", "0"], "positions is 0"),
        (["--positions", str(2**20 + 1)], "from 1 to 1,048,576"),
        (["--tolerance", "2"], "tolerance is 2.0"),
        (["--context", str(2**32)], "context is 4294967296"),
    ],
)
def test_a_setting_beyond_its_bound_exits_2(config, capsys, option, words) -> None:
    assert main(["diff", config, "preset:meta-llama/Llama-3.1-8B", *option]) == 2
    assert words in capsys.readouterr().err


def test_a_hub_gguf_against_the_hub_config(fake_hub, tmp_path, capsys) -> None:
    fake_hub.add("meta/Llama", {"config.json": json.dumps(LLAMA).encode()})
    fake_hub.add("bart/Llama-GGUF", {"L-Q4_K_M.gguf": ggufs.llama31(tmp_path / "l.gguf")})
    code, record = diff_json(capsys, "hf:meta/Llama", "hf:bart/Llama-GGUF:Q4_K_M")
    assert code == 0
    assert record["provenance"][1]["config"].endswith(":L-Q4_K_M.gguf")
    reruns(capsys, record, tmp_path)  # both read again at their commits
