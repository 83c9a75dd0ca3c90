"""Widgets every page shares: the table loader, the centring toggle, figures and numbers with
their export buttons, and the captions that state what was analysed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from posviz import datadir, export, figures, io, simulate
from posviz.embedding import Embedding, LoadError, numpy_dtype_name
from posviz.report import build_report
from posviz.spectrum import Spectrum
from posviz.ui import state


def center_toggle() -> bool:
    """The centring choice, shared by every page that offers it and kept across page switches."""
    return st.toggle(
        "Mean-centre rows",
        value=True,
        key="posviz.center",
        persist_state="session",
        bind="query-params",
        help="Subtract the mean row (the average position vector) before analysing: PCA. "
        "Without it the first component is mostly the mean row.",
    )


def table_caption(table: Embedding) -> None:
    """State which table and which rows the results below are about."""
    st.caption(
        f"**{table.name}** {table.shape[0]} x {table.shape[1]} · {table.describe_rows()} · "
        f"{table.source}"
    )


def sidebar_card() -> None:
    """The current matrix in the sidebar: name, shape, dtype, source."""
    table = state.current()
    with st.sidebar.container(border=True):
        st.markdown(f"**Current table** `{table.name}`")
        st.markdown(
            f"{table.shape[0]:,} positions x {table.shape[1]:,} dims · stored as "
            f"{table.dtype}  \n{table.describe_rows()}"
        )
        st.caption(table.source)
        center = st.session_state.get("posviz.center", True)
        st.download_button(
            "Report (HTML)",
            data=lambda: build_report(table, center=center),
            file_name=f"posviz-report-{table.sha256[:8]}.html",
            mime="text/html",
            key="download.report",
            icon=":material/summarize:",
            help="Every analysis of this table on one standalone page that opens offline "
            f"({'rows mean-centred' if center else 'uncentred'}, seed 0).",
        )


def show_figure(fig: go.Figure, *, name: str, settings: dict[str, Any]) -> None:
    """Draw `fig` full width, with downloads as standalone HTML, PNG and SVG.

    Files are built only when a download is clicked. PNG/SVG need a Chromium for kaleido;
    without one those buttons say so and the rest keeps working.
    """
    st.plotly_chart(fig, width="stretch", key=f"chart.{name}")
    browser = export.static_image_browser()
    with st.popover("Export figure", icon=":material/download:"):
        st.download_button(
            "Interactive HTML (opens offline)",
            data=lambda: export.figure_html(fig, settings),
            file_name=f"{name}.html",
            mime="text/html",
            key=f"download.{name}.html",
        )
        for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
            st.download_button(
                fmt.upper(),
                data=lambda fmt=fmt: _render(fig, fmt),
                file_name=f"{name}.{fmt}",
                mime=mime,
                key=f"download.{name}.{fmt}",
                disabled=browser is None,
                help=None
                if browser
                else "PNG/SVG need Chromium (set BROWSER_PATH); the HTML export works without it.",
            )


def show_spectra(spectra: dict[str, Spectrum], *, name: str, settings: dict[str, Any]) -> None:
    """Two tables' spectra side by side: variance per component, and cumulative."""
    left, right = st.columns(2)
    with left:
        show_figure(figures.spectra_overlay(spectra), name=f"{name}_spectra", settings=settings)
    with right:
        show_figure(
            figures.cumulative_overlay(spectra), name=f"{name}_cumulative", settings=settings
        )


@st.cache_resource
def _kaleido_server() -> None:
    """Start kaleido's browser once per server process: 0.15 s per image instead of 3 s."""
    import kaleido  # only on the first image export

    kaleido.start_sync_server(silence_warnings=True)


def _render(fig: go.Figure, fmt: str) -> bytes:
    _kaleido_server()
    return export.figure_image(fig, fmt)


def show_numbers(frame: pd.DataFrame, *, name: str, settings: dict[str, Any]) -> None:
    """Show a table of numbers with CSV and JSON downloads that carry `settings`."""
    st.dataframe(frame, hide_index=True, width="stretch")
    left, right = st.columns(2)
    left.download_button(
        "CSV",
        data=lambda: export.to_csv(frame, settings),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download.{name}.csv",
        icon=":material/download:",
    )
    right.download_button(
        "JSON",
        data=lambda: export.to_json(frame, settings),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"download.{name}.json",
        icon=":material/download:",
    )


# --- loading --------------------------------------------------------------------------------


def table_loader(slot: str = state.PRIMARY) -> None:
    """Load a table into `slot` by simulation, upload or (when POSVIZ_DATA_DIR is set) from the
    team's shared folder; a refusal keeps the table there."""
    shared = os.environ.get("POSVIZ_DATA_DIR")
    tabs = st.tabs(["Simulate", "Upload a file", *(["Shared folder"] if shared else [])])
    with tabs[0]:
        _simulate_form(slot)
    with tabs[1]:
        _upload(slot)
    if shared:
        with tabs[2]:
            _shared_folder(slot, Path(shared))


