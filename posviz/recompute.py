"""Recompute an export's numbers from what it records: the table its provenance names, read
again, and each analysis run through `posviz.pipeline` with its params.

An export (`posviz.export.header`) is ``{"analysis", "params", "provenance"}`` plus its numbers:
``"columns"`` (a table, as the CSV/JSON downloads hold it) or ``"numbers"`` (``posviz summary
--json``), or a step's JSON record (``posviz heads --json``: `posviz.pipeline.Step.record`). A
report embeds ``{"provenance", "analyses": [...]}``, one entry per table (an entry with a
provenance of its own, its heads', is read from there). A position scheme's export names a
config.json in its provenance instead of a table (`posviz.records.config_provenance`):
the scheme is read from it again; an attention layer's adds the layer and each tensor read with
its sha256, and the layer is read again from the model's weights and checked (``posviz heads
--layers``: every layer so, then the depth summary made again from them). A comparison of
two sources of a model's positions (``posviz diff --json``, the Schemes page's comparison)
names both: each config.json or GGUF read again as a scheme's, a runtime's dump by its file,
checked by its sha256 and read in the layout it was read in.

An export is a file anyone may hand over, so it is read as untrusted: only the steps of
`posviz.pipeline.STEPS` run, each with its params checked by its core function's bounds; a
file it names is checked (size, and a config.json's sha256) before it is parsed, and what a
file holds is never quoted back; a Hub model it names is read from the Hub the environment
names (``HF_ENDPOINT``, else huggingface.co), at the commit it names, never from a host the
export names, and `tell` hears what will be fetched before it is.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from posviz import _settings, depth, examples, export, models, pipeline, simulate
from posviz._json import max_depth
from posviz._params import MAX_RESULT_BYTES, Bound, Refused, as_recorded, quoted
from posviz.embedding import Embedding, LoadError
from posviz.export import columns, labelled
from posviz.io.config_json import read_config_file
from posviz.models import weights
from posviz.models.sources import MAX_DUMP_BYTES, Side, config_side, read_side
from posviz.models.weights import read_config
from posviz.rows import row_offsets
from posviz.schemes.config import position_scheme
from posviz.schemes.diff import FIRST_POSITIONS, LAYOUTS
from posviz.schemes.layers import MAX_LAYERS
from posviz.source import Cut, HubRef, LocalPath, Preset, Source, Upload, as_source

__all__ = ["MAX_ANALYSES", "MAX_EXPORT_BYTES", "Check", "RerunResult", "read_export", "rerun"]

#: Largest export file read (a similarity map's CSV is a few MB).
MAX_EXPORT_BYTES = MAX_RESULT_BYTES
#: Analyses of one export recomputed at most (a report has nine).
MAX_ANALYSES = 100
#: JSON nesting an export may have (a scheme record's: 4).
MAX_EXPORT_DEPTH = 32
#: A record's keys that are not its numbers: its header, its words, what travelled to make it.
_NOT_NUMBERS = frozenset(
    {"analysis", "params", "provenance", "description", "reason", "warnings", "notes",
     "definitions", "bytes_fetched"}
)  # fmt: skip
#: What steps take that is read from a model's config.json (and weights), not a table.
_FROM_MODELS = ("scheme", "schemes", "layer")
#: The report's embedded JSON block.
_DATA_OPEN = '<script id="posviz-data" type="application/json">'
#: What a provenance's rows may be: a row of a table of at most MAX_ELEMENTS values.
_ROWS = Bound(0, 2**26)
_POSITION = Bound(-(2**26), 2**26)
#: Told what `rerun` will fetch from the network, before it does.
Tell = Callable[[str], None]


class RerunOptions(TypedDict, total=False):
    """:func:`rerun`'s options, for the functions that pass them on (`posviz.rerun`)."""

    tables: Sequence[str | Path]
    base: str | Path | None
    tell: Tell | None


