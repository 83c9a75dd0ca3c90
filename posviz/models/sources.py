"""The sources `posviz diff` and the Schemes page's comparison read: a config.json (a path, a
preset, a Hub model), a GGUF file (local or on the Hub), or a runtime's dump (an ``inv_freq``
vector, or a cos/sin table as .npy, .npz, .safetensors or text, in a layout the user names)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from posviz import io
from posviz._params import Params, step_of
from posviz.embedding import LoadError
from posviz.models import weights
from posviz.models.weights import read_config
from posviz.schemes._values import given
from posviz.schemes.config import NAMES, position_scheme
from posviz.schemes.diff import (
    LAYOUTS,
    RotarySource,
    SchemeDiff,
    from_inv_freq,
    from_spec,
    from_table,
    scheme_diff,
    split_pair,
    split_table,
)
from posviz.schemes.layers import LayerScheme
from posviz.schemes.rotary import RotarySpec, rotary_frequencies
from posviz.source import LocalPath, Preset, Source, Upload, as_source

__all__ = ["DUMP_SUFFIXES", "Side", "compare", "config_side", "is_dump", "read_side"]

#: Files read as a runtime's dump (unless a .safetensors file has a config.json beside it).
DUMP_SUFFIXES = (".npy", ".npz", ".safetensors", ".csv", ".tsv", ".txt")
#: Largest dump read (a 131,072-position cos/sin table of 128 columns in float32 is 128 MiB):
#: a file beyond it is not a dump (a checkpoint without its config.json beside it?).
MAX_DUMP_BYTES = 2**28
#: Tensor names a dump's cos and sin go by (transformers' buffers, common dump names).
_COS, _SIN = ("cos", "cos_cached", "cos_table"), ("sin", "sin_cached", "sin_table")


@dataclass(frozen=True)
class Side:
    """One side of a comparison as read: a rotary scheme (from a config or GGUF), or a dump.

    Attributes
    ----------
    label : str
    provenance : dict
    spec : RotarySpec or None
        The main layer type's rule (None for a dump).
    others : tuple of RotarySpec
        The other layer types' rules.
    config : dict
        The config.json (or a GGUF's translation of it).
    dump : RotarySource or None
    notes : tuple of str
        What reading it showed (a table that looks like the other layout).
    layers : tuple of LayerScheme
        The scheme's per-layer map (NoPE layers, windows), when config.json gives one.
    """

    label: str
    provenance: dict[str, Any]
    spec: RotarySpec | None = None
    others: tuple[RotarySpec, ...] = ()
    config: dict[str, Any] | None = None
    dump: RotarySource | None = None
    notes: tuple[str, ...] = ()
    layers: tuple[LayerScheme, ...] = ()

    @property
    def context(self) -> int | None:
        return self.spec.context if self.spec else None


def is_dump(name: str) -> bool:
    """Whether `name` is read as a runtime's dump (a tensor file, not a config or GGUF)."""
    lower = name.lower()
    return lower.endswith(DUMP_SUFFIXES) and not (
        lower.endswith(".safetensors") and weights.config_beside(name)
    )


def read_side(
    source: Source | str,
    *,
    layout: str = "half-split",
    first_position: int = 0,
    label: str | None = None,
) -> Side:
    """The source `source` names: config.json (a path, ``preset:NAME``, ``hf:REPO[@REV]``), a
    GGUF (a path, ``hf:REPO[@REV]:FILE``), or a dump; an upload by its name and bytes;
    `label` names a local file on screen and in the provenance instead of its path (a shared
    folder's file by its name there).

    Raises
    ------
    LoadError
        If it cannot be read, names no rotary scheme, or a dump holds no inv_freq or cos/sin.
    """
    written = source if isinstance(source, str) else None  # as the user wrote it: its label
    source = as_source(source)
    if isinstance(source, LocalPath | Upload) and is_dump(_name(source)):
        return _dump(source, layout=layout, first_position=first_position, label=label)
    named = label or (source.name if isinstance(source, Upload) else None)
    config, provenance, _ = read_config(source, label=named)
    shown = source.name if isinstance(source, Preset) else named
    return config_side(config, provenance, shown or written or str(source))


def config_side(config: dict[str, Any], provenance: dict[str, Any], label: str) -> Side:
    """A side of a comparison from a config.json already read (or a GGUF's translation).

    Raises
    ------
    LoadError
        If the config's values are refused, or its scheme is not rotary.
    """
    scheme = position_scheme(config)
    if scheme.kind != "rotary":
        msg = (
            f"{label} uses {NAMES[scheme.kind]}, not rotary embeddings: the comparison is of "
            "rotary schemes (the Compare page compares two learned tables)."
        )
        raise LoadError(msg)
    main, *others = scheme.rotary
    text = config.get("text_config")
    inner = text if isinstance(text, dict) else {}
    return Side(label, provenance, main, tuple(others), {**config, **inner}, layers=scheme.layers)


def _name(source: LocalPath | Upload) -> str:
    return source.name if isinstance(source, Upload) else source.path


def _dump(
    source: LocalPath | Upload, *, layout: str, first_position: int, label: str | None
) -> Side:
    data = source.data if isinstance(source, Upload) else None
    file: io.Input = source.path if isinstance(source, LocalPath) else data or b""
    named = label or _name(source)  # the file as the provenance names it
    label = Path(named).name
    size = len(data) if data is not None else _size(_name(source), named)
    if size > MAX_DUMP_BYTES:
        msg = (
            f"{label} is {size:,} bytes, more than a dump of inv_freq or cos/sin ("
            f"{MAX_DUMP_BYTES:,} at most); a checkpoint is compared through its config.json, "
            "which must be beside it."
        )
        raise LoadError(msg)
    infos = {info.name: info for info in io.list_tensors(file, label)}
    raw = data if data is not None else Path(_name(source)).read_bytes()
    provenance: dict[str, Any] = {
        "dump": named,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "layout": layout,
        "first_position": first_position,
    }
    cos = next((n for n in _COS if n in infos), None)
    sin = next((n for n in _SIN if n in infos), None)
    if cos and sin:
        values = split_pair(
            io.read_tensor(file, cos, label), io.read_tensor(file, sin, label), layout
        )
        provenance["tensors"] = [cos, sin]
        dump = from_table(
            *values,
            label=label,
            provenance=provenance,
            layout=layout,
            first_position=first_position,
        )
        return Side(label, provenance, dump=dump)
    inv_freq = [n for n in infos if n.endswith("inv_freq")]
    name = inv_freq[0] if inv_freq else next(iter(infos)) if len(infos) == 1 else None
    if name is None:
        msg = (
            f"{label} holds {', '.join(list(infos)[:10])}: a dump holds one array (inv_freq, or "
            "a cos/sin table) or two named cos and sin."
        )
        raise LoadError(msg)
    array = io.read_tensor(file, name, label)
    provenance["tensors"] = [name]
    squeezed = array.reshape(-1) if min(array.shape, default=0) == 1 or array.ndim == 1 else array
    if squeezed.ndim == 1:
        return Side(
            label, provenance, dump=from_inv_freq(squeezed, label=label, provenance=provenance)
        )
    return _table_side(
        label, provenance, layout, first_position, lambda way: split_table(squeezed, way)
    )


#: A table dump whose angles stray further than this from a straight line is not a rotary
#: table in the layout read (float32 tables stray by ~1e-3 rad at 100,000 positions).
_STRAIGHT = 0.05


def _table_side(
    label: str,
    provenance: dict[str, Any],
    layout: str,
    first_position: int,
    split: Any,
) -> Side:
    """A cos/sin dump in `layout`, with a note when it reads as a rotary table only in the
    other layout."""
    dump = from_table(
        *split(layout),
        label=label,
        provenance=provenance,
        layout=layout,
        first_position=first_position,
    )
    notes: tuple[str, ...] = ()
    if dump.fit_residual is not None and dump.fit_residual > _STRAIGHT:
        other = next(way for way in LAYOUTS if way != layout)
        try:
            fit = from_table(
                *split(other),
                label=label,
                provenance=provenance,
                layout=other,
                first_position=first_position,
            ).fit_residual
        except LoadError:
            fit = None
        if fit is not None and fit <= _STRAIGHT:
            notes = (
                f"{label} read as {layout} is no rotary table (its angles stray "
                f"{dump.fit_residual:.2g} rad from a straight line); read as {other} they stray "
                f"{fit:.2g} rad: its layout is probably {other}.",
            )
    return Side(label, provenance, dump=dump, notes=notes)


def _size(path: str, what: str) -> int:
    try:
        return Path(path).stat().st_size
    except OSError as exc:  # strerror alone: str(exc) names the path itself
        msg = f"Cannot read {what}: {exc.strerror or type(exc).__name__}."
        raise LoadError(msg) from exc


def compare(
    a: Side,
    b: Side,
    *,
    context: int | None = None,
    tolerance: float = 1e-6,
    positions: int | None = None,
) -> SchemeDiff:
    """:func:`posviz.schemes.diff.scheme_diff` of two sides, each rule applied at one sequence
    length: `context`, else the first context either side states (recorded among the
    result's params, so `posviz rerun` applies them there again; a dump's layout is in its
    provenance)."""
    applied = context or a.context or b.context
    sources = [
        side.dump
        if side.dump is not None
        else from_spec(
            given(side.spec, "a rotary rule or a dump"),
            label=side.label,
            provenance=side.provenance,
            context=applied,
            others=side.others,
            config=side.config,
            layers=side.layers,
        )
        for side in (a, b)
    ]
    diff = scheme_diff(*sources, tolerance=tolerance, positions=positions)
    hints = [*a.notes, *b.notes]
    if not diff.agree:
        hints += _hints(a, b, sources, applied, tolerance)
    params = Params({**diff.params, "context": applied}, step=step_of(diff))
    return replace(diff, hints=tuple(hints), params=params)


def _hints(
    a: Side, b: Side, sources: list[RotarySource], applied: int | None, tolerance: float
) -> list[str]:
    """What a difference looks like, when it looks like a known mistake: LongRoPE's other
    factors, or θ off by a factor."""
    hints = []
    names = {"a": "A", "b": "B"}
    for (x, name), other, other_name in (
        ((a, "a"), sources[1], "b"),
        ((b, "b"), sources[0], "a"),
    ):
        spec = x.spec
        if spec is None or other.n_pairs != spec.n_pairs:
            continue
        X, Y = names[name], names[other_name]
        if spec.rope_type == "longrope" and applied is not None:
            original = given(spec.pretraining_context, "original_max_position_embeddings")
            beyond = applied > original
            swapped = rotary_frequencies(spec, context=original if beyond else original + 1)
            if np.allclose(other.inv_freq, swapped.inv_freq, rtol=tolerance, atol=0):
                which, where = ("short", "within") if beyond else ("long", "beyond")
                hints.append(
                    f"{Y} holds {X}'s LongRoPE {which} factors: {X}'s rule applied at a length "
                    f"{where} its original context {original}, where the comparison applies it "
                    f"at {applied}."
                )
                continue
        own = rotary_frequencies(spec, context=applied).inv_freq
        if spec.n_pairs < 2 or not np.all(other.inv_freq > 0):
            continue
        # θ' from pair 1 (the fastest pair but 0, kept by every rule), then the whole rule
        # with θ' must give the other side's frequencies.
        k = float((other.inv_freq[1] / own[1]) ** (-spec.rotary_dim / 2))
        if not (math.isfinite(k) and k > 0) or math.isclose(k, 1.0, rel_tol=1e-3):
            continue  # float32 noise on pair 1, raised to the power d/2, is no factor
        moved = rotary_frequencies(replace(spec, base=spec.base * k), context=applied).inv_freq
        if np.allclose(other.inv_freq, moved, rtol=1e-5, atol=0):
            hints.append(
                f"{Y}'s frequencies are {X}'s rule with θ multiplied by {k:.4g} (θ ≈ "
                f"{float(f'{spec.base * k:.4g}'):,g} instead of {spec.base:,g})."
            )
    return hints
