"""Several rotary models overlaid: one core function whose params follow the convention, and an
export of the Schemes page's overlay that `posviz rerun` recomputes from each config.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

import posviz
from posviz._params import defaults
from posviz.cli import main
from posviz.schemes.rotary import RotarySpec, rotary_overlay
from tests import apptest

PAGE = "pages/schemes.py"
LLAMA = "meta-llama/Llama-3.1-8B"


def test_overlay_decays_share_the_longest_context_and_params_rerun():
    specs = {
        "short": RotarySpec("default", 8, 10000.0, context=100),
        "long": RotarySpec("default", 4, 500.0, context=300),
    }
    o = rotary_overlay(specs, n_distances=50)
    assert o.params == {"max_distance": None, "n_distances": 50}
    assert defaults(rotary_overlay) == {"max_distance": None, "n_distances": 1024}
    assert [int(d.distances[-1]) for d in o.decays.values()] == [300, 300]
    # Two pairs at base 500: θ = 1, 1/sqrt(500); B(Δ) = mean of cos(Δθ).
    d = o.decays["long"]
    expected = (np.cos(d.distances) + np.cos(d.distances / np.sqrt(500))) / 2
    np.testing.assert_allclose(d.similarity, expected, rtol=0, atol=1e-12)
    frame = o.to_frame()
    assert frame["model"].tolist() == ["short"] * 4 + ["long"] * 2
    np.testing.assert_allclose(frame["wavelength"][4:], [2 * np.pi, 2 * np.pi * np.sqrt(500)])
    assert frame["pair_fraction"].tolist() == [0, 0.25, 0.5, 0.75, 0, 0.5]
    again = rotary_overlay(specs, **o.params)
    assert again.decay_table().equals(o.decay_table())
    capped = rotary_overlay(specs, max_distance=50)
    assert capped.decay_table()["distance"].max() == 50


def test_no_model_gives_an_empty_overlay():
    assert rotary_overlay({}).frequencies == {}


def test_the_pages_overlay_exports_params_and_reruns(downloads, tmp_path, capsys):
    at = apptest(PAGE)
    at.session_state["schemes.overlay"] = True
    at.run()
    assert not at.exception, at.exception
    for name in ("ladders_overlay", "decays_overlay"):
        data = json.loads(downloads[f"{name}.json"]())
        assert data["analysis"] == "rotary_overlay"
        assert data["params"] == defaults(rotary_overlay)
        models = [p["model"] for p in data["provenance"]]
        assert models[0] == LLAMA  # the page's model first, then the chosen presets
        assert [p["config"] for p in data["provenance"]] == [f"preset:{m}" for m in models]
        for suffix in ("json", "csv"):
            export = tmp_path / f"{name}.{suffix}"
            export.write_text(downloads[f"{name}.{suffix}"]())
            code = main(["rerun", str(export)])
            out = capsys.readouterr().out
            assert code == 0, out
            assert f"preset:{LLAMA}, preset:" in out.splitlines()[-1]
    column = "wavelength"
    data = json.loads(downloads["ladders_overlay.json"]())
    data["columns"][column][5] *= 1 + 1e-9
    assert [c.name for c in posviz.rerun(data).differing] == [f"{column}[5]"]
    data = json.loads(downloads["decays_overlay.json"]())
    data["provenance"][1]["model"] = "not a model"
    data["provenance"][1]["sha256"] = "0" * 64
    with pytest.raises(posviz.LoadError, match="is not the one exported"):
        posviz.rerun(data)
