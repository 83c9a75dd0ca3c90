"""Spectrum: how low-rank the table is."""

import streamlit as st

from posviz import export, figures, pipeline
from posviz.spectrum import DEFINITIONS, NO_VARIANCE, THRESHOLDS
from posviz.ui import cache, state, widgets

st.title("Spectrum")
table = state.current()
widgets.table_caption(table)
center = widgets.center_toggle()
result = cache.run(pipeline.spectrum, table, center=center)
settings = export.header(result, table)
metrics = result.metrics()

if not result.has_variance:
    st.info(NO_VARIANCE, icon=":material/info:")
widgets.quantization_note(table, center=center)
columns = st.columns(4)
for column, key in zip(columns, DEFINITIONS, strict=True):
    value = metrics[key]
    column.metric(
        export.column_label(key),
        "undefined" if value is None else f"{value:.2f}" if isinstance(value, float) else value,
        help=DEFINITIONS[key],
    )
st.markdown(
    "Components for a share of the variance: "
    + " · ".join(f"**{t:.0%}**: {metrics[f'k{round(t * 100)}'] or 'undefined'}" for t in THRESHOLDS)
)
if result.has_variance:
    # The two counts differ by design; side by side they read as a contradiction without this.
    st.caption(
        f"**Effective rank {metrics['effective_rank']:.2f}**: as many equal singular values σ "
        "would give the same spread; it weighs σ, not the variance σ², so a long tail of "
        "small components raises it.  \n"
        f"**99% in {metrics['k99']} components**: the fewest components that hold 99% of the "
        "variance σ²; the tail hardly counts there."
    )

values, variance, error = widgets.page_tabs("spectrum")
with values:
    if values.open:
        widgets.show_figure(
            cache.figure(figures.spectrum.singular_values, result),
            name="singular_values",
            settings=settings,
        )
        if result.singular_values[-1] < result.floor:
            st.caption(
                f"Singular values below {result.floor:.2g} (σ₁·√(min(n, d)·ε)) are rounding "
                "noise of the float64 Gram route and are drawn grey."
            )
with variance:
    if variance.open:
        widgets.show_figure(
            cache.figure(figures.spectrum.explained_variance, result),
            name="explained_variance",
            settings=settings,
        )
with error:
    if error.open:
        widgets.show_figure(
            cache.figure(figures.spectrum.reconstruction_error, result),
            name="reconstruction_error",
            settings=settings,
        )

with widgets.expander_drawn_when_open("Numbers", key="spectrum.numbers") as opened:
    if opened:
        widgets.show_numbers(result.metrics_table(), name="spectrum_metrics", settings=settings)
        widgets.show_numbers(result.to_frame(), name="singular_values", settings=settings)