@dataclass(frozen=True)
class Check:
    """One exported number against the same number recomputed."""

    analysis: str
    name: str
    exported: Any
    recomputed: Any

    @property
    def equal(self) -> bool:
        """Exactly equal, or both undefined (NaN or null)."""
        return _same(self.exported, self.recomputed)


@dataclass(frozen=True)
class RerunResult:
    """Every number of an export checked, the tables it was recomputed from, and each source
    as it was read again (a table's name and sha256, the config.json, GGUF or dump read: never
    what the export says it names)."""

    checks: tuple[Check, ...]
    tables: tuple[Embedding, ...] = field(repr=False)
    sources: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every number was recomputed exactly."""
        return all(c.equal for c in self.checks)

    @property
    def differing(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.equal)


def read_export(path: str | Path) -> dict[str, Any]:
    """The export a file holds: a JSON export or ``summary --json``, a CSV download (its ``#``
    header and columns), or an HTML report (its embedded ``posviz-data`` block).

    Raises
    ------
    LoadError
        If the file cannot be read, is larger than `MAX_EXPORT_BYTES` (refused unread), nests
        deeper than `MAX_EXPORT_DEPTH`, or holds no posviz export.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if not path.is_file() or size > MAX_EXPORT_BYTES:
            msg = (
                f"{path} is not a file of at most {MAX_EXPORT_BYTES // 2**20} MiB: give a posviz "
                "export (.json, .csv or .html)."
            )
            raise LoadError(msg)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"Cannot read {path} as a posviz export (UTF-8 text)."
        raise LoadError(msg) from exc
    try:
        if path.suffix.lower() == ".csv":
            for line in text.splitlines():  # the header's JSON values, before pandas reads
                if not line.startswith("# "):
                    break
                _check_depth(line, path)
            frame, header = export.from_csv(text)
            return {**header, "columns": export.columns(frame)}
        if path.suffix.lower() in (".html", ".htm"):
            text = _data_block(text, path)
        _check_depth(text, path)
        data = json.loads(text)
    except (ValueError, KeyError) as exc:
        if isinstance(exc, LoadError):
            raise
        msg = f"{path} is not a posviz export; give a JSON, CSV or HTML report export."
        raise LoadError(msg) from exc
    if not isinstance(data, dict):
        msg = f"{path} holds no posviz export (a JSON {type(data).__name__}, not an object)."
        raise LoadError(msg)
    return data


def _data_block(text: str, path: Path) -> str:
    """The report's embedded JSON: found by two searches (linear in the page's length; a
    regular expression would rescan the rest of the page from every opening tag)."""
    start = text.find(_DATA_OPEN)
    end = text.find("</script>", start) if start >= 0 else -1
    if end < 0:
        msg = f"{path} holds no posviz data block: is it a posviz report?"
        raise LoadError(msg)
    return text[start + len(_DATA_OPEN) : end]


def _check_depth(text: str, path: Path) -> None:
    if max_depth(text) > MAX_EXPORT_DEPTH:
        msg = f"{path} is nested deeper than {MAX_EXPORT_DEPTH} levels: it is no posviz export."
        raise LoadError(msg)


