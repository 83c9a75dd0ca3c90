"""Data: load the table to analyse, by simulation or from a file."""

import streamlit as st

from posviz.ui import state, widgets

st.title("Data")
st.markdown(
    "Simulate a table with known structure, or upload a position table or a checkpoint. "
    "Files are read without unpickling; pickle-based checkpoints are refused."
)
widgets.table_loader(state.PRIMARY)
widgets.table_caption(state.current())
