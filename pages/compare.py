"""Compare: two tables side by side (spectra, offsets, similarity) and how alike they are."""

import streamlit as st

from posviz import compare, export, figures, offsets, pipeline, resample, similarity
from posviz._params import defaults
from posviz.ui import cache, inputs, loaders, state, widgets
from posviz.ui.text import literal

#: Largest side of each similarity heatmap: three side by side get about 320 pixels each on a
#: laptop screen, so more cells would not show (and would cost every visit to send and draw).
HEATMAP_SIDE = 320

#: The resampling that matches the second table's length to the first's (the core's default).
RESAMPLE = defaults(resample.resample_length)

st.title("Compare")
first, second = state.current(), state.current(state.SECOND)
with widgets.expander_drawn_when_open(
    "Second table", key="compare.second", icon=":material/upload_file:"
) as opened:
    if opened:
        st.caption("The first table is the current one (Data page); load the second here.")
        loaders.table_loader(state.SECOND)
left, right = st.columns(2)
with left:
    st.markdown("**First**")
    widgets.table_caption(first)
with right:
    st.markdown("**Second**")
    widgets.table_caption(second)

options = st.columns(3)
with options[0]:
    center = widgets.center_toggle()
metric = options[1].selectbox(
    "Similarity",
    offsets.SIMILARITIES,
    index=offsets.SIMILARITIES.index(defaults(similarity.similarity_map)["metric"]),
    key="compare.metric",
    bind="query-params",
    persist_state="session",
    help=compare.DEFINITIONS["metric"],
)
shortest = min(first.shape[0], second.shape[0])
max_offset = inputs.setting(
    offsets.offset_profile,
    "max_offset",
    "Largest offset",
    high=shortest - 1,
    default=offsets.largest_offset(shortest, compare.OVERLAY_MAX_OFFSET),
    key="compare.max_offset",
    where=options[2],
)
# The legends name each table, not only its place (two panels both named "first" and
# "second" left the reader to remember which was which).
first_name, second_name = f"first: {first.name}", f"second: {second.name}"
names = {first_name: first, second_name: second}

matched = second
if first.shape[0] != second.shape[0]:
    match = st.toggle(
        f"Resample the second table to {first.shape[0]} positions",
        value=True,
        key="compare.match",
        bind="query-params",
        persist_state="session",
        help=f"{RESAMPLE['method'].capitalize()} interpolation, "
        f"{resample.POSITION_RULES[RESAMPLE['positions']]} (the Resample page offers more methods "
        "and sends its result here). Needed for the difference map and the "
        "position-by-position measures (the Similarity maps and CKA tabs).",
    )
    if match:
        matched = cache.run(pipeline.resample_length, second, n_positions=first.shape[0])
same_length = first.shape[0] == matched.shape[0]


