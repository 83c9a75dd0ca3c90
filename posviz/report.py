"""One standalone HTML page with every analysis of a table: the report a team shares.

The page embeds its numbers with what made them as JSON (``<script id="posviz-data"
type="application/json">``): the table's provenance and, per table of numbers, the pipeline
step and its params, which ``posviz rerun`` recomputes.
"""

from __future__ import annotations

import html
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from posviz import boundary, components, figures, forms, offsets, pipeline, probes
from posviz import collection as _collection
from posviz._params import defaults, split_params, step_of
from posviz.collection import Collection
from posviz.embedding import Embedding
from posviz.export import column_label, columns, labelled
from posviz.spectrum import DEFINITIONS, NO_VARIANCE

__all__ = [
    "REPORT_MAX_SIDE",
    "Section",
    "build_collection_report",
    "build_report",
    "report_sections",
]

#: Heatmap cells a side in the report: 512² float32 keeps the page near 2 MB per heatmap.
REPORT_MAX_SIDE = 512


@dataclass
class Section:
    """A report section: a heading, tables of numbers, figures, and a note on how to read them.

    `analyses` holds, per table of numbers, the result it was read from (which records its
    step and params); a table without one (DeBERTa's rows and their offsets) is no analysis'.
    """

    title: str
    note: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[go.Figure] = field(default_factory=list)
    analyses: dict[str, Any] = field(default_factory=dict)


#: Told before each section: ``progress(section title, sections done, sections in all)``.
Progress = Callable[[str, int, int], None]


def memo() -> pipeline.Run:
    """A runner that computes each (step, table, params) once: a report asks for the same
    principal components three times and the per-position statistics four times."""
    results: dict[bytes, object] = {}

    def run(step: Callable[..., object], /, *tables: Embedding, **params: object) -> object:
        key = pickle.dumps((step.__name__, [t.sha256 for t in tables], sorted(params.items())))
        if key not in results:
            results[key] = step(*tables, run=run, **params)
        return results[key]

    return run


def report_sections(
    table: Embedding,
    *,
    center: bool | None = None,
    n_components: int | None = None,
    seed: int | None = None,
    run: pipeline.Run | None = None,
    progress: Progress | None = None,
) -> list[Section]:
    """Compute every analysis of `table` with the core's defaults and the given options.

    Each section runs the pipeline's steps (posviz.pipeline): the same chain and defaults the
    pages run, so the same settings give the page's numbers. An option left None is the core
    function's default.

    Parameters
    ----------
    table : Embedding
    center : bool, optional
        Mean-centre rows (spectrum, similarity, components). Stated in every title.
    n_components : int, optional
        Principal components to show and fit.
    seed : int, optional
        Seed of the shuffled controls and the probes.
    run : callable, optional
        How a step is run: the app passes its cached runner, so what a page computed is not
        computed again; by default each result is computed once for this report (:func:`memo`).
    progress : callable, optional
        Called before each section (the app's progress bar, the CLI's status line).
    """
    centring = {} if center is None else {"center": center}
    seeded = {} if seed is None else {"seed": seed}
    run = run or memo()
    sections: list[tuple[str, Callable[[], Section]]] = [
        ("Spectrum", lambda: spectrum_section(table, run=run, **centring)),
        ("Similarity", lambda: similarity_section(table, run=run, **centring)),
        (
            "Components",
            lambda: components_section(
                table, n_components=n_components, run=run, **centring, **seeded
            ),
        ),
        ("Boundaries", lambda: boundaries_section(table, run=run)),
        ("Probes", lambda: probes_section(table, run=run, **seeded)),
    ]
    done = []
    for title, make in sections:
        if progress:
            progress(title, len(done), len(sections))
        done.append(make())
    return done


