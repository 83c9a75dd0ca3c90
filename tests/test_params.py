"""Every result records the settings that made it, by the core signatures' names: a pipeline
step called again with a result's params makes the same result."""

from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest

from posviz import (
    boundary,
    collection,
    compare,
    components,
    export,
    offsets,
    pipeline,
    probes,
    quantization,
    resample,
    similarity,
    simulate,
    spectrum,
)
from posviz._params import defaults, keyword_names, step_of
from posviz.embedding import LoadError

#: Each pipeline step, the core functions of its chain (whose settings its params are), and
#: settings other than the defaults (so a step that dropped one would be caught).
STEPS = {
    "spectrum": ([spectrum.spectrum], {"center": False}),
    "principal_components": ([components.principal_components], {"n_components": 3}),
    "fit_sinusoids": (
        [components.principal_components, components.fit_sinusoids],
        {"n_components": 2, "center": False},
    ),
    "sinusoid_likeness": (
        [components.principal_components, components.sinusoid_likeness],
        {"n_components": 3, "n_frequencies": 4, "n_shuffles": 3, "seed": 5},
    ),
    "similarity_map": ([similarity.similarity_map], {"metric": "dot", "rows": (2, 30)}),
    "grid_similarity": ([similarity.grid_similarity], {"grid": (8, 8), "max_tiles": 3}),
    "offset_profile": ([offsets.offset_profile], {"max_offset": 20, "spread": False}),
    "offset_scores": (
        [offsets.offset_profile, offsets.offset_scores],
        {"max_offset": 30, "monotonicity_window": 10},
    ),
    "position_statistics": ([boundary.position_statistics], {"n_directions_removed": 2}),
    "outliers": (
        [boundary.position_statistics, boundary.outliers],
        {"hampel_window": 6, "threshold": 3.0},
    ),
    "boundary_summary": (
        [boundary.position_statistics, boundary.boundary_summary],
        {"boundary_size": 4, "n_directions_removed": 1},
    ),
    "change_points": (
        [boundary.position_statistics, boundary.outliers, boundary.change_points],
        {"min_size": 8, "statistic": "dist_to_mean"},
    ),
    "probe_with_controls": (
        [probes.probe_with_controls],
        {"n_pairs": 200, "max_rows": 40, "repeats": 2, "seed": 3},
    ),
    "compare": ([compare.compare], {"n_components": 3}),
    "quantization_error": ([quantization.quantization_error], {"k": 3, "center": False}),
    "table_summary": ([collection.table_summary], {"center": False}),
}


@pytest.fixture(scope="module")
def table():
    return simulate.learned_like(64, 12, seed=2)


