"""posviz.io reads GGUF: tables in every type the gguf package reads, the header bounded and
checked (hostile counts, lengths, depths, truncations refused quickly), read in pieces."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest

from posviz import io
from posviz.io import (
    LoadError,
    TensorInfo,
    _gguf,
    list_tensors,
    load,
    read_gguf_header,
    read_tensor,
)
from tests import ggufs, hostile

RNG = np.random.default_rng(0)
TABLE = RNG.standard_normal((64, 256)).astype(np.float32)


def reference(path: Path, name: str) -> np.ndarray:
    """The tensor as gguf's own reader and dequantize give it (an independent path to it)."""
    (tensor,) = [t for t in gguf.GGUFReader(path).tensors if t.name == name]
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type)


@pytest.mark.parametrize(
    ("kind", "error"),
    # The largest error quantization may make on this table: F16's half ulp at |x| < 4, Q8_0's
    # half step of a block's scale (its largest |x| / 127), Q4_0's (largest |x| / 8).
    [("F32", 0.0), ("F16", 2**-11 * 4 / 2), ("Q8_0", 4.5 / 127 / 2), ("Q4_0", 4.5 / 8)],
)
def test_a_learned_table_is_read_in_every_type(tmp_path: Path, kind: str, error: float) -> None:
    path = ggufs.learned(tmp_path / f"gpt2-{kind}.gguf", TABLE, kind)
    infos = {i.name: i for i in list_tensors(path)}
    assert infos["position_embd.weight"] == TensorInfo("position_embd.weight", (64, 256), kind)
    table = load(path)  # the position table is found by its GGUF name
    assert (table.name, table.shape, table.source) == ("position_embd.weight", (64, 256), path.name)
    assert table.dtype == {"F32": "float32", "F16": "float16"}.get(kind, kind)
    np.testing.assert_array_equal(table.values, reference(path, "position_embd.weight"))
    assert np.abs(table.values - TABLE).max() <= error
    assert table.provenance()["dtype"] == table.dtype  # the quantization travels with exports


def test_a_k_quant_dequantizes_to_the_values_its_blocks_encode(tmp_path: Path) -> None:
    values = (np.arange(32 * 512) * 7 % 16).reshape(32, 512)
    path = ggufs.learned(tmp_path / "q4k.gguf", values, "Q4_K")
    table = load(path)
    assert table.dtype == "Q4_K"
    np.testing.assert_array_equal(table.values, values)
    np.testing.assert_array_equal(table.values, reference(path, "position_embd.weight"))


def test_uploaded_bytes_are_read_by_their_magic(tmp_path: Path) -> None:
    path = ggufs.learned(tmp_path / "model.gguf", TABLE, "Q8_0")
    data = path.read_bytes()
    for name in ("model.gguf", "x.dat", None):  # another extension, or none: the magic decides
        assert load(data, name).sha256 == load(path).sha256


def test_shapes_are_in_numpy_order(tmp_path: Path) -> None:
    path = ggufs.write(
        tmp_path / "shapes.gguf",
        "gpt2",
        tensors={"a": np.zeros((3, 5, 7), np.float32), "b": np.arange(6, dtype=np.int32)},
    )
    assert {i.name: i.shape for i in list_tensors(path)} == {"a": (3, 5, 7), "b": (6,)}
    np.testing.assert_array_equal(read_tensor(path, "b"), np.arange(6))


