"""posviz.pipeline, the one step registry: a step gives what its core function gives on its
data, a chained step asks for its upstream result with the settings its own core does not take,
a scheme's step finds its datum in the scheme as an export names it, and no step is named
anywhere else (that each result records its step and makes itself again: test_params.py)."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from posviz import components, pipeline, simulate, spectrum
from posviz.embedding import LoadError
from posviz.schemes.config import position_scheme
from posviz.schemes.presets import PRESETS
from tests import ROOT


@pytest.fixture(scope="module")
def table():
    return simulate.learned_like(64, 12, seed=2)


def test_a_step_is_its_core_function_on_the_tables_values(table):
    direct = spectrum.spectrum(table.values, center=False)
    for result in (
        pipeline.call(pipeline.spectrum, table, center=False),
        pipeline.spectrum(table, center=False),
    ):
        np.testing.assert_array_equal(result.singular_values, direct.singular_values)
        assert result.params == direct.params == {"center": False}


def test_a_chained_step_hands_its_upstream_the_settings_its_core_does_not_take(table):
    asked = []

    def run(step, *data, **params):
        asked.append((step.__name__, data, params))
        return pipeline.call(step, *data, **params)

    fits = pipeline.fit_sinusoids(table, run=run, n_components=2, center=False, min_cycles=1.0)
    assert asked == [("principal_components", (table,), {"n_components": 2, "center": False})]
    upstream = components.principal_components(table.values, n_components=2, center=False)
    expected = components.fit_sinusoids(upstream, min_cycles=1.0)
    np.testing.assert_array_equal(fits.fitted, expected.fitted)
    assert fits.params == expected.params == {"n_components": 2, "center": False, "min_cycles": 1.0}


def test_steps_say_how_many_tables_they_take():
    takes = {name: step.n_tables for name, step in pipeline.STEPS.items()}
    assert (takes["spectrum"], takes["compare"], takes["alibi_bias"]) == (1, 2, 0)
    assert {pipeline.STEPS[n].takes for n, k in takes.items() if k == 0} == {
        "scheme",
        "schemes",
        "layer",
        "two sources",
    }


def test_a_schemes_step_finds_the_rotary_rule_of_the_layer_type_an_export_names():
    scheme = position_scheme(PRESETS["google/gemma-3-4b-it"])
    find = pipeline.STEPS["rotary_frequencies"].data
    assert find(scheme, {"layer_type": "sliding_attention"}).base == 1e4
    assert find(scheme, {"layer_type": "full_attention"}).base == 1e6
    assert find(scheme, {}) is scheme.rotary[0]  # none named: the main rule
    with pytest.raises(LoadError, match="no rotary rule for the layer type 'global'"):
        find(scheme, {"layer_type": "global"})


def test_a_schemes_step_refuses_a_scheme_without_its_datum_saying_what_it_is():
    rotary = position_scheme(PRESETS["meta-llama/Llama-3.1-8B"])
    with pytest.raises(LoadError, match=r"^The config\.json describes rotary, not ALiBi\.$"):
        pipeline.STEPS["alibi_bias"].data(rotary, {})
    with pytest.raises(LoadError, match=r"describes rotary, not T5's buckets\.$"):
        pipeline.STEPS["bucket_layouts"].data(rotary, {})
    assert (
        pipeline.STEPS["alibi_bias"].data(position_scheme(PRESETS["bigscience/bloom"]), {}) == 112
    )


def test_a_grid_is_resampled_only_on_a_table_with_a_grid():
    grid = simulate.vit_grid(4, 4, 8)
    assert pipeline.resample_grid(grid, new_grid=(6, 5)).grid == (6, 5)
    flat = simulate.learned_like(16, 8)
    with pytest.raises(
        ValueError, match=r"has no patch grid \(a ViT's H x W\) to resample; resample its length"
    ):
        pipeline.resample_grid(flat, new_grid=(6, 5))


def test_the_public_names_are_the_registrys():
    assert set(pipeline.__all__) == {"HEADS_STEPS", "STEPS", "Run", "Step", "call", *pipeline.STEPS}
    assert set(pipeline.HEADS_STEPS.values()) == {
        step.run for step in pipeline.STEPS.values() if step.takes == "layer"
    }
    assert sorted(pipeline.HEADS_STEPS) == ["alibi", "learned", "relative_bias", "rotary"]


def test_no_step_name_is_typed_as_a_string_outside_the_registry():
    # A step is named once, by its core function: elsewhere it is pipeline.<step> (or the
    # function's __name__), never "<step>" as a key of STEPS or an export's "analysis".
    typed = []
    for path in [*(ROOT / "posviz").rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        if path.name == "pipeline.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            named = None
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("STEPS"):
                named = node.slice
            elif isinstance(node, ast.Dict):
                named = next(
                    (v for k, v in zip(node.keys, node.values, strict=True)
                     if isinstance(k, ast.Constant) and k.value == "analysis"),
                    None,
                )  # fmt: skip
            elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).endswith(
                "['analysis']"
            ):
                named = node.value
            if isinstance(named, ast.Constant) and named.value in pipeline.STEPS:
                typed.append(f"{path.relative_to(ROOT)}:{node.lineno}: {named.value}")
    assert typed == []
