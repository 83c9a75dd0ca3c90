"""Reading .npz archives: pickles and zip bombs refused before anything is inflated."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from posviz.embedding import LoadError
from posviz.io._file import TensorInfo, _File, _missing_message, _pickle_refused
from posviz.io._npy import _npy_data, _npy_header

#: Zip archives (.npz) are refused beyond these, before anything is inflated.
MAX_MEMBERS = 1000
MAX_UNZIPPED_BYTES = 2 * 2**30
#: Real tables compress less than 2:1; a member above 1 MiB that shrank more than this is a bomb.
MAX_RATIO = 100


def _npz_members(archive: zipfile.ZipFile, label: str) -> dict[str, zipfile.ZipInfo]:
    """The .npy members of an archive by array name, after refusing pickles and bombs."""
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        msg = f"{label} has {len(members):,} members, above the limit of {MAX_MEMBERS:,}."
        raise LoadError(msg)
    if any(m.filename.endswith(".pkl") for m in members):
        raise _pickle_refused(label)
    declared = sum(m.file_size for m in members)
    if declared > MAX_UNZIPPED_BYTES:
        msg = (
            f"{label} declares {declared:,} bytes uncompressed, above the limit of "
            f"{MAX_UNZIPPED_BYTES:,}: refused as a possible zip bomb; save only the tables."
        )
        raise LoadError(msg)
    for m in members:
        if m.file_size > 2**20 and m.file_size > MAX_RATIO * m.compress_size:
            msg = (
                f"{label}: member {m.filename} inflates {m.file_size // max(m.compress_size, 1):,}"
                f" times ({m.compress_size:,} -> {m.file_size:,} bytes), beyond the {MAX_RATIO}x "
                "of any real table: refused as a possible zip bomb."
            )
            raise LoadError(msg)
    arrays = {m.filename.removesuffix(".npy"): m for m in members if m.filename.endswith(".npy")}
    if not arrays:
        msg = f"{label} is a zip archive without .npy arrays; an .npz is written by numpy.savez."
        raise LoadError(msg)
    return arrays


@contextmanager
def _member(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> Iterator[zipfile.ZipExtFile]:
    """One member opened to read (typeshed's ``IO[bytes]`` is a ZipExtFile, which reads into a
    buffer)."""
    with archive.open(member) as file:
        assert isinstance(file, zipfile.ZipExtFile)
        yield file


def _list_npz(src: _File) -> list[TensorInfo]:
    with zipfile.ZipFile(src.file) as archive:
        infos = []
        for name, member in _npz_members(archive, src.label).items():
            with _member(archive, member) as file:
                shape, dtype, _ = _npy_header(file, f"{src.label}:{name}", member.file_size)
            infos.append(TensorInfo(name, shape, str(dtype)))
    return infos


def _read_npz(src: _File, name: str) -> np.ndarray:
    with zipfile.ZipFile(src.file) as archive:
        arrays = _npz_members(archive, src.label)
        if name not in arrays:
            raise LoadError(_missing_message(src.label, name, arrays))
        with _member(archive, arrays[name]) as file:
            return _npy_data(file, f"{src.label}:{name}", arrays[name].file_size)
