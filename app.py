"""posviz: route to the pages and show the current table. No analysis here."""

from pathlib import Path

import streamlit as st

from posviz.ui.widgets import sidebar_card

HERE = Path(__file__).parent

st.set_page_config(page_title="posviz", page_icon=":material/ssid_chart:", layout="wide")
page = st.navigation(
    [
        st.Page(HERE / "pages/spectrum.py", title="Spectrum", icon=":material/ssid_chart:"),
        st.Page(HERE / "pages/data.py", title="Data", icon=":material/upload_file:"),
    ]
)
sidebar_card()
page.run()
