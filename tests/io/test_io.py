"""posviz.io: every format round-trips exactly, headers are read lazily, hostile files refused."""

from __future__ import annotations

import ast
import io
import json
import pickle
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import posviz.io
from posviz.embedding import MIN_POSITIONS, Embedding
from posviz.io import (
    LoadError,
    TensorInfo,
    Trim,
    detect,
    detect_position_tensor,
    list_tensors,
    load,
    read_tensor,
    suggest_trim,
)
from posviz.source import Cut
from tests.corpus import (
    HOSTILE_WORDS,
    MARKER,
    Good,
    good_files,
    hostile_files,
    write_safetensors,
)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Good]:
    return good_files(tmp_path_factory.mktemp("good"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("hostile")
    return folder, hostile_files(folder)


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of every read posviz.io makes from files it opens by path."""
    reads: list[int] = []

    class CountingFile(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            reads.append(len(data))
            return data

        def readinto(self, buffer: memoryview) -> int:
            n = super().readinto(buffer)
            reads.append(n or 0)
            return n

    monkeypatch.setattr(posviz.io, "open", lambda path, mode: CountingFile(path), raising=False)
    return reads


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


def test_bf16_bits_become_the_float32_they_encode(tmp_path: Path) -> None:
    # Five copies of the four cases: a table of the 10-row minimum that load() accepts.
    bits = np.tile(np.array([[0x3F80, 0xC049], [0x0001, 0x8000]], dtype="<u2"), (5, 1))
    path = write_safetensors(tmp_path / "b.safetensors", {"t": ("BF16", (10, 2), bits.tobytes())})
    expected = np.tile(np.array([[1.0, -3.140625], [2.0**-133, -0.0]], dtype=np.float32), (5, 1))
    assert load(path).dtype == "bfloat16"
    array = read_tensor(path, "t")
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array, expected)
    assert np.signbit(array[1::2, 1]).all()


def sparse_checkpoint(path: Path) -> np.ndarray:
    """A safetensors file with a 128 MiB "wte" (a hole on disk) before a small "wpe"."""
    big = 8192 * 4096 * 4
    wpe = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    header = {
        "wte": {"dtype": "F32", "shape": [8192, 4096], "data_offsets": [0, big]},
        "wpe": {"dtype": "F32", "shape": [16, 8], "data_offsets": [big, big + wpe.nbytes]},
    }
    blob = json.dumps(header).encode()
    with path.open("wb") as file:
        file.write(struct.pack("<Q", len(blob)) + blob)
        file.seek(8 + len(blob) + big)
        file.write(wpe.tobytes())
    return wpe


def test_safetensors_listing_reads_only_the_header(tmp_path: Path, bytes_read: list[int]) -> None:
    sparse_checkpoint(tmp_path / "big.safetensors")
    infos = list_tensors(tmp_path / "big.safetensors")
    assert [(i.name, i.shape, i.dtype) for i in infos] == [
        ("wte", (8192, 4096), "F32"),
        ("wpe", (16, 8), "F32"),
    ]
    assert 0 < sum(bytes_read) < 1024


def test_safetensors_reads_one_tensor_without_the_rest(
    tmp_path: Path, bytes_read: list[int]
) -> None:
    wpe = sparse_checkpoint(tmp_path / "big.safetensors")
    table = load(tmp_path / "big.safetensors")
    assert table.name == "wpe"
    np.testing.assert_array_equal(table.values, wpe)
    assert sum(bytes_read) < 4 * 1024


def test_npz_listing_does_not_inflate_members(tmp_path: Path, bytes_read: list[int]) -> None:
    noise = np.random.default_rng(1).standard_normal((512, 256))  # 1 MiB, incompressible
    np.savez_compressed(tmp_path / "a.npz", wpe=noise, other=noise[:4])
    infos = list_tensors(tmp_path / "a.npz")
    assert {(i.name, i.shape) for i in infos} == {("wpe", (512, 256)), ("other", (4, 256))}
    assert sum(bytes_read) < 64 * 1024


def test_tensors_are_size_checked_before_reading(
    good: dict[str, Good], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(posviz.embedding, "MAX_ELEMENTS", 95)
    for name in ("npy_float32", "npz_wpe", "st_f32", "csv_plain"):
        with pytest.raises(LoadError, match=r"\(12, 8\) \(96 values\), above the limit of 95"):
            read_tensor(good[name].path, good[name].tensor)


def test_text_over_the_size_limit_is_not_read(
    good: dict[str, Good], monkeypatch: pytest.MonkeyPatch, bytes_read: list[int]
) -> None:
    monkeypatch.setattr(posviz.io._text, "MAX_TEXT_BYTES", 100)
    with pytest.raises(LoadError, match="above the 100-byte limit for text tables"):
        list_tensors(good["csv_plain"].path)
    assert sum(bytes_read) <= 16  # the magic-byte sniff only


def test_pandas_column_labels_are_a_header(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("0,1,2\n1.5,2.5,3.5\n4,5,6\n")
    np.testing.assert_array_equal(
        read_tensor(tmp_path / "t.csv", "table"), [[1.5, 2.5, 3.5], [4, 5, 6]]
    )


GPT2 = [
    TensorInfo("transformer.wte.weight", (50257, 768), "F32"),
    TensorInfo("transformer.wpe.weight", (1024, 768), "F32"),
    TensorInfo("transformer.h.0.attn.bias", (1, 1, 1024, 1024), "F32"),
]
VIT = [
    TensorInfo("cls_token", (1, 1, 768), "F32"),
    TensorInfo("pos_embed", (1, 197, 768), "F32"),
    TensorInfo("patch_embed.proj.weight", (768, 3, 16, 16), "F32"),
]
OPT = [
    TensorInfo("model.decoder.embed_tokens.weight", (50272, 768), "F16"),
    TensorInfo("model.decoder.embed_positions.weight", (2050, 768), "F16"),
]
BERT = [
    TensorInfo("bert.embeddings.word_embeddings.weight", (30522, 768), "F32"),
    TensorInfo("bert.embeddings.position_embeddings.weight", (512, 768), "F32"),
    TensorInfo("bert.embeddings.position_ids", (1, 512), "I64"),
    TensorInfo("bert.embeddings.token_type_embeddings.weight", (2, 768), "F32"),
]
BART = [
    TensorInfo("model.encoder.embed_positions.weight", (1026, 768), "F32"),
    TensorInfo("model.decoder.embed_positions.weight", (1026, 768), "F32"),
]


@pytest.mark.parametrize(
    ("infos", "expected"),
    [
        (GPT2, "transformer.wpe.weight"),
        (VIT, "pos_embed"),
        (OPT, "model.decoder.embed_positions.weight"),
        (BERT, "bert.embeddings.position_embeddings.weight"),
        (BART, None),  # two position tables: unsure
        ([TensorInfo("a", (10,), "f4"), TensorInfo("b", (16, 4), "f4")], "b"),
        ([TensorInfo("a", (12, 4), "f4"), TensorInfo("b", (16, 4), "f4")], None),
        ([TensorInfo("pos_embed", (1, 768), "F32")], None),
        ([], None),
    ],
    ids=["gpt2", "vit", "opt", "bert", "bart", "only-2d", "two-2d", "unusable", "empty"],
)
def test_detect_position_tensor(infos: list[TensorInfo], expected: str | None) -> None:
    assert detect_position_tensor(infos) == expected


@pytest.mark.parametrize(
    ("name", "shape", "row_start", "grid", "words"),
    [
        ("pos_embed", (1, 197, 768), 1, (14, 14), "1 class token + 14x14 patch grid"),
        ("pos_embed", (1, 198, 768), 2, (14, 14), "distillation tokens + 14x14"),
        ("pos_embed", (1, 196, 768), 0, (14, 14), "14x14 patch grid, no class token"),
        ("vision_model.embeddings.position_embedding.weight", (257, 1024), 1, (16, 16), "16x16"),
        ("pos_embed", (1, 200, 768), 0, None, ""),
        ("roberta.embeddings.position_embeddings.weight", (514, 768), 2, None, "512 positions"),
        ("model.decoder.embed_positions.weight", (2050, 768), 2, None, "2 reserved rows"),
        ("model.encoder.embed_positions.weight", (1602, 768), 2, None, "1600 positions"),
        ("model.encoder.embed_positions.weight", (1002, 768), 0, None, ""),
        ("transformer.wpe.weight", (1024, 768), 0, None, ""),
        ("table", (66, 8), 2, None, "64 positions"),
        ("table", (34, 8), 0, None, ""),
        ("wpe", (1024,), 0, None, ""),
    ],
)
def test_suggest_trim(
    name: str, shape: tuple[int, ...], row_start: int, grid: tuple[int, int] | None, words: str
) -> None:
    trim = suggest_trim(name, shape)
    assert (trim.row_start, trim.grid) == (row_start, grid)
    assert words in trim.reason
    assert bool(trim.reason) == (row_start > 0 or grid is not None)


def test_zero_leading_rows_roberta_style():
    table = np.random.default_rng(0).standard_normal((10, 4))
    assert detect.zero_leading_rows(table) == 0
    table[1] = 0.0  # padding_idx 1: rows 0 and 1 are reserved
    assert detect.zero_leading_rows(table) == 2


def test_reserved_rows_by_name_and_by_a_zero_row():
    rows = np.random.default_rng(0).standard_normal((66, 8))
    plain = Embedding.from_array(rows[:60], name="wpe", source="s")
    nothing = detect.reserved_rows(plain)
    assert (nothing.rows, nothing.reasons, nothing.most) == (0, (), 60 - MIN_POSITIONS)
    # RoBERTa: 2 + 64 rows by name, and padding row 1 all zeros; either rule finds rows 0-1.
    padded = rows.copy()
    padded[1] = 0.0
    roberta = Embedding.from_array(padded, name="embed_positions.weight", source="s")
    found = detect.reserved_rows(roberta)
    assert found.rows == 2
    assert found.reasons == (
        "RoBERTa/BART/OPT-style table: 2 reserved rows + 64 positions",
        "row 1 is all zeros (an untrained padding row)",
    )
    trimmed = found.trim(roberta, 2)
    np.testing.assert_array_equal(trimmed.values, padded[2:])
    np.testing.assert_array_equal(trimmed.prefix, padded[:2])
    assert trimmed.row_start == 2
    # A trimmed table is not judged by its name again; its rows are.
    assert detect.reserved_rows(trimmed).rows == 0


def test_trimming_keeps_the_names_grid_only_for_the_rows_it_names():
    vit = Embedding.from_array(
        np.random.default_rng(1).standard_normal((17, 8)), name="vit.pos_embed", source="s"
    )
    found = detect.reserved_rows(vit)
    assert (found.rows, found.by_name.grid) == (1, (4, 4))
    assert found.trim(vit, 1).grid == (4, 4)
    assert found.trim(vit, 2).grid is None
    twice = detect.trim_leading(detect.trim_leading(vit, 1), 2)
    assert (twice.row_start, twice.shape) == (3, (14, 8))
    assert twice.describe_rows() == "rows 3-16 of 17 (3 leading rows trimmed)"


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


# --- bounded headers, parsed once; messages without server paths -------------------


def _empty_tensors(n: int) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    return {f"t{i}": ("F32", (0,), b"") for i in range(n)}


def test_a_safetensors_header_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Formerly: a header was parsed three times per Load (list, then list + read) and again
    # on every rerun.
    table = np.arange(48, dtype=np.float32).reshape(12, 4)
    path = write_safetensors(
        tmp_path / "once.safetensors", {"wpe": ("F32", (12, 4), table.tobytes())}
    )
    calls = []
    check = posviz.io._safetensors._check_header
    monkeypatch.setattr(
        posviz.io._safetensors, "_check_header", lambda *a: calls.append(a) or check(*a)
    )
    monkeypatch.setattr(posviz.io._safetensors, "_CHECKED_HEADERS", {})
    for _ in range(3):  # three reruns of the Data page: list, then Load
        list_tensors(path.read_bytes(), "once.safetensors")
        loaded = load(path.read_bytes(), "once.safetensors", Cut("wpe"))
    np.testing.assert_array_equal(loaded.values, table)
    assert len(calls) == 1
    # Another header is parsed anew, and a header error is raised every time, not cached.
    other = write_safetensors(tmp_path / "other.safetensors", {"w": ("F32", (12, 4), bytes(192))})
    list_tensors(other)
    assert len(calls) == 2


def test_header_byte_and_entry_limits_are_stated_with_their_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = write_safetensors(tmp_path / "big.safetensors", _empty_tensors(40))
    monkeypatch.setattr(posviz.io._safetensors, "MAX_HEADER_BYTES", 1000)
    with pytest.raises(LoadError, match=r"header of 2,\d{3} bytes, above the limit of 1,000"):
        list_tensors(big)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_HEADER_BYTES", 2**20)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_TENSORS", 39)
    with pytest.raises(LoadError, match="more than 39 tensors"):
        list_tensors(big)
    monkeypatch.setattr(posviz.io._safetensors, "MAX_TENSORS", 40)
    assert len(list_tensors(big)) == 40


def test_a_header_past_the_entry_limit_is_refused_in_bounded_time_and_memory(
    tmp_path: Path,
) -> None:
    # Formerly: a 100 MB header of 1.43 M empty tensors took 28 s and 1.6 GB to list. Now
    # 8 MiB at most is read, and parsing stops at the 65,537th tensor entry.
    data = write_safetensors(tmp_path / "many.safetensors", _empty_tensors(100_000)).read_bytes()
    assert len(data) < posviz.io.MAX_HEADER_BYTES
    start = time.process_time()  # CPU seconds: a busy machine's other work does not count
    with pytest.raises(LoadError, match="more than 65,536 tensors"):
        list_tensors(data, "many.safetensors")
    seconds = time.process_time() - start
    tracemalloc.start()
    with pytest.raises(LoadError, match="more than 65,536 tensors"):
        list_tensors(data, "many.safetensors")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 15  # about 1 s on an idle machine
    assert peak < 200 * 2**20


def test_an_unreadable_file_is_named_as_given_not_by_its_server_path(tmp_path: Path) -> None:
    # Formerly: an unreadable shared file's message showed the server's absolute path.
    (tmp_path / "gpt2" / "model.npy").mkdir(parents=True)  # a directory: refused
    with pytest.raises(LoadError) as refused:
        load(tmp_path / "gpt2" / "model.npy", "gpt2/model.npy")
    assert "gpt2/model.npy is not a regular file" in str(refused.value)
    assert str(tmp_path) not in str(refused.value)


def test_messages_quote_long_names_and_many_tensors_briefly(tmp_path: Path) -> None:
    # A header of a few MiB may hold one name of megabytes: the message stays short.
    name = "w" * 2**20
    path = write_safetensors(tmp_path / "long.safetensors", {name: ("F7", (12, 4), bytes(192))})
    with pytest.raises(LoadError, match=r"tensor 'w{100}… \(1,048,576 characters\)'") as refused:
        list_tensors(path)
    assert len(str(refused.value)) < 1000
    many = write_safetensors(tmp_path / "many.safetensors", _empty_tensors(5000))
    with pytest.raises(LoadError, match="and 4,980 more") as refused:
        read_tensor(many, "wpe")
    assert len(str(refused.value)) < 1000


# --- not a regular file ---------------------------------------------------------------------


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
