"""Boundaries & probes: which positions are unusual, and how much position a table encodes.

Shares the flagged positions with the Similarity page through ``state.set_flags``.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

import streamlit as st

from posviz import boundary, export, figures, forms, io, pipeline, probes
from posviz._params import Bound, defaults
from posviz.embedding import MIN_POSITIONS, Embedding
from posviz.ui import cache, inputs, state, widgets


def offer_trim(table: Embedding) -> None:
    """Name leading rows that look reserved and offer a one-click trim."""
    found = io.reserved_rows(table)
    k = found.rows
    with st.expander("Reserved rows and trimming", expanded=bool(k), icon=":material/content_cut:"):
        if k:
            st.warning(f"Rows 0-{k - 1} look reserved: {'; '.join(found.reasons)}.")
        else:
            st.caption(
                "No leading row looks reserved (by tensor name and shape, or an all-zero "
                f"row among the first {io.ZERO_ROWS_SEARCHED}). Trim by hand if a row is "
                "known not to be a position."
            )
        if found.most < 1:
            st.caption(
                f"posviz analyses tables of at least {MIN_POSITIONS} positions: this one "
                "cannot be trimmed further."
            )
            return
        left, right = st.columns([1, 2], vertical_alignment="bottom")
        rows = inputs.number(
            "Leading rows to trim",
            Bound(1, found.most),
            max(k, 1),
            key="boundaries.trim",
            where=left,
            link=False,  # the button's input: a link names the trimmed table itself
        )
        if right.button(f"Trim the first {rows} rows for every page", key="boundaries.trim_go"):
            state.set_table(found.trim(table, int(rows)))
            st.rerun()


st.title("Boundaries & probes")
table = state.current()
widgets.table_caption(table)
offer_trim(table)

# --- boundaries -----------------------------------------------------------------------------
# The settings stay above the tabs (their flags are shared with the Similarity page whichever
# tab is open), in a popover: its inputs are drawn in the browser only once it is opened.
most = forms.boundary_limits(table.shape)
default = forms.boundary_defaults(table.shape)
button, stated, count = st.columns([1, 4, 1], vertical_alignment="center")


def shown(core: Callable[..., Any], name: str, label: str, **options: Any) -> Any:
    """`core`'s setting `name`, within what this table allows (`forms`)."""
    return inputs.setting(core, name, label, high=most.get(name), default=default[name], **options)


with button.popover("Settings", icon=":material/tune:", width="stretch"):
    window = shown(
        boundary.outliers, "hampel_window", "Window (± positions)", key="boundaries.window"
    )
    threshold = shown(
        boundary.outliers,
        "threshold",
        "Flag at |robust z| >",
        step=0.5,
        key="boundaries.threshold",
        help=boundary.DEFINITIONS["robust_z"],
    )
    n_directions_removed = shown(
        boundary.position_statistics,
        "n_directions_removed",
        "Residual after the top principal directions (0 = off)",
        key="boundaries.n_directions_removed",
        help=boundary.DEFINITIONS["residual_norm"],
    )
    edge = shown(
        boundary.boundary_summary, "boundary_size", "Boundary size k", key="boundaries.edge"
    )
    flags = cache.run(
        pipeline.outliers,
        table,
        n_directions_removed=n_directions_removed,
        hampel_window=window,
        threshold=threshold,
    )
    statistic = st.selectbox(
        "Change points on",
        flags.statistics,
        index=flags.statistics.index(default["statistic"]),
        format_func=export.column_label,
        key="boundaries.change_statistic",
        bind="query-params",
        persist_state="session",
        help="The curve searched for steps: changes over a row or two that its own wiggles "
        "(a drift, slow waves) do not explain. Rows flagged on any statistic are left out, so "
        "a single odd row neither makes a step nor hides one.",
    )
    max_changes = shown(
        boundary.change_points,
        "max_changes",
        "Change points at most",
        key="boundaries.max_changes",
    )
    min_size = shown(
        boundary.change_points,
        "min_size",
        "Positions between steps at least",
        key="boundaries.min_size",
    )
