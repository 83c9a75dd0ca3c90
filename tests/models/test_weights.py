"""A safetensors checkpoint on disk with its config.json beside it: the position scheme read from
there, through the same code as a Hub model's, reading only the bytes the scheme needs."""

from __future__ import annotations

import builtins
import html
import io as pyio
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

import posviz
from posviz import io
from posviz.cli import main
from posviz.io.config_json import MAX_CONFIG_BYTES
from posviz.schemes.alibi import alibi_slopes
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import t5_buckets
from tests import apptest

RNG = np.random.default_rng(0)
#: Weights a rotary or ALiBi scheme must never read: 4 MB.
BIG = {"model.embed_tokens.weight": np.zeros((4096, 256), np.float32)}
T5 = "google-t5/t5-small"
DEBERTA = "microsoft/deberta-v3-base"
ENCODER = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
DECODER = "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
REL = "deberta.encoder.rel_embeddings.weight"
LLAMA = "meta-llama/Llama-3.1-8B"


def checkpoint(folder: Path, config: dict | bytes, tensors: dict) -> Path:
    """folder/config.json and folder/model.safetensors, as save_pretrained leaves them."""
    folder.mkdir()
    data = config if isinstance(config, bytes) else json.dumps(config, indent=2).encode()
    (folder / "config.json").write_bytes(data)
    weights = folder / "model.safetensors"
    weights.write_bytes(save(tensors))
    return weights


def opening(weights: Path) -> int:
    """Bytes posviz.io reads each time it opens a safetensors file: the first 16 (the format,
    by magic bytes), then the 8-byte length and the JSON header."""
    return 16 + 8 + int.from_bytes(weights.read_bytes()[:8], "little")


@pytest.fixture
def weights_read(monkeypatch) -> Callable[[], int]:
    """Bytes read from weights files by posviz.io (every read of a tensor file goes through
    its unbuffered file object here), reset when asked."""
    read = [0]

    class Counting(pyio.FileIO):
        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            read[0] += len(data)
            return data

        def readinto(self, buffer) -> int:
            got = super().readinto(buffer)
            read[0] += got or 0
            return got

    def counting_open(fd, mode="r", *args, **kwargs):
        return Counting(fd, "rb") if mode == "rb" else builtins.open(fd, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open, raising=False)

    def taken() -> int:
        value, read[0] = read[0], 0
        return value

    return taken


