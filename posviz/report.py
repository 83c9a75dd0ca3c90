"""One standalone HTML page with every analysis of a table: the report a team shares.

The page embeds its numbers with what made them as JSON (``<script id="posviz-data"
type="application/json">``): the table's provenance and, per table of numbers, the pipeline
step and its params, which ``posviz rerun`` recomputes.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from posviz import (
    boundary,
    components,
    depth,
    figures,
    forms,
    heads,
    models,
    offsets,
    pipeline,
    probes,
)
from posviz import collection as _collection
from posviz._params import Refused, defaults, split_params, step_of
from posviz.collection import Collection
from posviz.embedding import Embedding, LoadError
from posviz.export import column_label, columns, labelled
from posviz.export.screen import on_screen
from posviz.models import attention, weights
from posviz.schemes.config import position_scheme
from posviz.schemes.plan import CRITICAL_BASE_SOURCE, CRITICAL_DIMENSION_SOURCE
from posviz.schemes.plan import default_target as plan_target
from posviz.spectrum import DEFINITIONS, NO_VARIANCE, THRESHOLDS, Spectrum

__all__ = [
    "REPORT_MAX_SIDE",
    "Section",
    "build_collection_report",
    "build_report",
    "plan_section",
    "report_sections",
]

#: Heatmap cells a side in the report: 512² float32 keeps the page near 2 MB per heatmap.
REPORT_MAX_SIDE = 512


@dataclass
class Section:
    """A report section: a heading, tables of numbers, figures, and a note on how to read them.

    `analyses` holds, per table of numbers, the result it was read from (which records its
    step and params); a table without one (DeBERTa's rows and their offsets) is no analysis'.
    The page shows a long table's first rows and its `rows`; the data block keeps them all.
    `provenance`: per table, where its numbers came from when that is not the table (heads:
    each layer's). `hidden`: tables in the data block but not on the page (each layer's heads,
    summarised on it).
    """

    title: str
    note: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[go.Figure] = field(default_factory=list)
    analyses: dict[str, Any] = field(default_factory=dict)
    #: Per long table, the rows worth showing besides its first ones, and which they are in
    #: words (the data block and ``posviz rerun`` keep every row).
    rows: dict[str, tuple[list[int], str]] = field(default_factory=dict)
    #: Per table with blank cells, why they are blank.
    blanks: dict[str, str] = field(default_factory=dict)
    #: How the numbers were made, step by step, under the note.
    steps: list[str] = field(default_factory=list)
    #: Where its numbers came from when that is not the table, per table (heads: each
    #: layer's provenance).
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Tables kept in the data block (and so rerun), not shown (each layer's heads).
    hidden: set[str] = field(default_factory=set)


#: Told before each section: ``progress(section title, sections done, sections in all)``.
Progress = Callable[[str, int, int], None]


def memo(results: dict[bytes, object] | None = None) -> pipeline.Run:
    """A runner that computes each (step, table, params) once: a report asks for the same
    principal components three times and the per-position statistics four times. It keeps
    them in `results` (a new dict if not given)."""
    results = {} if results is None else results

    def run(step: Callable[..., object], /, *tables: Embedding, **params: object) -> object:
        # A table or a layer by its sha256; a scheme's datum (a rotary rule, a scheme) whole.
        data = [getattr(t, "sha256", None) or pickle.dumps(t) for t in tables]
        key = pickle.dumps((step.__name__, data, sorted(params.items())))
        if key not in results:
            results[key] = step(*tables, run=run, **params)
        return results[key]

    return run


#: What this process's latest report computed, under its table's sha256: a second report of
#: that table (another centring, seed or number of components) computes only what those
#: change. One table's results at a time, so the process keeps no more than one report needs.
_LATEST: dict[str, dict[bytes, object]] = {}


def _reusing(table: Embedding) -> pipeline.Run:
    """:func:`memo` over the latest report's results if it was of `table`, else over none
    (those are dropped)."""
    if table.sha256 not in _LATEST:
        _LATEST.clear()
        _LATEST[table.sha256] = {}
    return memo(_LATEST[table.sha256])


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
        computed again; by default each result is computed once (:func:`memo`) and kept for
        the process's next report of the same table.
    progress : callable, optional
        Called before each section (the app's progress bar, the CLI's status line).
    """
    centring = {} if center is None else {"center": center}
    seeded = {} if seed is None else {"seed": seed}
    run = run or _reusing(table)
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
    model: weights.Readable | LoadError | None
    try:
        model = models.model_of(table)
    except LoadError as error:  # its model's, but not opened: the section says why
        model = error
    if model is not None:  # the table came with its model: its layers' heads too
        sections.append(("Heads", lambda: heads_section(model, run=run, **seeded)))
        opened = model
        if not isinstance(opened, LoadError) and _rotary(opened):  # and at a longer context
            sections.append(("Longer context", lambda: plan_section(opened, run=run)))
    done: list[Section] = []
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
        rows={
            "Singular values": (
                _spectrum_rows(s),
                "where the cumulative share reaches 50, 80, 90, 95 and 99%, the last above the "
                "noise cut and the first below it, and the smallest",
            )
        },
    )


