"""Recompute an export's numbers from what it records: the table its provenance names, read
again, and each analysis run through `posviz.pipeline` with its params.

An export (`posviz.export.header`) is ``{"analysis", "params", "provenance"}`` plus its numbers:
``"columns"`` (a table, as the CSV/JSON downloads hold it) or ``"numbers"`` (``posviz summary
--json``). A report embeds ``{"provenance", "analyses": [...]}``, one entry per table. A position
scheme's export names a config.json in its provenance instead of a table
(`posviz.schemes.record.config_provenance`): the scheme is read from it again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from posviz import export, hub, io, pipeline, simulate
from posviz._params import as_recorded
from posviz.embedding import Embedding, LoadError
from posviz.export import columns, labelled
from posviz.rows import row_offsets
from posviz.schemes import weights
from posviz.schemes.alibi import alibi_bias
from posviz.schemes.config import position_scheme
from posviz.schemes.record import PRESET, read_config, scheme_record
from posviz.schemes.rotary import rotary_frequencies, rotary_overlay

__all__ = ["Check", "RerunResult", "read_export", "rerun"]

#: Pipeline steps whose result is a table, not numbers: an export never names them.
_NOT_ANALYSES = frozenset({"call", "resample_length", "resample_grid"})
#: How a simulated table's source begins (posviz.simulate).
_SIMULATED = "simulated: "
#: The Schemes page's exported analyses: each core function, and how it takes its data from a
#: scheme (and the provenance's layer type).
_SCHEME_STEPS: dict[str, tuple[Callable[..., Any], Callable[[Any, dict[str, Any]], Any]]] = {
    "rotary_frequencies": (
        rotary_frequencies,
        lambda scheme, where: next(s for s in scheme.rotary if s.layer_type == where["layer_type"]),
    ),
    "alibi_bias": (alibi_bias, lambda scheme, where: scheme.alibi.n_heads),
}
#: Exports of several models' schemes (a provenance per config.json, each naming its model):
#: the core function, and how it takes its data from the schemes and their provenances.
_SCHEMES_STEPS: dict[str, tuple[Callable[..., Any], Callable[[list, list], Any]]] = {
    "rotary_overlay": (
        rotary_overlay,
        lambda schemes, records: {
            where["model"]: _SCHEME_STEPS["rotary_frequencies"][1](scheme, where)
            for scheme, where in zip(schemes, records, strict=True)
        },
    ),
}
#: A scheme record's keys that are not its numbers: its header and its words.
_NOT_NUMBERS = frozenset({"analysis", "params", "provenance", "description", "reason", "warnings"})
#: The report's embedded JSON block.
_DATA = re.compile(r'<script id="posviz-data" type="application/json">(.*?)</script>', re.S)


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
    """Every number of an export checked, and the tables it was recomputed from."""

    checks: tuple[Check, ...]
    tables: tuple[Embedding, ...] = field(repr=False)

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
        If the file cannot be read or holds no posviz export.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"Cannot read {path}: {exc.strerror}."
        raise LoadError(msg) from exc
    try:
        if path.suffix.lower() == ".csv":
            frame, header = export.from_csv(text)
            return {**header, "columns": export.columns(frame)}
        if path.suffix.lower() in (".html", ".htm"):
            block = _DATA.search(text)
            if block is None:
                msg = f"{path} holds no posviz data block: is it a posviz report?"
                raise LoadError(msg)
            return json.loads(block.group(1))
        return json.loads(text)
    except (ValueError, KeyError) as exc:
        msg = f"{path} is not a posviz export ({exc}); give a JSON, CSV or HTML report export."
        raise LoadError(msg) from exc


def rerun(
    export: dict[str, Any],
    *,
    tables: Sequence[str | Path] = (),
    base: str | Path | None = None,
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

    Returns
    -------
    RerunResult
        Each exported number beside its recomputed value.

    Raises
    ------
    LoadError
        When a table cannot be found or read, or its bytes are not the ones the export was
        made from (sha256), or the export records no analysis posviz can recompute.
    """
    provenance = export.get("provenance")
    if provenance is None:
        msg = "The export has no provenance: it was not made by this version of posviz."
        raise LoadError(msg)
    configs = provenance if isinstance(provenance, list) else [provenance]
    if all("config" in p for p in configs):  # position schemes': each config.json read again
        try:
            checks = _scheme_checks(export, tables, base)
        except (KeyError, TypeError, AttributeError, StopIteration) as exc:
            msg = f"The export is incomplete or not from this posviz version ({exc!r})."
            raise LoadError(msg) from exc
        return RerunResult(tuple(checks), ())
    records = provenance if isinstance(provenance, list) else [provenance]
    if "analyses" in export:  # a report: one table, several analyses
        entries = export["analyses"]
    elif "analysis" in export:
        entries = [export]
    else:
        msg = "The export names no analysis to recompute."
        raise LoadError(msg)
    try:
        loaded = tuple(
            _table(record, tables[i] if i < len(tables) else None, base)
            for i, record in enumerate(records)
        )
        checks: list[Check] = []
        for entry in entries:
            checks += _checks(entry, loaded)
    except (KeyError, TypeError, AttributeError) as exc:  # a hand-edited or foreign export
        msg = f"The export is incomplete or not from this posviz version ({exc!r})."
        raise LoadError(msg) from exc
    return RerunResult(tuple(checks), loaded)