def rerun(
    export: dict[str, Any],
    *,
    tables: Sequence[str | Path] = (),
    base: str | Path | None = None,
    tell: Tell | None = None,
) -> RerunResult:
    """Recompute every number of `export` and compare it with the exported one.

    Parameters
    ----------
    export : dict
        As :func:`read_export` returns it (or ``json.load`` of a JSON export).
    tables : sequence of path, optional
        Where the table(s) are, in the order of the provenance, when not where it says.
    base : path, optional
        A folder to look for a table file in first (the export's folder).
    tell : callable, optional
        Called with a line saying what will be fetched from the Hub, before it is.

    Returns
    -------
    RerunResult
        Each exported number beside its recomputed value.

    Raises
    ------
    LoadError
        When a table cannot be found or read, or its bytes are not the ones the export was
        made from (sha256), or the export records no analysis posviz can recompute.
    Refused
        When a setting of the export is outside its analysis' bounds.
    """
    if not isinstance(export, dict) or export.get("provenance") is None:
        msg = "The export has no provenance: it was not made by this version of posviz."
        raise LoadError(msg)
    provenance = export["provenance"]
    records = provenance if isinstance(provenance, list) else [provenance]
    if not records or not all(isinstance(r, dict) for r in records):
        msg = "The export's provenance is not a record of where its numbers came from."
        raise LoadError(msg)
    if isinstance(export.get("layers"), list) and "depth" in export:  # `heads --layers`
        checks, read_from = _depth(export, tables, base, tell)
        return RerunResult(tuple(checks), (), tuple(read_from))
    if "analyses" in export:  # a report: one table, several analyses
        entries = export["analyses"]
    elif "analysis" in export:
        entries = [export]
    else:
        msg = "The export names no analysis to recompute."
        raise LoadError(msg)
    if not isinstance(entries, list) or not 0 < len(entries) <= MAX_ANALYSES:
        msg = f"The export lists no analyses or more than {MAX_ANALYSES}: it is no posviz export."
        raise LoadError(msg)
    steps = [_step(entry) for entry in entries]  # every name checked before anything is read
    try:
        if all(step.takes == "two sources" for step in steps):
            sides = [
                _side(where, tables[i] if i < len(tables) else None, base, tell)
                for i, where in enumerate(records)
            ]
            pairs = zip(steps, entries, strict=True)
            checks = [check for step, entry in pairs for check in _sources(step, entry, sides)]
            read_from = [_read_from(side.provenance) for side in sides]
            return RerunResult(tuple(checks), (), tuple(read_from))
        read: list[tuple[dict, dict[str, Any], Any]] | None = None
        loaded: tuple[Embedding, ...] = ()
        if any(step.takes not in _FROM_MODELS for step in steps):
            loaded = tuple(
                _table(record, tables[i] if i < len(tables) else None, base, tell)
                for i, record in enumerate(records)
            )
        checks = []
        read_from = [f"{t.name} ({t.sha256[:12]}…)" for t in loaded]
        for step, entry in zip(steps, entries, strict=True):
            if step.takes not in _FROM_MODELS:
                checks += _checks(step, entry, loaded)
            elif entry is not export and "provenance" in entry:  # a report's heads: their own
                own = entry["provenance"]
                own = own if isinstance(own, list) else [own]
                # The table's checkpoint holds them: where it is given, so are they.
                given = [tables[0] if tables and "weights" in w else None for w in own]
                configs = [_config(w, g, base, tell) for w, g in zip(own, given, strict=True)]
                read_from += [_read_from(where) for _, where, _ in configs]
                checks += _scheme(step, entry, configs)
            else:
                if read is None:  # the export's model(s), read once for all its entries
                    read = [
                        _config(where, tables[i] if i < len(tables) else None, base, tell)
                        for i, where in enumerate(records)
                    ]
                    read_from += [_read_from(where) for _, where, _ in read]
                checks += _scheme(step, entry, read)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a hand-edited export
        msg = f"The export is incomplete or not from this posviz version ({type(exc).__name__})."
        raise LoadError(msg) from exc
    return RerunResult(tuple(checks), loaded, tuple(dict.fromkeys(read_from)))


def _read_from(where: dict[str, Any]) -> str:
    """A source as it was read again (its provenance after the reading): the config.json, GGUF
    or dump, and the layer of heads."""
    named = str(where.get("config") or where.get("dump"))[:200]
    return named + (f" layer {quoted(where['layer'])}" if "layer" in where else "")


