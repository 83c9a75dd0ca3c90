"""Scheme figures, checked by their traces: what is drawn where, and labels kept as text."""

from __future__ import annotations

import numpy as np

from posviz import figures
from posviz.schemes.alibi import alibi_bias
from posviz.schemes.config import position_scheme
from posviz.schemes.layers import MROPE_AXES, LayerScheme, Mrope, layer_table
from posviz.schemes.presets import PRESETS
from posviz.schemes.relative import relative_bias
from posviz.schemes.rotary import RotarySpec, rotary_decay, rotary_frequencies

LLAMA3 = RotarySpec("llama3", 128, 500000.0, context=131072, original_context=8192, factor=8.0,
                    low_freq_factor=1.0, high_freq_factor=4.0)  # fmt: skip


def test_ladder_draws_each_band_at_its_wavelengths():
    f = rotary_frequencies(LLAMA3)
    fig = figures.schemes.frequency_ladder(f)
    unscaled, kept, blended, divided = fig.data
    np.testing.assert_allclose(unscaled.y, f.wavelengths_unscaled, rtol=1e-6)
    assert (len(kept.x), len(blended.x), len(divided.x)) == (29, 6, 29)
    np.testing.assert_allclose(divided.y, 8 * f.wavelengths_unscaled[35:], rtol=1e-6)
    assert fig.layout.yaxis.type == "log"


def test_decay_has_similarity_and_bound_panels_on_a_log_axis():
    f = rotary_frequencies(LLAMA3)
    fig = figures.schemes.decay(rotary_decay(f, max_distance=1000), f)
    assert [t.name for t in fig.data] == ["unscaled", "scaled", "unscaled", "scaled"]
    assert fig.data[1].y[0] == 1.0  # B(0)
    assert fig.layout.xaxis.type == "log"


def test_alibi_and_t5_figures():
    b = alibi_bias(112, max_distance=100)
    fig = figures.schemes.alibi_bias(b)
    assert len(fig.data) == 32
    # Formerly: 32 of BLOOM's 112 heads drawn without saying which, three dotted lines
    # without labels, the axis cut at -12 unsaid.
    drawn = [int(t.name.split()[1]) for t in fig.data]
    assert ", ".join(map(str, drawn)) in fig.layout.title.text
    slopes = np.sort(b.slopes[drawn])
    assert slopes[0] == b.slopes.min()  # the whole fan
    assert slopes[-1] == b.slopes.max()
    assert "Axis cut at −12 logits" in fig.layout.title.text
    marks = [a.text for a in fig.layout.annotations]
    assert [m.split(":")[0] for m in marks] == [
        "fallen by 1 logit",
        "fallen by 5 logits",
        "fallen by 10 logits",
    ]
    r = relative_bias(np.ones((32, 4)), max_distance=16)
    heat = figures.schemes.t5_bias(r, name="<b>x</b>")
    assert heat.data[0].z.shape == (4, 33)
    assert "&lt;b&gt;x&lt;/b&gt;" in heat.layout.title.text


def test_a_layer_type_is_shown_as_text():
    spec = RotarySpec("default", 8, 10000.0, layer_type='<a href="x">s</a>')
    title = figures.schemes.frequency_ladder(rotary_frequencies(spec)).layout.title.text
    assert "&lt;a href" in title
    assert "<a" not in title


def test_bands_draw_each_pairs_division_with_the_factor_marked():
    f = rotary_frequencies(LLAMA3)
    fig = figures.schemes.bands(f)
    (pairs,) = fig.data
    np.testing.assert_allclose(pairs.y, f.division, rtol=1e-6)
    assert pairs.y[0] == 1.0
    assert pairs.y[-1] == 8.0
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.shapes[0].y0 == 8.0  # the factor


def test_unrotated_pairs_have_no_wavelength_or_division_drawn():
    spec = RotarySpec("proportional", 16, 1e6, rotating_pairs=2)
    f = rotary_frequencies(spec)
    ladder = figures.schemes.frequency_ladder(f)
    assert len(ladder.data[0].x) == 2
    assert np.isfinite(ladder.data[0].y).all()
    assert len(figures.schemes.bands(f).data[0].x) == 2


