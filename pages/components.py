"""Components: principal components over position, the helix, and how sinusoidal they are."""

from functools import partial

import streamlit as st

from posviz import components, export, figures, pipeline
from posviz.ui import cache, inputs, state, widgets

st.title("Components")
table = state.current()
widgets.table_caption(table)
n = table.shape[0]
center = widgets.center_toggle()
top = min(components.max_components(table.shape, center=center), 20)
n_components = inputs.setting(
    components.principal_components,
    "n_components",
    "Principal components k",
    high=top,
    key="components.n_components",
    help="How many leading principal components to show and fit (at most 20).",
)
pc = cache.run(pipeline.principal_components, table, n_components=n_components, center=center)
settings = export.header(pc, table)
if table.grid:
    st.caption(
        f"2-D grid {table.grid[0]} x {table.grid[1]}: position p is patch (p // "
        f"{table.grid[1]}, p % {table.grid[1]}), row-major."
    )

# Only the open tab is built. Its widgets keep their values while another tab is open
# (persist_state="page"): a closed tab's widgets are not drawn, and Streamlit forgets those.
over_position, path, fits_tab, span = widgets.page_tabs("components")
numbers = list(range(1, n_components + 1))


@st.fragment
def trajectories_section() -> None:
    """A fragment: the layout redraws only the trajectories."""
    overlaid = st.radio(
        "Layout",
        ["small multiples", "overlaid"],
        # Overlaid by default: one axis draws faster than six panels, and the Sinusoid fits
        # tab shows each PC in its own panel.
        index=1,
        horizontal=True,
        key="components.layout",
        persist_state="page",
    )
    widgets.show_figure(
        cache.figure(
            figures.components.pc_trajectories,
            pc,
            overlaid=overlaid == "overlaid",
            labels=table.labels,
        ),
        name="pc_trajectories",
        settings=settings,
    )


@st.fragment
def path_section() -> None:
    """A fragment: the axes and the 3-D toggle redraw only the paths, not the whole page."""
    choose = st.columns(3)
    axes = [
        column.selectbox(
            label,
            numbers,
            index=min(default, n_components - 1),
            key=f"components.axis{default}",
            persist_state="page",
        )
        for column, label, default in zip(
            choose, ["PC (x)", "PC (y)", "PC (z, 3-D only)"], range(3), strict=True
        )
    ]
    if n > figures.components.PATH_POINTS:
        st.caption(
            f"{n:,} positions: figures draw at most {figures.components.PATH_POINTS:,} positions "
            f"per path and {figures.layout.LINE_POINTS:,} per line, evenly spaced (first and last "
            "included); every "
            "number and download uses all positions."
        )
    flat, solid = st.columns(2)
    with flat:
        widgets.show_figure(
            cache.figure(
                figures.components.pc_path,
                pc,
                tuple(axes[:2]),
                labels=table.labels,
            ),
            name="pc_path_2d",
            settings={**settings, "components": axes[:2]},
        )
    with solid:
        if n_components >= 3:
            # Drawn on request: WebGL, which the browser may draw in software (seconds).
            if st.toggle(
                "Show the 3-D path (PC x / y / z)",
                key="components.show_3d",
                persist_state="page",
                help="A WebGL chart, slow to draw without a GPU: drawn only when asked for.",
            ):
                widgets.show_figure(
                    cache.figure(
                        figures.components.pc_path,
                        pc,
                        tuple(axes),
                        labels=table.labels,
                    ),
                    name="pc_path_3d",
                    settings={**settings, "components": axes},
                )
            else:
                st.caption("The 3-D path through the chosen PCs is one click away (toggle above).")
        else:
            st.info("The 3-D path needs k >= 3 components.")


@st.fragment
def periodogram_section(fits: components.SinusoidFits) -> None:
    """A fragment: the frequency range redraws only the periodogram."""
    nyquist = n // 2
    max_cycles = st.slider(
        "Highest frequency shown (cycles)",
        1,
        nyquist,
        # Wide enough to show every fitted peak with room around it.
        min(max(8, 4 * int(fits.peak.max())), nyquist),
        key="components.max_cycles",
        persist_state="page",
        help="Display only: the downloads hold every frequency up to n / 2.",
    )
    widgets.show_figure(
        cache.figure(figures.components.periodogram, fits, max_cycles=max_cycles),
        name="periodogram",
        settings={**settings, "highest_frequency_shown": max_cycles},
    )


with over_position:
    if over_position.open:
        trajectories_section()
        # One "Numbers" key in every tab: opened once, each tab shows its own tables.
        with widgets.expander_drawn_when_open("Numbers", key="components.numbers") as opened:
            if opened:
                widgets.show_numbers(pc.to_frame(), name="pc_projections", settings=settings)