def _depth(
    export: dict[str, Any],
    tables: Sequence[str | Path],
    base: str | Path | None,
    tell: Tell | None,
) -> tuple[list[Check], list[str]]:
    """Every layer of a ``posviz heads --layers`` export recomputed as its own export is (each
    layer read again from the model's weights, every tensor's sha256 checked), then its depth
    summary made again from the layers recomputed; and the sources read. The model's
    config.json is read once."""
    layers = export["layers"]
    if not 0 < len(layers) <= MAX_LAYERS:
        msg = f"The export lists no layers or more than {MAX_LAYERS:,}: it is no posviz export."
        raise LoadError(msg)
    steps = [_step(entry) for entry in layers]  # every name checked before anything is read
    if any(step.takes != "layer" or step.data is None or step.record is None for step in steps):
        msg = "The export's layers are not every one a layer's heads."
        raise LoadError(msg)
    read: dict[tuple[Any, ...], tuple[dict, dict[str, Any], Any]] = {}
    checks: list[Check] = []
    found = []
    try:
        for step, entry in zip(steps, layers, strict=True):
            own = entry["provenance"]
            if not isinstance(own, dict):
                raise TypeError(own)
            key = (own.get("config"), own.get("sha256"), own.get("weights"))
            if key not in read:
                read[key] = _config(own, tables[0] if tables else None, base, tell)
            config, where, model = read[key]
            where = {**where, "layer": own["layer"], "tensors": own["tensors"]}
            data = step.data(position_scheme(config), where, model)  # type: ignore[misc]
            result = _recomputed(step, [data], _params(step, entry))
            record = step.record(data, result, entry)  # type: ignore[misc]
            checks += _record_checks(f"{step.name} (layer {_cut(own['layer'])})", entry, record)
            found.append(depth.LayerNumbers.made(data, result))
        skipped = export["depth"].get("skipped") or {}
        again = depth.depth_record(found, skipped={int(k): v for k, v in skipped.items()})
    except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a hand-edited export
        msg = f"The export is incomplete or not from this posviz version ({type(exc).__name__})."
        raise LoadError(msg) from exc
    sources = [_read_from(where) for _, where, _ in read.values()]
    return checks + _record_checks("depth", export["depth"], again), sources


def _step(entry: Any) -> pipeline.Step:
    """The registered step `entry` names (the registry is the allow-list)."""
    name = entry.get("analysis") if isinstance(entry, dict) else None
    step = pipeline.STEPS.get(name) if isinstance(name, str) else None
    if step is None:
        msg = f"{quoted(name)} is not an analysis posviz can recompute."
        raise LoadError(msg)
    if step.makes_table:
        msg = f"{step.name} makes a table, not numbers: rerun the exports of what was analysed."
        raise LoadError(msg)
    return step


def _params(step: pipeline.Step, entry: dict[str, Any]) -> dict[str, Any]:
    params = entry["params"]
    if not isinstance(params, dict):
        msg = f"The export's params of {step.name} are not a record of settings."
        raise LoadError(msg)
    return as_recorded(params)


def _recomputed(step: pipeline.Step, data: Sequence[Any], params: dict[str, Any]) -> Any:
    """`step` on `data` with the export's `params`; a setting it refuses said so, briefly."""
    try:
        return pipeline.call(step.run, *data, **params)
    except Refused:
        raise
    except (TypeError, ValueError) as exc:  # a setting this version does not take, or refuses
        msg = f"{step.name} cannot be recomputed with the export's params: {quoted(str(exc))}"
        raise LoadError(msg) from exc