def strip_rows(fig) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Each row's values and the (first, last) layers of their runs, as drawn."""
    rows: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for bar in fig.data:
        starts = [int(b + 0.5) for b in bar.base]
        runs = [(a, a + int(w) - 1) for a, w in zip(starts, bar.x, strict=True)]
        rows.setdefault(bar.legendgroup or bar.y[0], {})[bar.name] = runs
    return rows


def test_the_layer_strip_draws_each_run_of_layers_in_its_row():
    layers = position_scheme(PRESETS["HuggingFaceTB/SmolLM3-3B"]).layers
    fig = figures.schemes.layer_strip(layer_table(layers))
    rows = strip_rows(fig)
    assert list(rows) == list(fig.layout.yaxis.categoryarray) == [
        "encoding", "rule", "θ", "rotary width", "layer type", "sliding window",
    ]  # fmt: skip
    assert rows["encoding"]["NoPE"] == [(i, i) for i in range(3, 36, 4)]
    assert rows["encoding"]["RoPE"] == [(i, i + 2) for i in range(0, 36, 4)]
    assert rows["θ"]["5,000,000"] == rows["encoding"]["RoPE"]
    assert rows["layer type"] == {"full_attention": [(0, 35)]}
    for row, values in rows.items():  # every layer once in every row
        covered = sorted(i for runs in values.values() for a, b in runs for i in range(a, b + 1))
        assert covered == list(range(36)), row
    nope = next(bar for bar in fig.data if bar.name == "NoPE")
    assert nope.marker.color == figures.schemes.NONE_COLOUR
    assert nope.hovertext[0] == "layer 3: encoding NoPE"


def test_the_strip_adds_mrope_and_temperature_rows_for_models_that_have_them():
    llama4 = layer_table(position_scheme(PRESETS["meta-llama/Llama-4-Scout-17B-16E"]).layers,
                         context=16384)  # fmt: skip
    rows = strip_rows(figures.schemes.layer_strip(llama4))
    assert rows["temperature"] == {
        "none": [(i, i + 2) for i in range(0, 48, 4)],
        f"{1 + 0.1 * np.log(3):.4f}": [(i, i) for i in range(3, 48, 4)],
    }
    assert "mrope" not in rows
    qwen = layer_table(position_scheme(PRESETS["Qwen/Qwen2-VL-7B-Instruct"]).layers)
    assert strip_rows(figures.schemes.layer_strip(qwen))["mrope"] == {"16/24/24": [(0, 27)]}


def test_mrope_pairs_colour_each_axis_in_its_own_colour():
    fig = figures.schemes.mrope_pairs(Mrope((2, 1, 1), interleaved=True))
    assert strip_rows(fig)["axis"] == {"time": [(0, 0), (3, 3)], "height": [(1, 1)],
                                       "width": [(2, 2)]}  # fmt: skip
    colours = {bar.name: bar.marker.color for bar in fig.data}
    assert colours == dict(zip(MROPE_AXES, figures.schemes.STRIP_COLOURS, strict=False))
    # An axis without pairs leaves the others their colours.
    fig = figures.schemes.mrope_pairs(Mrope((0, 2, 2)))
    assert {bar.name: bar.marker.color for bar in fig.data} == {
        "height": figures.schemes.STRIP_COLOURS[1], "width": figures.schemes.STRIP_COLOURS[2]
    }  # fmt: skip


def test_a_layer_type_in_the_strip_is_shown_as_text():
    layer = LayerScheme(0, '<a href="x">s</a>', RotarySpec("default", 8, 10000.0))
    fig = figures.schemes.layer_strip(layer_table((layer,)))
    texts = [t for bar in fig.data for t in (bar.name, *bar.hovertext, *bar.text)]
    assert not [t for t in texts if "<a" in t]
    assert any("&lt;a href" in t for t in texts)
