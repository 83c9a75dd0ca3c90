"""Spectrum: how low-rank the table is."""

import pandas as pd
import streamlit as st

from posviz import export, figures
from posviz.spectrum import NO_VARIANCE, NOISE_RULE, THRESHOLDS
from posviz.ui import cache, state, widgets

DEFINITIONS = {
    "effective_rank": "Roy & Vetterli (2007): exp(entropy of σ_i / Σσ_j). Equals r for r "
    "equal singular values.",
    "stable_rank": "Σσ_i² / σ_1²: squared Frobenius norm over squared spectral norm.",
    "participation_ratio": "(Σλ_i)² / Σλ_i², λ_i = σ_i²: how many components share the variance.",
    "n_above_noise": NOISE_RULE[0].upper() + NOISE_RULE[1:],
}

st.title("Spectrum")
table = state.current()
widgets.table_caption(table)
center = widgets.center_toggle()
result = cache.spectrum(table, center=center)
settings = export.export_settings(table, centered=center, n_above_noise=NOISE_RULE)
metrics = result.metrics()

if not result.has_variance:
    st.info(NO_VARIANCE, icon=":material/info:")
columns = st.columns(4)
for column, key in zip(columns, DEFINITIONS, strict=True):
    value = metrics[key]
    column.metric(
        key.replace("_", " "),
        "undefined" if value is None else f"{value:.2f}" if isinstance(value, float) else value,
        help=DEFINITIONS[key],
    )
st.markdown(
    "Components for a share of the variance: "
    + " · ".join(f"**{t:.0%}**: {metrics[f'k{round(t * 100)}'] or 'undefined'}" for t in THRESHOLDS)
)

widgets.show_figure(
    cache.figure(figures.spectrum.singular_values, result),
    name="singular_values",
    settings=settings,
)
if result.singular_values[-1] < result.floor:
    st.caption(
        f"Singular values below {result.floor:.2g} (σ₁·√(min(n, d)·ε)) are rounding noise of "
        "the float64 Gram route and are drawn grey."
    )
left, right = st.columns(2)
with left:
    widgets.show_figure(
        cache.figure(figures.spectrum.explained_variance, result),
        name="explained_variance",
        settings=settings,
    )
with right:
    widgets.show_figure(
        cache.figure(figures.spectrum.reconstruction_error, result),
        name="reconstruction_error",
        settings=settings,
    )

with widgets.expander_drawn_when_open("Numbers", key="spectrum.numbers") as opened:
    if opened:
        widgets.show_numbers(pd.DataFrame([metrics]), name="spectrum_metrics", settings=settings)
        widgets.show_numbers(
            pd.DataFrame(
                {
                    "k": range(1, len(result.singular_values) + 1),
                    "singular_value": result.singular_values,
                    "explained_variance": result.explained_variance,
                    "cumulative": result.cumulative,
                }
            ),
            name="singular_values",
            settings=settings,
        )
