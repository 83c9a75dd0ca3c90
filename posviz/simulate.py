"""Simulated position tables with known structure: sinusoidal, learned-like, Gaussian, 2-D grid."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from posviz._params import Bound, quoted
from posviz.embedding import (
    MAX_ELEMENTS,
    MIN_DIMS,
    MIN_POSITIONS,
    Embedding,
    LoadError,
    check_elements,
)

__all__ = [
    "GENERATORS",
    "PARAMETERS",
    "Parameter",
    "gaussian",
    "learned_like",
    "parse_options",
    "remade",
    "sinusoidal",
    "sinusoidal_table",
    "vit_grid",
]


@dataclass(frozen=True)
class Parameter:
    """One generator option: its label in the form and the values it may take.

    The form's widgets and the link parser (:func:`parse_options`) both read these bounds, so
    a link cannot ask for more than the form offers. An option is whole when its bounds are.
    """

    label: str
    low: int | float
    high: int | float

    @property
    def whole(self) -> bool:
        return isinstance(self.low, int)

    def check(self, name: str, value: object) -> None:
        """Refuse `value` for option `name` unless it is a number of the option's type within
        its bounds (a simulation named by an export, before it is made)."""
        Bound(self.low, self.high, whole=self.whole).check(name, value)

    def parse(self, name: str, text: str) -> int | float:
        """`text` (from a URL) as this option's value; a LoadError says why it is refused."""
        text = text.strip()
        # Whole options take plain digits only: no "2.5", "1e10" or 4,000-digit numbers.
        if self.whole and not re.fullmatch(r"[+-]?[0-9]{1,12}", text):
            msg = f"{name}={text[:40]!r} is not a whole number"
            raise LoadError(msg)
        try:
            value = int(text) if self.whole else float(text)
        except ValueError:
            msg = f"{name}={text[:40]!r} is not a number"
            raise LoadError(msg) from None
        if not self.low <= value <= self.high:  # NaN fails this too
            msg = f"{name}={text[:40]!r} is outside {_number(self.low)}..{_number(self.high)}"
            raise LoadError(msg)
        return value


#: Every generator option, by keyword. Bounds are the form's: sizes far past real tables are
#: refused by the element cap anyway, and 256 waves (512 wave columns) keep learned_like's
#: working arrays within a few times the table's own size.
PARAMETERS = {
    "n_positions": Parameter("Positions", MIN_POSITIONS, 65536),
    "d_model": Parameter("Dimensions", 4, 8192),
    "height": Parameter("Grid height", 1, 256),
    "width": Parameter("Grid width", 1, 256),
    "prefix_tokens": Parameter("Prefix (class) tokens", 0, 8),
    "base": Parameter("Base", 2.0, 1e7),
    "n_frequencies": Parameter("Waves", 1, 256),
    "noise": Parameter("Noise", 0.0, 10.0),
    "boundary": Parameter("Boundary kick", 0.0, 100.0),
    "seed": Parameter("Seed", 0, 2**31 - 1),
}


def _number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def parse_options(kind: str, params: Mapping[str, str]) -> dict[str, int | float]:
    """The options of generator `kind` named in `params` (a URL's query), each checked.

    Keys that are not options of `kind` are ignored.

    Raises
    ------
    LoadError
        If a value is not a number of the option's type or lies outside its bounds.

    Examples
    --------
    >>> parse_options("gaussian", {"n_positions": "300", "seed": "7", "noise": "x"})
    {'n_positions': 300, 'seed': 7}
    >>> parse_options("gaussian", {"seed": "0.5"})
    Traceback (most recent call last):
    ...
    posviz.source.LoadError: seed='0.5' is not a whole number
    """
    names = inspect.signature(GENERATORS[kind]).parameters
    return {name: PARAMETERS[name].parse(name, params[name]) for name in names if name in params}