def _table(record: dict[str, Any], given: str | Path | None, base: str | Path | None) -> Embedding:
    """The table `record` (a provenance) names, read as it was, its bytes checked."""
    if "error" in record or "label" in record:
        msg = "A collection's export cannot be rerun yet: rerun each table's export instead."
        raise LoadError(msg)
    source = str(record["source"])
    grid = record.get("grid")
    row_start = int(record["row_start"])
    rows = {
        "row_start": row_start,
        "row_stop": row_start + int(record["shape"][0]),
        "grid": tuple(grid) if grid else None,
    }
    if given is None and source.startswith(_SIMULATED):
        where = source
        table = _simulated(source, **rows)
    else:
        if given is not None:
            where = str(given)
        elif "repo" in record and "commit" in record:
            where = f"hf:{record['repo']}@{record['commit']}"
        else:
            where = _find(source, base)
        table = weights.load(where, tensor=record["tensor"], **rows)
    # What its rows stand for (a relative table's buckets and their offsets), as exported.
    table = replace(table, first_position=int(record.get("first_position", 0)), row_offsets=None)
    if isinstance(rule := record.get("row_labels"), dict):
        offsets = row_offsets(
            position_buckets=int(rule["position_buckets"]),
            max_relative_positions=int(rule["max_relative_positions"]),
        )
        table = replace(table, row_offsets=offsets.rows(row_start, row_start + table.shape[0]))
    if table.sha256 != record["sha256"]:
        msg = (
            f"The table read from {where} is not the one exported: its sha256 is "
            f"{table.sha256[:16]}…, the export's {str(record['sha256'])[:16]}… (the file's "
            "bytes changed, or another file has its name)."
        )
        raise LoadError(msg)
    return table


def _scheme_checks(
    export: dict[str, Any], given: Sequence[str | Path], base: str | Path | None
) -> list[Check]:
    """Each number of a scheme's export, recomputed from its config.json(s) read again."""
    recorded = export["provenance"]
    records = recorded if isinstance(recorded, list) else [recorded]
    read = [
        _config(where, given[i] if i < len(given) else None, base)
        for i, where in enumerate(records)
    ]
    schemes = [position_scheme(config) for config, _, _ in read]
    name = export["analysis"]
    params = as_recorded(export["params"])
    try:
        if isinstance(recorded, list):
            if name not in _SCHEMES_STEPS:
                msg = f"{name!r} is not an analysis of several schemes posviz can recompute."
                raise LoadError(msg)
            step, data = _SCHEMES_STEPS[name]
            result = step(data(schemes, records), **params)
        elif name == "scheme_record":
            (_, provenance, opened), (scheme,) = read[0], schemes
            return _record_checks(name, export, scheme_record(scheme, provenance, opened, **params))
        elif name in _SCHEME_STEPS:
            step, data = _SCHEME_STEPS[name]
            result = step(data(schemes[0], recorded), **params)
        else:
            msg = f"{name!r} is not a scheme analysis posviz can recompute."
            raise LoadError(msg)
    except (TypeError, ValueError) as exc:  # a setting this version does not take, or refuses
        if isinstance(exc, LoadError):
            raise
        msg = f"{name} cannot be recomputed with the export's params: {exc}"
        raise LoadError(msg) from exc
    return _column_checks(name, export["columns"], result)


def _config(
    recorded: dict[str, Any], given: str | Path | None, base: str | Path | None
) -> tuple[dict, dict[str, Any], Any]:
    """The config.json provenance `recorded` names (or `given`), read again, its bytes checked:
    as :func:`posviz.schemes.record.read_config` returns it."""
    # A local checkpoint's scheme is read from the config.json beside its weights.
    where = str(given or recorded.get("weights") or recorded["config"])
    if not (given or hub.is_hub_ref(where) or where.startswith(PRESET)):
        where = _find(where, base)
    read = read_config(where)
    sha256 = read[1]["sha256"]
    if not recorded["sha256"] or sha256 != recorded["sha256"]:
        msg = (
            f"The config.json read from {where} is not the one exported: its sha256 is "
            f"{sha256[:16] or 'unknown'}…, the export's "
            f"{str(recorded['sha256'])[:16] or 'unknown (read offline)'}… (its bytes changed)."
        )
        raise LoadError(msg)
    return read


