"""A Hub repo of GGUF files, served by the fake Hub with range reads: the file picked (by name,
by quantization, else the most precise), only its header and the one tensor on the wire, its
metadata as config.json for the scheme, hostile headers refused after a few bytes, parts of a
split GGUF without its first named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import posviz
from posviz import hub, io
from posviz.cli import main
from posviz.embedding import LoadError
from posviz.io import _gguf
from posviz.models import remote
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from posviz.source import HubRef
from tests import ggufs
from tests.fakehub import FakeHub

TABLE = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
#: The revision API's answer and request headers' worth of slack in the bytes-sent budget.
OVERHEAD = 1024


def header_budget(path: Path) -> int:
    """Bytes a GGUF header may cost on the wire: the 24 bytes read first, then the header,
    read as far as the parse asks (5% beyond an array's guessed end, 4 KiB more), but never
    less than the first range (a short header costs that much at most)."""
    header = header_end(path)
    return 24 + max(int(header * 1.05) + 2**12, _gguf.FIRST_RANGE)


def header_end(path: Path) -> int:
    return io.read_gguf_header(lambda a, b: path.read_bytes()[a:b], path.stat().st_size, "x")[
        0
    ].nbytes


def gpt2_repo(fake_hub: FakeHub, tmp_path: Path) -> dict[str, Path]:
    files = {
        "gpt2-Q8_0.gguf": ggufs.learned(tmp_path / "q8.gguf", TABLE, "Q8_0"),
        "gpt2-F16.gguf": ggufs.learned(tmp_path / "f16.gguf", TABLE, "F16"),
        # 4 MB of token table that must not travel
        "gpt2-Q4_0.gguf": ggufs.learned(tmp_path / "q4.gguf", TABLE, "Q4_0", vocab=4096),
        "mmproj-gpt2-F32.gguf": ggufs.learned(tmp_path / "mm.gguf", TABLE, "F32"),
    }
    fake_hub.add("acme/gpt2-GGUF", {**files, "README.md": b"# GGUF"})
    return files


def test_the_most_precise_file_is_read_unless_one_is_named(fake_hub, tmp_path) -> None:
    files = gpt2_repo(fake_hub, tmp_path)
    table = posviz.load("hf:acme/gpt2-GGUF")
    assert table.source.endswith(" · gpt2-F16.gguf")  # not the vision projector's F32
    assert table.dtype == "float16"
    np.testing.assert_array_equal(table.values, io.load(files["gpt2-F16.gguf"]).values)
    for named in ("Q8_0", "q8_0", "gpt2-Q8_0.gguf"):
        table = posviz.load(f"hf:acme/gpt2-GGUF:{named}")
        assert table.dtype == "Q8_0"
        assert table.sha256 == io.load(files["gpt2-Q8_0.gguf"]).sha256
        assert table.provenance()["file"] == "gpt2-Q8_0.gguf"


def test_only_the_header_and_the_table_travel(fake_hub, tmp_path) -> None:
    files = gpt2_repo(fake_hub, tmp_path)
    posviz.load("hf:acme/gpt2-GGUF:Q4_0")
    path = files["gpt2-Q4_0.gguf"]
    table_bytes = 64 * 256 // 32 * 18  # Q4_0: 18 bytes per 32 values
    assert fake_hub.bytes_sent() <= header_budget(path) + table_bytes + OVERHEAD
    assert fake_hub.bytes_sent() < path.stat().st_size / 2  # the token table never travelled
    others = [s for s in fake_hub.log if "gguf" in s.path and "Q4_0" not in s.path]
    assert others == []


def test_the_header_is_read_in_growing_ranges(fake_hub, tmp_path, monkeypatch) -> None:
    words = [f"token{i}" for i in range(60000)]
    path = ggufs.write(
        tmp_path / "v.gguf",
        "gpt2",
        keys=lambda w: w.add_token_list(words),
        tensors={"position_embd.weight": TABLE, "token_embd.weight": np.ones((4096, 256), "f4")},
    )
    monkeypatch.setattr(_gguf, "FIRST_RANGE", 4096)
    monkeypatch.setattr(io, "FIRST_RANGE", 4096)
    fake_hub.add("acme/vocab-GGUF", {"v.gguf": path})
    posviz.load("hf:acme/vocab-GGUF")
    ranges = [s.nbytes for s in fake_hub.requests_for("v.gguf")]
    header = header_end(path)
    assert len(ranges) <= 6  # 24 bytes, the first range, the rest as the strings suggest, table
    assert sum(ranges) <= 24 + header * 1.05 + 2**12 + TABLE.nbytes


def test_a_rotary_repo_gives_its_scheme_from_the_metadata(fake_hub, tmp_path, capsys) -> None:
    path = ggufs.llama31(tmp_path / "llama.gguf")
    repo = fake_hub.add("acme/Llama-3.1-8B-GGUF", {"Llama-3.1-8B-Q4_K_M.gguf": path})
    opened = remote.open_config(HubRef("acme/Llama-3.1-8B-GGUF"))
    assert opened.gguf == "Llama-3.1-8B-Q4_K_M.gguf"
    assert opened.at_commit == f"hf:acme/Llama-3.1-8B-GGUF@{repo.commit}:Llama-3.1-8B-Q4_K_M.gguf"
    (spec,) = position_scheme(opened.config).rotary
    assert spec == position_scheme(PRESETS["meta-llama/Llama-3.1-8B"]).rotary[0]
    sent = [s.nbytes for s in fake_hub.requests_for("Llama-3.1-8B-Q4_K_M.gguf")]
    assert sum(sent) <= header_budget(path) + 256  # the header and rope_freqs (64 floats)
    assert main(["summary", "hf:acme/Llama-3.1-8B-GGUF", "--json", "--positions", "64"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["rope_type"] == "llama3"
    assert record["provenance"]["config"] == opened.at_commit
    assert {k["gguf"] for k in record["provenance"]["gguf_keys"]} >= {"rope_freqs.weight"}
    (tmp_path / "r.json").write_text(json.dumps(record))
    assert main(["rerun", str(tmp_path / "r.json")]) == 0
    with pytest.raises(LoadError, match="GGUF metadata says it uses rotary"):
        posviz.load("hf:acme/Llama-3.1-8B-GGUF")


def test_a_hub_table_export_reruns_from_the_same_file(fake_hub, tmp_path, capsys) -> None:
    gpt2_repo(fake_hub, tmp_path)
    assert main(["summary", "hf:acme/gpt2-GGUF:Q8_0", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["provenance"]["file"] == "gpt2-Q8_0.gguf"
    (tmp_path / "s.json").write_text(json.dumps(record))
    assert main(["rerun", str(tmp_path / "s.json")]) == 0


def test_a_hostile_header_costs_a_few_bytes(fake_hub, tmp_path) -> None:
    fake_hub.add("acme/evil-GGUF", {"evil.gguf": ggufs.header(0, 2**40) + bytes(10**6)})
    with pytest.raises(LoadError, match="claims"):
        remote.open_model(HubRef("acme/evil-GGUF"))
    assert fake_hub.bytes_sent() <= 24 + _gguf.FIRST_RANGE + OVERHEAD


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("hf:acme/gpt2-GGUF:Q5_K_M", "no GGUF file of the repo is quantized as Q5_K_M"),
        ("hf:acme/gpt2-GGUF:other.gguf", "has no file 'other.gguf'"),
        ("hf:acme/gpt2-GGUF:../x.gguf", "not a GGUF file of the repo"),
    ],
)
def test_a_file_the_repo_lacks_is_named(fake_hub, tmp_path, ref: str, words: str) -> None:
    gpt2_repo(fake_hub, tmp_path)
    with pytest.raises(LoadError, match=words):
        posviz.load(ref)


def test_a_repo_with_safetensors_reads_them_unless_a_gguf_is_named(fake_hub, tmp_path) -> None:
    from safetensors.numpy import save

    gguf_file = ggufs.learned(tmp_path / "q8.gguf", TABLE, "Q8_0")
    weights = save({"transformer.wpe.weight": TABLE})
    fake_hub.add("acme/both", {"model.safetensors": weights, "model-Q8_0.gguf": gguf_file})
    assert posviz.load("hf:acme/both").dtype == "float32"
    assert posviz.load("hf:acme/both:Q8_0").dtype == "Q8_0"


def test_parts_of_a_split_gguf_without_the_first_are_named(fake_hub, tmp_path: Path):
    # Before: IndexError in hub._gguf_file.
    part = ggufs.llama31(tmp_path / "part.gguf")
    fake_hub.add(
        "test/split-GGUF",
        {"m-Q8_0-00002-of-00003.gguf": part, "m-Q8_0-00003-of-00003.gguf": part},
    )
    with pytest.raises(LoadError, match=r"holds parts 2, 3 of a split GGUF but not part 1"):
        hub.list_model(HubRef("test/split-GGUF"))