def _table(
    record: dict[str, Any], given: str | Path | None, base: str | Path | None, tell: Tell | None
) -> Embedding:
    """The table `record` (a provenance) names, read as it was, its bytes checked."""
    if "error" in record or "label" in record:
        msg = "A collection's export cannot be rerun yet: rerun each table's export instead."
        raise LoadError(msg)
    source = record["source"]
    if not isinstance(source, str):
        raise TypeError(source)
    shape, grid = record["shape"], record.get("grid")
    row_start = record["row_start"]
    _ROWS.check("The provenance's row_start", row_start, error=LoadError)
    if not isinstance(shape, list) or len(shape) != 2:
        msg = f"The provenance's shape {quoted(shape)} is not [positions, dimensions]."
        raise LoadError(msg)
    for n in shape:
        _ROWS.check("The provenance's shape", n, error=LoadError)
    if grid is not None:
        if not isinstance(grid, list) or len(grid) != 2:
            msg = f"The provenance's grid {quoted(grid)} is not [height, width]."
            raise LoadError(msg)
        for n in grid:
            _ROWS.check("The provenance's grid", n, error=LoadError)
    first_position = record.get("first_position", 0)
    _POSITION.check("The provenance's first_position", first_position, error=LoadError)
    rows = Cut(None, row_start, row_start + shape[0], tuple(grid) if grid else None)
    simulated = record.get("simulated")
    if given is None and simulated is not None:
        where = "the simulation"
        made = simulate.remade(simulated) if isinstance(simulated, dict) else None
        if made is None:
            raise TypeError(simulated)
        table = models.recut(made, rows)
    elif given is not None:
        where = str(given)  # the user's own file: its messages are shown
        table = models.load(where, replace(rows, tensor=record["tensor"]))
    else:
        named: Source
        if "repo" in record and "commit" in record:
            named = _hub_ref(record["repo"], record["commit"], tell, file=record.get("file"))
        elif source.startswith("simulated: "):
            msg = (
                "The export's table is a simulation recorded by an older posviz (as text): "
                "export it again with this version, or give the table with --table."
            )
            raise LoadError(msg)
        else:
            named = LocalPath(_find(source, base))
        where = str(named)
        table = _named(named, record["tensor"], rows)
    # What its rows stand for (a relative table's buckets and their offsets), as exported.
    table = replace(table, first_position=first_position, row_offsets=None)
    if isinstance(rule := record.get("row_labels"), dict):
        offsets = row_offsets(
            position_buckets=int(rule["position_buckets"]),
            max_relative_positions=int(rule["max_relative_positions"]),
        )
        table = replace(table, row_offsets=offsets.rows(row_start, row_start + table.shape[0]))
    if table.sha256 != record["sha256"]:
        msg = (
            f"The table read from {quoted(where)} is not the one exported: its sha256 differs "
            f"from the export's {quoted(str(record['sha256'])[:16])} (the file's bytes changed, "
            "or another file has its name)."
        )
        raise LoadError(msg)
    return table


def _named(where: Source, tensor: Any, rows: Cut) -> Embedding:
    """The table a file named by the export holds. What the file holds is never quoted back:
    an export could name any readable file (a list of keys saved as CSV)."""
    if not isinstance(tensor, str):
        raise TypeError(tensor)
    try:
        return models.load(where, replace(rows, tensor=tensor))
    except LoadError as exc:
        if isinstance(where, HubRef):
            raise  # the Hub's answer, not a local file's contents
        msg = (
            f"{quoted(str(where))} does not hold the export's table {quoted(tensor)} as posviz "
            "reads tables (its contents are not shown); give the table's file with --table."
        )
        raise LoadError(msg) from exc


def _hub_ref(repo: Any, commit: Any, tell: Tell | None, *, file: Any = None) -> HubRef:
    """A repo id at a full commit sha (and a repo's GGUF file), on the environment's Hub;
    `tell` says so before it is fetched."""
    named = f"{quoted(repo)} at {quoted(commit)}" + (f", file {quoted(file)}" if file else "")
    if not (isinstance(repo, str) and isinstance(commit, str) and len(commit) == 40):
        msg = f"The export names the Hub model {named}, not a repo id at a full commit sha."
        raise LoadError(msg)
    if file is not None and not (isinstance(file, str) and file.lower().endswith(".gguf")):
        msg = f"The export names the Hub file {named}, not a GGUF file of a repo."
        raise LoadError(msg)
    try:
        ref = HubRef(repo, commit, file)  # a repo id only: a URL or a path is refused here
    except LoadError as exc:
        msg = f"The export names the Hub model {named}, not a repo id at a full commit sha: {exc}"
        raise LoadError(msg) from exc
    if tell is not None:
        endpoint = _settings.hub_endpoint() or "https://huggingface.co"
        tell(f"fetching {ref} from {endpoint} (HF_ENDPOINT)")
    return ref


