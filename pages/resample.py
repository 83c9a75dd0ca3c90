"""Resample: stretch the table to a new length or a new 2-D grid, look at it, download it."""

import streamlit as st

from posviz import compare, export, figures, io, offsets, pipeline, resample
from posviz._params import defaults
from posviz.embedding import MAX_ELEMENTS, MIN_POSITIONS
from posviz.ui import cache, inputs, state, widgets
from posviz.ui.text import literal

#: Largest side of each patch mosaic: two side by side stay under ~2.5 MB of figure.
MOSAIC_SIDE = 400

st.title("Resample")
table = state.current()
widgets.table_caption(table)
n, d = table.shape
longest = MAX_ELEMENTS // d

if table.grid is not None:
    default = defaults(resample.resample_grid)
    height, width = table.grid
    st.markdown(
        f"A {height} x {width} patch grid"
        + (f" after {table.row_start} prefix rows, kept unchanged." if table.row_start else ".")
    )
    left, middle, right, last = st.columns(4)
    sides = resample.GRID_SIDES
    new_height = inputs.number("New grid height", sides, 2 * height, key="resample.h", where=left)
    new_width = inputs.number("New grid width", sides, 2 * width, key="resample.w", where=middle)
    method = right.selectbox(
        "Method",
        resample.GRID_METHODS,
        index=resample.GRID_METHODS.index(default["method"]),
        key="resample.grid_method",
        bind="query-params",
        persist_state="session",
    )
    antialias = last.checkbox(
        "Antialias",
        value=default["antialias"],
        key="resample.antialias",
        bind="query-params",
        persist_state="session",
        help="PyTorch's antialias=True (timm's resample_abs_pos_embed default): Pillow-style "
        "kernels (bicubic a = -0.5) stretched by the scale factor when shrinking. Off: the "
        "plain kernels (bicubic: Keys a = -0.75, half-pixel centres, border clamped). Both "
        "match torch.nn.functional.interpolate(align_corners=False) to float rounding.",
    )
    options = {"new_grid": (new_height, new_width), "method": method, "antialias": antialias}
    compute = pipeline.resample_grid
else:
    default = defaults(resample.resample_length)
    left, middle, right = st.columns(3)
    n_new = inputs.setting(
        resample.resample_length,
        "n_positions",
        "New length L'",
        low=MIN_POSITIONS,
        high=longest,
        default=2 * n,
        key="resample.n",
        where=left,
    )
    method = middle.selectbox(
        "Method",
        resample.LENGTH_METHODS,
        index=resample.LENGTH_METHODS.index(default["method"]),
        key="resample.method",
        bind="query-params",
        persist_state="session",
        help="linear: between neighbouring rows; cubic: scipy CubicSpline (not-a-knot) "
        "through all rows; tile: Longformer's copy of the table end to end.",
    )
    if method == "tile":
        positions = default["positions"]
        reserved = inputs.setting(
            resample.resample_length,
            "reserved",
            "Reserved rows",
            low=0,
            high=n - 2,
            key="resample.reserved",
            help="Leading rows copied once and not repeated (RoBERTa's offset of 2 when "
            "those rows were not trimmed on loading).",
            where=right,
        )
    else:
        reserved = default["reserved"]
        positions = right.radio(
            "Positions read",
            list(resample.POSITION_RULES),
            index=list(resample.POSITION_RULES).index(default["positions"]),
            format_func=resample.POSITION_RULES.get,
            key="resample.positions",
            bind="query-params",
            persist_state="session",
            help="New row p is the old table read at x. 'scaled' is Position Interpolation: "
            "the old spacing shrinks by L/L'.",
        )
    options = {
        "n_positions": n_new,
        "method": method,
        "positions": positions,
        "reserved": reserved,
    }
    compute = pipeline.resample_length


