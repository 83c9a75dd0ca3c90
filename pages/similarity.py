"""Similarity: how similarity between positions falls with distance.

Positions the Boundaries page flagged on this table are marked on the heatmap edges.
"""

import streamlit as st

from posviz import export, figures, io, offsets, pipeline, similarity
from posviz._params import Bound, defaults
from posviz.similarity import METRICS
from posviz.ui import cache, inputs, state, widgets

MAP = defaults(similarity.similarity_map)

METRIC_HELP = (
    "cosine: ⟨a, b⟩ / (|a| |b|), 0 with a zero row (e.g. a zeroed class token), not NaN. "
    "dot: ⟨a, b⟩. Euclidean: |a − b|."
)
#: The scores shown, by label: the columns of OffsetScores.to_frame() each label stands for.
SCORES = {
    "translation invariance": ("translation_invariance",),
    "monotonicity ρ": ("monotonicity",),
    "falls until k": ("falls_until",),
    "similarity length (1/e)": ("similarity_length",),
    "length (0)": ("length_zero",),
    "sign changes / ringing peaks": ("sign_changes", "peaks"),
}


st.title("Similarity")
table = state.current()
widgets.table_caption(table)
n = table.shape[0]
left, right = st.columns([2, 1])
metric = left.radio(
    "Measure",
    METRICS,
    index=METRICS.index(MAP["metric"]),
    format_func=similarity.METRIC_NAMES.get,
    horizontal=True,
    key="similarity.metric",
    bind="query-params",
    help=METRIC_HELP,
)
with right:
    center = widgets.center_toggle()
flags = state.flags(table)


def as_picture(cells: int, *, key: str) -> bool:
    """Whether a map of `cells` cells is drawn as a picture of their colours: above
    figures.similarity.PICTURE_CELLS, unless the user asks for the cells themselves."""
    if cells <= figures.similarity.PICTURE_CELLS:
        return False
    return not st.toggle(
        "Exact values on hover",
        key=key,
        persist_state="page",
        help=f"Draw the {cells:,} cells themselves (float32) instead of a picture of their "
        "colours: hover gives each value and the figure's downloads hold them; the browser "
        "takes several times longer to draw them.",
    )


@st.fragment
def zoom_window() -> None:
    """A fragment: moving the window redraws only its heatmap."""
    row_col, col_col, size_col = st.columns(3)
    size = inputs.number(
        "Window size (positions)",
        Bound(2, min(n, MAP["max_side"])),
        256,
        key="similarity.zoom_size",
        where=size_col,
    )
    # Asked and shown as the table's positions (a relative table's start below 0).
    first = table.first_position
    starts = Bound(first, first + n - size)
    row0 = inputs.number("First row i", starts, first, key="similarity.zoom_row", where=row_col)
    col0 = inputs.number("First column j", starts, first, key="similarity.zoom_col", where=col_col)
    row0, col0 = row0 - first, col0 - first
    window = cache.run(
        pipeline.similarity_map,
        table,
        metric=metric,
        center=center,
        rows=(row0, row0 + size),
        cols=(col0, col0 + size),
    )
    widgets.show_figure(
        cache.figure(
            figures.similarity.similarity_heatmap, window, highlight=flags, labels=table.labels
        ),
        name="similarity_zoom",
        settings=export.header(window, table),
    )


