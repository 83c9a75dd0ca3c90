"""Old import paths of what moved in 0.2.0 still work, with a DeprecationWarning naming the new
path (posviz._moved), and name nothing that never was there."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
from safetensors.numpy import save

import posviz
from posviz import _moved
from tests import ROOT


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_every_moved_module_is_the_new_one_under_its_old_name(old, new):
    # In a fresh interpreter: this one may have imported the old name already.
    code = (
        "import warnings, importlib, posviz; warnings.simplefilter('error'); "
        f"importlib.import_module({old!r})"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert f"DeprecationWarning: {old} moved to {new}" in out.stderr
    with warnings.catch_warnings():  # warned once, when first imported in this process
        warnings.simplefilter("ignore", DeprecationWarning)
        assert importlib.import_module(old) is importlib.import_module(new)


@pytest.mark.parametrize(
    ("module", "names"), sorted((m, sorted(n)) for m, n in _moved.MOVED_NAMES.items())
)
def test_every_moved_name_is_found_where_it_was(module, names):
    old = importlib.import_module(module)
    for name in names:
        where, _, path = _moved.MOVED_NAMES[module][name].partition(":")
        new: object = importlib.import_module(where)
        for part in path.split("."):
            new = getattr(new, part)
        with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} moved to {where}"):
            assert getattr(old, name) is new


def test_the_hub_loader_of_0_1_still_loads_and_says_where_it_went(tmp_path):
    from posviz import hub

    with pytest.warns(DeprecationWarning, match="posviz.hub.load moved to posviz.load"):
        load = hub.load
    assert load is posviz.load
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        hub.nothing  # noqa: B018 -- a name that never was there


def test_the_hub_readers_of_0_1_take_their_old_calls_and_give_the_new_results(fake_hub):
    # posviz.hub.open_model(repo, revision, file) and its kin took strings and keywords; they
    # are posviz.models.remote's functions of a HubRef and a Cut now.
    from posviz import hub
    from posviz.models import remote
    from posviz.source import Cut, HubRef

    wpe = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    config = json.dumps({"model_type": "gpt2", "n_positions": 64}).encode()
    fake_hub.add("acme/gpt2", {"config.json": config, "model.safetensors": save({"wpe": wpe})})
    ref = HubRef("acme/gpt2", "main")

    def old(name):
        with pytest.warns(DeprecationWarning, match=rf"posviz\.hub\.{name} is \S*posviz\."):
            return getattr(hub, name)

    model = old("open_model")("acme/gpt2", "main")
    assert model == remote.open_model(ref)
    opened = old("open_config")("acme/gpt2")
    assert opened == remote.open_config(ref)
    assert old("open_model_at")(opened) == remote.open_model_at(opened)
    table = old("load_model")(model, tensor="wpe", row_start=2, row_stop=40)
    new = remote.load_model(model, Cut("wpe", 2, 40))
    np.testing.assert_array_equal(table.values, wpe[2:40])
    assert (table.sha256, table.row_start, table.origin) == (new.sha256, 2, new.origin)
    is_hub_ref = old("is_hub_ref")
    assert is_hub_ref("hf:acme/gpt2")
    assert not is_hub_ref("wpe.npy")
