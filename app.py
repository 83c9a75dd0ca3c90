"""posviz: route to the pages and show the current table. No analysis here."""

import sys
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent

# A file, not ":material/...": Streamlit fetches a Material favicon from fonts.gstatic.com,
# and nothing the app shows may leave the server's host. Before st.navigation, which would
# otherwise make the open page's Material icon the favicon until this call replaced it.
st.set_page_config(page_title="posviz", page_icon=HERE / "posviz/ui/favicon.png", layout="wide")

# The pages as links drawn here, not Streamlit's own sidebar navigation (turned off in
# .streamlit/config.toml): a fresh server runs its first visit in Streamlit's pages-folder
# mode, whose own navigation would list the raw pages/ file names until st.navigation
# replaced them. Drawn before the slow imports below, so the titles show at once.
from posviz.ui import pages  # noqa: E402

links = [st.Page(HERE / p.file, title=p.title, icon=p.icon) for p in pages.PAGES]
page = st.navigation(links, position="hidden")
for link in links:
    st.sidebar.page_link(link)
# A fresh server's first visitor waits a second or two for the imports, then for the first
# page's analyses: a progress bar says so (later visits find the imports done: no bar).
first = "posviz.ui.sidebar" not in sys.modules
if first:
    bar = st.progress(0.0, text="Opening posviz: loading its analyses (step 1 of 2, 1 more)")
from posviz.ui.sidebar import freeze_imports, glossary, link_notices, sidebar_card  # noqa: E402

if first:
    bar.progress(0.5, text="Opening posviz: the first page's analyses (step 2 of 2, the last)")
freeze_imports()
link_notices()
try:
    page.run()
finally:
    # After the page, even one that stopped early (st.stop: a model still to pick): a table
    # the page just loaded is already the one named.
    if first:
        bar.empty()
    glossary()
    sidebar_card()