@st.fragment
def position_section() -> None:
    """A fragment: moving the position redraws only this chart, not the heatmap."""
    first = table.first_position  # asked and shown as the table's positions
    label = st.slider(
        "Bucket" if table.labels.bucketed else "Position",
        first,
        first + n - 1,
        first + n // 2,
        key="similarity.position",
        bind="query-params",
        persist_state="session",
    )
    position = label - first
    if table.labels.bucketed:  # DeBERTa's: a bucket is asked for, its offsets shown
        st.caption(f"Bucket {label} is {table.labels.named(position)} (q − k).")
    neighbours = similarity.grid_neighbours(position, table.grid or (1, n))
    row = cache.run(
        pipeline.similarity_map,
        table,
        metric=metric,
        center=center,
        rows=(position, position + 1),
        cols=(0, n),
        max_side=n,
    )
    # At hundreds of positions a chart's width the neighbours' marks sit under the star:
    # their values are written out too.
    values = "; ".join(f"{table.labels.named(j)}: {row.values[0][j]:.4f}" for j in neighbours)
    st.caption(
        (
            "Neighbours: the patches above, left, right and below on the grid"
            if table.grid
            else "Neighbours: positions p − 1 and p + 1"
        )
        + f" ({values})."
    )
    widgets.show_figure(
        cache.figure(
            figures.similarity.position_profile,
            row,
            position=position,
            neighbours=neighbours,
            labels=table.labels,
        ),
        name="position_profile",
        settings={**export.header(row, table), "position": label},
    )


layout = io.vit_layout(n)
if not table.grid and layout and layout.row_start:
    prefix, side = layout.row_start, layout.grid[0]
    st.info(
        f"{n} = {prefix} + {side}²: the first {prefix} row(s) may be class/distillation "
        f"tokens. Trim them on the Data page to analyse a {side} x {side} grid.",
        icon=":material/grid_on:",
    )

# Settings inside the tabs persist on the page (persist_state): a closed tab's widgets are not
# drawn, and would fall back to their defaults when it is opened again.
pairs, by_offset, one, grids = widgets.page_tabs("similarity")
with pairs:
    if pairs.open:
        overview = cache.run(pipeline.similarity_map, table, metric=metric, center=center)
        picture = as_picture(overview.values.size, key="similarity.exact_cells")
        widgets.show_figure(
            cache.figure(
                figures.similarity.similarity_heatmap,
                overview,
                highlight=flags,
                picture=picture,
                labels=table.labels,
            ),
            name="similarity_heatmap",
            settings=export.header(overview, table),
        )
        if picture:
            st.caption(figures.similarity.PICTURE_NOTE)
        if metric == "euclidean":
            st.caption(
                "Distances come from |a|² + |b|² − 2⟨a, b⟩ in float64: within ~1e-7 of the row "
                "norm of the exact value near 0, far closer elsewhere."
            )
        if flags:
            st.caption(
                f"Triangles on the edges mark the {len(flags)} positions flagged on another page."
            )
        if not overview.exact:
            block = overview.block
            st.caption(
                f"{n:,} positions a side is more than {MAP['max_side']} cells: each cell is "
                f"the exact {'root mean square' if metric == 'euclidean' else 'mean'} over a "
                f"{block} x {block} block of positions (not a sample); axes are positions (block "
                "centres). Open the exact window below to see every pair."
            )
            with widgets.expander_drawn_when_open(
                "Exact window: every pair of a range of positions", key="similarity.zoom"
            ) as opened:
                if opened:
                    zoom_window()
