"""Property-based tests: no input a link or a file can carry escapes as anything but LoadError.

Every loader gets random and mutated inputs (safetensors headers, .npy headers, .npz
directories, CSV text) and the link parser random option values. Each input must either load
or raise LoadError with a message; nothing else may escape, and each input must finish within
the deadline and a memory bound.
"""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
import zipfile
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posviz import simulate
from posviz.embedding import LoadError
from posviz.io import list_tensors, load

#: Per input: time (Hypothesis deadline) and traced Python memory.
PER_INPUT = settings(
    max_examples=300,
    deadline=timedelta(seconds=5),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MAX_TRACED_BYTES = 64 * 2**20


def refusal(call: Callable[..., object], *args: object, **kwargs: object) -> str | None:
    """None if `call` succeeds, else its LoadError's message; any other exception escapes."""
    try:
        call(*args, **kwargs)
    except LoadError as error:
        return str(error)
    return None


def readable(message: str | None) -> bool:
    """A message a user can act on: not empty, no Python object reprs."""
    return message is None or (message.strip() != "" and " object at 0x" not in message)


def loads_or_refuses(data: bytes, filename: str) -> None:
    """List and load `data`: each either succeeds or raises LoadError with a message."""
    tracemalloc.start()
    try:
        messages = [refusal(step, data, filename) for step in (list_tensors, load)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all(map(readable, messages)), messages
    assert peak < MAX_TRACED_BYTES, f"{peak:,} bytes traced for a {len(data):,}-byte input"


# --- safetensors ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
dtypes = st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "F7", ""]) | json_values
sizes = st.integers(min_value=0, max_value=40) | st.integers() | st.booleans() | json_values


@st.composite
def safetensors_entries(draw: st.DrawFn) -> dict:
    """A header entry that is mostly well-formed, with any field possibly replaced."""
    rows, cols = draw(st.integers(0, 16)), draw(st.integers(0, 6))
    begin = draw(st.integers(0, 64))
    entry = {
        "dtype": "F32",
        "shape": [rows, cols],
        "data_offsets": [begin, begin + 4 * rows * cols],
    }
    for key in draw(st.lists(st.sampled_from(["dtype", "shape", "data_offsets"]), max_size=3)):
        entry[key] = draw(
            {
                "dtype": dtypes,
                "shape": st.lists(sizes, max_size=4),
                "data_offsets": st.lists(sizes, max_size=3),
            }[key]
            | json_values
        )
    return entry