def _config(
    recorded: dict[str, Any], given: str | Path | None, base: str | Path | None, tell: Tell | None
) -> tuple[dict, dict[str, Any], Any]:
    """The config.json provenance `recorded` names (or `given`), read again, its bytes checked
    before they are parsed (a Hub model's: at its commit), as
    :func:`posviz.records.read_config` returns it, `recorded`'s place in it kept (the
    layer type, the tensor, the model's label)."""
    named = given or recorded.get("weights") or recorded["config"]
    if not isinstance(named, str | Path):
        raise TypeError(named)
    where, expected = str(named), recorded["sha256"]
    if not isinstance(expected, str):
        raise TypeError(expected)
    source = as_source(where)
    if isinstance(source, HubRef):
        ref = _hub_ref(source.repo, source.revision, tell, file=source.file)
        where, read = str(ref), read_config(ref)
    elif isinstance(source, Preset):
        read = read_config(source)
    elif where.lower().endswith(".gguf"):
        # A GGUF (GBs) is not read whole: its header and rope tensors are, and their sha256
        # is the one recorded (checked below).
        where = where if given else _find(where, base)
        read = read_config(LocalPath(where))
    else:
        if not given:
            where = _find(where, base)
        config = weights.config_beside(where) if weights.is_weights(where) else where
        data = read_config_file(config or where)  # its size checked before it is read
        if hashlib.sha256(data).hexdigest() != expected:
            msg = (
                f"The config.json read from {quoted(str(config or where))} is not the one "
                f"exported: its sha256 differs from the export's {quoted(expected[:16])} (its "
                "bytes changed)."
            )
            raise LoadError(msg)
        # A config.json's bytes, checked, are the ones read; a checkpoint's, read beside it.
        read = read_config(LocalPath(where) if config != where else Upload(where, data))
    sha256 = read[1]["sha256"]
    if not expected or sha256 != expected:
        msg = (
            f"The config.json read from {quoted(where)} is not the one exported: its sha256 is "
            f"{sha256[:16] or 'unknown'}…, the export's {quoted(expected[:16]) or 'unknown'}… "
            "(its bytes changed)."
        )
        raise LoadError(msg)
    if "gguf_keys" in recorded:  # what the export says was read: the same bytes read alike
        _check_keys(recorded["gguf_keys"], read[1].get("gguf_keys", []), where)
    return read[0], {**recorded, **read[1]}, read[2]


def _check_keys(recorded: Any, read: list[dict[str, Any]], where: str) -> None:
    """Refuse an export whose GGUF keys (each key, the config key it fed, its value) are not
    those read again from the same bytes."""
    if not isinstance(recorded, list) or not all(isinstance(k, dict) for k in recorded):
        raise TypeError(recorded)
    fields = ("gguf", "config", "value")
    exported = [tuple(k.get(f) for f in fields) for k in recorded]
    again = [tuple(k.get(f) for f in fields) for k in read]
    if exported != again:
        first = next(x or y for x, y in itertools.zip_longest(exported, again) if x != y)
        msg = (
            f"The export's gguf_keys are not the keys read from {quoted(where)} (first at "
            f"{quoted(first[0])}): the export was edited, or made from another file."
        )
        raise LoadError(msg)