changes = cache.run(
    pipeline.change_points,
    table,
    n_directions_removed=n_directions_removed,
    hampel_window=window,
    threshold=threshold,
    statistic=statistic,
    max_changes=max_changes,
    min_size=min_size,
)
flagged = flags.positions.tolist()
state.set_flags(table, flagged, flags.rule)
stated.caption(
    f"Flagged: {flags.rule} on any of {', '.join(map(export.column_label, flags.statistics))}"
    + (f" (after the top {n_directions_removed} PCs)" if n_directions_removed else "")
    + f". Change points on {export.column_label(statistic)}: steps between lines fitted to "
    f"{changes.window} positions each side, against the curve's own autocorrelated wiggles, "
    f"at most {max_changes}. Near the boundaries: the first and last {edge} positions."
)
count.metric(
    "Flagged positions",
    len(flagged),
    help=f"Positions with {flags.rule} on at least one statistic. The Similarity page marks them.",
)


# --- probes ---------------------------------------------------------------------------------
def show_probes(table: Embedding) -> None:
    """The probes' settings, numbers, chart and exports.

    Their settings keep their values while another tab is open (persist_state="page"):
    Streamlit forgets the widgets a run does not draw.
    """
    columns = st.columns(5)
    probe = partial(inputs.setting, probes.probe_with_controls)
    seed = probe("seed", "Seed", key="probes.seed", where=columns[0])
    max_rows = probe(
        "max_rows", "Rows probed at most", step=256, key="probes.max_rows", where=columns[1]
    )
    n_pairs = probe(
        "n_pairs", "Training pairs per fold", step=100, key="probes.n_pairs", where=columns[2]
    )
    repeats = probe("repeats", "Repeated splits", key="probes.repeats", where=columns[3])
    protocol = columns[4].selectbox(
        "Absolute probe",
        list(probes.PROTOCOLS),
        index=list(probes.PROTOCOLS).index(defaults(probes.probe_with_controls)["protocol"]),
        key="probes.protocol",
        bind="query-params",
        persist_state="session",
        help=" ".join(f"{name}: {text}." for name, text in probes.PROTOCOLS.items()),
    )
    report = cache.run(
        pipeline.probe_with_controls,
        table,
        seed=seed,
        max_rows=max_rows,
        n_pairs=n_pairs,
        repeats=repeats,
        protocol=protocol,
    )
    # The exports say how the probes were run, the Gaussian control's reuse included.
    probe_settings = {**export.header(report, table), "notes": report.procedure_steps()}
    columns = st.columns(3)
    absolute = report.absolute["table"]
    columns[0].metric(
        "Absolute MAE (positions)",
        f"{absolute.mae:.2f} ± {absolute.mae_sd_folds:.2f}",
        help=probes.DEFINITIONS["mae"],
    )
    controls = probes.CONTROLS[1:]
    draws = report.n_control_draws

    def control_skill(name: str) -> str:
        mean, low, high = map(probes.skill_text, report.control_summary(name))
        return f"{name}: skill {mean} ({low} to {high})"

    columns[0].caption(
        f"chance {absolute.chance_mae:.2f} · skill {probes.skill_text(absolute.skill)} "
        f"± {absolute.skill_sd:.3f} "
        f"(± sd over folds) · "
        + " · ".join(control_skill(c) for c in controls)
        + f" (mean and central 95% over {draws} draws)"
    )
    columns[1].metric("Absolute R²", f"{absolute.r2:.3f}", help=probes.DEFINITIONS["r2"])
    columns[1].caption(
        " · ".join(f"{c}: {report.control_summary(c, 'r2')[0]:.3f}" for c in controls)
        + f" (means over {draws} draws)"
    )
    relative = report.relative["table"]
    columns[2].metric(
        "Relative error rate",
        f"{relative.error_rate:.3f} ± {relative.error_rate_sd:.3f}",
        help=probes.DEFINITIONS["error_rate"],
    )
    columns[2].caption(
        f"chance {probes.RELATIVE_CHANCE:g}"
        + "".join(f" · {c}: {report.relative[c].error_rate:.3f}" for c in controls)
        + " (one draw each; ± sd over folds)"
    )
    st.caption(
        "How they were run:\n"
        + "\n".join(f"{i}. {step}" for i, step in enumerate(report.procedure_steps(), 1))
    )
    if note := table.labels.note("probes"):  # DeBERTa's buckets
        st.caption(note)
    widgets.show_figure(
        cache.figure(figures.probes.probe_predictions, report),
        name="probe_predictions",
        settings=probe_settings,
    )
    widgets.show_numbers(
        report.to_frame(),
        name="probes",
        settings=probe_settings,
        blank=probes.BLANK_CELLS,
    )


