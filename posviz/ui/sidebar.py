"""What the app draws around every page: the tables a link names, the sidebar card of the
current table with its report, the glossary."""

from __future__ import annotations

import gc
import html
from collections.abc import Callable
from typing import Any

import streamlit as st

from posviz.embedding import Embedding
from posviz.ui import cache, state
from posviz.ui.text import literal
from posviz.ui.widgets import CENTER


def link_notices() -> None:
    """Before the page: open the tables the URL names, say above the page what a link could
    not reopen, and name the tables in the URL (a page switch drops them from it)."""
    state.current()
    if any(key.startswith(state.PREFIX[state.SECOND]) for key in st.query_params):
        state.current(state.SECOND)
    for text in state.notices():
        st.warning(text, icon=":material/link_off:")
    state.sync_url()


def glossary() -> None:
    """The glossary in the sidebar, on every page: one line per word the pages use."""
    from posviz.glossary import TOPICS

    with st.sidebar.popover("Glossary", icon=":material/menu_book:", width="stretch"):
        for topic, terms in TOPICS.items():
            st.markdown(f"**{topic}**")
            st.markdown(
                "\n".join(f"- **{literal(term)}**: {literal(line)}" for term, line in terms.items())
            )


def sidebar_card() -> None:
    """The current matrix in the sidebar: name, shape, dtype, source."""
    table = state.current()
    with st.sidebar.container(border=True):
        st.markdown(f"**Current table** {literal(table.name)}")
        st.markdown(
            f"{table.shape[0]:,} positions x {table.shape[1]:,} dims · stored as "
            f"{literal(table.dtype)}  \n{table.describe_rows()}"
        )
        st.caption(literal(table.source))
        center = st.session_state.get("posviz.center", CENTER)
        made = (table.sha256, center)
        if st.button(
            "Report (HTML)",
            key="make.report",
            icon=":material/summarize:",
            help="Every analysis of this table on one standalone page that opens offline "
            f"({'rows mean-centred' if center else 'uncentred'}, seed 0). What the pages "
            "already computed is reused.",
        ):
            bar = st.progress(0.0)
            page = _report(table, center=center, progress=_progress_bar(bar, "Report"))
            bar.empty()
            st.session_state[REPORT] = (made, page)
        kept = st.session_state.get(REPORT)
        if kept and kept[0] == made:
            st.download_button(
                "Download the report",
                data=lambda: kept[1],  # sent when clicked, not with every rerun
                file_name=f"posviz-report-{table.sha256[:8]}.html",
                mime="text/html",
                key="download.report",
                icon=":material/download:",
                on_click="ignore",
            )


#: The last report made in this session: ((sha256, center), its HTML).
REPORT = "posviz.report"


def _progress_bar(bar: Any, work: str) -> Callable[[str, int, int], None]:
    """A `progress(step, done, total)` that moves `bar` and names the step and what is left."""

    def told(step: str, done: int, total: int) -> None:
        left = total - done - 1
        bar.progress(
            done / total,
            text=f"{work}: {step} (step {done + 1} of {total}"
            + (f", {left} more after it)" if left else ", the last)"),
        )

    return told


def _report(
    table: Embedding, *, center: bool, progress: Callable[[str, int, int], None] | None = None
) -> str:
    """The report, or a page saying why it could not be made (a failure in one analysis must
    not take the page down); every step asked of the session's cache first."""
    from posviz.report import build_report  # on click: it loads pandas and every analysis

    try:
        return build_report(table, center=center, run=cache.run, progress=progress)
    except Exception as error:  # whatever failed, the downloaded file says so
        return (
            "<!doctype html><meta charset='utf-8'><title>posviz report failed</title>"
            f"<h1>The report of {html.escape(table.name)} could not be made</h1>"
            f"<p>{html.escape(type(error).__name__)}: {html.escape(str(error))}</p>"
            "<p>The app's pages still work; please report this with the table's shape "
            f"{table.shape[0]} x {table.shape[1]}.</p>"
        )


@st.cache_resource(show_spinner=False)
def freeze_imports() -> None:
    """Once per server process, after the app's imports: move them out of the collector's walk.

    Streamlit runs a full garbage collection after every script run (runner.postScriptGC, kept:
    it frees what sessions leave behind). Everything imported by then (Streamlit, plotly,
    scipy, posviz) lives as long as the server; frozen, those objects are no longer scanned,
    so that collection walks only what runs create. Called by app.py, not on import, so that
    importing this module (tests, notebooks) freezes nothing.
    """
    gc.freeze()
