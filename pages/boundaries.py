"""Boundaries & probes: which positions are unusual, and how much position a table encodes.

Shares the flagged positions with the Similarity page through ``state.set_flags``.
"""

import numpy as np
import pandas as pd
import streamlit as st

from posviz import export, figures, io, probes
from posviz.boundary import STATISTICS, zero_leading_rows
from posviz.embedding import MIN_POSITIONS, Embedding
from posviz.ui import cache, state, widgets

PROBE_HELP = {
    "mae": "Absolute probe: mean |round(predicted) − p| of a linear regression from row to "
    "position p, predicted out of fold, mean ± sd over the folds of the repeated splits. "
    "Chance: the same for the constant predictor (the training fold's mean position, ≈ n/4 "
    "for evenly spread positions). Skill = 1 − MAE / chance MAE: 1 perfect, 0 no better "
    "than chance.",
    "r2": "Absolute probe: R² of the unrounded out-of-fold predictions (1 = perfect, 0 = as "
    "good as predicting the mean, < 0 worse), mean over the repeated splits.",
    "error_rate": "Relative probe: share of held-out pairs (i, j) misclassified by a logistic "
    "regression on [e_i ; e_j] predicting j > i, mean ± sd over the folds. Pairs are drawn "
    "within folds of positions, so no test pair contains a row seen in training. Chance 0.5.",
}


def trim_leading(table: Embedding, k: int, grid: tuple[int, int] | None) -> Embedding:
    """The same source with `k` more leading rows trimmed; the provenance says so."""
    return Embedding.from_array(
        np.concatenate([table.prefix, table.values]),
        name=table.name,
        source=table.source,
        dtype=table.dtype,
        row_start=table.row_start + k,
        grid=grid,
    )


def reserved_rows(table: Embedding) -> None:
    """Name leading rows that look reserved and offer a one-click trim."""
    by_name = io.Trim(0, None, "")
    if table.row_start == 0:
        by_name = io.suggest_trim(table.name, (table.n_source_rows, table.shape[1]))
    zero = zero_leading_rows(table.values)
    reasons = [by_name.reason] if by_name.row_start else []
    if zero:
        reasons.append(f"row {zero - 1} is all zeros (an untrained padding row)")
    k = max(by_name.row_start, zero)
    with st.expander("Reserved rows and trimming", expanded=bool(k), icon=":material/content_cut:"):
        if k:
            st.warning(f"Rows 0-{k - 1} look reserved: {'; '.join(reasons)}.")
        else:
            st.caption(
                "No leading row looks reserved (by tensor name and shape, or an all-zero "
                "row among the first 4). Trim by hand if a row is known not to be a position."
            )
        most = table.shape[0] - MIN_POSITIONS
        if most < 1:
            st.caption(
                f"posviz analyses tables of at least {MIN_POSITIONS} positions: this one "
                "cannot be trimmed further."
            )
            return
        left, right = st.columns([1, 2], vertical_alignment="bottom")
        rows = left.number_input(
            "Leading rows to trim", 1, most, min(max(k, 1), most), key="boundaries.trim"
        )
        if right.button(f"Trim the first {rows} rows for every page", key="boundaries.trim_go"):
            grid = by_name.grid if rows == by_name.row_start else None
            state.set_table(trim_leading(table, int(rows), grid))
            st.rerun()


st.title("Boundaries & probes")
table = state.current()
widgets.table_caption(table)
n, d = table.shape
reserved_rows(table)

