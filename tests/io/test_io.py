"""posviz.io: every format round-trips exactly through one list and one read, the position table
found and trimmed, hostile files refused (each format's own limits: test_<format>.py)."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest

import posviz.io
from posviz.embedding import Embedding
from posviz.io import LoadError, TensorInfo, Trim, list_tensors, load, read_tensor, suggest_trim
from posviz.source import Cut
from tests.corpus import HOSTILE_WORDS, MARKER, Good, hostile_files


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("hostile")
    return folder, hostile_files(folder)


GOOD_NAMES = [
    "npy_float32",
    "npy_float64",
    "npy_float16",
    "npy_fortran",
    "npy_sniffed",
    "npz_wpe",
    "npz_wte",
    "csv_header",
    "csv_plain",
    "csv_semicolon",
    "csv_pandas",
    "tsv_projector",
    "txt_whitespace",
    "st_f32",
    "st_f16",
    "st_bf16",
    "st_f64",
    "st_i32",
    "st_gpt2_wpe",
    "st_sniffed",
    "st_vit",
]


def test_corpus_covers_every_good_file(good: dict[str, Good]) -> None:
    assert sorted(good) == sorted(GOOD_NAMES)


@pytest.mark.parametrize("name", GOOD_NAMES)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["path", "bytes"])
def test_round_trip_gives_the_stored_values(
    good: dict[str, Good], name: str, *, as_bytes: bool
) -> None:
    path, tensor, values, dtype = good[name]
    source = path.read_bytes() if as_bytes else path
    infos = {info.name: info for info in list_tensors(source, path.name)}
    assert infos[tensor] == TensorInfo(tensor, values.shape, dtype)
    array = read_tensor(source, tensor, path.name)
    assert array.dtype == values.dtype
    np.testing.assert_array_equal(array, values)


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_load_keeps_the_values_and_the_stored_dtype(good: dict[str, Good], name: str) -> None:
    path, tensor, values, dtype = good[name]
    table = load(path, None, Cut(tensor))
    # One vocabulary, numpy's, whatever the format names it ("F32", "BF16" in safetensors).
    named = "bfloat16" if dtype == "BF16" else str(values.dtype)  # BF16 is read as float32
    # A single-array file's table is named after the file ("wpe" for wpe.npy).
    expected = path.stem if tensor == "table" else tensor
    assert (table.name, table.source, table.dtype) == (expected, path.name, named)
    assert load(path, None, Cut(expected)).sha256 == table.sha256  # its name reads it again
    np.testing.assert_array_equal(table.values, values.reshape(table.shape))


def test_tensors_are_size_checked_before_reading(
    good: dict[str, Good], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(posviz.embedding, "MAX_ELEMENTS", 95)
    for name in ("npy_float32", "npz_wpe", "st_f32", "csv_plain"):
        with pytest.raises(LoadError, match=r"\(12, 8\) \(96 values\), above the limit of 95"):
            read_tensor(good[name].path, good[name].tensor)


def test_load_detects_the_position_table(good: dict[str, Good]) -> None:
    path, _, wpe, _ = good["st_gpt2_wpe"]
    table = load(path)
    assert (table.name, table.source, table.dtype, table.shape) == (
        "wpe.weight",
        "gpt2.safetensors",
        "float32",
        (32, 16),
    )
    assert table.sha256 == Embedding.from_array(wpe, name="x", source="y").sha256


def test_load_trims_a_vit_table_to_its_grid(good: dict[str, Good]) -> None:
    path, _, pos_embed, _ = good["st_vit"]
    trim = suggest_trim(
        "pos_embed", next(i.shape for i in list_tensors(path) if i.name == "pos_embed")
    )
    assert trim == Trim(1, (14, 14), "ViT pos_embed: 1 class token + 14x14 patch grid")
    table = load(path.read_bytes(), "upload.safetensors", Cut(None, trim.row_start, grid=trim.grid))
    assert (table.name, table.source, table.shape, table.grid) == (
        "pos_embed",
        "upload.safetensors",
        (196, 768),
        (14, 14),
    )
    np.testing.assert_array_equal(table.prefix, pos_embed[0, :1])
    np.testing.assert_array_equal(table.values, pos_embed[0, 1:])


def test_load_without_a_clear_table_lists_the_candidates(good: dict[str, Good]) -> None:
    with pytest.raises(LoadError, match=r"5 tensors.*f32 \(12, 8\), f16 \(12, 8\)"):
        load(good["st_f32"].path)


def test_load_names_a_missing_tensor_and_lists_the_real_ones(good: dict[str, Good]) -> None:
    with pytest.raises(LoadError, match="no tensor 'nope'; it holds: wpe, wte, bias"):
        load(good["npz_wpe"].path, None, Cut("nope"))
    with pytest.raises(LoadError, match="no tensor 'nope'; it holds: table"):
        load(good["csv_plain"].path, None, Cut("nope"))


def test_load_of_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"Cannot open .*no_such\.npy: No such file"):
        load(tmp_path / "no_such.npy")


def test_text_bytes_without_a_filename_are_not_guessed() -> None:
    with pytest.raises(
        LoadError, match=r"Accepted formats: \.npy, \.npz, \.safetensors, \.gguf, \.csv"
    ):
        list_tensors(b"1,2\n3,4\n")


def test_the_pickles_of_the_corpus_really_run_code(tmp_path: Path) -> None:
    files = hostile_files(tmp_path)
    pickle.loads(files["rce.pkl"].read_bytes())  # proves the marker check can fail
    assert (tmp_path / MARKER).exists()


def test_corpus_has_a_message_word_for_every_hostile_file(
    hostile: tuple[Path, dict[str, Path]],
) -> None:
    assert sorted(hostile[1]) == sorted(HOSTILE_WORDS)


@pytest.mark.parametrize("name", sorted(HOSTILE_WORDS))
def test_hostile_file_is_refused_with_a_useful_message(
    hostile: tuple[Path, dict[str, Path]], name: str
) -> None:
    folder, files = hostile
    for source in (files[name], files[name].read_bytes()):
        with pytest.raises(LoadError) as refusal:
            load(source, name if isinstance(source, bytes) else None)
        message = str(refusal.value)
        assert HOSTILE_WORDS[name].lower() in message.lower()
        assert message.startswith(name)
    assert not (folder / MARKER).exists()


def test_pickle_refusal_shows_the_safetensors_conversion(
    hostile: tuple[Path, dict[str, Path]],
) -> None:
    with pytest.raises(LoadError) as refusal:
        list_tensors(hostile[1]["rce.pt"])
    # The message one line, the code beside it, to be printed and shown as a block of its own.
    assert "\n" not in str(refusal.value)
    assert refusal.value.snippet.splitlines() == [
        "import torch",
        "from safetensors.torch import save_file",
        "",
        "state = torch.load('rce.pt', weights_only=True)",
        "save_file({k: v.contiguous() for k, v in state.items()}, 'rce.safetensors')",
    ]


@pytest.mark.parametrize("name", ['it\'s "x".pt', "a\nb.pt", "\u202ex.bin", "back\\slash.pkl"])
def test_the_conversion_runs_whatever_the_files_name(name: str) -> None:
    with pytest.raises(LoadError) as refusal:
        list_tensors(b"\x80\x04K\x01.", name)
    code = ast.parse(refusal.value.snippet)  # a name's quotes or newline cannot break it
    load, save = (node.value for node in code.body[2:])
    assert load.args[0].value == name
    assert save.args[1].value == Path(name).stem + ".safetensors"
    assert name not in refusal.value.snippet or name.isprintable()  # escaped, not raw


# --- not a regular file ---------------------------------------------------------------------


def test_an_unreadable_file_is_named_as_given_not_by_its_server_path(tmp_path: Path) -> None:
    # Formerly: an unreadable shared file's message showed the server's absolute path.
    (tmp_path / "gpt2" / "model.npy").mkdir(parents=True)  # a directory: refused
    with pytest.raises(LoadError) as refused:
        load(tmp_path / "gpt2" / "model.npy", "gpt2/model.npy")
    assert "gpt2/model.npy is not a regular file" in str(refused.value)
    assert str(tmp_path) not in str(refused.value)


def finishes(call, seconds: float = 10.0) -> object:
    """`call()`'s result, or a failure if it is still running after `seconds` (a FIFO's open
    waits for a writer: the thread is released by opening the FIFO for writing)."""
    import threading

    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return outcome[0]


def fifo(path: Path) -> Path:
    import os

    os.mkfifo(path)
    return path


def release(path: Path) -> None:
    """Open `path` (a FIFO) for writing and close it: a reader waiting on it gets EOF."""
    import contextlib
    import os

    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("call", [load, list_tensors])
def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path, call):
    pipe = fifo(tmp_path / "wpe.npy")
    try:
        error = finishes(lambda: call(pipe))
    finally:
        release(pipe)
    assert isinstance(error, LoadError)
    assert str(error) == "wpe.npy is not a regular file (a FIFO, device or folder); give a file."
    folder = tmp_path / "model.safetensors"
    folder.mkdir()
    with pytest.raises(LoadError, match=r"model\.safetensors is not a regular file"):
        call(folder)