def spectrum_section(
    table: Embedding, *, run: pipeline.Run = pipeline.call, **params: Any
) -> Section:
    s = run(pipeline.spectrum, table, **params)
    return Section(
        "Spectrum",
        "How low-rank the table is. "
        + " ".join(f"{key}: {text}" for key, text in DEFINITIONS.items())
        + ("" if s.has_variance else f" {NO_VARIANCE}"),
        {"Metrics": s.metrics_table(), "Singular values": s.to_frame()},
        [figures.spectrum.singular_values(s), figures.spectrum.explained_variance(s)],
        {"Metrics": s, "Singular values": s},
    )


def similarity_section(
    table: Embedding, *, run: pipeline.Run = pipeline.call, **params: Any
) -> Section:
    overview = run(pipeline.similarity_map, table, max_side=REPORT_MAX_SIDE, **params)
    profile = run(pipeline.offset_profile, table, **params)
    scores = run(pipeline.offset_scores, table, **params)
    return Section(
        "Similarity",
        "Cosine similarity between positions, and its mean and spread over all pairs at "
        "each offset. "
        + " ".join(f"{key}: {value}" for key, value in offsets.DEFINITIONS.items())
        + f" Offsets 0..{profile.max_offset}; monotonicity over offsets 1..{scores.window}."
        + _note(table, "offset_profile"),
        {"Scores": scores.to_frame()},
        [
            figures.similarity.similarity_heatmap(overview, labels=table.labels),
            figures.offsets.offset_profile(profile, scores),
        ],
        {"Scores": scores},
    )