def same(a: object, b: object) -> bool:
    """Results equal field by field, arrays exactly (NaN equal to NaN)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return a == b or (a != a and b != b)


def run(name: str, table, **params):
    step = pipeline.STEPS[name]
    tables = (table, simulate.sinusoidal(64, 12))[: step.n_tables]
    return pipeline.call(step.run, *tables, **params)


def test_every_step_is_in_the_registry_once_named_as_its_core_function():
    defined = {
        name
        for name, value in vars(pipeline).items()
        if callable(value)
        and getattr(value, "__module__", "") == "posviz.pipeline"
        and not name.startswith("_")
        and name[0].islower()
    }
    assert defined - {"call"} == set(pipeline.STEPS)
    for name, step in pipeline.STEPS.items():
        assert step.name == name == step.run.__name__ == step.core.__name__
        assert getattr(pipeline, name) is step.run
    tables = {name for name, step in pipeline.STEPS.items() if step.n_tables}
    assert tables == {*STEPS, "resample_length", "resample_grid"}


@pytest.mark.parametrize("name", STEPS)
def test_a_result_records_the_step_that_made_it(table, name):
    result = run(name, table, **STEPS[name][1])
    assert step_of(result) == name
    # Kept through a pickle (the app's caches store results pickled).
    assert step_of(pickle.loads(pickle.dumps(result))) == name


@pytest.mark.parametrize("name", STEPS)
def test_a_step_called_with_its_results_params_makes_the_same_result(table, name):
    _, settings = STEPS[name]
    result = run(name, table, **settings)
    assert {k: result.params[k] for k in settings} == settings
    assert same(run(name, table, **result.params), result)
    # Through JSON (tuples become lists), as `posviz rerun` reads an export.
    read = json.loads(json.dumps(result.params))
    assert same(run(name, table, **read), result)


@pytest.mark.parametrize("name", STEPS)
def test_exported_params_are_the_signatures_names_with_their_defaults(table, name):
    chain, settings = STEPS[name]
    result = run(name, table, **settings)
    header = json.loads(export.to_json(result_frame(), export.header(result, table)))
    names = {n for core in chain for n in keyword_names(core)}
    assert set(header["params"]) == names
    expected = {k: v for core in chain for k, v in defaults(core).items()} | settings
    assert header["params"] == json.loads(json.dumps(expected))


def result_frame():
    import pandas as pd

    return pd.DataFrame({"x": [1.0]})


def test_resampled_results_record_their_settings(table):
    length = resample.resample_length(table.values, n_positions=100, method="cubic")
    assert length.params == {
        "n_positions": 100,
        "method": "cubic",
        "positions": "ends",
        "reserved": 0,
    }
    grid = simulate.vit_grid(4, 4, 8)
    resampled = resample.resample_grid(grid.values, grid.grid, new_grid=(6, 5))
    assert resampled.params == {"new_grid": (6, 5), "method": "bicubic", "antialias": True}


def test_one_centring_default_everywhere():
    found = {
        f"{f.__module__}.{f.__name__}": defaults(f)["center"]
        for f in (
            spectrum.spectrum,
            components.principal_components,
            similarity.similarity_map,
            offsets.offset_profile,
            similarity.grid_similarity,
            compare.compare,
            collection.table_summary,
        )
    }
    assert set(found.values()) == {True}, found


# --- the heads: steps that take an attention layer -------------------------------------------

#: Each heads step, a fixture model of its kind, and settings other than the defaults.
LAYER_STEPS = {
    "learned_heads": ("gpt2", {"n_positions": 20, "local_window": 3, "n_draws": 2, "seed": 4}),
    "rotary_heads": ("mistral", {"context": 8192, "fast_wavelength": 12.5, "n_draws": 3}),
    "alibi_heads": ("bloom", {"n_positions": 40, "local_window": 2}),
    "t5_heads": ("t5", {"n_positions": 24, "n_draws": 2, "seed": 1}),
}


def attention_layer(family: str, tmp_path):
    from safetensors.numpy import save_file

    from posviz.models import attention, weights
    from tests import ROOT

    if family == "bloom":  # ALiBi reads no tensor: a config.json and any header
        config = {"model_type": "bloom", "n_head": 4, "hidden_size": 16, "n_layer": 2}
        (tmp_path / "config.json").write_text(json.dumps(config))
        save_file({"x": np.zeros(1, np.float32)}, str(tmp_path / "model.safetensors"))
        path = tmp_path / "model.safetensors"
    else:
        path = ROOT / "tests" / "data" / "heads" / family / "model.safetensors"
    return attention.open_layer(weights.open_checkpoint(path))


@pytest.mark.parametrize("name", LAYER_STEPS)
def test_a_heads_result_records_its_step_and_makes_itself_again(tmp_path, name):
    family, settings = LAYER_STEPS[name]
    layer = attention_layer(family, tmp_path)
    step = pipeline.STEPS[name]
    assert step.takes == "layer"
    assert pipeline.HEADS_STEPS[layer.kind] is step.run
    result = pipeline.call(step.run, layer, **settings)
    assert step_of(result) == name
    assert step_of(pickle.loads(pickle.dumps(result))) == name
    assert {k: result.params[k] for k in settings} == settings
    read = json.loads(json.dumps(result.params))
    assert same(pipeline.call(step.run, layer, **read), result)
    header = export.header(result, layer.provenance())
    assert header["analysis"] == name
    assert header["provenance"]["layer"] == 0
    assert all(len(t["sha256"]) == 64 for t in header["provenance"]["tensors"])
    # Another kind's step refuses the layer, naming its own.
    other = next(s for kind, s in pipeline.HEADS_STEPS.items() if kind != layer.kind)
    with pytest.raises(LoadError, match=f"its heads' step is {name}"):
        pipeline.call(other, layer)