def test_metadata_is_read_as_gguf_reads_it(tmp_path: Path) -> None:
    # A vocabulary with the strings the fast walk cannot take (NUL bytes, 300 bytes, empty),
    # another it can, and every value type: the metadata must match gguf's own reader.
    odd = ["a", "", "x" * 300, "nul\x00inside", "é"] * 1000
    plain = [f"tok{i}" for i in range(9000)]

    def keys(w: gguf.GGUFWriter) -> None:
        w.add_token_list(odd)
        w.add_array("plain", plain)
        w.add_uint8("u8", 7)
        w.add_int64("i64", -(2**40))
        w.add_float64("f64", 0.1)
        w.add_bool("flag", True)
        w.add_array("bools", [True, False, True])
        w.add_array("nested", [[1, 2], [3]])
        w.add_array("floats", list(np.linspace(0, 1, 5000)))
        w.add_string("text", "λ")

    path = ggufs.write(tmp_path / "meta.gguf", "llama", keys=keys, tensors={"t": TABLE})
    header, head = read_gguf_header(
        lambda a, b: path.read_bytes()[a:b], path.stat().st_size, path.name
    )
    theirs = gguf.GGUFReader(path)
    assert header.nbytes == len(head) <= theirs.data_offset
    assert header.data_start == theirs.data_offset
    for key in ("u8", "i64", "f64", "flag", "bools", "text", "general.architecture"):
        expected = theirs.fields[key].contents()
        value = header.metadata[key]
        assert (list(value) if isinstance(value, tuple) else value) == pytest.approx(expected)
    assert header.metadata["nested"] == ((1, 2), (3,))
    assert header.metadata["tokenizer.ggml.tokens"] == io.LongArray("str", 5000)
    assert header.metadata["plain"] == io.LongArray("str", 9000)
    assert header.metadata["floats"] == io.LongArray("f32", 5000)
    assert header.value_types["plain"] == "arr[str]"
    (tensor,) = header.tensors.values()
    assert (tensor.begin, tensor.end) == (0, TABLE.nbytes)


def test_the_fast_walk_and_the_loop_agree(tmp_path: Path) -> None:
    words = [f"w{i % 97}" * (1 + i % 5) for i in range(20000)]
    path = ggufs.write(tmp_path / "v.gguf", "llama", keys=lambda w: w.add_token_list(words))
    data = path.read_bytes()
    start = data.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 16
    end = _gguf._string_chain_end(data, start, len(words))
    assert end == start + sum(8 + len(w) for w in words)
    broken = bytearray(data)
    broken[start + 8 + len(words[0]) + 1] = 1  # the second length field is now 2**8 + its own
    assert _gguf._string_chain_end(bytes(broken), start, len(words)) is None


@pytest.mark.parametrize("pad", range(4))
def test_the_word_walk_ends_where_the_byte_walk_does_at_every_alignment(
    tmp_path: Path, pad: int
) -> None:
    # The key's length moves the strings' start through the four places in a word.
    words = [f"w{i % 97}" * (1 + i % 5) for i in range(20000)]
    key = "k" * (5 + pad)
    path = ggufs.write(tmp_path / "v.gguf", "llama", keys=lambda w: w.add_array(key, words))
    data = path.read_bytes()
    start = data.index(key.encode()) + len(key) + 16
    expected = start + sum(8 + len(w) for w in words)
    assert _gguf._word_chain_end(data, start, len(words)) == expected
    assert _gguf._byte_chain_end(data, start, len(words)) == expected
    # An empty string (a zero length byte) breaks the words' pattern: the bytes settle it.
    words[100] = ""
    path = ggufs.write(tmp_path / "e.gguf", "llama", keys=lambda w: w.add_array(key, words))
    data = path.read_bytes()
    assert _gguf._word_chain_end(data, start, len(words)) is None
    assert _gguf._string_chain_end(data, start, len(words)) == start + sum(
        8 + len(w) for w in words
    )


