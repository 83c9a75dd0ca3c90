"""One standalone HTML page with every analysis of a table: the report a team shares."""

from __future__ import annotations

import html
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd
import plotly.graph_objects as go

from posviz import boundary, components, figures, pipeline, probes
from posviz.collection import METRIC_DEFINITIONS, Collection
from posviz.embedding import Embedding
from posviz.export import column_label, export_settings
from posviz.similarity import SCORE_DEFINITIONS
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
    """A report section: a heading, tables of numbers, figures, and a note on how to read them."""

    title: str
    note: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[go.Figure] = field(default_factory=list)


#: Told before each section: ``progress(section title, sections done, sections in all)``.
Progress = Callable[[str, int, int], None]


def memo() -> pipeline.Run:
    """A runner that computes each (step, table, settings) once: a report asks for the same
    principal components three times and the per-position statistics four times."""
    results: dict[bytes, object] = {}

    def run(step: Callable[..., object], /, *tables: Embedding, **settings: object) -> object:
        key = pickle.dumps((step.__name__, [t.sha256 for t in tables], sorted(settings.items())))
        if key not in results:
            results[key] = step(*tables, run=run, **settings)
        return results[key]

    return run


def report_sections(
    table: Embedding,
    *,
    center: bool = True,
    k: int = components.K,
    seed: int = 0,
    run: pipeline.Run | None = None,
    progress: Progress | None = None,
) -> list[Section]:
    """Compute every analysis of `table` with the app's defaults and the given options.

    Each section runs the pipeline's steps (posviz.pipeline): the same chain and defaults the
    pages run, so the same settings give the page's numbers.

    Parameters
    ----------
    table : Embedding
    center : bool
        Mean-centre rows (spectrum, similarity, components). Stated in every title.
    k : int
        Principal components to show and fit.
    seed : int
        Seed of the shuffled controls and the probes.
    run : callable, optional
        How a step is run: the app passes its cached runner, so what a page computed is not
        computed again; by default each result is computed once for this report (:func:`memo`).
    progress : callable, optional
        Called before each section (the app's progress bar, the CLI's status line).
    """
    run = run or memo()
    sections: list[tuple[str, Callable[[], Section]]] = [
        ("Spectrum", lambda: spectrum_section(table, center=center, run=run)),
        ("Similarity", lambda: similarity_section(table, center=center, run=run)),
        ("Components", lambda: components_section(table, center=center, k=k, seed=seed, run=run)),
        ("Boundaries", lambda: boundaries_section(table, run=run)),
        ("Probes", lambda: probes_section(table, seed=seed, run=run)),
    ]
    done = []
    for title, make in sections:
        if progress:
            progress(title, len(done), len(sections))
        done.append(make())
    return done


def spectrum_section(table: Embedding, *, center: bool, run: pipeline.Run) -> Section:
    s = run(pipeline.spectrum, table, center=center)
    return Section(
        "Spectrum",
        "How low-rank the table is. "
        + " ".join(f"{key}: {text}" for key, text in DEFINITIONS.items())
        + ("" if s.has_variance else f" {NO_VARIANCE}"),
        {"Metrics": s.metrics_table(), "Singular values": s.table()},
        [figures.spectrum.singular_values(s), figures.spectrum.explained_variance(s)],
    )


def similarity_section(table: Embedding, *, center: bool, run: pipeline.Run) -> Section:
    overview = run(pipeline.similarity_map, table, center=center, max_side=REPORT_MAX_SIDE)
    profile = run(pipeline.offset_profile, table, center=center)
    scores = run(pipeline.offset_scores, table, center=center)
    return Section(
        "Similarity",
        "Cosine similarity between positions, and its mean and spread over all pairs at "
        "each offset. "
        + " ".join(f"{key}: {value}" for key, value in SCORE_DEFINITIONS.items())
        + " "
        + " ".join(f"{key}: {value}." for key, value in scores.settings().items()),
        {"Scores": scores.table()},
        [
            figures.similarity.similarity_heatmap(overview),
            figures.similarity.offset_profile(profile, scores),
        ],
    )