with by_offset:
    if by_offset.open:
        measure = metric if metric in offsets.SIMILARITIES else MAP["metric"]
        if metric == "euclidean":
            st.caption(
                f"Offset profile and scores need a similarity: they use {measure} similarity."
            )
        left, right = st.columns(2)
        max_offset = inputs.setting(
            offsets.offset_profile,
            "max_offset",
            "Largest offset k",
            high=n - 1,
            default=offsets.largest_offset(n),
            key="similarity.max_offset",
            where=left,
        )
        profile = cache.run(
            pipeline.offset_profile, table, metric=measure, center=center, max_offset=max_offset
        )
        if note := table.labels.note("offset_profile"):  # DeBERTa's buckets
            st.caption(note)
        scores = None
        if max_offset >= 2:
            window = inputs.setting(
                offsets.offset_scores,
                "monotonicity_window",
                "Monotonicity window (offsets)",
                high=max_offset,
                key="similarity.window",
                where=right,
            )
            scores = cache.run(
                pipeline.offset_scores,
                table,
                metric=measure,
                center=center,
                max_offset=max_offset,
                monotonicity_window=window,
            )
            values = {
                "translation invariance": f"{scores.translation_invariance:.4f}",
                "monotonicity ρ": f"{scores.monotonicity:.3f}",
                "falls until k": scores.falls_until,
                "similarity length (1/e)": scores.similarity_length
                if scores.similarity_length is not None
                else f"> {max_offset}",
                "length (0)": scores.length_zero
                if scores.length_zero is not None
                else f"> {max_offset}",
                "sign changes / ringing peaks": f"{scores.sign_changes} / {scores.peaks}",
            }
            # Two rows of three: six metrics in one row truncate their labels.
            columns = [*st.columns(3), *st.columns(3)]
            for column, (label, value) in zip(columns, values.items(), strict=True):
                meaning = " ".join(offsets.DEFINITIONS[name] for name in SCORES[label])
                column.metric(label, value, help=meaning)
            st.caption(
                f"Monotonicity ρ over offsets 1..{window}: −1 = similarity falls with every "
                "step, 0 = no trend, +1 = it rises."
            )
        offset_settings = (
            export.header(scores, table) if scores is not None else export.header(profile, table)
        )
        widgets.show_figure(
            cache.figure(figures.offsets.offset_profile, profile, scores),
            name="offset_profile",
            settings=offset_settings,
        )
        with widgets.expander_drawn_when_open("Numbers", key="similarity.numbers") as opened:
            if opened:
                if scores is not None:
                    widgets.show_numbers(
                        scores.to_frame(), name="similarity_scores", settings=offset_settings
                    )
                widgets.show_numbers(
                    profile.to_frame(), name="offset_profile", settings=offset_settings
                )
with one:
    if one.open:
        position_section()
with grids:
    if grids.open:
        heights, _ = similarity.grid_heights(n)
        if not table.grid:
            st.info(
                f"This table is not a patch grid: its {n:,} rows are positions in a sequence, "
                "as in a text model, so it has no 2-D layout of its own. A vision model's table "
                "is one: on the Data page, load it with **2-D grid** ticked (posviz offers it "
                "for ViT layouts such as 14 x 14 after the class token). To look at these rows "
                "as a grid anyway, turn this on and choose its height x width.",
                icon=":material/grid_off:",
            )
        use_grid = st.toggle(
            "Treat the rows as a 2-D patch grid (row-major)",
            value=table.grid is not None,
            key="similarity.grid",
            bind="query-params",
            persist_state="session",
            help="On by default when the loaded table is a grid (e.g. ViT's 14 x 14 after trimming "
            "the class token).",
        )
        height = None
        if use_grid:
            height = st.selectbox(
                "Grid (height x width)",
                heights,
                # A declared grid is shown at once; for a sequence none is made up.
                index=heights.index(table.grid[0]) if table.grid else None,
                placeholder="Choose height x width",
                format_func=lambda h: f"{h} x {n // h}",
                key="similarity.grid_height",
                bind="query-params",
                persist_state="session",
            )
        if height is not None:
            grid = (height, n // height)
            patches = cache.run(pipeline.grid_similarity, table, grid=grid, center=center)
            grid_settings = export.header(patches, table)
            if patches.subsampled:
                st.caption(
                    f"{len(patches.tile_rows)} x {len(patches.tile_cols)} tiles for evenly "
                    f"spaced patches (of {grid[0]} x {grid[1]}): at most "
                    f"{patches.params['max_tiles']} a side, and at most "
                    f"{patches.params['max_side']} cells a side."
                )
            cells = figures.similarity.grid_mosaic(patches)[0].size
            picture = as_picture(cells, key="similarity.grid_exact_cells")
            widgets.show_figure(
                cache.figure(figures.similarity.grid_tiles, patches, picture=picture),
                name="grid_tiles",
                settings=grid_settings,
            )
            if picture:
                st.caption(figures.similarity.PICTURE_NOTE)
            with widgets.expander_drawn_when_open(
                "Mean cosine vs patch offset along rows and columns",
                key="similarity.grid_profiles",
            ) as opened:
                if opened:
                    widgets.show_figure(
                        cache.figure(figures.similarity.grid_profiles, patches),
                        name="grid_profiles",
                        settings=grid_settings,
                    )
