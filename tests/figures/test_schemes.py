"""Scheme figures, checked by their traces: what is drawn where, and labels kept as text."""

from __future__ import annotations

import numpy as np

from posviz import figures
from posviz.schemes.alibi import alibi_bias
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
