"""`posviz summary|report|serve|rerun FILE.gguf`: a learned table (its quantization named), a
rotary model's scheme from its metadata (the keys read in the provenance), both rerun exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from posviz._settings import SERVED_TABLE
from posviz.cli import main
from posviz.schemes.presets import PRESETS
from tests import ggufs
from tests.cli.test_schemes import config_file, summary_json
from tests.cli.test_serve import Started, started  # noqa: F401 -- the fixture

TABLE = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)


def test_summary_of_a_quantized_table_names_its_type(tmp_path, capsys) -> None:
    path = ggufs.learned(tmp_path / "gpt2-q8.gguf", TABLE, "Q8_0")
    record = summary_json(capsys, str(path))
    assert record["scheme"] == "learned_absolute"
    assert record["provenance"]["dtype"] == "Q8_0"
    assert record["provenance"]["tensor"] == "position_embd.weight"
    assert main(["summary", str(path)]) == 0
    assert "stored as Q8_0 in a .gguf file" in capsys.readouterr().out
    (tmp_path / "s.json").write_text(json.dumps(record))
    assert main(["rerun", str(tmp_path / "s.json")]) == 0


def test_summary_of_a_rotary_gguf_matches_its_config(tmp_path, capsys) -> None:
    path = ggufs.llama31(tmp_path / "llama.gguf")
    record = summary_json(capsys, str(path), "--positions", "1024")
    config = config_file(tmp_path, PRESETS["meta-llama/Llama-3.1-8B"])
    expected = summary_json(capsys, config, "--positions", "1024")
    for key in ("rope_type", "rotary_dim", "base", "context", "original_context", "factor"):
        assert record[key] == expected[key]
    bands = {band: len(value["pairs"]) for band, value in record["bands"].items()}
    assert bands == {"kept": 29, "blended": 6, "divided": 29}
    assert record["bands"].keys() == expected["bands"].keys()
    np.testing.assert_allclose(record["inv_freq"], expected["inv_freq"], rtol=2e-7)
    provenance = record["provenance"]
    assert provenance["config"] == str(path)
    fed = {k["gguf"]: k["config"] for k in provenance["gguf_keys"]}
    assert fed["llama.rope.freq_base"] == "rope_theta"
    assert fed["rope_freqs.weight"] == "rope_scaling (llama3)"
    (tmp_path / "r.json").write_text(json.dumps(record))
    assert main(["rerun", str(tmp_path / "r.json")]) == 0
    assert "recomputed exactly from" in capsys.readouterr().out
    ggufs.llama31(path, factor=4.0)  # the file changed: its sha256 no longer matches
    assert main(["rerun", str(tmp_path / "r.json")]) == 2
    assert "not the one exported" in capsys.readouterr().err


def test_report_of_a_gguf_table(tmp_path, capsys) -> None:
    path = ggufs.learned(tmp_path / "gpt2.gguf", TABLE, "F16")
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "position_embd.weight" in capsys.readouterr().out
    assert "float16" in out.read_text()


def test_serve_checks_a_gguf_first(started, tmp_path, capsys) -> None:  # noqa: F811
    path = ggufs.learned(tmp_path / "gpt2.gguf", TABLE, "Q8_0")
    with pytest.raises(Started):
        main(["serve", str(path)])
    assert os.environ[SERVED_TABLE] == str(path)
    assert "position_embd.weight, 64 x 32" in capsys.readouterr().out
    rotary = ggufs.llama31(tmp_path / "llama.gguf")
    assert main(["serve", str(rotary)]) == 2
    assert len(started) == 1
    assert "GGUF metadata says it uses rotary" in capsys.readouterr().err


def test_a_hostile_gguf_exits_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "evil.gguf"
    path.write_bytes(ggufs.header(0, 2**40))
    assert main(["summary", str(path)]) == 2
    assert "claims" in capsys.readouterr().err