def _page() -> None:
    """The resampled table, its comparison with the original and its download."""
    try:
        result = cache.run(compute, table, **options)
    except ValueError as error:
        st.error(literal(error), icon=":material/error:")
        return

    center = widgets.center_toggle()
    # The resampling's params, the original's provenance, then the result's.
    settings = export.step_header(compute.__name__, options, table, result)
    st.success(f"Result: {result.shape[0]:,} x {result.shape[1]:,} · {literal(result.source)}")
    st.caption(resample.rounding_note(method, table.values.dtype))
    if note := table.labels.note("resample"):  # DeBERTa's buckets
        st.caption(note)

    buttons = st.columns(2)
    buttons[0].button(
        "Send to Compare",
        on_click=state.set_table,
        args=(result, state.SECOND),
        icon=":material/compare:",
        help="Make the result the Compare page's second table.",
    )
    buttons[1].button(
        "Make current table",
        on_click=state.set_table,
        args=(result,),
        icon=":material/check:",
        help="Analyse the result on every page (the original stays loadable from Data).",
    )

    st.header("Before and after", divider=True)
    # Only the open tab is built and sent to the browser.
    spectrum_tab, similarity_tab = widgets.page_tabs("resample")
    with spectrum_tab:
        if spectrum_tab.open:
            spectra = {
                "original": cache.run(pipeline.spectrum, table, center=center),
                "resampled": cache.run(pipeline.spectrum, result, center=center),
            }
            widgets.show_spectra(
                spectra,
                page="resample",
                settings={**settings, "spectrum": spectra["original"].params},
            )
    with similarity_tab:
        if similarity_tab.open:
            if table.grid is not None:
                mosaics = {
                    name: cache.run(
                        pipeline.grid_similarity,
                        t,
                        grid=t.grid,
                        center=center,
                        max_side=MOSAIC_SIDE,
                    )
                    for name, t in {"original": table, "resampled": result}.items()
                }
                widgets.show_figure(
                    cache.figure(figures.resample.mosaic_pair, mosaics),
                    name="resample_mosaics",
                    settings=settings,
                )
                if any(g.subsampled for g in mosaics.values()):
                    st.caption(
                        "Large grids show evenly spaced patches only: at most "
                        f"{MOSAIC_SIDE} cells a side."
                    )
            else:
                profiles = {
                    name: cache.run(
                        pipeline.offset_profile,
                        t,
                        center=center,
                        max_offset=offsets.largest_offset(t.shape[0], compare.OVERLAY_MAX_OFFSET),
                    )
                    for name, t in {"original": table, "resampled": result}.items()
                }
                widgets.show_figure(
                    cache.figure(figures.compare.offset_overlay, profiles),
                    name="resample_offsets",
                    # Each table's own largest offset, up to the cap: the export states the cap.
                    settings={**settings, "offset_profile": profiles["original"].params},
                )
                st.caption(
                    f"Offsets up to {compare.OVERLAY_MAX_OFFSET} in each table's own positions: a "
                    "table stretched by L'/L falls off L'/L times more slowly."
                )

    st.header("Download", divider=True)
    batch_axis = st.checkbox(
        "Leading batch axis (1, N, d)",
        value=table.grid is not None,
        key="resample.batch_axis",
        help="timm's pos_embed is stored as (1, N, d); GPT-2/BERT tables as (N, d).",
    )
    dtype, note = io.storage_dtype(result)
    dropped = table.n_source_rows > table.row_start + n
    prefix = result.row_start
    st.caption(
        f"Tensor {literal(result.name)}, "
        + (
            f"{prefix} prefix row{'s' * (prefix > 1)} re-attached in front"
            if prefix
            else "no prefix rows to re-attach"
        )
        + f", written as {dtype}"
        + (f" ({note})." if note else " (the stored dtype).")
        + (" Rows trimmed after the table on loading are not included." * dropped)
    )
    stem = f"{result.name}_{result.shape[0]}"
    writers = {".safetensors": io.to_safetensors, ".npy": io.to_npy}
    for column, (suffix, write) in zip(st.columns(2), writers.items(), strict=True):
        column.download_button(
            suffix,
            data=lambda write=write: write(result, batch_axis=batch_axis),
            file_name=f"{stem}{suffix}",
            mime="application/octet-stream",
            key=f"resample.download{suffix}",
            icon=":material/download:",
        )


# A function, not st.stop(): app.py draws the sidebar card after the page.
_page()
