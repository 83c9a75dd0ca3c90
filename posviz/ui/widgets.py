"""Widgets every page shares: the centring toggle, figures and numbers with their export
buttons, and the captions that state what was analysed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
import streamlit as st

from posviz import compare, export, figures, pipeline, quantization
from posviz._params import defaults
from posviz.embedding import Embedding
from posviz.export.screen import on_screen
from posviz.spectrum import Spectrum, spectrum
from posviz.ui import cache, pages, state
from posviz.ui.text import literal

if TYPE_CHECKING:
    import pandas as pd

#: The centring every core function defaults to (one default: `center: bool = True`).
CENTER = defaults(spectrum)["center"]


def center_toggle() -> bool:
    """The centring choice, shared by every page that offers it and kept across page switches."""
    return st.toggle(
        "Mean-centre rows",
        value=CENTER,
        key="posviz.center",
        persist_state="session",
        bind="query-params",
        help="Subtract the mean row (the average position vector) before analysing: PCA. "
        "Without it the first component is mostly the mean row.",
    )


def table_caption(table: Embedding) -> None:
    """State which table and which rows the results below are about."""
    st.caption(
        f"**{literal(table.name)}** {table.shape[0]} x {table.shape[1]} · "
        f"{table.describe_rows()} · {literal(table.source)}"
    )


@contextmanager
def expander_drawn_when_open(label: str, *, key: str, icon: str | None = None) -> Iterator[bool]:
    """An expander whose contents are built and sent to the browser only while it is open.

    Yields whether it is open: opening it reruns the page, which then draws the contents.
    """
    with st.expander(label, key=key, icon=icon, on_change="rerun") as box:
        yield bool(box.open)  # None only for an expander that tracks no state: never here


def tabs_drawn_when_open(labels: list[str], *, key: str) -> Sequence[Any]:
    """Tabs of which only the open one is built and sent to the browser.

    Guard each tab's contents with ``if tab.open:``. Switching tabs reruns the page (its
    results come from the cache); the open tab is kept in the URL (``?key=label``), so a link
    opens it again.
    """
    return st.tabs(labels, key=key, on_change="rerun", bind="query-params")


def page_tabs(name: str) -> Sequence[Any]:
    """The tabs of page `name` as the page registry lists them, drawn when open; the open tab
    is kept under ``<name>.section`` (and in the URL)."""
    return tabs_drawn_when_open(list(pages.page(name).tabs), key=f"{name}.section")


def show_figure(fig: go.Figure, *, name: str, settings: dict[str, Any]) -> None:
    """Draw `fig` full width, with downloads as standalone HTML, PNG and SVG.

    Files are built only when a download is clicked. PNG/SVG need a Chromium for kaleido;
    without one those buttons say so and the rest keeps working.
    """
    st.plotly_chart(fig, width="stretch", key=f"chart.{name}")
    browser = figures.export.static_image_browser()
    with st.popover("Export figure", icon=":material/download:"):
        st.download_button(
            "Interactive HTML (opens offline)",
            data=lambda: figures.export.figure_html(fig, settings),
            file_name=f"{name}.html",
            mime="text/html",
            key=f"download.{name}.html",
        )
        for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
            st.download_button(
                fmt.upper(),
                data=partial(_render, fig, fmt, settings),
                file_name=f"{name}.{fmt}",
                mime=mime,
                key=f"download.{name}.{fmt}",
                disabled=browser is None,
                help=None
                if browser
                else "PNG/SVG need Chromium (set BROWSER_PATH); the HTML export works without it.",
            )


def show_spectra(spectra: dict[str, Spectrum], *, page: str, settings: dict[str, Any]) -> None:
    """Two tables' spectra: variance per component drawn; the cumulative shares and the
    metrics side by side one click away (built when opened)."""
    show_figure(
        cache.figure(figures.compare.spectra_overlay, spectra),
        name=f"{page}_spectra",
        settings=settings,
    )
    with expander_drawn_when_open(
        "Cumulative explained variance", key=f"{page}.cumulative"
    ) as opened:
        if opened:
            show_figure(
                cache.figure(figures.compare.cumulative_overlay, spectra),
                name=f"{page}_cumulative",
                settings=settings,
            )
    with expander_drawn_when_open(
        "Numbers: the spectra's metrics side by side", key=f"{page}.spectra_numbers"
    ) as opened:
        if opened:
            show_numbers(
                compare.metrics_table(*spectra.values()), name=f"{page}_metrics", settings=settings
            )


@st.cache_resource
def _kaleido_server() -> None:
    """Start kaleido's browser once per server process, not once per image (its start-up is
    most of an image's time; benchmarks/exports.py)."""
    import kaleido  # only on the first image export

    kaleido.start_sync_server(silence_warnings=True)


def _render(fig: go.Figure, fmt: str, settings: dict[str, Any]) -> bytes:
    _kaleido_server()
    return figures.export.figure_image(fig, fmt, settings=settings)


