"""posviz: route to the pages and show the current table. No analysis here."""

from pathlib import Path

import streamlit as st

from posviz.ui import pages
from posviz.ui.widgets import freeze_imports, sidebar_card

HERE = Path(__file__).parent

# A file, not ":material/...": Streamlit fetches a Material favicon from fonts.gstatic.com,
# and nothing the app shows may leave the server's host.
st.set_page_config(page_title="posviz", page_icon=HERE / "posviz/ui/favicon.png", layout="wide")
freeze_imports()
page = st.navigation([st.Page(HERE / p.file, title=p.title, icon=p.icon) for p in pages.PAGES])
page.run()
# After the page: a table the page just loaded is already the one named.
sidebar_card()