def test_the_header_is_read_in_pieces_as_far_as_it_goes(tmp_path: Path) -> None:
    words = [f"token{i}" for i in range(60000)]
    path = ggufs.write(
        tmp_path / "v.gguf", "llama", keys=lambda w: w.add_token_list(words), tensors={"t": TABLE}
    )
    data = path.read_bytes()
    asked: list[tuple[int, int]] = []

    def read(begin: int, end: int) -> bytes:
        asked.append((begin, end))
        return data[begin:end]

    header, head = read_gguf_header(read, len(data), "v.gguf", first=4096)
    assert bytes(head) == data[: header.nbytes]
    assert [b for b, _ in asked] == [0] + [e for _, e in asked[:-1]]  # contiguous pieces
    assert asked[-1][1] <= header.nbytes * 1.1 + 2**13  # a few kB past the header at most
    assert len(asked) <= 5


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"GGUF" + struct.pack("<I", 3), "truncated"),
        (ggufs.header(0, 2**60), "claims"),
        (ggufs.header(2**40, 0), "claims"),
        (ggufs.header(0, 1, version=1), "version 1"),
        (b"GGUF" + struct.pack("<I", 3 << 24) + bytes(16), "big-endian"),
        (b"GGUX" + bytes(20), "not a GGUF file"),
        # a key of 2**62 bytes, then of 5000 (the names' limit is 4096)
        (ggufs.header(0, 1) + struct.pack("<Q", 2**62), "claims"),
        (ggufs.header(0, 1) + ggufs.string("k" * 5000) + bytes(8), "limit"),
        # a string value longer than the file
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<IQ", 8, 10**12), "claims"),
        # arrays: 2**60 u8, 2**59 strings, 2**58 arrays, with nothing behind them
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<IIQ", 9, 0, 2**60), "claims"),
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<IIQ", 9, 8, 2**59), "claims"),
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<IIQ", 9, 9, 2**58), "claims"),
        # arrays of arrays of … five deep
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<I", 9)
         + struct.pack("<IQ", 9, 1) * 5 + struct.pack("<IQ", 0, 0), "deeper"),
        (ggufs.header(0, 1) + ggufs.string("k") + struct.pack("<II", 13, 0), "unknown value type"),
        (ggufs.header(0, 2) + ggufs.kv_u32("k", 1) * 2, "appears twice"),
        (ggufs.header(0, 1) + ggufs.string(b"\xff\xfe") + struct.pack("<II", 4, 0), "not UTF-8"),
        (ggufs.header(0, 1) + ggufs.string("general.alignment") + struct.pack("<II", 4, 24),
         "power of two"),
        (ggufs.header(0, 1) + ggufs.kv_str("general.alignment", "32"), "power of two"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [4] * 5, 0, 0), bytes(64)),
         "5 dimensions"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [4], 99, 0), bytes(64)),
         "GGML type 99"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [33], 8, 0), bytes(64)),
         "whole number"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [2**20, 2**20], 0, 0)),
         "past the"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [2**40, 2**40], 0, 0)),
         "more elements"),
        (ggufs.padded(ggufs.header(1, 0) + ggufs.tensor_info("t", [4], 0, 8), bytes(64)),
         "multiple of 32"),
        (ggufs.padded(ggufs.header(2, 0) + ggufs.tensor_info("a", [16], 0, 0)
                      + ggufs.tensor_info("b", [16], 0, 32), bytes(96)), "overlap"),
        (ggufs.padded(ggufs.header(2, 0) + ggufs.tensor_info("a", [4], 0, 0)
                      + ggufs.tensor_info("a", [4], 0, 32), bytes(64)), "appears twice"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)  # fmt: skip
@pytest.mark.timeout(20)
def test_a_hostile_header_is_refused_quickly(tmp_path: Path, data: bytes, words: str) -> None:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(LoadError, match=words):
            list_tensors(source, "hostile.gguf")


def test_every_truncation_of_a_good_file_is_refused(tmp_path: Path) -> None:
    path = ggufs.learned(tmp_path / "t.gguf", TABLE[:16, :64], "Q8_0")
    data = path.read_bytes()
    for cut in range(0, len(data) - 1, 7):
        with pytest.raises(LoadError):
            load(data[:cut], "t.gguf")


def test_a_header_past_the_byte_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gguf, "MAX_GGUF_HEADER_BYTES", 2**16)
    path = ggufs.write(
        tmp_path / "v.gguf", "llama", keys=lambda w: w.add_token_list(["tok"] * 20000)
    )
    with pytest.raises(LoadError, match="more than 65,536 bytes"):
        list_tensors(path)