def summary(capsys, *args: str) -> dict:
    code = main(["summary", *args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def reruns(capsys, tmp_path: Path, record: dict) -> str:
    export = tmp_path / "summary.json"
    export.write_text(json.dumps(record))
    code = main(["rerun", str(export)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "DIFFERS" not in out
    return out.splitlines()[-1]


def test_rotary_reads_config_json_only_and_equals_the_config_alone(tmp_path, capsys, weights_read):
    weights = checkpoint(tmp_path / "llama", PRESETS[LLAMA], BIG)
    record = summary(capsys, str(weights), "--positions", "64")
    assert weights_read() == 0  # config.json says it all: not even the header
    alone = summary(capsys, str(weights.parent / "config.json"), "--positions", "64")
    assert record["scheme"] == "rotary"
    assert {b: len(v["pairs"]) for b, v in record["bands"].items()} == {
        "kept": 29, "blended": 6, "divided": 29
    }  # fmt: skip
    assert record["inv_freq"] == alone["inv_freq"]
    assert record["provenance"]["weights"] == str(weights)
    assert record["provenance"]["config"] == str(weights.parent / "config.json")
    assert record["provenance"]["sha256"] == alone["provenance"]["sha256"]
    last = reruns(capsys, tmp_path, record)
    assert last.endswith(f"numbers recomputed exactly from {weights.parent / 'config.json'}")


@pytest.mark.parametrize("wrong", [False, True])
def test_a_stored_inv_freq_is_read_from_the_local_file(tmp_path, capsys, weights_read, wrong):
    inv_freq = (10000.0 ** (-np.arange(0, 128, 2) / 128)).astype(np.float32)
    if wrong:
        inv_freq = inv_freq[::-1].copy()
    tensor = "model.layers.0.self_attn.rotary_emb.inv_freq"
    weights = checkpoint(
        tmp_path / "mistral", PRESETS["mistralai/Mistral-7B-v0.1"], {tensor: inv_freq, **BIG}
    )
    record = summary(capsys, str(weights), "--positions", "64", "--check-inv-freq")
    # Listed, then opened again for the buffer alone.
    assert weights_read() == 2 * opening(weights) + 64 * 4
    assert (record["stored_inv_freq"]["tensor"], record["stored_inv_freq"]["matches"]) == (
        tensor,
        not wrong,
    )
    reruns(capsys, tmp_path, record)


@pytest.mark.parametrize(("name", "n_heads"), [("bigscience/bloom", 112), ("mosaicml/mpt-7b", 32)])
def test_alibi_reads_config_json_only(tmp_path, capsys, weights_read, name, n_heads):
    weights = checkpoint(tmp_path / "alibi", PRESETS[name], BIG)
    record = summary(capsys, str(weights))
    assert weights_read() == 0
    assert (record["scheme"], record["n_heads"]) == ("alibi", n_heads)
    np.testing.assert_allclose(record["slopes"], alibi_slopes(n_heads), rtol=0, atol=0)
    # 112 is not a power of two: after 2^(-8k/64) for k = 1..64 come 2^(-4j/64), j odd.
    if n_heads == 112:
        assert record["slopes"][64] == 2.0 ** (-4 / 64)
    reruns(capsys, tmp_path, record)


def test_t5_reads_its_two_bias_tensors_from_the_file(tmp_path, capsys, weights_read):
    bias = RNG.standard_normal((32, 8)).astype(np.float32)
    tensors = {ENCODER: bias, DECODER: -bias, **BIG}
    weights = checkpoint(tmp_path / "t5", PRESETS[T5], tensors)
    record = summary(capsys, str(weights))
    # Listed, then opened once per bias tensor for its 1,024 bytes alone.
    assert weights_read() == 3 * opening(weights) + 2 * 32 * 8 * 4
    assert record["tensors"] == [DECODER, ENCODER]
    encoder = np.array(record["bias"][ENCODER])
    # Key 20 ahead: encoder bucket 16 + 10 (log-spaced); 20 behind, decoder: bucket 17.
    assert t5_buckets(np.array([20]))[0] == 26
    np.testing.assert_array_equal(encoder[:, 128 + 20], bias[26])
    decoder = np.array(record["bias"][DECODER])
    np.testing.assert_array_equal(decoder[:, 128 - 20], -bias[17])
    np.testing.assert_array_equal(decoder[:, 128 + 5], -bias[0])  # keys ahead: bucket 0
    reruns(capsys, tmp_path, record)


def deberta(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rel = RNG.standard_normal((512, 64)).astype(np.float32)
    return checkpoint(tmp_path / "deberta", PRESETS[DEBERTA], {REL: rel, **BIG}), rel


def test_deberta_opens_rel_embeddings_as_its_relative_table(tmp_path, capsys, weights_read):
    weights, rel = deberta(tmp_path)
    record = summary(capsys, str(weights))
    assert weights_read() == 2 * opening(weights) + rel.nbytes  # listed, then read
    assert record["scheme"] == "relative_table"
    assert record["relative_positions"] == [-256, 255]
    table = record["table"]["provenance"]
    assert (table["tensor"], table["shape"]) == (REL, [512, 64])
    # Its spectrum: the singular values of the centred table, by numpy.
    centred = rel.astype(np.float64) - rel.mean(axis=0)
    expected = np.linalg.svd(centred, compute_uv=False)[:10]
    np.testing.assert_allclose(record["table"]["numbers"]["singular_values"], expected, rtol=1e-5)
    reruns(capsys, tmp_path, record)
    # The Python API and `posviz serve PATH` open the same table.
    loaded = posviz.load(weights)
    assert loaded.name == REL
    np.testing.assert_array_equal(loaded.values, rel)


def test_a_model_without_a_learned_table_names_its_scheme_when_loaded(tmp_path):
    weights = checkpoint(tmp_path / "llama", PRESETS[LLAMA], BIG)
    with pytest.raises(posviz.LoadError, match=r"uses rotary embeddings \(rope_theta\)"):
        posviz.load(weights)
    # Any tensor can still be looked at by name.
    assert posviz.load(weights, tensor="model.embed_tokens.weight").shape == (4096, 256)


def test_a_learned_table_is_summarised_as_before(tmp_path, capsys):
    wpe = RNG.standard_normal((64, 16)).astype(np.float32)
    config = {"model_type": "gpt2", "n_positions": 64}
    weights = checkpoint(tmp_path / "gpt2", config, {"transformer.wpe.weight": wpe})
    record = summary(capsys, str(weights))
    assert record["scheme"] == "learned_absolute"
    assert record["provenance"]["tensor"] == "transformer.wpe.weight"
    reruns(capsys, weights.parent, record)  # the table's file is found beside the export


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (b"[" * 100 + b"]" * 100, "nested deeper than 32 levels"),
        (json.dumps({**PRESETS[LLAMA], "rope_theta": "fast"}).encode(), "rope_theta"),
        (json.dumps({**PRESETS[LLAMA], "rope_theta": -1}).encode(), "rope_theta"),
        (json.dumps({**PRESETS[LLAMA], "hidden_size": [4096]}).encode(), "hidden_size"),
        (json.dumps({**PRESETS["bigscience/bloom"], "n_head": 0}).encode(), "head"),
        (b'["a config is an object"]', "not an object"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_a_hostile_config_json_exits_2(tmp_path, capsys, config, message):
    weights = checkpoint(tmp_path / "bad", config, BIG)
    assert main(["summary", str(weights)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    with pytest.raises(posviz.LoadError, match=message):
        posviz.load(weights)


def test_a_huge_config_json_is_refused_unread(tmp_path, capsys, monkeypatch):
    weights = checkpoint(tmp_path / "huge", b"{}", BIG)
    with (weights.parent / "config.json").open("wb") as file:
        file.truncate(50 * 2**20)  # 50 MB of zeros, sparse on disk
    asked = []
    real = Path.open

    class Recording:
        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def read(self, size=-1):
            data = self.file.read(size)
            asked.append((size, len(data)))
            return data

    monkeypatch.setattr(Path, "open", lambda self, *a, **k: Recording(real(self, *a, **k)))
    assert main(["summary", str(weights)]) == 2
    assert f"is 52,428,800 bytes; a model config is a few kB (limit {MAX_CONFIG_BYTES:,})" in (
        capsys.readouterr().err
    )
    assert asked == []  # its size said enough
    with pytest.raises(posviz.LoadError, match="52,428,800 bytes"):
        posviz.load(weights)


# --- the app: the shared folder's checkpoints ----------------------------------------------


@pytest.fixture
def shared(tmp_path, monkeypatch) -> Path:
    """A shared folder with a T5, a DeBERTa and a Llama checkpoint, each with its config.json."""
    bias = RNG.standard_normal((32, 8)).astype(np.float32)
    checkpoint(tmp_path / "t5", PRESETS[T5], {ENCODER: bias, DECODER: -bias})
    deberta(tmp_path)
    checkpoint(tmp_path / "llama", PRESETS[LLAMA], BIG)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(tmp_path))
    return tmp_path


def test_the_schemes_page_reads_a_shared_checkpoint(shared, downloads, capsys):

    at = apptest("pages/schemes.py")
    at.session_state["schemes.source"] = "Shared folder"
    at.run()
    assert not at.exception, at.exception
    box = at.selectbox(key="schemes.shared")
    assert box.options == ["deberta/model.safetensors", "llama/model.safetensors",
                           "t5/model.safetensors"]  # fmt: skip
    box.set_value("t5/model.safetensors").run()
    at.toggle(key="schemes.read_bias").set_value(True).run()
    assert not at.exception, at.exception
    (bias,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")][-1:]
    assert bias["layout"]["title"]["text"] == f"T5 relative bias: {DECODER}"
    at.selectbox(key="schemes.shared").set_value("deberta/model.safetensors").run()
    at.button[-1].click().run()  # "Open rel_embeddings as the current table"
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert (table.source, table.first_position, table.shape) == (
        "deberta/model.safetensors",
        -256,
        (512, 64),
    )
    at.selectbox(key="schemes.shared").set_value("llama/model.safetensors").run()
    at.session_state["schemes.section"] = "Numbers"
    at.run()
    data = json.loads(downloads["rotary_frequencies.json"]())
    assert data["provenance"]["weights"] == "llama/model.safetensors"  # not the server's path
    assert data["provenance"]["config"] == "llama/config.json"
    export = shared / "rotary_frequencies.json"
    export.write_text(json.dumps(data))
    assert main(["rerun", str(export), "--table", str(shared / "llama/model.safetensors")]) == 0


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (b"{not json", "model/config.json is not valid JSON"),
        (b"[1, 2]", "model/config.json holds a JSON list"),
        (None, f"model/config.json is {MAX_CONFIG_BYTES + 1:,} bytes"),
        (b'{"rope_theta": -3, "head_dim": 64}', "rope_theta in config.json is -3"),
    ],
    ids=["not-json", "a-list", "too-big", "bad-value"],
)
def test_a_shared_checkpoints_config_is_named_as_the_folder_lists_it(
    tmp_path, monkeypatch, config, says
):
    # Issue 37: the Schemes page's error named the config.json by the server's absolute path.
    root = tmp_path / "srv-models"
    root.mkdir()
    checkpoint(root / "model", config or b"{}", {"x": np.zeros((4, 4), np.float32)})
    if config is None:  # above the limit: refused by its size, unread (a sparse file)
        with (root / "model" / "config.json").open("wb") as file:
            file.truncate(MAX_CONFIG_BYTES + 1)
    monkeypatch.setenv("POSVIZ_DATA_DIR", str(root))
    at = apptest("pages/schemes.py")
    at.session_state["schemes.source"] = "Shared folder"
    at.run()
    at.selectbox(key="schemes.shared").set_value("model/model.safetensors").run()
    assert not at.exception, at.exception
    (error,) = [html.unescape(e.value) for e in at.error]
    assert says in error
    assert str(tmp_path) not in error
    assert "srv-models" not in error


def test_the_data_page_names_the_scheme_and_opens_the_relative_table(shared):

    at = apptest("app.py").run()
    at.switch_page("pages/data.py").run()
    at.selectbox(key="posviz.table.shared.file").set_value("deberta/model.safetensors").run()
    assert at.selectbox(key="posviz.table.shared.tensor").value == REL  # picked first
    at.button[-1].click().run()  # "Load"
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert (table.name, table.source, table.first_position) == (
        REL,
        "deberta/model.safetensors",
        -256,
    )
    at.selectbox(key="posviz.table.shared.file").set_value("llama/model.safetensors").run()
    (said,) = [html.unescape(w.value) for w in at.warning]  # shown literally: escaped markdown
    assert said.startswith("llama/model.safetensors has no learned absolute position table")
    assert "uses rotary embeddings (rope_theta)" in said


def test_serve_opens_the_relative_table_and_refuses_a_rotary_model(tmp_path, monkeypatch, capsys):
    from tests.cli.test_serve import Started, app_table

    started = []

    def execv(path, argv):
        started.append(argv)
        raise Started

    monkeypatch.setattr("os.execv", execv)
    monkeypatch.setenv("POSVIZ_OPEN", "")
    llama = checkpoint(tmp_path / "llama", PRESETS[LLAMA], BIG)
    assert main(["serve", str(llama)]) == 2  # before any server starts
    assert started == []
    assert "uses rotary embeddings (rope_theta)" in capsys.readouterr().err
    weights, rel = deberta(tmp_path)
    with pytest.raises(Started):
        main(["serve", str(weights)])
    assert f"{REL}, 512 x 64" in capsys.readouterr().out
    at = app_table(monkeypatch, str(weights))
    assert not at.exception, at.exception
    table = at.session_state["posviz.table"]
    assert (table.name, table.first_position) == (REL, -256)
    np.testing.assert_array_equal(table.values, rel)