#: What a blank cell of a table of numbers means, unless the table says more.
BLANK = "A blank cell: not defined for that row."
#: Columns a table of numbers shows in the page's width: a wider one (the heads' numbers beside
#: their nulls, the probes') keeps its first column in view while it scrolls sideways, and says so.
WIDE = 8


def _significant(value: float) -> float:
    """`value` to six significant digits (NaN and infinities as they are)."""
    return float(f"{value:.6g}")


def show_numbers(
    frame: pd.DataFrame,
    *,
    name: str,
    settings: dict[str, Any],
    shown: pd.DataFrame | None = None,
    pinned: str | None = None,
    blank: str = BLANK,
) -> None:
    """Show a table of numbers, headed by labels, with CSV and JSON downloads that carry
    `settings` and the columns' keys.

    `shown` is drawn instead of `frame` when the screen needs text where the files keep
    numbers (a "-" for a missing step); column `pinned` stays in view when scrolling sideways
    (by default the first, of a table of more than `WIDE` columns).
    Positions are shown and exported as the table's (:func:`posviz.export.labelled`). On
    screen, float64 rounding noise reads 0 (:func:`posviz.export.screen.on_screen`) and a
    missing value is a blank cell, which `blank` explains under the table.
    """
    frame = export.labelled(frame, settings)
    shown = None if shown is None else export.labelled(shown, settings)
    screen = on_screen(frame if shown is None else shown)
    wide = len(screen.columns) > WIDE
    if wide and not pinned:
        pinned = str(screen.columns[0])
    config: dict[str, Any] = {}
    if pinned:
        config[export.column_label(pinned)] = st.column_config.Column(pinned=True)
    if "label" in screen:  # a head's label: autosized from a first empty cell, it was cut
        config.setdefault("label", st.column_config.Column(width=130))
    for key in ("statistic", "metric"):  # rows named by a key, read as labels too
        if key in screen:
            screen = screen.assign(**{key: screen[key].map(export.column_label)})
            # Each row is its own quantity (a count beside a threshold of 7e-8): one number of
            # decimals per column cannot serve them all. Six significant digits each, written
            # as they are ("%g": 2, 134.913, 4.35709e-08); the downloads keep every digit.
            floats = [c for c in screen.columns if screen[c].dtype.kind == "f"]
            screen = screen.assign(**{c: screen[c].map(_significant) for c in floats})
            config |= {
                export.column_label(c): st.column_config.NumberColumn(format="%g") for c in floats
            }
    st.dataframe(
        screen.rename(columns=export.column_label),
        hide_index=True,
        width="stretch",
        column_config=config or None,
        placeholder="",  # not "None"
    )
    if wide and pinned:  # the grid's scroll bar shows only under the pointer
        st.caption(
            f"{len(screen.columns)} columns: scroll sideways for the rest; "
            f"{export.column_label(pinned)} stays in view."
        )
    if screen.isna().to_numpy().any():
        st.caption(blank)
    # Side by side: in two half-width columns the JSON button stood mid-page, a gap apart.
    buttons = st.container(horizontal=True, gap="small")
    buttons.download_button(
        "CSV",
        data=lambda: export.to_csv(frame, settings),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download.{name}.csv",
        icon=":material/download:",
    )
    buttons.download_button(
        "JSON",
        data=lambda: export.to_json(frame, settings),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"download.{name}.json",
        icon=":material/download:",
    )


def quantization_note(table: Embedding, *, center: bool) -> None:
    """For a table stored quantized (a GGUF's Q8_0, Q4_K, …): its quantization named, and its
    error against the original when the second table (Compare page) is that original."""
    if not quantization.is_quantized(table.dtype):
        return
    original = state.current(state.SECOND)
    if original.shape != table.shape or original.sha256 == table.sha256:
        st.info(
            f"This table was stored as **{literal(table.dtype)}** (GGML quantization) and "
            "dequantized by gguf's dequantize. Load the original (the model's safetensors "
            "table) as the second table on the Compare page to see the quantization's error "
            "here.",
            icon=":material/compress:",
        )
        return
    e = cache.run(pipeline.quantization_error, table, original, center=center)
    st.info(
        f"**Quantization {literal(table.dtype)}** against the second table "
        f"({literal(original.name)}, {literal(original.dtype)}): relative error "
        f"‖Q − O‖/‖O‖ = **{e.relative_error:.3g}** (rounding the original to float16 would "
        f"give {e.float16_relative_error:.3g}, to bfloat16 {e.bfloat16_relative_error:.3g}); "
        f"largest error of one value {e.max_abs_error:.3g}; the first "
        f"{len(e.singular_values)} singular values move by at most "
        f"{e.singular_value_change:.3g} of σ₁.",
        icon=":material/compress:",
    )
    settings = export.header(e, table, original)
    with expander_drawn_when_open("Quantization error: numbers", key="spectrum.quantization") as o:
        if o:
            show_numbers(e.to_frame(), name="quantization_error", settings=settings)