def _split_pc(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the settings of `params` principal_components takes, the rest)."""
    return split_params(params, components.principal_components)


def components_section(
    table: Embedding,
    *,
    n_components: int | None = None,
    run: pipeline.Run = pipeline.call,
    **params: Any,
) -> Section:
    # At most the components the table has: the Components page caps its default alike.
    pc_params = {**defaults(components.principal_components), **_split_pc(params)[0]}
    top = components.max_components(table.shape, center=pc_params["center"])
    pc_params["n_components"] = min(n_components or pc_params["n_components"], top)
    pcs = run(pipeline.principal_components, table, **pc_params)
    fits = run(pipeline.fit_sinusoids, table, **pc_params)
    likeness = run(pipeline.sinusoid_likeness, table, **pc_params, **_split_pc(params)[1])
    return Section(
        "Components",
        "Principal components over position and a sinusoid fitted to each. "
        f"{components.DEFINITIONS['r2']} Likeness to sinusoids: "
        f"{components.DEFINITIONS['likeness']} Against {len(likeness.shuffled)} row shuffles "
        f"(seed {likeness.params['seed']}) for the chance level, m = {likeness.n_frequencies}."
        + _note(table, "fit_sinusoids"),
        {"Sinusoid fits": fits.to_frame(), "Likeness to sinusoids": likeness.to_frame()},
        [
            figures.components.pc_trajectories(pcs, overlaid=False, labels=table.labels),
            figures.components.sinusoid_fits(pcs, fits, labels=table.labels),
        ],
        {"Sinusoid fits": fits, "Likeness to sinusoids": likeness},
    )


def boundaries_section(table: Embedding, *, run: pipeline.Run = pipeline.call) -> Section:
    fitted = forms.boundary_defaults(table.shape)  # the signatures' defaults, fitted to the length
    stats_params = {"n_directions_removed": fitted["n_directions_removed"]}
    flag_params = {
        **stats_params,
        "hampel_window": fitted["hampel_window"],
        "threshold": fitted["threshold"],
    }
    change_params = {
        **flag_params,
        **{name: fitted[name] for name in ("statistic", "max_changes", "min_size")},
    }
    stats = run(pipeline.position_statistics, table, **stats_params)
    flags = run(pipeline.outliers, table, **flag_params)
    changes = run(pipeline.change_points, table, **change_params)
    summary = run(
        pipeline.boundary_summary, table, **stats_params, boundary_size=fitted["boundary_size"]
    )
    return Section(
        "Boundaries",
        " ".join(
            [
                f"Per-position statistics, flagged where {flags.rule}.",
                *(f"{name}: {boundary.DEFINITIONS[name]}" for name in flags.statistics),
                boundary.DEFINITIONS["robust_z"],
                f"Change points: {changes.procedure()}",
                f"Boundary summary: {summary.procedure()}",
                _note(table, "boundary"),
            ]
        ),
        {  # positions labelled as the table's (a relative table's start below 0)
            "Flagged positions": labelled(flags.to_frame(), {"provenance": table.provenance()}),
            "Change points": labelled(changes.to_frame(), {"provenance": table.provenance()}),
            "Boundary summary": summary.to_frame(),
        },
        [figures.boundary.position_statistics(stats, flags, changes, labels=table.labels)],
        {"Flagged positions": flags, "Change points": changes, "Boundary summary": summary},
    )


def _note(table: Embedding, analysis: str) -> str:
    """What `analysis` does with a table whose rows are buckets (DeBERTa's), after a space."""
    note = table.labels.note(analysis)
    return f" {note}" if note else ""


def rows_section(table: Embedding) -> Section:
    """DeBERTa's relative table: the offsets q − k each row (bucket) covers, as every figure
    and table of the report names its rows."""
    offsets = table.row_offsets
    frame = labelled(
        pd.DataFrame({"position": range(table.shape[0])}), {"provenance": table.provenance()}
    )
    return Section(
        "Rows",
        f"Each row is a bucket of relative offsets q − k ({offsets.describe()}), as "
        f"config.json's position_buckets {offsets.position_buckets} and max_relative_positions "
        f"{offsets.max_relative_positions} make it (transformers' make_log_bucket_position, "
        "then clamp(bucket + span, 0, 2 · span − 1)). Figures over position draw each row at "
        "the centre of its offsets; maps keep one cell per bucket, labelled by its offsets. "
        f"{table.row_offsets.rule()['as_positions']}",
        {"Offsets of each row": frame.rename(columns={"position": "bucket"})},
    )


def probes_section(
    table: Embedding, *, run: pipeline.Run = pipeline.call, **params: Any
) -> Section:
    probe = run(pipeline.probe_with_controls, table, **params)
    return Section(
        "Probes",
        " ".join([probes.ABOUT, probe.procedure(), *probes.DEFINITIONS.values()])
        + _note(table, "probes"),
        {"Probe results": probe.to_frame()},
        [figures.probes.probe_predictions(probe)],
        {"Probe results": probe},
    )


def build_report(table: Embedding, *, progress: Progress | None = None, **options: Any) -> str:
    """A standalone HTML report of `table`: opens offline (plotly.js inlined once).

    The table's provenance and each analysis' params are listed at the top, and embedded with
    every table of numbers as JSON (``<script id="posviz-data" type="application/json">``,
    which ``posviz rerun`` reads). `options` (``center``, ``n_components``, ``seed``, ``run``)
    are :func:`report_sections`' (the one signature that holds them); `progress` as there,
    writing the page is one step more.
    """
    told = progress and (lambda step, done, total: progress(step, done, total + 1))
    sections = report_sections(table, progress=told, **options)
    if table.row_offsets is not None:  # DeBERTa's buckets: what each row stands for, first
        sections.insert(0, rows_section(table))
    if progress:
        progress("writing the page", len(sections), len(sections) + 1)
    title = f"posviz report: {table.name} ({table.shape[0]} x {table.shape[1]})"
    data = {
        "provenance": table.provenance(),
        "analyses": [
            {**_analysis(section.analyses[caption]), "caption": caption, "columns": columns(frame)}
            for section in sections
            for caption, frame in section.tables.items()
            if caption in section.analyses  # a table of numbers an analysis made
        ],
    }
    if table.row_offsets is not None:  # as `posviz summary --json` carries them
        data["row_offsets"] = table.row_offsets.record()
    listing = {**data["provenance"]}
    for entry in data["analyses"]:
        listing[entry["caption"]] = f"{entry['analysis']} {json.dumps(entry['params'])}"
    return _page(title, listing, sections, data)


def _analysis(result: Any) -> dict[str, Any]:
    """The step and params of `result`, as every export's header has them (the report names
    its table once, at the top)."""
    return {"analysis": step_of(result), "params": dict(result.params)}


def build_collection_report(c: Collection) -> str:
    """A standalone HTML report of a collection: its metrics table and every chart."""
    figs = [
        *([figures.collection.metrics_over_step] if c.ordered else []),
        figures.collection.collection_cumulative,
        figures.collection.collection_offsets,
        figures.collection.similarity_grid,
        figures.collection.cka_map,
    ]
    refused = [f"{m.label}: {m.error}" for m in c.members if m.error]
    frame = c.to_frame(refused=False)  # refusals: in the note
    section = Section(
        "Collection",
        c.describe()
        + (f"; refused: {'; '.join(refused)}" if refused else "")
        + ". "
        + " ".join(f"{k}: {v}" for k, v in _collection.DEFINITIONS.items()),
        {"Metrics": frame},
        [f(c) for f in figs],
    )
    settings = {**c.procedure(), "center": c.center}
    settings["tables"] = "; ".join(
        f"{m.label} = {m.table.name} {m.table.source} sha256 {m.table.sha256}" for m in c.loaded
    )
    data = {**c.header(), "columns": columns(frame)}
    title = f"posviz collection report: {len(c.loaded)} tables"
    return _page(title, settings, [section], data)


def _page(
    title: str, settings: dict[str, object], sections: list[Section], data: dict[str, Any]
) -> str:
    """The report's HTML: settings listed at the top, then each section; `data` embedded."""
    body = []
    first = True
    for section in sections:
        body.append(f"<section><h2>{html.escape(section.title)}</h2>")
        body.append(f"<p class='note'>{html.escape(section.note)}</p>")
        for caption, frame in section.tables.items():
            body.append(f"<h3>{html.escape(caption)}</h3>")
            body.append(_table_html(frame))
        for fig in section.figures:
            body.append(
                fig.to_html(full_html=False, include_plotlyjs=first, config={"responsive": True})
            )
            first = False
        body.append("</section>")
    listing = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in settings.items()
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.8em; }}
th, td {{ padding: 0.2em 0.45em; border-bottom: 1px solid #ddd; text-align: left; }}
th {{ vertical-align: bottom; }}
.numbers {{ max-width: 100%; overflow-x: auto; }}
.note {{ color: #555; }} section {{ margin-top: 2.5em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Made by posviz {html.escape(str(settings["posviz_version"]))} on {stamp}.</p>
<table class="settings">{listing}</table>
<script id="posviz-data" type="application/json">{_script_json(data)}</script>
{"".join(body)}
</body></html>
"""


def _table_html(frame: pd.DataFrame) -> str:
    """A table of numbers that fits the page: "none" when it has no rows, headers that wrap
    (labels, not keys), and a text column that repeats one value (a setting, such as the
    probes' model) stated once beneath it instead of in every row."""
    if frame.empty:
        return "<p class='none'>none</p>"
    repeated = [
        name
        for name in frame.columns
        if len(frame) > 1
        and not pd.api.types.is_numeric_dtype(frame[name])
        and frame[name].nunique() == 1
    ]
    shown = frame.drop(columns=repeated).rename(columns=column_label)
    table = shown.to_html(index=False, float_format=lambda v: f"{v:.6g}", border=0)
    stated = "; ".join(f"{column_label(name)}: {frame[name].iloc[0]}" for name in repeated)
    note = f"<p class='note'>In every row, {html.escape(stated)}.</p>" if repeated else ""
    return f"<div class='numbers'>{table}</div>{note}"


def _script_json(value: object) -> str:
    r"""JSON safe inside <script>: with <, > and & as \u escapes, no tensor name ("</script>",
    "<!--") can end the block or turn the rest of the page into a comment.

    Examples
    --------
    >>> print(_script_json({"tensor": "<!--<script>&"}))
    {"tensor": "\u003c!--\u003cscript\u003e\u0026"}
    """
    text = json.dumps(value, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