def _spectrum_rows(s: Spectrum) -> list[int]:
    """The singular values a reader looks for past the first: where the cumulative share
    reaches each threshold, the last above the noise cut and the first below, the smallest."""
    if not s.has_variance:
        return []
    n = len(s.singular_values)
    ks = [s.k_at(t) for t in THRESHOLDS] + [s.n_above_noise, s.n_above_noise + 1, n]
    return sorted({k - 1 for k in ks if 1 <= k <= n})


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
        + f" Offsets 0..{profile.max_offset}; monotonicity over offsets 1..{scores.window}. "
        + "The map is a picture of its colours: hovering it gives positions, not values (the "
        + "app's Similarity page has them)."
        + _note(table, "offset_profile"),
        {"Scores": scores.to_frame()},
        [
            # A picture of the map's colours: a sixth of its cells' bytes (hover: positions).
            figures.similarity.similarity_heatmap(overview, labels=table.labels, picture=True),
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
    if offsets is None:
        msg = f"{table.name} has rows of positions, not buckets of relative offsets."
        raise ValueError(msg)
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
        f"{offsets.rule()['as_positions']}",
        {"Offsets of each row": frame.rename(columns={"position": "bucket"})},
    )


def probes_section(
    table: Embedding, *, run: pipeline.Run = pipeline.call, **params: Any
) -> Section:
    probe = run(pipeline.probe_with_controls, table, **params)
    return Section(
        "Probes",
        " ".join([probes.ABOUT, *probes.DEFINITIONS.values()]) + _note(table, "probes"),
        {"Probe results": probe.to_frame()},
        [figures.probes.probe_predictions(probe)],
        {"Probe results": probe},
        blanks={"Probe results": probes.BLANK_CELLS},
        steps=probe.procedure_steps(),
    )


#: Bytes the report fetches by name for every layer's heads; above, layer 0 alone (the report
#: cannot ask, as the page does above this).
REPORT_FETCH = 2**30


def heads_section(
    model: weights.Readable | LoadError,
    *,
    layers: str | int | Sequence[int] = depth.ALL,
    run: pipeline.Run = pipeline.call,
    **params: Any,
) -> Section:
    """The heads of every layer of the table's model (`posviz.depth`: each layer's kind's step
    of `posviz.pipeline.HEADS_STEPS`, with `params`, one layer at a time): a table of each
    layer's labelled heads and largest label numbers beside its null, a layers x heads map of
    each label's number; every layer's own table (each head's numbers beside the null's
    largest draw) is in the page's data block, which `posviz rerun` checks. By name, more than
    `REPORT_FETCH` bytes to fetch reads layer 0 alone and says so; a model without a per-head
    view, or one that could not be opened (`model` is then why), says why."""
    try:
        if isinstance(model, LoadError):
            raise model
        opened = attention.open_model(model)
        plan = depth.plan_depth(opened, layers)
        fetch = ""
        if plan.to_fetch > REPORT_FETCH:
            fetch = (
                f" Every layer would fetch {plan.to_fetch / 2**30:.1f} GiB, above the report's "
                f"{REPORT_FETCH / 2**30:.0f} GiB: layer {plan.read[0]} alone is read (posviz "
                "heads --layers all reads them all)."
            )
            plan = depth.plan_depth(opened, [plan.read[0]])
        for each in plan.plans:  # the work the heads would take, before a weight is read
            depth.check_heads(each, **params)
    except Refused as error:  # LoadError included; a depth a config does not state
        return Section("Heads", f"No per-head view of this model's layers: {error}")
    tables: dict[str, pd.DataFrame] = {}

    def keep(layer: depth.LayerHeads) -> None:
        tables[f"Heads, layer {layer.index}"] = layer.result.to_frame()

    found = depth.collect(plan, run=run, each=keep, **params)
    summary = found.record()
    label_numbers = {name: t for name, t in heads.LABELS.values() if name in found.definitions}
    by_layer = pd.DataFrame({"layer": summary["layers"]})
    by_layer["labelled heads"] = [
        "; ".join(
            f"h{head} {label}"
            for label, got in summary["labels"].items()
            for at, head in got["heads"]
            if at == layer
        )
        for layer in summary["layers"]
    ]
    for name in label_numbers:
        got = summary["numbers"][name]
        by_layer[f"{name} max"] = got["max"]
        by_layer[f"{name} head"] = got["max_head"]
        by_layer[f"{name} null max"] = got["null_max"]
    first = found.layers[0]
    thresholds = "; ".join(
        f"“{label}”: {name} ≥ {threshold:g}"
        for label, (name, threshold) in heads.LABELS.items()
        if name in found.definitions
    )
    skipped = "".join(f" Layer {k} skipped: {v}" for k, v in plan.skipped.items())
    notes = " ".join(dict.fromkeys(note for layer in plan.plans for note in layer.notes))
    note = (
        f"Layers {', '.join(map(str, found.indices))} of {plan.model} ({plan.family}, "
        f"{plan.kind}), from their weights alone, one layer at a time.{fetch}{skipped} {notes} "
        + " ".join(f"{k}: {v}." for k, v in found.definitions.items())
        + f" Null: each layer's query and key rows permuted across its heads, "
        f"{first.params.get('n_draws', 0)} draws; a head is labelled only above every null draw "
        f"of its layer and at least: {thresholds}. Each layer's table of every head's numbers "
        "is in this page's data block."
    )
    return Section(
        "Heads",
        note,
        {"Heads by layer": by_layer, **tables},
        [figures.heads.depth_map(found, name, model=plan.model) for name in label_numbers],
        {f"Heads, layer {n.layer}": n for n in found.layers},
        provenance={f"Heads, layer {n.layer}": n.provenance for n in found.layers},
        hidden=set(tables),
    )


