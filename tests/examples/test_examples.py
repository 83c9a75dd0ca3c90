"""The models shipped with posviz (posviz/examples): all-MiniLM-L6-v2 holds exactly what its six
layers' heads read, its position table the bytes the tests check elsewhere; the planted GPT-2
is the test fixture, its head found where planted and nowhere else; rerun finds both again."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from posviz import depth, examples
from posviz.embedding import LoadError
from posviz.models import attention, weights
from posviz.recompute import rerun
from tests import ROOT


def opened(name: str) -> attention.Opened:
    found = examples.EXAMPLES[name]
    return attention.open_model(weights.open_checkpoint(found.weights, label=found.label))


def test_minilm_ships_exactly_the_tensors_its_layers_read():
    model = opened("all-MiniLM-L6-v2")
    plan = depth.plan_depth(model)
    assert plan.layers == tuple(range(6))
    assert not plan.skipped
    read = {r.name for p in plan.plans for r in p.reads}
    assert read == set(model.tensors)
    # Bytes unchanged: the position table is the one tests/data/README.md records.
    table = load_file(examples.EXAMPLES["all-MiniLM-L6-v2"].weights)
    positions = table["embeddings.position_embeddings.weight"]
    assert hashlib.sha256(positions.tobytes()).hexdigest() == (
        "4c347d866c9012e7160b42a7e36d9138935e0669cc62932df70cdc7d6401ea01"
    )
    licence = examples.EXAMPLES["all-MiniLM-L6-v2"].weights.with_name("LICENSE")
    assert "Apache License" in licence.read_text()


def test_the_planted_example_is_the_fixture_and_its_head_is_found_alone():
    shipped = examples.EXAMPLES["planted-gpt2"].weights.parent
    fixture = ROOT / "tests" / "data" / "heads" / "depth" / "gpt2"
    for name in ("config.json", "model.safetensors", "planted.json"):
        assert (shipped / name).read_bytes() == (fixture / name).read_bytes()
    assert examples.EXAMPLES["planted-gpt2"].simulated
    found = depth.collect(depth.plan_depth(opened("planted-gpt2")))
    labels = found.label_map()
    assert [tuple(map(int, rc)) for rc in np.argwhere(labels != "")] == [(2, 1)]
    assert labels[2, 1] == "previous-token"
    planted = json.loads((shipped / "planted.json").read_text())
    assert planted["previous-token"] == [[2, 1]]


def test_a_depth_export_of_an_example_reruns_wherever_posviz_is():
    plan = depth.plan_depth(opened("planted-gpt2"), "1-2")
    records: list[dict] = []
    found = depth.collect(plan, each=lambda layer: records.append(layer.record()))
    exported = json.loads(json.dumps(depth.layers_record(found, records)))
    assert exported["provenance"]["weights"] == "example:planted-gpt2/model.safetensors"
    assert exported["provenance"]["config"] == "example:planted-gpt2/config.json"
    result = rerun(exported)
    assert result.ok, result.differing[:3]


@pytest.mark.parametrize(
    "source",
    ["example:nothing/model.safetensors", "example:planted-gpt2/planted.json",
     "planted-gpt2/config.json"],
)  # fmt: skip
def test_only_a_shipped_models_files_are_found(source):
    with pytest.raises(LoadError, match="not a model shipped with posviz"):
        examples.path_of(source)
