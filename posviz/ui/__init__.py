"""The only part of posviz that imports Streamlit: session state, cached core calls, widgets."""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

# Streamlit runs a fresh server's first request in its legacy pages-folder mode (each file in
# pages/ a page of its own, without app.py) until app.py's st.navigation has run once, so a
# deep link as the very first request would skip the router. Every page imports posviz.ui:
# leave that mode and run again, now through app.py.
if PagesManager.uses_pages_directory:
    PagesManager.uses_pages_directory = False
    st.rerun()