def _record_checks(
    label: str, exported: dict[str, Any], recomputed: dict[str, Any], prefix: str = ""
) -> list[Check]:
    """Every number of a scheme record, nested records' (its table's) by their path."""
    checks = []
    for key, value in exported.items():
        if key in _NOT_NUMBERS:
            continue
        name, new = prefix + key, recomputed.get(key)
        if isinstance(value, dict) and isinstance(new, dict):
            checks += _record_checks(label, value, new, f"{name}.")
        elif isinstance(value, list) and isinstance(new, list) and len(value) == len(new):
            pairs = enumerate(zip(value, new, strict=True))
            checks += [Check(label, f"{name}[{i}]", v, w) for i, (v, w) in pairs]
        else:
            checks.append(Check(label, name, value, new))
    return checks


def _simulated(source: str, **rows: Any) -> Embedding:
    """The simulated table `source` states (``simulated: learned_like(n=512, d=768, ...)``),
    made again, with the rows the export analysed."""
    match = re.fullmatch(r"simulated: (\w+)\((.*)\)", source)
    generator = getattr(simulate, match.group(1), None) if match else None
    if generator not in simulate.GENERATORS.values():
        msg = f"The export's table ({source}) is not a simulation posviz can make again."
        raise LoadError(msg)
    options: dict[str, Any] = {}
    for item in match.group(2).split(", "):
        name, _, value = item.partition("=")
        if not value:  # vit_grid's "14x14"
            options["height"], options["width"] = (int(v) for v in name.split("x"))
            continue
        name = {"n": "n_positions", "d": "d_model"}.get(name, name)
        options[name] = float(value) if name in ("base", "noise", "boundary") else int(value)
    made = generator(**options)
    return io.table_from(
        np.concatenate([made.prefix, made.values]),
        name=made.name,
        source=made.source,
        dtype=made.dtype,
        **rows,
    )


def _find(source: str, base: str | Path | None) -> str:
    """The file `source` names: as it is, or in `base`, or in the working folder."""
    if " → " in source:
        msg = (
            f"The export's table ({source}) was made in the app, not read from a file: save it "
            "(Resample's download) and give its path with --table."
        )
        raise LoadError(msg)
    name = Path(source)
    for candidate in (name, Path(base or ".") / name.name, Path(name.name)):
        if candidate.is_file():
            return str(candidate)
    looked = ", ".join(dict.fromkeys(str(Path(p).resolve()) for p in (base or ".", ".")))
    msg = (
        f"The export's table {source} was not found (looked in {looked}); give its path with "
        "--table."
    )
    raise LoadError(msg)


def _checks(entry: dict[str, Any], tables: tuple[Embedding, ...]) -> list[Check]:
    """Each number of one analysis of `entry`, recomputed."""
    name = entry["analysis"]
    step = getattr(pipeline, name, None)
    if not callable(step) or name.startswith("_") or name in _NOT_ANALYSES:
        msg = f"{name!r} is not an analysis posviz can recompute."
        raise LoadError(msg)
    wanted = 2 if name == "compare" else 1
    if len(tables) != wanted:
        msg = f"{name} takes {wanted} table(s); the export's provenance names {len(tables)}."
        raise LoadError(msg)
    try:
        result = pipeline.call(step, *tables, **as_recorded(entry["params"]))
    except (TypeError, ValueError) as exc:  # a setting this version does not take, or refuses
        msg = f"{name} cannot be recomputed with the export's params: {exc}"
        raise LoadError(msg) from exc
    label = f"{name}" + (f" ({entry['caption']})" if "caption" in entry else "")
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
        msg = f"{label}: no table of the recomputed result has the columns {list(exported)}."
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
        new = metrics[key] if key in metrics else getattr(result, key, None)
        if isinstance(new, np.ndarray):
            new = new.tolist()
        if isinstance(value, list) and isinstance(new, list):  # the export holds the first ones
            pairs = zip(value, new[: len(value)], strict=True) if len(new) >= len(value) else ()
            checks += [Check(label, f"{key}[{i}]", v, w) for i, (v, w) in enumerate(pairs)]
            if len(new) < len(value):
                checks.append(Check(label, f"{key} (length)", len(value), len(new)))
            continue
        checks.append(Check(label, key, value, new))
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