def components_section(
    table: Embedding, *, center: bool, k: int, seed: int, run: pipeline.Run
) -> Section:
    k = min(k, components.max_components(table.shape, center=center))
    pcs = run(pipeline.principal_components, table, k=k, center=center)
    fits = run(pipeline.fit_sinusoids, table, k=k, center=center)
    likeness = run(pipeline.sinusoid_likeness, table, k=k, center=center, seed=seed)
    return Section(
        "Components",
        "Principal components over position and a sinusoid fitted to each. "
        f"{components.R2_DEFINITION} Likeness to sinusoids: {components.LIKENESS_DEFINITION} "
        f"Against {len(likeness.shuffled)} row shuffles (seed {likeness.seed}) for the chance "
        f"level, m = {likeness.n_frequencies}.",
        {"Sinusoid fits": fits.table(), "Likeness to sinusoids": likeness.table()},
        [
            figures.components.pc_trajectories(pcs, overlaid=False),
            figures.components.sinusoid_fits(pcs, fits),
        ],
    )


def boundaries_section(table: Embedding, *, run: pipeline.Run) -> Section:
    settings = boundary.defaults(table.shape)
    stats = run(pipeline.position_statistics, table, top_k=settings["top_k"])
    flags = run(
        pipeline.outliers,
        table,
        top_k=settings["top_k"],
        window=settings["window"],
        threshold=settings["threshold"],
    )
    changes = run(
        pipeline.change_points,
        table,
        top_k=settings["top_k"],
        window=settings["window"],
        threshold=settings["threshold"],
        statistic=settings["statistic"],
        max_changes=settings["max_changes"],
        min_size=settings["min_size"],
    )
    summary = run(pipeline.boundary_summary, table, top_k=settings["top_k"], k=settings["k"])
    return Section(
        "Boundaries",
        " ".join(
            [
                f"Per-position statistics, flagged where {flags.rule}.",
                *(f"{name}: {boundary.STATISTICS[name]}" for name in flags.statistics),
                boundary.ROBUST_Z,
                f"Change points: {changes.procedure()}",
                f"Boundary summary: {summary.procedure()}",
            ]
        ),
        {
            "Flagged positions": flags.table(),
            "Change points": changes.table(),
            "Boundary summary": summary.table(),
        },
        [figures.boundary.position_statistics(stats, flags, changes)],
    )


def probes_section(table: Embedding, *, seed: int, run: pipeline.Run) -> Section:
    probe = run(pipeline.probe_with_controls, table, seed=seed)
    return Section(
        "Probes",
        " ".join([probes.ABOUT, probe.procedure(), *probes.METRIC_DEFINITIONS.values()]),
        {"Probe results": probe.table()},
        [figures.probes.probe_predictions(probe)],
    )


def build_report(
    table: Embedding,
    *,
    center: bool = True,
    k: int = components.K,
    seed: int = 0,
    run: pipeline.Run | None = None,
    progress: Progress | None = None,
) -> str:
    """A standalone HTML report of `table`: opens offline (plotly.js inlined once).

    Every setting that changed a number is listed at the top and in a JSON block
    (``<script id="posviz-settings" type="application/json">``). `run` and `progress` as for
    :func:`report_sections`; the page itself is the last step.
    """
    settings = export_settings(table, centered=center, k=k, seed=seed)
    title = f"posviz report: {table.name} ({table.shape[0]} x {table.shape[1]})"
    # One step more than the sections: writing the page (plotly's JSON of every figure).
    told = progress and (lambda step, done, total: progress(step, done, total + 1))
    sections = report_sections(table, center=center, k=k, seed=seed, run=run, progress=told)
    if progress:
        progress("writing the page", len(sections), len(sections) + 1)
    return _page(title, settings, sections)


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
    frame = c.table(refused=False)  # refusals: in the note
    section = Section(
        "Collection",
        c.describe()
        + (f"; refused: {'; '.join(refused)}" if refused else "")
        + ". "
        + " ".join(f"{k}: {v}" for k, v in METRIC_DEFINITIONS.items()),
        {"Metrics": frame},
        [f(c) for f in figs],
    )
    settings = {k: v for k, v in c.settings().items() if k != "tables"}
    settings["tables"] = "; ".join(
        f"{m.label} = {m.table.name} {m.table.source} sha256 {m.table.sha256}" for m in c.loaded
    )
    return _page(f"posviz collection report: {len(c.loaded)} tables", settings, [section])


def _page(title: str, settings: dict[str, object], sections: list[Section]) -> str:
    """The report's HTML: settings listed at the top and as JSON, then each section."""
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
<script id="posviz-settings" type="application/json">{_script_json(settings)}</script>
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
