"""The only part of posviz that imports Streamlit: session state, cached core calls, widgets."""