def test_a_type_gguf_cannot_dequantize_is_named(tmp_path: Path) -> None:
    raw = np.zeros((16, 40 * 2), dtype=np.uint8)  # Q8_1: 32 values in 40 bytes, no dequantize
    path = ggufs.write(
        tmp_path / "q81.gguf", "gpt2", tensors={"position_embd.weight": (raw, "Q8_1")}
    )
    assert list_tensors(path)[0].dtype == "Q8_1"
    with pytest.raises(LoadError, match="cannot dequantize"):
        load(path)


def test_a_tensor_above_the_element_limit_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("posviz.embedding.MAX_ELEMENTS", 1000)
    path = ggufs.learned(tmp_path / "big.gguf", TABLE, "F32")
    with pytest.raises(LoadError, match="above the limit"):
        read_tensor(path, "position_embd.weight")


def test_the_shared_folder_offers_gguf_files(tmp_path: Path) -> None:
    from posviz.io import datadir

    (tmp_path / "models").mkdir()
    ggufs.learned(tmp_path / "models" / "gpt2.gguf", TABLE, "F16")
    assert datadir.list_files(tmp_path) == ["models/gpt2.gguf"]
    assert datadir.resolve(tmp_path, "models/gpt2.gguf").name == "gpt2.gguf"


# --- issue 45: the work of a header bounded before it is done ---------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        # 5 million one-element arrays (64 MiB): 31-54 s and 0.9 GB before.
        (hostile.nested_arrays_gguf, "5,000,000 arrays inside an array; posviz steps over at"),
        # 8 million empty strings (64 MiB): 20-26 s before.
        (hostile.empty_strings_gguf, "8,000,000 strings that cannot be stepped over at once"),
    ],
    ids=["nested-arrays", "empty-strings"],
)
@pytest.mark.timeout(60)
def test_a_64_mib_header_of_tiny_items_is_refused_before_it_is_walked(
    tmp_path: Path, make, words: str
) -> None:
    path = make(tmp_path / "hostile.gguf")
    for source in (path, path.read_bytes()):  # a file, and an upload's bytes
        tracemalloc.start()
        try:
            with pytest.raises(LoadError, match=words):
                list_tensors(source, "hostile.gguf")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The first piece read (16 MiB) and a window of it scanned: nothing decoded, no copy.
        assert peak < 2 * _gguf.FIRST_READ, f"{peak / 2**20:.0f} MiB"


def test_arrays_are_decoded_up_to_a_total_and_stepped_over_beyond(tmp_path: Path) -> None:
    def keys(w: gguf.GGUFWriter) -> None:
        for i in range(20):
            w.add_array(f"junk.{i}", list(range(4000)))
        w.add_array("llama.rope.dimension_sections", [16, 24, 24, 0])

    path = ggufs.write(tmp_path / "many.gguf", "llama", keys=keys)
    data = path.read_bytes()
    header, _ = read_gguf_header(lambda a, b: data[a:b], len(data), "many.gguf")
    decoded = [
        k for k, v in header.metadata.items() if k.startswith("junk") and isinstance(v, tuple)
    ]
    assert len(decoded) == _gguf.DECODED_TOTAL // 4000  # 16 decoded, then stepped over
    assert header.metadata["junk.19"] == io.LongArray("i32", 4000)
    # A short array after them still fits in what is left of the total.
    assert header.metadata["llama.rope.dimension_sections"] == (16, 24, 24, 0)


def test_a_header_read_in_pieces_parses_each_key_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n_keys = 3000

    def keys(w: gguf.GGUFWriter) -> None:
        for i in range(n_keys):
            w.add_string(f"general.note.{i}", "x" * 40)

    path = ggufs.write(tmp_path / "keys.gguf", "llama", keys=keys, tensors={"t": TABLE})
    data = path.read_bytes()
    pieces: list[int] = []
    named = []
    name = _gguf._Parser.name
    monkeypatch.setattr(
        _gguf._Parser, "name", lambda self, what: named.append(what) or name(self, what)
    )
    read_gguf_header(lambda a, b: pieces.append(b) or data[a:b], len(data), "keys.gguf", first=4096)
    assert len(pieces) > 5
    # Each key once, but the one each piece cut off: parsing starts where the last piece stopped.
    assert len(named) <= n_keys + 2 + 1 + len(pieces)