def _side(
    recorded: dict[str, Any], given: str | Path | None, base: str | Path | None, tell: Tell | None
) -> Side:
    """One of two sources of a model's positions, read again as `recorded` (or `given`) names
    it: a config.json or GGUF as :func:`_config` reads one; a runtime's dump by its file, its
    size and sha256 checked before it is parsed, read in its recorded layout and first row's
    position."""
    if "dump" not in recorded:
        config, where, _ = _config(recorded, given, base, tell)
        return config_side(config, where, str(where["config"]))
    named, expected = given or recorded["dump"], recorded["sha256"]
    layout, first = recorded["layout"], recorded["first_position"]
    if not isinstance(named, str | Path) or not isinstance(expected, str):
        raise TypeError(named)
    if layout not in LAYOUTS:
        msg = f"The export's layout {quoted(layout)} is not one of {', '.join(LAYOUTS)}."
        raise LoadError(msg)
    FIRST_POSITIONS.check("The provenance's first_position", first, error=LoadError)
    dump = str(named) if given else _find(str(named), base)
    try:
        size = Path(dump).stat().st_size
        if size > MAX_DUMP_BYTES:
            msg = f"{quoted(dump)} is {size:,} bytes, more than a dump ({MAX_DUMP_BYTES:,})."
            raise LoadError(msg)
        data = Path(dump).read_bytes()
    except OSError as exc:
        msg = f"Cannot read the dump {quoted(dump)}: {exc.strerror or 'unreadable'}."
        raise LoadError(msg) from exc
    if hashlib.sha256(data).hexdigest() != expected:
        msg = (
            f"The dump read from {quoted(dump)} is not the one exported: its sha256 differs "
            f"from the export's {quoted(expected[:16])} (its bytes changed)."
        )
        raise LoadError(msg)
    return read_side(Upload(dump, data), layout=layout, first_position=first)


def _sources(step: pipeline.Step, entry: dict[str, Any], sides: list[Side]) -> list[Check]:
    """Each number of a comparison of two sources, recomputed from them read again: its
    record's (``posviz diff --json``) or its table's."""
    if len(sides) != 2:
        msg = f"{step.name} compares two sources; the export's provenance names {len(sides)}."
        raise LoadError(msg)
    result = _recomputed(step, sides, _params(step, entry))
    if "columns" in entry:
        return _column_checks(step.name, entry["columns"], result)
    return _record_checks(step.name, entry, result.record())


def _scheme(
    step: pipeline.Step, entry: dict[str, Any], read: list[tuple[dict, dict[str, Any], Any]]
) -> list[Check]:
    """Each number of a scheme's export, recomputed from its config.json(s) read again."""
    found = [(position_scheme(config), where, model) for config, where, model in read]
    if step.data is None:
        raise TypeError(step.name)
    if step.takes == "schemes":
        data = step.data(found)
    elif len(found) != 1:
        msg = f"{step.name} takes one model's config.json; the export names {len(found)}."
        raise LoadError(msg)
    else:
        data = step.data(*found[0])
    result = _recomputed(step, [data], _params(step, entry))
    if isinstance(result, dict):  # a scheme record: its numbers by their keys
        return _record_checks(step.name, entry, result)
    if "columns" not in entry and step.record is not None:  # the step's JSON record
        return _record_checks(step.name, entry, step.record(data, result, entry))
    return _column_checks(step.name, entry["columns"], result)


def _record_checks(
    label: str, exported: dict[str, Any], recomputed: dict[str, Any], prefix: str = ""
) -> list[Check]:
    """Every number of a scheme record, nested records' (its table's) by their path."""
    checks = []
    for key, value in exported.items():
        if key in _NOT_NUMBERS:
            continue
        checks += _nested_checks(label, prefix + _cut(key), value, recomputed.get(key))
    return checks


def _nested_checks(label: str, name: str, value: Any, new: Any) -> list[Check]:
    """`value` against `new` number by number, through nested records and lists (a heads
    record's heads, each with its kernel's rows)."""
    if isinstance(value, dict) and isinstance(new, dict):
        return _record_checks(label, value, new, f"{name}.")
    if isinstance(value, list) and isinstance(new, list) and len(value) == len(new):
        pairs = enumerate(zip(value, new, strict=True))
        return [c for i, (v, w) in pairs for c in _nested_checks(label, f"{name}[{i}]", v, w)]
    return [Check(label, name, value, new)]


def _cut(text: Any, most: int = 200) -> str:
    """`text` from an export, cut to `most` characters for a message or a check's name."""
    text = str(text)
    return text if len(text) <= most else f"{text[: most - 1]}…"