@st.composite
def safetensors_files(draw: st.DrawFn) -> bytes:
    names = st.text(max_size=12) | st.sampled_from(["wpe.weight", "__metadata__", "pos_embed"])
    header = draw(
        st.dictionaries(names, safetensors_entries() | json_values, max_size=5) | json_values
    )
    blob = json.dumps(header).encode()
    blob = draw(st.sampled_from([blob, blob[: len(blob) // 2], blob + b"}", b"{" + blob]))
    length = draw(st.sampled_from([len(blob)]) | st.integers(0, 2**64 - 1))
    data = draw(st.binary(max_size=2048))
    return struct.pack("<Q", length) + blob + data


@pytest.mark.slow
@PER_INPUT
@given(safetensors_files())
def test_safetensors_headers_load_or_are_refused(data):
    loads_or_refuses(data, "model.safetensors")


@pytest.mark.slow
@PER_INPUT
@given(st.binary(max_size=600), st.integers(0, 599), st.binary(min_size=1, max_size=8))
def test_mutated_safetensors_bytes_load_or_are_refused(data, at, patch):
    table = np.arange(48, dtype="<f4").reshape(12, 4)
    header = json.dumps(
        {"wpe": {"dtype": "F32", "shape": [12, 4], "data_offsets": [0, 192]}}
    ).encode()
    good = bytearray(struct.pack("<Q", len(header)) + header + table.tobytes())
    at %= len(good)
    good[at : at + len(patch)] = patch
    loads_or_refuses(bytes(good) + data[:8], "model.safetensors")


# --- .npy -----------------------------------------------------------------------------------

literals = st.sampled_from(
    ["'<f4'", "'<f8'", "'|O'", "'<c8'", "[('a', '<f4')]", "'S3'", "'<U2'", "garbage", "2**40"]
)
shapes = st.lists(
    st.sampled_from(["0", "1", "12", "4", "-3", "True", "2.5", "10**30", "2**40", "()"]),
    max_size=4,
).map(lambda parts: "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")")


@st.composite
def npy_files(draw: st.DrawFn) -> bytes:
    descr = draw(literals)
    fortran = draw(st.sampled_from(["False", "True", "1", "None"]))
    shape = draw(shapes | st.text(max_size=10))
    header = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header = draw(st.sampled_from([header, header[: len(header) // 2]]))
    text = header.encode("utf-8")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    version = draw(st.sampled_from([b"\x01\x00", b"\x02\x00", b"\x03\x00", b"\x09\x00"]))
    length = struct.pack("<H", len(text)) if version[0] == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + version + length + text + draw(st.binary(max_size=512))


@pytest.mark.slow
@PER_INPUT
@given(npy_files())
def test_npy_headers_load_or_are_refused(data):
    loads_or_refuses(data, "table.npy")


# --- .npz -----------------------------------------------------------------------------------


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@st.composite
def npz_files(draw: st.DrawFn) -> bytes:
    members = draw(
        st.dictionaries(
            st.sampled_from(["wpe.npy", "a/b.npy", "x.pkl", "readme", "wte.npy", "../e.npy"])
            # Names a zip can hold: no NUL (zipfile cuts the name there, and an empty name
            # breaks its writer), no lone surrogates (not encodable).
            | st.text(
                st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
                min_size=1,
                max_size=8,
            ),
            npy_files()
            | st.binary(max_size=256)
            | st.just(npy_bytes(np.ones((12, 4), dtype=np.float32))),
            max_size=4,
        )
    )
    buffer = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    data = bytearray(buffer.getvalue())
    if data and draw(st.booleans()):  # flip bytes anywhere, headers included
        for at in draw(st.lists(st.integers(0, len(data) - 1), max_size=4)):
            data[at] ^= 0xFF
    return bytes(data)


@pytest.mark.slow
@PER_INPUT
@given(npz_files())
def test_npz_directories_load_or_are_refused(data):
    loads_or_refuses(data, "arrays.npz")


# --- text -----------------------------------------------------------------------------------


@pytest.mark.slow
@PER_INPUT
@given(
    st.text(alphabet="0123456789.,;\t -e+#\nnaifINFxé\r\x00", max_size=400),
    st.sampled_from(["t.csv", "t.tsv", "t.txt"]),
)
def test_csv_text_loads_or_is_refused(text, filename):
    loads_or_refuses(text.encode("utf-8"), filename)


@pytest.mark.slow
@PER_INPUT
@given(st.binary(max_size=400))
def test_any_bytes_under_any_name_load_or_are_refused(data):
    for filename in ("t.csv", "m.safetensors", "t.npy", "a.npz", "blob"):
        loads_or_refuses(data, filename)


# --- the link parser ------------------------------------------------------------------------

option_text = (
    st.integers(-(2**40), 2**40).map(str)
    | st.floats().map(str)
    | st.sampled_from(["1e10", "2.5", "0x10", "1_000", " 7 ", "+3", "", "nan", "-0"])
    | st.text(max_size=12)
)


@pytest.mark.slow
@PER_INPUT
@given(
    st.sampled_from(list(simulate.GENERATORS)),
    st.dictionaries(st.sampled_from([*simulate.PARAMETERS, "sim", "x"]), option_text),
)
def test_link_options_parse_within_bounds_or_are_refused(kind, params):
    message = refusal(simulate.parse_options, kind, params)
    assert readable(message)
    if message is not None:
        return
    options = simulate.parse_options(kind, params)
    for name, value in options.items():
        p = simulate.PARAMETERS[name]
        assert type(value) is (int if p.whole else float)
        assert p.low <= value <= p.high
    # Making the table: small ones are made, and every refusal is a LoadError.
    rows = options.get("n_positions", 1024)
    if "height" in options or "width" in options:
        rows = options.get("height", 14) * options.get("width", 14)
    if rows * options.get("d_model", 768) <= 2**18 and options.get("n_frequencies", 24) <= 64:
        assert readable(refusal(simulate.GENERATORS[kind], **options))


# --- labels, steps and sizes ----------------------------------------------------------------


@PER_INPUT
@given(st.integers(0, 10**450), st.sampled_from(["step", "global_step", "epoch", "ckpt_"]))
def test_steps_are_whole_bounded_and_never_negative(n, keyword):
    from posviz.collection import MAX_STEP, parse_step

    step = parse_step(f"run-{keyword}{n}")
    assert step == (None if n > MAX_STEP else (n, "epoch" if keyword == "epoch" else "step"))
    assert step is None or type(step.value) is int
    if keyword != "ckpt_":  # "-" after step/epoch is a minus sign
        assert parse_step(f"{keyword}-{n}") is None


@PER_INPUT
@given(st.text(alphabet="0123456789.", min_size=1, max_size=500), st.sampled_from(["", "GB"]))
def test_cache_sizes_parse_exactly_or_are_refused(number, unit):
    from posviz.hub.cache import MAX_CACHE_SIZE, parse_size

    message = refusal(parse_size, number + unit)
    assert readable(message)
    if message is None:
        assert 0 <= parse_size(number + unit) <= MAX_CACHE_SIZE


@PER_INPUT
@given(st.text(max_size=200))
def test_escaped_labels_hold_no_markup_and_read_back_as_typed(label):
    import re

    from posviz.figures.layout import escape

    shown = escape(label)
    assert not {"<", ">"} & set(shown)
    # plotly.js turns each entity back into its character, in one pass: the label as typed.
    entities = {"lt": "<", "gt": ">", "amp": "&"}
    assert re.sub(r"&(lt|gt|amp);", lambda m: entities[m[1]], shown) == label


# --- what a Hub answers -----------------------------------------------------------------------

#: Any JSON value: what a hostile Hub can put in its revision API answer or a shard index.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
#: File names a repo may list, hostile ones included.
FILE_NAMES = st.sampled_from(
    ["model.safetensors", "a.safetensors", "../../x.safetensors", "./a.safetensors", "config.json"]
) | st.text(max_size=20)


@pytest.mark.slow
@PER_INPUT
@given(
    st.dictionaries(st.sampled_from(["sha", "siblings", "id"]), JSON, max_size=3),
    st.lists(st.fixed_dictionaries({"rfilename": FILE_NAMES}), max_size=4),
)
def test_any_revision_answer_gives_a_commit_and_files_or_is_refused(answer, siblings):
    from unittest import mock

    from posviz import hub
    from posviz.source import HubRef

    commit = {"sha": "a" * 40}
    for body in (answer, answer | commit, answer | commit | {"siblings": siblings}):
        with (
            mock.patch.object(hub.client, "_get_json", return_value=body),
            mock.patch.object(hub, "_Cache"),
        ):
            message = refusal(hub._resolve, HubRef("acme/x"), hub._Cache())
        assert readable(message)


@pytest.mark.slow
@PER_INPUT
@given(JSON, st.lists(FILE_NAMES, max_size=4))
def test_any_shard_index_lists_files_inside_the_repo_or_is_refused(index, files):
    from unittest import mock

    from posviz import hub
    from posviz.source import HubRef, plain_path

    files = ["model.safetensors.index.json", *files]
    shards: list[str] = []
    for body in (index, {"weight_map": index}):
        with mock.patch.object(hub.client, "_get_json", return_value=body):
            message = refusal(
                lambda: shards.extend(hub._weight_files(HubRef("acme/x"), "a" * 40, files))
            )
        assert readable(message)
    assert all(s in files and plain_path(s) and s.endswith(".safetensors") for s in shards)


@pytest.mark.slow
@PER_INPUT
@given(JSON)
def test_json_depth_is_counted_as_parsed(value):
    from posviz.hub.client import _depth

    def depth(v: object) -> int:
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        return 0 if children is None else 1 + max(map(depth, children), default=0)

    assert _depth(json.loads(json.dumps(value))) == depth(value)


@PER_INPUT
@given(st.text(alphabet="ab./\\\\", max_size=12))
def test_plain_paths_stay_where_they_are_put(path):
    import posixpath

    from posviz.source import plain_path

    if plain_path(path):
        assert posixpath.normpath(path) == path
        assert not path.startswith("/")
