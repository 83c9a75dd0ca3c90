"""The yardstick of benchmarks/browser.py: a Streamlit page holding one 1024-point Plotly line.

It opens on the chart (timed as a first open); a blank page beside it lets the chart be
reached by a sidebar click, as posviz's pages are.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st


def blank() -> None:
    st.title("Blank")


def one_chart() -> None:
    st.title("Chart")
    x = np.arange(1024)
    fig = go.Figure(go.Scatter(x=x, y=np.sin(x / 50).astype(np.float32), mode="lines"))
    st.plotly_chart(fig, width="stretch")


st.set_page_config(page_title="reference", layout="wide")
# Its pages as sidebar links, drawn as posviz's app.py draws its own (the clone's
# .streamlit/config.toml turns Streamlit's own sidebar navigation off).
pages = [st.Page(one_chart, title="Chart"), st.Page(blank, title="Blank")]
page = st.navigation(pages, position="hidden")
for link in pages:
    st.sidebar.page_link(link)
page.run()
