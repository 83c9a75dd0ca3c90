"""posviz: route to the pages and show the current table. No analysis here."""

import sys
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

HERE = Path(__file__).parent

# A fresh server runs its first visit in Streamlit's pages-folder mode, which lists the raw
# pages/ file names in the sidebar. This run is the router itself, whose st.navigation below
# leaves that mode: say so before posviz.ui (which reruns a deep link into pages/ through
# app.py) would rerun it, and draw the titles before the slow imports.
PagesManager.uses_pages_directory = False
from posviz.ui import pages  # noqa: E402

page = st.navigation([st.Page(HERE / p.file, title=p.title, icon=p.icon) for p in pages.PAGES])
# A file, not ":material/...": Streamlit fetches a Material favicon from fonts.gstatic.com,
# and nothing the app shows may leave the server's host.
st.set_page_config(page_title="posviz", page_icon=HERE / "posviz/ui/favicon.png", layout="wide")
# A fresh server's first visitor waits a second or two for the imports, then for the first
# page's analyses: a progress bar says so (later visits find the imports done: no bar).
first = "posviz.ui.widgets" not in sys.modules
if first:
    bar = st.progress(0.0, text="Opening posviz: loading its analyses (step 1 of 2, 1 more)")
from posviz.ui.widgets import freeze_imports, sidebar_card  # noqa: E402

if first:
    bar.progress(0.5, text="Opening posviz: the first page's analyses (step 2 of 2, the last)")
freeze_imports()
page.run()
if first:
    bar.empty()
# After the page: a table the page just loaded is already the one named.
sidebar_card()