def _check_size(n_positions: int, d_model: int, prefix: int = 0) -> None:
    """Refuse a table too small to analyse or too large to make, before allocating it."""
    if n_positions < MIN_POSITIONS or d_model < MIN_DIMS:
        msg = (
            f"A table of {n_positions} positions x {d_model} dimensions is outside "
            f"{MIN_POSITIONS} x {MIN_DIMS} .. {MAX_ELEMENTS:,} values; choose other sizes."
        )
        raise LoadError(msg)
    check_elements("The table to simulate", (n_positions + prefix, d_model), "choose other sizes.")


def _made(generator: Callable[..., Embedding], arguments: dict[str, Any]) -> dict[str, Any]:
    """What a simulated table's provenance records: the generator and its arguments."""
    names = inspect.signature(generator).parameters
    return {"generator": generator.__name__, "params": {name: arguments[name] for name in names}}


def remade(simulated: Mapping[str, Any]) -> Embedding:
    """The simulated table a provenance's ``simulated`` record names, made again, each
    argument checked against its `PARAMETERS` bounds first.

    Raises
    ------
    LoadError
        If the record names no generator of posviz, or an argument it does not take.
    Refused
        If an argument is outside its bounds.

    Examples
    --------
    >>> t = gaussian(20, 4, seed=3)
    >>> remade(t.provenance()["simulated"]).sha256 == t.sha256
    True
    """
    name, params = simulated.get("generator"), simulated.get("params")
    generator = _BY_NAME.get(name) if isinstance(name, str) else None
    if generator is None or not isinstance(params, Mapping):
        msg = f"The export's table names a simulation posviz cannot make ({quoted(name)})."
        raise LoadError(msg)
    names = inspect.signature(generator).parameters
    for key, value in params.items():
        if key not in names:
            msg = f"{name} takes no argument {quoted(key)}."
            raise LoadError(msg)
        PARAMETERS[key].check(key, value)
    return generator(**params)