positions, tables, probed = widgets.page_tabs("boundaries")
with positions:
    if positions.open:
        if flagged:
            labels = table.labels.text(flagged[:20])  # as the axes label them
            gap = "; " if table.labels.bucketed else ", "  # offsets are ranges: "278 … 280"
            shown = gap.join(labels) + (" …" if len(flagged) > 20 else "")
            st.markdown(f"**Flagged** ({flags.rule}): {shown}")
        shown = changes.describe(table.labels)
        if changes.z.size:
            shown += " (|z| " + ", ".join(f"{z:.1f}" for z in changes.z)
            shown += f" > {changes.critical:.2f})"
        if changes.null_z.size:  # the null beside it: the same test on shuffles of the curve
            shown += (
                f"; on {changes.null_z.size} shuffles of the curve: {changes.null_found} found one"
            )
        st.markdown(f"**Change points** on {export.column_label(statistic)}: {shown}")
        stats = cache.run(
            pipeline.position_statistics, table, n_directions_removed=n_directions_removed
        )
        widgets.show_figure(
            cache.figure(
                figures.boundary.position_statistics,
                stats,
                flags,
                changes,
                labels=table.labels,
            ),
            name="position_statistics",
            settings=export.header(changes, table),
        )
        if note := table.labels.note("boundary"):  # DeBERTa's buckets
            st.caption(note)
        stands = (
            f"bucket {table.first_position}, offsets {table.labels.label(0)}"
            if table.labels.bucketed
            else f"position {table.first_position}"
        )
        st.caption(
            "Positions are rows of the analysed table "
            f"(source row {table.row_start} is {stands}). Red circles: "
            "flagged on that "
            "panel's statistic (the cosine panel flags on the more similar neighbour). Dashed "
            f"lines: change points on {export.column_label(statistic)}. "
            + " ".join(
                f"**{name}**: {boundary.DEFINITIONS[name]}" for name in stats.flagging_curves()
            )
        )
        st.caption("The flags, change points and boundary summary as tables: the Tables tab.")
with tables:
    if tables.open:
        left, right = st.columns(2)
        with left:
            st.subheader("Flagged positions")
            if flagged:
                widgets.show_numbers(
                    flags.to_frame(),
                    name="flagged_positions",
                    settings=export.header(flags, table),
                )
            else:  # as the change points below: in words, not an empty table
                st.markdown(f"No position flagged ({flags.rule}).")
            st.subheader("Change points")
            st.caption(changes.procedure())
            if changes.positions.size:
                widgets.show_numbers(
                    changes.to_frame(),
                    name="change_points",
                    settings=export.header(changes, table),
                )
            else:  # "None found (…)."
                none = changes.describe()
                st.markdown(f"{none[:1].upper()}{none[1:]}.")
        with right:
            st.subheader("Near the boundaries")
            summary = cache.run(
                pipeline.boundary_summary,
                table,
                n_directions_removed=n_directions_removed,
                boundary_size=edge,
            )
            st.caption(summary.procedure())
            widgets.show_numbers(
                summary.to_frame(),
                name="boundary_summary",
                settings=export.header(summary, table),
            )
with probed:
    if probed.open:
        st.markdown(probes.ABOUT)
        st.caption(
            "The probes fit ridge and logistic read-outs of the table and both controls over "
            "every fold and repeated split: the slowest part of this page, so they run when "
            "this tab is opened."
        )
        show_probes(table)