def _simulate_form(slot: str) -> None:
    kind = st.selectbox("Generator", list(simulate.GENERATORS), key=f"{slot}.kind")
    with st.form(f"{slot}.simulate"):
        left, right = st.columns(2)
        options: dict[str, Any] = {}
        if kind == "2-D grid (ViT)":
            options["height"] = left.number_input("Grid height", 1, 256, 14)
            options["width"] = right.number_input("Grid width", 1, 256, 14)
            options["prefix_tokens"] = left.number_input("Prefix (class) tokens", 0, 8, 1)
        else:
            options["n_positions"] = left.number_input("Positions", 2, 65536, 1024)
        options["d_model"] = right.number_input("Dimensions", 4, 8192, 768, step=4)
        if kind in ("sinusoidal", "2-D grid (ViT)"):
            options["base"] = left.number_input("Base", 2.0, 1e7, 10000.0, format="%g")
        if kind == "learned-like":
            options["n_frequencies"] = left.number_input("Waves", 1, 256, 24)
            options["noise"] = right.number_input("Noise", 0.0, 10.0, 0.1, format="%g")
            options["boundary"] = left.number_input("Boundary kick", 0.0, 100.0, 4.0)
        if kind != "sinusoidal":
            options["seed"] = right.number_input("Seed", 0, 2**31 - 1, 0)
        if st.form_submit_button("Simulate", type="primary"):
            try:
                state.set_simulated(kind, options, slot)
            except ValueError as error:  # LoadError included: sizes out of range
                st.error(str(error))
            else:
                st.success(f"Simulated {kind}.")


def _upload(slot: str) -> None:
    upload = st.file_uploader(
        "A position table or checkpoint",
        key=f"{slot}.upload",
        help="safetensors, npy, npz, csv/tsv/txt. Pickle-based files (.pt, .bin, .ckpt) are "
        "refused: convert them to safetensors first.",
    )
    if upload is not None:
        _pick_and_load(upload.getvalue(), upload.name, slot=slot, key=slot)


@st.cache_data(ttl=60, show_spinner="Listing the shared folder…")
def _shared_files(root: Path) -> list[str]:
    # Cached briefly: every rerun of the Data page draws all tabs, and a network mount is slow.
    return datadir.list_files(root)


def _shared_folder(slot: str, root: Path) -> None:
    """Pick a file of the read-only folder the server mounts; it is read from disk, lazily."""
    try:
        files = _shared_files(root)
    except LoadError as error:
        st.error(f"POSVIZ_DATA_DIR: {error}", icon=":material/error:")
        return
    note = f" (listing stops at {datadir.MAX_FILES:,})" if len(files) == datadir.MAX_FILES else ""
    relative = st.selectbox(
        f"File in the shared folder: {len(files):,} loadable{note}",
        files,
        index=None,
        placeholder="Choose a file",
        key=f"{slot}.shared.file",
        help="The folder the server mounts (POSVIZ_DATA_DIR), listed again every minute. "
        "Only the chosen tensor's bytes are read.",
    )
    if relative is None:
        return
    try:
        path = datadir.resolve(root, relative)
    except LoadError as error:
        st.error(str(error), icon=":material/error:")
        return
    _pick_and_load(path, relative, slot=slot, key=f"{slot}.shared")


def _pick_and_load(source: io.Source, filename: str, *, slot: str, key: str) -> None:
    """List `source`'s tensors, let the user pick one and trim its rows, then load it into
    `slot`. Widget keys start with `key`, so two loaders can be on one page."""
    try:
        infos = io.list_tensors(source, filename)
        usable = [info for info in infos if info.table_shape is not None]
        if not usable:
            io.load(source, filename)  # raises the precise reason (1-D, object dtype, ...)
    except LoadError as error:
        st.error(str(error), icon=":material/error:")
        return
    st.markdown(
        f"**{filename}** holds {len(infos)} tensor{'s' * (len(infos) > 1)}, "
        f"{len(usable)} usable as a table:"
    )
    st.dataframe(
        pd.DataFrame(
            [
                {"tensor": i.name, "shape": str(i.shape), "dtype": numpy_dtype_name(i.dtype)}
                for i in infos
            ]
        ),
        hide_index=True,
    )
    names = [info.name for info in usable]
    detected = io.detect_position_tensor(infos)
    name = st.selectbox(
        "Tensor",
        names,
        index=names.index(detected) if detected in names else 0,
        key=f"{key}.tensor",
        help="Auto-detected by name and shape; pick any other 2-D tensor.",
    )
    info = usable[names.index(name)]
    trim = io.suggest_trim(info.name, info.shape)
    if trim.reason:
        st.info(trim.reason, icon=":material/content_cut:")
    n_rows = info.table_shape[0]
    with st.form(f"{key}.rows"):
        left, right, grid = st.columns(3)
        start = left.number_input("First row", 0, n_rows - 2, trim.row_start)
        stop = right.number_input("Stop row (exclusive)", 2, n_rows, n_rows)
        as_grid = grid.checkbox(
            f"2-D grid {trim.grid[0]} x {trim.grid[1]}" if trim.grid else "2-D grid",
            value=trim.grid is not None,
            disabled=trim.grid is None,
        )
        if not st.form_submit_button("Load", type="primary"):
            return
    try:
        table = io.load(
            source,
            filename,
            tensor=name,
            row_start=int(start),
            row_stop=int(stop),
            grid=trim.grid if as_grid and (start, stop) == (trim.row_start, n_rows) else None,
        )
    except LoadError as error:
        st.error(str(error), icon=":material/error:")
        return
    state.set_table(table, slot)
    st.success(f"Loaded {table.name} ({table.describe_rows()}).")