with path:
    if path.open:
        path_section()

with fits_tab:
    if fits_tab.open:
        fits = cache.run(pipeline.fit_sinusoids, table, n_components=n_components, center=center)
        fit_settings = export.header(fits, table)
        st.metric(
            "Median R² of the top-k fits",
            f"{fits.median_r2:.4f}",
            help=components.DEFINITIONS["r2"],
        )
        widgets.show_figure(
            cache.figure(figures.components.sinusoid_fits, pc, fits, labels=table.labels),
            name="sinusoid_fits",
            settings=fit_settings,
        )
        st.caption(
            f"Frequencies in cycles over the table's {n:,} positions. "
            + components.DEFINITIONS["r2"]
        )
        if note := table.labels.note("fit_sinusoids"):  # DeBERTa's buckets
            st.caption(note)
        if fits.at_lower_bound.any():
            flagged = ", ".join(f"PC{c + 1}" for c, low in enumerate(fits.at_lower_bound) if low)
            st.warning(
                f"{flagged}: the best fit sits on the lowest frequency allowed "
                f"({fits.min_cycles:g} cycle over the table): a trend, not an oscillation.",
                icon=":material/warning:",
            )
        widgets.show_numbers(fits.to_frame(), name="sinusoid_fits", settings=fit_settings)
        with widgets.expander_drawn_when_open(
            "Periodogram: each PC's share of variance per frequency",
            key="components.periodogram",
        ) as opened:
            if opened:
                periodogram_section(fits)
                widgets.show_numbers(
                    fits.periodogram_table(), name="periodogram", settings=fit_settings
                )

with span:
    if span.open:
        st.markdown("**Is the component span a span of low-frequency sinusoids?**")
        left, middle, right = st.columns(3)
        ask = partial(inputs.setting, components.sinusoid_likeness)
        m = ask(  # 1 .. n // 2, as sinusoid_likeness checks it (a table's bound, not declared)
            "n_frequencies",
            "Sinusoid frequencies m",
            low=1,
            high=n // 2,
            key="components.m",
            where=left,
        )
        shuffles = ask("n_shuffles", "Shuffles", key="components.shuffles", where=middle)
        seed = ask("seed", "Seed", key="components.seed", where=right)
        likeness = cache.run(
            pipeline.sinusoid_likeness,
            table,
            n_components=n_components,
            center=center,
            n_frequencies=m,
            n_shuffles=shuffles,
            seed=seed,
        )
        like_settings = export.header(likeness, table)
        if note := table.labels.note("fit_sinusoids"):  # DeBERTa's buckets
            st.caption(note)
        row = likeness.to_frame().iloc[0]
        table_col, chance_col, p_col = st.columns(3)
        table_col.metric(
            "Mean cos², table", f"{row.mean_cos2:.4f}", help=components.DEFINITIONS["likeness"]
        )
        chance_col.metric(
            "Mean cos², shuffled rows",
            f"{row.shuffled_mean_cos2:.4f}",
            help="The same number after shuffling the table's rows, averaged over the shuffles "
            "(seeded): what a table without positional order gives.",
        )
        at_floor = likeness.p_value <= likeness.smallest_p_value
        p_col.metric(
            f"p-value ({shuffles:,} shuffles)",
            f"≤ {row.p_value:.2g}" if at_floor else f"{row.p_value:.2g}",
            help="(1 + shuffles with mean cos² ≥ the table's) / (1 + shuffles): below 0.05 the "
            "span is more sinusoid-like than chance.",
        )
        st.caption(
            f"Shuffled rows: {row.shuffled_mean_cos2:.4f} ± {row.shuffled_std_cos2:.4f} (mean ± "
            f"standard deviation over {shuffles} shuffles, seed {seed}); a random "
            f"{n_components}-dimensional span scores about 2m / n = {likeness.random_level:.4f}. "
            f"{likeness.p_text}; the "
            f"smallest p-value {shuffles:,} shuffles can give is 1 / {shuffles + 1:,} = "
            f"{likeness.smallest_p_value:.2g}. {likeness.procedure()}"
        )
        widgets.show_figure(
            cache.figure(figures.components.principal_angles, likeness),
            name="principal_angles",
            settings=like_settings,
        )
        with widgets.expander_drawn_when_open("Numbers", key="components.numbers") as opened:
            if opened:
                widgets.show_numbers(
                    likeness.to_frame(), name="sinusoid_likeness", settings=like_settings
                )
                widgets.show_numbers(
                    likeness.angles_table(), name="principal_angles", settings=like_settings
                )
                widgets.show_numbers(
                    likeness.shuffled_table(), name="shuffled_control", settings=like_settings
                )