def plan_section(model: weights.Readable, *, run: pipeline.Run = pipeline.call) -> Section:
    """The table's rotary model extended to four times its trained context: every rope
    scaling rule side by side (`posviz plan`; the Schemes page's "Longer context")."""
    scheme = position_scheme(model.config)
    plan = run(pipeline.context_plan, scheme, target=plan_target(scheme))
    provenance = weights.model_provenance(model)
    rules = "; ".join(
        f"{r.rule}: {r.llama_cpp}" for r in plan.rules if not r.llama_cpp.startswith("-c ")
    )
    critical = "undefined" if plan.critical_base is None else f"{plan.critical_base:,.0f}"
    note = (
        f"{provenance['config']}'s rotary positions (trained at L = {plan.original_context:,}, "
        f"{plan.original_context_key}) planned to N = {plan.target:,} (s = {plan.factor:g}; "
        "`posviz plan SOURCE --target N` for another length). Critical dimension "
        f"{plan.critical_dimension} ({CRITICAL_DIMENSION_SOURCE}); critical base "
        f"{critical} ({CRITICAL_BASE_SOURCE}). What each rule does to the "
        "positions, not which gives the lowest perplexity (measured: YaRN's Table 1, "
        f"LongRoPE's Table 1). llama.cpp: {rules}. " + " ".join(plan.notes)
    )
    return Section(
        "Longer context",
        note,
        {"Rules": plan.to_frame()},
        [figures.plan.ratios(plan), figures.plan.angles(plan)],
        {"Rules": plan},
        provenance={"Rules": provenance},
    )


def _rotary(model: weights.Readable) -> bool:
    """Whether `model`'s config.json describes rotary positions (a refused one: no plan)."""
    try:
        return position_scheme(model.config).kind == "rotary"
    except LoadError:
        return False