def _find(source: str, base: str | Path | None) -> str:
    """The file `source` names: a model shipped with posviz (``example:NAME/FILE``), or as it
    is, or in `base`, or in the working folder."""
    if source.startswith(examples.PREFIX):
        return str(examples.path_of(source))
    if " → " in source:
        msg = (
            f"The export's table ({_cut(source)}) was made in the app, not read from a file: save "
            "it (Resample's download) and give its path with --table."
        )
        raise LoadError(msg)
    name = Path(source)
    for candidate in (name, Path(base or ".") / name.name, Path(name.name)):
        if candidate.is_file():
            return str(candidate)
    looked = ", ".join(dict.fromkeys(str(Path(p).resolve()) for p in (base or ".", ".")))
    msg = (
        f"The export's table {_cut(source)} was not found (looked in {looked}); give its path "
        "with --table."
    )
    raise LoadError(msg)


def _checks(
    step: pipeline.Step, entry: dict[str, Any], tables: tuple[Embedding, ...]
) -> list[Check]:
    """Each number of one analysis of `entry`, recomputed."""
    if len(tables) != step.n_tables:
        msg = (
            f"{step.name} takes {step.n_tables} table(s); the export's provenance names "
            f"{len(tables)}."
        )
        raise LoadError(msg)
    result = _recomputed(step, tables, _params(step, entry))
    label = step.name + (f" ({_cut(entry['caption'], 80)})" if "caption" in entry else "")
    if "columns" in entry:
        # Positions labelled as the export labels them (a relative table's first position).
        labels = {"provenance": tables[0].provenance()} if len(tables) == 1 else {}
        return _column_checks(label, entry["columns"], result, labels)
    return _number_checks(label, entry.get("numbers", {}), result)


def _column_checks(
    label: str, exported: dict[str, list], result: Any, settings: dict[str, Any] | None = None
) -> list[Check]:
    """A table's cells against the result's frame with the same columns (positions labelled
    by `settings`, as :func:`posviz.export.labelled`)."""
    frames = [getattr(result, n) for n in dir(result) if n == "to_frame" or n.endswith("_table")]
    for make in frames:
        recomputed = columns(labelled(make(), settings or {}))
        if list(recomputed) == list(exported):
            break
    else:
        msg = f"{label}: no table of the recomputed result has the export's columns."
        raise LoadError(msg)
    checks = []
    for column, values in exported.items():
        again = recomputed[column]
        if len(again) != len(values):
            checks.append(Check(label, f"{column} (rows)", len(values), len(again)))
            continue
        checks += [
            Check(label, f"{column}[{i}]", value, new)
            for i, (value, new) in enumerate(zip(values, again, strict=True))
        ]
    return checks


def _number_checks(label: str, exported: dict[str, Any], result: Any) -> list[Check]:
    """Named numbers: the result's metrics, or its arrays (as long as the export's)."""
    metrics: dict[str, Any] = result.metrics() if hasattr(result, "metrics") else {}
    checks = []
    for key, value in exported.items():
        if key in metrics:  # an undefined metric is None: not looked up further
            new = metrics[key]
        else:  # an array of the result (never a private or special attribute)
            new = getattr(result, key, None) if not str(key).startswith("_") else None
        if isinstance(new, np.ndarray):
            new = new.tolist()
        name = _cut(key)
        if isinstance(value, list) and isinstance(new, list):  # the export holds the first ones
            pairs = zip(value, new[: len(value)], strict=True) if len(new) >= len(value) else ()
            checks += [Check(label, f"{name}[{i}]", v, w) for i, (v, w) in enumerate(pairs)]
            if len(new) < len(value):
                checks.append(Check(label, f"{name} (length)", len(value), len(new)))
            continue
        checks.append(Check(label, name, value, new))
    return checks


def _undefined(value: Any) -> bool:
    """None (JSON's null) or NaN: a number the analysis leaves undefined."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _same(a: Any, b: Any) -> bool:
    """Exactly equal, element by element for lists, undefined equal to undefined."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if _undefined(a) or _undefined(b):
        return _undefined(a) and _undefined(b)
    return bool(a == b)