# --- boundaries -----------------------------------------------------------------------------
st.header("Boundaries")
columns = st.columns(4)
window = columns[0].number_input(
    "Window (± positions)",
    1,
    max(1, n // 2),
    min(16, max(1, n // 2)),
    key="boundaries.window",
    bind="query-params",
    help="Each position is compared with the median of the 2w + 1 positions around it "
    "(shifted inward at the ends).",
)
threshold = columns[1].number_input(
    "Flag at |robust z| >",
    1.0,
    1e6,
    8.0,
    step=0.5,
    key="boundaries.threshold",
    bind="query-params",
    help="Robust z = (x − window median) / (1.4826 · MAD of the window): the Hampel "
    "identifier. 1.4826 · MAD estimates the standard deviation of normal data.",
)
top_k = columns[2].number_input(
    "Residual after top-k PCs (0 = off)",
    0,
    min(n, d) - 1,
    0,
    key="boundaries.top_k",
    help=STATISTICS["residual_norm"],
)
edge = columns[3].number_input(
    "Boundary size k",
    1,
    max(1, (n - 1) // 2),
    min(8, max(1, (n - 1) // 2)),
    key="boundaries.edge",
    help="The summary compares the first k and last k positions with the middle.",
)
flags = cache.outliers(table, top_k=top_k, window=window, threshold=threshold)
columns = st.columns(4)
statistic = columns[0].selectbox(
    "Change points on",
    flags.statistics,
    key="boundaries.change_statistic",
    help="The curve searched for level shifts; its flagged values are replaced by their "
    "window median first, so single odd rows do not count as shifts.",
)
max_changes = columns[1].number_input(
    "Change points at most", 0, 20, 3, key="boundaries.max_changes"
)
min_size = columns[2].number_input(
    "Shortest segment (positions)",
    1,
    max(1, n // 2),
    min(16, max(1, n // 2)),
    key="boundaries.min_size",
)
changes = cache.change_points(
    table,
    top_k=top_k,
    window=window,
    threshold=threshold,
    statistic=statistic,
    max_changes=max_changes,
    min_size=min_size,
)
rule = f"|robust z| > {threshold:g} in a window of ±{window} positions"
state.set_flags(table, flags.positions.tolist(), rule)
settings = export.export_settings(
    table,
    window=window,
    threshold=threshold,
    top_k=top_k,
    boundary_k=edge,
    change_statistic=statistic,
    max_changes=max_changes,
    min_segment=min_size,
)
flagged = flags.positions.tolist()
columns[3].metric(
    "Flagged positions",
    len(flagged),
    help=f"Positions with {rule} on at least one statistic. The Similarity page marks them.",
)
if flagged:
    shown = ", ".join(map(str, flagged[:20])) + (" …" if len(flagged) > 20 else "")
    st.markdown(f"**Flagged** ({rule}): {shown}")
st.markdown(
    f"**Change points** on {statistic}: "
    + (", ".join(map(str, changes.positions.tolist())) or "none")
)
stats = cache.position_statistics(table, top_k=top_k)
widgets.show_figure(
    cache.figure(figures.boundary.position_statistics, stats, flags, changes),
    name="position_statistics",
    settings=settings,
)
st.caption(
    "Positions are 0-based rows of the analysed table "
    f"(source row {table.row_start} is position 0). Red circles: flagged on that panel's "
    "statistic (the cosine panel flags on the more similar neighbour). Dashed lines: change "
    f"points on {statistic}. "
    + " ".join(f"**{name}**: {STATISTICS[name]}" for name in stats.flagging_curves())
)

left, right = st.columns(2)
with left:
    st.subheader("Flagged positions")
    widgets.show_numbers(flags.table(), name="flagged_positions", settings=settings)
    st.subheader("Change points")
    st.caption(
        f"Binary segmentation for changes in mean on {statistic}: each step makes the split "
        "that most reduces squared deviations, until the cap or until the reduction is below "
        f"2σ² log n (BIC; σ = {changes.sigma:.3g} from first differences)."
    )
    widgets.show_numbers(
        pd.DataFrame(
            {
                "position": changes.positions,
                "shift": changes.shifts,
                "share_of_variance": changes.gains,
            }
        ),
        name="change_points",
        settings=settings,
    )
with right:
    st.subheader("Near the boundaries")
    summary = cache.boundary_summary(table, top_k=top_k, k=edge)
    st.caption(f"Mean over the first {edge}, the middle, and the last {edge} positions.")
    widgets.show_numbers(
        pd.DataFrame(
            {
                "statistic": summary.statistics,
                f"first_{edge}": summary.first,
                "middle": summary.middle,
                f"last_{edge}": summary.last,
            }
        ),
        name="boundary_summary",
        settings=settings,
    )


# --- probes ---------------------------------------------------------------------------------
def show_probes(table: Embedding) -> None:
    """The probes' settings, numbers, chart and exports."""
    n = table.shape[0]
    columns = st.columns(5)
    seed = columns[0].number_input("Seed", 0, 2**31 - 1, 0, key="probes.seed", bind="query-params")
    max_rows = columns[1].number_input(
        "Rows probed at most",
        10,
        65536,
        2048,
        step=256,
        key="probes.max_rows",
        help="Longer tables are probed on a seeded random subsample of rows (stated below).",
    )
    n_pairs = columns[2].number_input(
        "Training pairs per fold", 100, 20000, 2000, step=100, key="probes.n_pairs"
    )
    repeats = columns[3].number_input(
        "Repeated splits",
        2,
        10,
        2,
        key="probes.repeats",
        help="The absolute probe's folds are drawn this many times (seeds seed, seed + 1, ...); "
        "± is the sd over all their folds. Each split costs one eigendecomposition per fold.",
    )
    protocol = columns[4].selectbox(
        "Absolute probe",
        list(probes.PROTOCOLS),
        key="probes.protocol",
        help="nested ridge: "
        + probes.PROTOCOLS["nested ridge"]
        + ". linear: "
        + probes.PROTOCOLS["linear"]
        + ".",
    )
    report = cache.probe_with_controls(
        table, seed=seed, max_rows=max_rows, n_pairs=n_pairs, repeats=repeats, protocol=protocol
    )
    probe_settings = export.export_settings(table, **report.settings())
    columns = st.columns(3)
    absolute = report.absolute["table"]
    columns[0].metric(
        "Absolute MAE (positions)",
        f"{absolute.mae:.2f} ± {absolute.mae_sd_folds:.2f}",
        help=PROBE_HELP["mae"],
    )
    controls = [name for name in report.absolute if name != "table"]
    columns[0].caption(
        f"chance {absolute.chance_mae:.2f} · skill {absolute.skill:.3f} ± {absolute.skill_sd:.3f}"
        + "".join(f" · {c}: skill {report.absolute[c].skill:.3f}" for c in controls)
    )
    columns[1].metric("Absolute R²", f"{absolute.r2:.3f}", help=PROBE_HELP["r2"])
    columns[1].caption(" · ".join(f"{c}: {report.absolute[c].r2:.3f}" for c in controls))
    relative = report.relative["table"]
    columns[2].metric(
        "Relative error rate",
        f"{relative.error_rate:.3f} ± {relative.error_rate_sd:.3f}",
        help=PROBE_HELP["error_rate"],
    )
    columns[2].caption(
        "chance 0.5" + "".join(f" · {c}: {report.relative[c].error_rate:.3f}" for c in controls)
    )
    probed = (
        f"a seeded random subsample of {report.n_rows:,} of {n:,} rows"
        if report.subsampled
        else f"all {n:,} rows"
    )
    st.caption(
        f"Seed {seed}; {report.folds}-fold cross-validation on {probed}, repeated over "
        f"{report.repeats} seeded splits (± is the sd over their {report.folds * report.repeats} "
        f"folds; the sd of the splits' means is in the table). **Absolute probe** "
        f"({protocol}): {probes.PROTOCOLS[protocol]}. **Relative probe**: "
        f"{probes.RELATIVE_PROTOCOL}; {n_pairs:,} training pairs per fold. The controls get "
        "the same procedure, their penalties chosen in their own folds."
    )
    widgets.show_figure(
        cache.figure(figures.probes.probe_predictions, report),
        name="probe_predictions",
        settings=probe_settings,
    )
    widgets.show_numbers(report.table(), name="probes", settings=probe_settings)


st.header("Probes")
st.markdown(
    "How much absolute and relative position a linear read-out recovers (Wang & Chen, "
    "EMNLP 2020), beside the same probe on two tables without position information: the rows "
    "shuffled to random positions, and i.i.d. Gaussian rows of the same shape and overall "
    "standard deviation."
)
st.caption(
    "The probes fit ridge and logistic read-outs of the table and both controls over "
    "every fold and repeated split: the slowest part of this page, so they run when opened."
)
with widgets.expander_drawn_when_open(
    "Probes: absolute and relative position", key="probes.open", icon=":material/model_training:"
) as opened:
    if opened:
        show_probes(table)