def build_report(table: Embedding, *, progress: Progress | None = None, **options: Any) -> str:
    """A standalone HTML report of `table`: opens offline (plotly.js inlined once, gzipped).

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
    data: dict[str, Any] = {
        "provenance": table.provenance(),
        "analyses": [
            {**_analysis(section.analyses[caption]), "caption": caption, "columns": columns(frame)}
            | ({"provenance": section.provenance[caption]} if caption in section.provenance else {})
            for section in sections
            for caption, frame in section.tables.items()
            if caption in section.analyses  # a table of numbers an analysis made
        ],
    }
    if table.row_offsets is not None:  # as `posviz summary --json` carries them
        data["row_offsets"] = table.row_offsets.record()
    listing: dict[str, object] = {**data["provenance"]}
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
        f"{m.label} = {t.name} {t.source} sha256 {t.sha256}"
        for m, t in zip(c.loaded, c.tables, strict=True)
    )
    data = {**c.header(), "columns": columns(frame)}
    title = f"posviz collection report: {len(c.loaded)} tables"
    return _page(title, settings, [section], data)


def _page(
    title: str, settings: dict[str, object], sections: list[Section], data: dict[str, Any]
) -> str:
    """The report's HTML: settings listed at the top, then each section and the glossary;
    `data` embedded. The figures are drawn by plotly.js, which the page carries gzipped."""
    body = []
    charts = 0
    for section in sections:
        body.append(f"<section><h2>{html.escape(section.title)}</h2>")
        body.append(f"<p class='note'>{html.escape(section.note)}</p>")
        if section.steps:
            steps = "".join(f"<li>{html.escape(step)}</li>" for step in section.steps)
            body.append(f"<ol class='steps'>{steps}</ol>")
        for caption, frame in section.tables.items():
            if caption in section.hidden:
                continue
            body.append(f"<h3>{html.escape(caption)}</h3>")
            rows, which = section.rows.get(caption, ([], ""))
            blank = section.blanks.get(caption, BLANK)
            body.append(_table_html(frame, rows=rows, which=which, blank=blank))
        for fig in section.figures:
            body.append(_figure_html(fig, charts))
            charts += 1
        body.append("</section>")
    body.append(_glossary_html())
    listing = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_setting(v))}</td></tr>"
        for k, v in settings.items()
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
  padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.8em; }}
th, td {{ padding: 0.2em 0.45em; border-bottom: 1px solid #ddd; text-align: left; }}
th {{ vertical-align: bottom; }}
/* A table wider than the page scrolls sideways, its first column (what each row is) kept in
   view, with a shadow on the side that has more (covered where there is none). */
.numbers {{ max-width: 100%; overflow-x: auto;
  background: linear-gradient(to right, #fff 30%, #fff0) left / 3em 100% no-repeat local,
    linear-gradient(to left, #fff 30%, #fff0) right / 3em 100% no-repeat local,
    radial-gradient(farthest-side at 100% 50%, #0003, #0000) right / 1em 100% no-repeat scroll,
    radial-gradient(farthest-side at 0 50%, #0003, #0000) left / 1em 100% no-repeat scroll; }}
.numbers th:first-child, .numbers td:first-child {{ position: sticky; left: 0;
  background: #fff; }}
.note, .steps {{ color: #555; }} section {{ margin-top: 2.5em; }}
dt {{ font-weight: 600; margin-top: 0.3em; }} dd {{ margin-left: 1.5em; color: #555; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Made by posviz {html.escape(str(settings["posviz_version"]))} on {stamp}.</p>
<p id="posviz-charts-note" class="note" hidden></p>
<table class="settings">{listing}</table>
<script id="posviz-data" type="application/json">{_script_json(data)}</script>
{"".join(body)}
<script id="posviz-plotly" type="application/octet-stream">{_packed_plotly()}</script>
<script>{_DRAW_CHARTS}</script>
</body></html>
"""


def _setting(value: object) -> str:
    """A setting as the listing shows it: "none" for None (a table without a grid)."""
    return "none" if value is None else str(value)


#: What a blank cell means, unless a section says more.
BLANK = "A blank cell: not defined for that row."
#: A table longer than this shows its first `FIRST_ROWS` rows and the rows that matter.
MAX_ROWS, FIRST_ROWS = 25, 10
#: A table of at most `FEW_ROWS` rows and more than `WIDE` columns is turned on its side to fit
#: the page: one column per row (the probes' three tables), one row per number.
FEW_ROWS, WIDE = 6, 9


