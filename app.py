"""posviz: route to the pages and show the current table. No analysis here."""

from pathlib import Path

import streamlit as st

from posviz.ui.widgets import freeze_imports, sidebar_card

HERE = Path(__file__).parent

# A file, not ":material/...": Streamlit fetches a Material favicon from fonts.gstatic.com,
# and nothing the app shows may leave the server's host.
st.set_page_config(page_title="posviz", page_icon=HERE / "posviz/ui/favicon.png", layout="wide")
freeze_imports()
page = st.navigation(
    [
        st.Page(HERE / "pages/spectrum.py", title="Spectrum", icon=":material/ssid_chart:"),
        st.Page(HERE / "pages/similarity.py", title="Similarity", icon=":material/grid_on:"),
        st.Page(HERE / "pages/components.py", title="Components", icon=":material/timeline:"),
        st.Page(
            HERE / "pages/boundaries.py",
            title="Boundaries & probes",
            icon=":material/border_outer:",
        ),
        st.Page(HERE / "pages/compare.py", title="Compare", icon=":material/compare:"),
        st.Page(HERE / "pages/collection.py", title="Collection", icon=":material/view_module:"),
        st.Page(HERE / "pages/resample.py", title="Resample", icon=":material/aspect_ratio:"),
        st.Page(HERE / "pages/data.py", title="Data", icon=":material/upload_file:"),
    ]
)
page.run()
# After the page: a table the page just loaded is already the one named.
sidebar_card()
