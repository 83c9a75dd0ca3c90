"""Data: load the table to analyse, by simulation or from a file."""

import streamlit as st

from posviz import hub
from posviz.ui import loaders, state, widgets

st.title("Data")
hub_tab = (
    ", or open a model on the Hugging Face Hub by name (only the picked tensor is fetched)"
    if hub.enabled()
    else ""
)
st.markdown(
    f"Simulate a table with known structure, upload a position table or a checkpoint{hub_tab}. "
    "Files are read without unpickling; pickle-based checkpoints are refused."
)
loaders.table_loader(state.PRIMARY)
widgets.table_caption(state.current())
