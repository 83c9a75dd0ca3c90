"""Reading text tables (.csv, .tsv, .txt, the Embedding Projector's TSV) without pandas."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posviz.embedding import LoadError, check_elements
from posviz.io._file import _SAVE_LESS, TensorInfo, _check_single, _File

#: Text is parsed in memory: larger files are refused before being read.
MAX_TEXT_BYTES = 512 * 2**20


@dataclass(frozen=True)
class _Text:
    """Data lines of a text table: (1-based line number, line), how to split, columns to skip."""

    lines: list[tuple[int, str]]
    delimiter: str | None
    skip: int

    def cells(self, line: str) -> list[str]:
        return line.split(self.delimiter)[self.skip :]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _scan_text(src: _File) -> _Text:
    """Find the data lines, the delimiter and a header of a text table, without parsing it.

    Blank lines and ``#`` comments (numpy.savetxt headers) are skipped. The delimiter is the
    first of tab, semicolon, comma found in the first line, else runs of whitespace. The
    first line is a header if a cell is not a number or it reads 0, 1, 2, ... (pandas column
    labels); a header starting with an empty cell marks a pandas index column, dropped.
    """
    if src.size > MAX_TEXT_BYTES:
        msg = (
            f"{src.label} is {src.size:,} bytes, above the {MAX_TEXT_BYTES:,}-byte limit for text "
            "tables; save the table as .npy or .safetensors instead."
        )
        raise LoadError(msg)
    try:
        text = src.file.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        msg = f"{src.label} is not UTF-8 text (byte {exc.start}); save it as UTF-8 CSV."
        raise LoadError(msg) from exc
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        msg = f"{src.label} holds no numbers: every line is blank or a # comment."
        raise LoadError(msg)
    delimiter = next((d for d in "\t;," if d in lines[0][1]), None)
    first = lines[0][1].split(delimiter)
    if all(map(_is_number, first)) and first != [str(i) for i in range(len(first))]:
        return _Text(lines, delimiter, 0)
    if len(lines) == 1:
        msg = f"{src.label} holds a header line and no numbers."
        raise LoadError(msg)
    return _Text(lines[1:], delimiter, int(first[0].strip() == ""))


def _list_text(src: _File) -> list[TensorInfo]:
    text = _scan_text(src)
    return [TensorInfo("table", (len(text.lines), len(text.cells(text.lines[0][1]))), "float64")]


def _read_text(src: _File, name: str) -> np.ndarray:
    _check_single(src, name)
    text = _scan_text(src)
    width = len(text.cells(text.lines[0][1]))
    check_elements(src.label, (len(text.lines), width), _SAVE_LESS)
    table = np.empty((len(text.lines), width))
    for row, (number, line) in enumerate(text.lines):
        cells = text.cells(line)
        if len(cells) != width:
            msg = (
                f"{src.label} line {number} has {len(cells)} values where the first data row "
                f"has {width}; every row must have the same number of columns."
            )
            raise LoadError(msg)
        try:
            table[row] = cells
        except ValueError:
            column, cell = next((i, c) for i, c in enumerate(cells) if not _is_number(c))
            msg = f"{src.label} line {number}, column {column + 1}: {cell!r} is not a number."
            raise LoadError(msg) from None
    return table