def sinusoidal_table(n_positions: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The fixed encoding of Vaswani et al. (2017), float64.

    ``PE[p, 2i] = sin(p / base**(2i/d))`` and ``PE[p, 2i+1] = cos(p / base**(2i/d))``. For
    even `d_model` every row has norm ``sqrt(d_model / 2)`` and ``<PE[p], PE[p+k]>`` depends
    on the offset k only.

    Returns
    -------
    ndarray of shape (n_positions, d_model)

    Examples
    --------
    >>> pe = sinusoidal_table(4, 6)
    >>> bool(np.allclose(np.linalg.norm(pe, axis=1), np.sqrt(3)))
    True
    """
    freqs = base ** (-np.arange(0, d_model, 2) / d_model)
    angles = np.arange(n_positions)[:, None] * freqs[None, :]
    table = np.empty((n_positions, d_model))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table


def sinusoidal(n_positions: int = 512, d_model: int = 768, *, base: float = 10000.0) -> Embedding:
    """A sinusoidal table (see :func:`sinusoidal_table`) as an :class:`Embedding`."""
    _check_size(n_positions, d_model)
    return Embedding.from_array(
        sinusoidal_table(n_positions, d_model, base=base),
        name="sinusoidal",
        source=f"simulated: sinusoidal(n={n_positions}, d={d_model}, base={base:g})",
        simulated=_made(sinusoidal, locals()),
    )


def learned_like(
    n_positions: int = 512,
    d_model: int = 768,
    *,
    n_frequencies: int = 24,
    noise: float = 0.1,
    boundary: float = 4.0,
    seed: int = 0,
) -> Embedding:
    """A table shaped like a trained one: smooth low-rank waves, noise, and odd end rows.

    Component ``f = 1..n_frequencies`` is a cosine and a sine of ``f/2`` cycles over the table
    length with amplitude ``1/f`` along random directions, so principal components over
    position are low-frequency sinusoids (GPT-2's helix). I.i.d. Gaussian noise of standard
    deviation `noise` per entry is added. Rows 0 and ``n_positions - 1`` get an extra random
    vector of norm `boundary` times the median row norm: the boundary effect of trained tables.

    Examples
    --------
    >>> learned_like(64, 16, seed=1).shape
    (64, 16)
    """
    _check_size(n_positions, d_model)
    rng = np.random.default_rng(seed)
    p = np.arange(n_positions)[:, None] / n_positions
    f = np.arange(1, n_frequencies + 1)[None, :]
    waves = np.concatenate([np.cos(np.pi * f * p), np.sin(np.pi * f * p)], axis=1)
    amplitude = np.tile(1.0 / f[0], 2)
    directions = rng.standard_normal((2 * n_frequencies, d_model)) / np.sqrt(d_model)
    table = (waves * amplitude) @ directions
    table += noise * rng.standard_normal(table.shape) / np.sqrt(d_model)
    scale = boundary * float(np.median(np.linalg.norm(table, axis=1)))
    for row in (0, n_positions - 1):
        kick = rng.standard_normal(d_model)
        table[row] += scale * kick / np.linalg.norm(kick)
    return Embedding.from_array(
        table.astype(np.float32),
        name="learned_like",
        source=(
            f"simulated: learned_like(n={n_positions}, d={d_model}, n_frequencies={n_frequencies}"
            f", noise={noise:g}, boundary={boundary:g}, seed={seed})"
        ),
        simulated=_made(learned_like, locals()),
    )


def gaussian(n_positions: int = 512, d_model: int = 768, *, seed: int = 0) -> Embedding:
    """I.i.d. standard Gaussian rows: the no-position-information baseline."""
    _check_size(n_positions, d_model)
    rng = np.random.default_rng(seed)
    return Embedding.from_array(
        rng.standard_normal((n_positions, d_model)).astype(np.float32),
        name="gaussian",
        source=f"simulated: gaussian(n={n_positions}, d={d_model}, seed={seed})",
        simulated=_made(gaussian, locals()),
    )


def vit_grid(
    height: int = 14,
    width: int = 14,
    d_model: int = 768,
    *,
    base: float = 10000.0,
    prefix_tokens: int = 1,
    seed: int = 0,
) -> Embedding:
    """A ViT-like table: `prefix_tokens` class rows, then a 2-D sinusoidal patch grid.

    As in MAE's ``get_2d_sincos_pos_embed``: the first half of the dimensions encode the patch
    row with a 1-D sinusoidal table of width ``d_model / 2``, the second half the column. The
    prefix rows are small random vectors (seeded), as learned class tokens are. The returned
    table keeps the prefix rows in the source and analyses the grid rows
    (``row_start = prefix_tokens``, ``grid = (height, width)``).

    Examples
    --------
    >>> e = vit_grid(4, 5, 16)
    >>> e.shape, e.grid, e.n_source_rows
    ((20, 16), (4, 5), 21)
    """
    if d_model % 4:
        msg = f"d_model must be a multiple of 4 for a 2-D sinusoidal grid, got {d_model}."
        raise LoadError(msg)
    _check_size(height * width, d_model, prefix_tokens)
    half = d_model // 2
    rows = sinusoidal_table(height, half, base=base)
    cols = sinusoidal_table(width, half, base=base)
    grid = np.concatenate([np.repeat(rows, width, axis=0), np.tile(cols, (height, 1))], axis=1)
    rng = np.random.default_rng(seed)
    prefix = 0.02 * rng.standard_normal((prefix_tokens, d_model))
    return Embedding.from_array(
        np.concatenate([prefix, grid]),
        name="pos_embed",
        source=(
            f"simulated: vit_grid({height}x{width}, d={d_model}, base={base:g}, "
            f"prefix_tokens={prefix_tokens}, seed={seed})"
        ),
        row_start=prefix_tokens,
        grid=(height, width),
        simulated=_made(vit_grid, locals()),
    )


#: Generators by the name the app shows.
GENERATORS: dict[str, Callable[..., Embedding]] = {
    "sinusoidal": sinusoidal,
    "learned-like": learned_like,
    "gaussian": gaussian,
    "2-D grid (ViT)": vit_grid,
}
#: Generators by their function's name, as a provenance records them.
_BY_NAME = {generator.__name__: generator for generator in GENERATORS.values()}
