"""The Schemes page's comparison: the scheme shown on the page (A) against a second source of the
same model's positions (B): another config.json, a GGUF (upload, shared folder, Hub), or a
runtime's dump. What `posviz diff` prints, drawn: the verdict, every field side by side, the
pairs and the positions where they part, with exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st

from posviz import export, figures, hub, pipeline
from posviz._params import Bound, Refused, bounds_of
from posviz.embedding import LoadError
from posviz.io import datadir
from posviz.models.sources import DUMP_SUFFIXES, Side, config_side, is_dump, read_side
from posviz.schemes.diff import ANGLE_LIMIT, FIELDS, LAYOUTS, NUMBERS, SchemeDiff, scheme_diff
from posviz.schemes.presets import rotary_presets
from posviz.schemes.rotary import rotary_frequencies
from posviz.source import HubRef, LocalPath, Preset, Source, Upload
from posviz.ui import cache, inputs, widgets
from posviz.ui.text import literal

__all__ = ["draw", "gguf_keys"]

#: The second source's kinds, in the order offered.
KINDS = ["Known model", "Hub model", "File", "Shared folder"]
#: What a file may be: a config.json, a GGUF, or a runtime's dump.
FILE_TYPES = ["json", "gguf", *(s.removeprefix(".") for s in DUMP_SUFFIXES)]
#: The positions compared at most, as scheme_diff declares them.
POSITIONS = bounds_of(scheme_diff)["positions"]
#: Where a runtime's cos/sin dump may start.
FIRST_POSITIONS = Bound(0, 10**8)


@st.cache_data(ttl=600, max_entries=32, show_spinner="Reading the second source…")
def _side(source: Source, layout: str, first_position: int, label: str | None) -> Side:
    return read_side(source, layout=layout, first_position=first_position, label=label)


def gguf_keys(provenance: dict[str, Any]) -> None:
    """The GGUF keys a scheme was read from, each with the config key it fed (nothing for a
    config.json)."""
    keys = provenance.get("gguf_keys")
    if not keys:
        return
    import pandas as pd

    with st.expander(f"GGUF keys read ({len(keys)}), each with the config key it fed"):
        st.dataframe(
            pd.DataFrame(keys).astype(str),
            hide_index=True,
            column_config={"note": st.column_config.TextColumn(width="large")},
        )


def draw(config: dict, provenance: dict[str, Any], label: str, *, shared: str | None) -> None:
    """Compare the page's scheme (`config`, read as `provenance` says) with a source the user
    picks; every failure is said on the page, nothing else changes."""
    try:
        a = config_side(config, provenance, label)
    except LoadError as error:
        st.info(literal(error), icon=":material/info:")
        return
    st.caption(
        f"**A** is the scheme above ({literal(label)}). Pick **B**: another config.json, a GGUF "
        "(its metadata), or what a runtime computed: an inv_freq vector, or a cos/sin table "
        "(one array [cos | sin], or tensors named cos and sin) whose layout you name."
    )
    b = _pick(shared)
    if b is None:
        return
    left, middle, right = st.columns(3)
    tolerance = inputs.setting(
        scheme_diff,
        "tolerance",
        "Tolerance (relative)",
        low=1e-12,
        high=0.5,
        key="schemes.compare.tolerance",
        where=left,
    )
    context = inputs.setting(
        rotary_frequencies,
        "context",
        "Sequence length the rules are applied at",
        default=a.context or 4096,
        key="schemes.compare.context",
        help="LongRoPE's long factors apply beyond the original context, dynamic NTK's base "
        "grows beyond max_position_embeddings: both sides at this length.",
        where=middle,
    )
    positions = inputs.number(  # 0 stands for the function's None
        "Positions compared (0: the dump's own, else the shorter context)",
        Bound(0, POSITIONS.high),
        0,
        key="schemes.compare.positions",
        help=inputs.described(scheme_diff, "positions"),
        where=right,
    )
    try:
        d = cache.run(
            pipeline.scheme_diff,
            a,
            b,
            context=context,
            tolerance=tolerance,
            positions=positions or None,
        )
    except Refused as error:  # a setting out of its bound, a LoadError of a source
        st.error(literal(error), icon=":material/error:")
        return
    _show(d)


def _pick(shared: str | None) -> Side | None:
    """The second source, read; None until one is given (or when it is refused: said)."""
    kinds = KINDS if shared else KINDS[:-1]
    kind = st.segmented_control(
        "B", kinds, default=kinds[0], key="schemes.compare.kind", bind="query-params"
    )
    source: Source | None = None
    dump, label = False, None
    if kind == "Known model":
        source = Preset(
            st.selectbox(
                "Model", rotary_presets(), key="schemes.compare.preset", bind="query-params"
            )
        )
    elif kind == "Hub model":
        if not hub.enabled():
            st.info("Hub access is off on this server (POSVIZ_HUB=off).")
            return None
        text = st.text_input(
            "Model id",
            placeholder="bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M",
            key="schemes.compare.repo",
            help="REPO[@REVISION], and in a repo of GGUF files :FILE.gguf or :QUANT (its "
            "header and rope factors travel, nothing else).",
        ).strip()
        try:
            source = HubRef.parse(text) if text else None
        except LoadError as error:
            st.error(literal(error), icon=":material/error:")
            return None
    elif kind == "File":
        upload = st.file_uploader(
            "config.json, a .gguf, or a runtime's dump",
            type=FILE_TYPES,
            key="schemes.compare.upload",
        )
        if upload is not None:
            source = Upload(upload.name, upload.getvalue())
            dump = is_dump(upload.name)
    elif kind == "Shared folder" and shared:
        source, label, dump = _shared(Path(shared))
    if source is None:
        return None
    layout, first = "half-split", 0
    if dump:
        left, right = st.columns(2)
        layout = left.radio(
            "Layout of the dump's columns (a cos/sin table's)",
            list(LAYOUTS),
            key="schemes.compare.layout",
            bind="query-params",
            help=" · ".join(f"{k}: {v}" for k, v in LAYOUTS.items()),
            horizontal=True,
        )
        first = inputs.number(
            "Position of its first row (a cos/sin table's)",
            FIRST_POSITIONS,
            0,
            key="schemes.compare.first",
            where=right,
        )
    try:
        return _side(source, layout, first, label)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None


def _shared(root: Path) -> tuple[LocalPath | None, str | None, bool]:
    """A config.json, GGUF or dump of the shared folder: its checked path, its name there (how
    the page and the exports name it: the server's path is not the visitor's business), and
    whether it is a dump."""
    try:
        files = [
            f
            for f in datadir.list_files(root)
            if f.lower().endswith((".gguf", *DUMP_SUFFIXES)) or f.endswith("config.json")
        ]
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {literal(error)}", icon=":material/error:")
        return None, None, False
    relative = st.selectbox(
        "File in the shared folder", files, index=None, key="schemes.compare.shared"
    )
    if relative is None:
        return None, None, False
    try:
        path = str(datadir.resolve(root, relative))
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None, None, False
    return LocalPath(path), relative, is_dump(path)


def _show(d: SchemeDiff) -> None:
    context = d.params["context"]
    if d.agree:
        st.success(
            f"A and B agree within {d.params['tolerance']:g} (rules applied at length "
            f"{context:,}).",
            icon=":material/check:",
        )
    else:
        what = {**FIELDS, **NUMBERS}.get(d.first_difference or "", "")
        st.error(
            f"A and B differ: first at **{d.first_difference}** ({literal(what)}).",
            icon=":material/error:",
        )
    for hint in d.hints:
        st.info(literal(hint), icon=":material/lightbulb:")
    columns = st.columns(4)
    largest = d.inv_freq_max_relative_difference
    columns[0].metric(
        "inv_freq difference",
        "not compared" if largest is None else f"{largest:.3g}",
        help="The largest |a − b| / max(|a|, |b|) of a pair's frequency, as applied.",
    )
    columns[1].metric("pairs differing", len(d.pairs_differing), help="Past the tolerance.")
    columns[2].metric(
        "cos/sin difference",
        f"{d.table_max_abs_difference:.3g}",
        help=f"The largest |a − b| of a cos or sin value over positions "
        f"{int(d.positions[0]):,}…{int(d.positions[-1]):,}, attention factors included.",
    )
    over = d.first_position_over_0_01_rad
    columns[3].metric(
        f"first position past {ANGLE_LIMIT} rad",
        "none" if over is None else f"{over:,}",
        help="Where the largest angle error over pairs first exceeds 0.01 radians.",
    )
    frame = d.field_frame().rename(columns={"a": "A", "b": "B"})
    frame["same"] = frame["same"].map({True: "same", False: "DIFFERS", None: "-"})
    st.dataframe(frame, hide_index=True, width="stretch")
    # The step and both sources: `posviz rerun` reads them again (an upload by its file name).
    settings = export.header(d, d.a.provenance, d.b.provenance)
    widgets.show_figure(
        figures.scheme_diff.pair_differences(d), name="scheme_diff_pairs", settings=settings
    )
    widgets.show_figure(
        figures.scheme_diff.angle_error(d), name="scheme_diff_angles", settings=settings
    )
    widgets.show_numbers(d.pair_table(), name="scheme_diff_pairs", settings=settings)
    st.download_button(
        "The comparison as JSON (what posviz diff --json prints)",
        data=lambda: json.dumps(d.record(), allow_nan=False, indent=1),
        file_name="scheme_diff.json",
        icon=":material/download:",
        key="schemes.compare.json",
    )