def _table_html(
    frame: pd.DataFrame,
    *,
    rows: list[int] | tuple[()] = (),
    which: str = "",
    blank: str = BLANK,
) -> str:
    """A table of numbers that fits the page.

    "none" when it has no rows; headers that wrap (labels, not keys); a text column that
    repeats one value (a setting, such as the probes' model) stated once beneath it; numbers
    to 6 significant digits, rounding noise as 0, a missing value as a blank cell (`blank`
    says why). A long table shows its first `FIRST_ROWS` rows and `rows` (`which` says which
    they are), a wide one of few rows is turned on its side.
    """
    if frame.empty:
        return "<p class='none'>none</p>"
    repeated = [
        name
        for name in frame.columns
        if len(frame) > 1
        and not pd.api.types.is_numeric_dtype(frame[name])
        and frame[name].nunique() == 1
    ]
    notes = []
    if repeated:
        stated = "; ".join(
            f"{column_label(name)}: {frame[name].iloc[0] or 'none'}" for name in repeated
        )
        notes.append(f"In every row, {stated}.")
    shown = on_screen(frame.drop(columns=repeated))
    if shown.isna().to_numpy().any():
        notes.append(blank)
    cells = shown.map(_cell).rename(columns=column_label)
    if len(shown) > MAX_ROWS:
        kept = sorted(set(range(FIRST_ROWS)) | {r for r in rows if 0 <= r < len(shown)})
        kept = sorted({*kept, len(shown) - 1})
        cells = _with_gaps(cells, kept)
        named = f"the first {FIRST_ROWS}" + (f" and those {which}" if which else "")
        notes.append(
            f"{len(kept)} of {len(shown):,} rows shown: {named}. Every row is in this page's "
            "data block (posviz-data), which posviz rerun reads."
        )
    names = shown[shown.columns[0]]  # the rows' names, when the first column holds them
    named = names.map(lambda v: isinstance(v, str) and v != "").all() and names.is_unique
    if len(shown) <= FEW_ROWS and len(shown.columns) > WIDE and named:
        sideways = cells.set_index(cells.columns[0]).T
        sideways.insert(0, "", sideways.index)  # each row named by its number's label
        cells = sideways.rename_axis(columns=None)
    table = cells.to_html(index=False, border=0)
    note = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes)
    return f"<div class='numbers'>{table}</div>{note}"


def _cell(value: object) -> str:
    """A number to 6 significant digits, a missing one blank, anything else as it is."""
    if isinstance(value, float):
        return "" if value != value else f"{value:.6g}"  # NaN is not equal to itself
    return "" if value is None else str(value)


def _with_gaps(cells: pd.DataFrame, kept: list[int]) -> pd.DataFrame:
    """Rows `kept` of `cells`, a row of "⋮" where rows were left out."""
    parts = []
    for before, row in zip([-1, *kept], kept, strict=False):
        if row > before + 1:
            parts.append(pd.DataFrame([["⋮"] * len(cells.columns)], columns=cells.columns))
        parts.append(cells.iloc[[row]])
    return pd.concat(parts, ignore_index=True)


def _figure_html(fig: go.Figure, number: int) -> str:
    """A chart's place on the page and its figure as JSON, drawn once plotly.js is unpacked."""
    target = f"posviz-chart-{number}"
    height = fig.layout.height or 450
    return (
        f'<div id="{target}" class="plotly-graph-div" style="height:{height}px; width:100%;">'
        f'</div><script type="application/json" class="posviz-figure" data-target="{target}">'
        f"{_script_text(fig.to_json())}</script>"
    )


@functools.cache
def _packed_plotly() -> str:
    """plotly.js, gzipped and in base64: 2.0 MB of its 4.8 (the page opens offline still)."""
    from plotly.offline import get_plotlyjs

    packed = gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode()


#: Unpacks plotly.js (the browser's own gzip: DecompressionStream) and draws every chart; a
#: browser without it is told so above the numbers, which are all on the page anyway.
_DRAW_CHARTS = """
(async () => {
  try {
    const packed = atob(document.getElementById('posviz-plotly').textContent.trim());
    const bytes = Uint8Array.from(packed, (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    const script = document.createElement('script');
    script.textContent = await new Response(stream).text();
    document.head.appendChild(script);
    for (const data of document.querySelectorAll('script.posviz-figure')) {
      const figure = JSON.parse(data.textContent);
      Plotly.newPlot(data.dataset.target, figure.data, figure.layout, {responsive: true});
    }
  } catch (error) {
    const note = document.getElementById('posviz-charts-note');
    note.textContent = 'This browser could not draw the charts (' + error + '): it needs ' +
      'DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 or later). The numbers ' +
      'below are complete.';
    note.hidden = false;
  }
})();
"""


def _glossary_html() -> str:
    """The glossary, one line a word, at the end of the page."""
    from posviz.glossary import GLOSSARY

    entries = "".join(
        f"<dt>{html.escape(term)}</dt><dd>{html.escape(line)}</dd>"
        for term, line in GLOSSARY.items()
    )
    return f"<section><h2>Glossary</h2><dl>{entries}</dl></section>"


def _script_json(value: object) -> str:
    r"""JSON safe inside <script>: with <, > and & as \u escapes, no tensor name ("</script>",
    "<!--") can end the block or turn the rest of the page into a comment.

    Examples
    --------
    >>> print(_script_json({"tensor": "<!--<script>&"}))
    {"tensor": "\u003c!--\u003cscript\u003e\u0026"}
    """
    return _script_text(json.dumps(value, allow_nan=False))


def _script_text(text: str) -> str:
    """JSON text with <, > and & as \\u escapes (see :func:`_script_json`)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