def same_positions() -> None:
    """CKA, principal angles and the Procrustes error of two tables of equal length."""
    if not same_length:
        st.info(
            f"The tables have {first.shape[0]} and {second.shape[0]} positions: these measures "
            "compare position by position, so they need equal lengths.",
            icon=":material/info:",
        )
        return
    k_max = compare.largest_k(first.shape, matched.shape)
    n_components = inputs.setting(
        compare.compare, "n_components", "Components k", high=k_max, key="compare.n_components"
    )
    try:
        result = cache.run(
            pipeline.compare, first, matched, n_components=n_components, center=center
        )
    except ValueError as error:
        st.error(literal(error), icon=":material/error:")
        return
    settings = export.header(result, first, matched)
    measures = result.metrics()
    null = result.null
    cka_columns = st.columns(4)
    cka_columns[0].metric(
        "linear CKA (classic)", f"{result.cka:.4f}", help=compare.DEFINITIONS["cka"]
    )
    cka_columns[1].metric(
        "linear CKA (debiased)",
        f"{result.cka_debiased:.4f}",
        help=compare.DEFINITIONS["cka_debiased"],
    )
    if null is not None:
        summary = null.summary()
        cka_columns[2].metric(
            "chance level (classic)",
            f"{summary['cka_null_mean']:.4f}",
            help=f"Mean over shuffles; 95th percentile {summary['cka_null_p95']:.4f}. "
            + null.procedure(),
        )
        p, floor = summary["cka_debiased_p_value"], 1 / (1 + null.n_permutations)
        cka_columns[3].metric(
            f"p-value ({null.n_permutations} shuffles)",
            f"≤ {p:.3g}" if p <= floor else f"{p:.3g}",  # no shuffle reached it: p at its floor
            help=f"Of the debiased CKA (the classic one's is {summary['cka_p_value']:.3g}); the "
            f"smallest p-value {null.n_permutations} shuffles can give is 1 / "
            f"{null.n_permutations + 1} = {floor:.3g}. " + null.procedure(),
        )
        st.caption(
            f"Shuffling the second table's rows: classic CKA {summary['cka_null_mean']:.4f} on "
            f"average (95th percentile {summary['cka_null_p95']:.4f}), debiased "
            f"{summary['cka_debiased_null_mean']:.4f} (95th percentile "
            f"{summary['cka_debiased_null_p95']:.4f}). {null.procedure()}"
        )
    columns = st.columns(3)
    columns[0].metric(
        "mean principal angle",
        f"{measures['mean_angle_degrees']:.2f}°",
        help=compare.DEFINITIONS["angles"],
    )
    columns[1].metric(
        "largest principal angle",
        f"{measures['max_angle_degrees']:.2f}°",
        help=compare.DEFINITIONS["angles"],
    )
    columns[2].metric(
        "Procrustes error",
        "undefined" if result.procrustes_error is None else f"{result.procrustes_error:.4f}",
        help=compare.DEFINITIONS["procrustes"],
    )
    if result.procrustes_error is None:  # said here, not only in the tooltip
        columns[2].caption(
            f"Undefined: the tables are {first.shape[1]:,} and {matched.shape[1]:,} dimensions "
            "wide, and a rotation maps one table onto another of the same width only."
        )
    widgets.show_figure(
        cache.figure(figures.compare.comparison_angles, result),
        name="compare_angles",
        settings=settings,
    )
    with widgets.expander_drawn_when_open("Numbers", key="compare.numbers") as opened:
        if opened:
            widgets.show_numbers(result.to_frame(), name="compare_measures", settings=settings)
            widgets.show_numbers(
                result.angles_table(), name="compare_principal_angles", settings=settings
            )


spectra_tab, offsets_tab, maps_tab, same_tab = widgets.page_tabs("compare")
with spectra_tab:
    if spectra_tab.open:
        spectra = {
            name: cache.run(pipeline.spectrum, table, center=center)
            for name, table in names.items()
        }
        settings = export.header(spectra[first_name], first, second)
        widgets.show_spectra(spectra, page="compare", settings=settings)
with offsets_tab:
    if offsets_tab.open:
        profiles = {
            name: cache.run(
                pipeline.offset_profile, table, metric=metric, center=center, max_offset=max_offset
            )
            for name, table in names.items()
        }
        widgets.show_figure(
            cache.figure(figures.compare.offset_overlay, profiles),
            name="compare_offsets",
            settings=export.header(profiles[first_name], first, second),
        )
with maps_tab:
    if maps_tab.open:
        maps = {
            name: cache.run(
                pipeline.similarity_map, table, metric=metric, center=center, max_side=HEATMAP_SIDE
            )
            for name, table in {first_name: first, second_name: matched}.items()
        }
        widgets.show_figure(
            cache.figure(
                figures.compare.similarity_pair,
                maps,
                difference=same_length,
                labels=(first.labels, matched.labels),
            ),
            name="compare_similarity",
            settings=export.header(maps[first_name], first, matched),
        )
        if max(m.block for m in maps.values()) > 1:
            st.caption(
                f"Above {HEATMAP_SIDE} positions a side each cell is the mean over a block of "
                "positions (exact block means; the block size is in the title)."
            )
with same_tab:
    if same_tab.open:
        same_positions()
