"""The Heads page's cached calls: a model's headers and plan once per model and revision, a
layer's weights read once (kept as the object: a Llama-8B layer is 80 MB), shared by all
sessions; each head's numbers are the pipeline's steps, cached in `posviz.ui.cache`."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import streamlit as st

from posviz import hub, pipeline
from posviz.heads import PatternHeads, RotaryHeads
from posviz.models import attention, weights
from posviz.ui import cache

__all__ = ["HUB_MODEL", "heads", "hub_model", "layer", "opened", "plan", "set_hub_model", "size"]

#: The Hub model (repo, revision) the Heads page shows.
HUB_MODEL = "heads.opened"


def size(nbytes: int) -> str:
    """Bytes as the page says them: MB, or kB below 0.1 MB."""
    return f"{nbytes / 1e6:,.2f} MB" if nbytes >= 10**5 else f"{nbytes / 1e3:,.1f} kB"


def set_hub_model(repo: str, revision: str) -> None:
    st.session_state[HUB_MODEL] = (repo.strip(), revision.strip() or "main")


def hub_model() -> tuple[str, str] | None:
    """The Hub model named on the Heads page, if any."""
    named = st.session_state.get(HUB_MODEL)
    return named if named and named[0] else None


@st.cache_resource(ttl=600, max_entries=16, show_spinner="Reading the model's headers…")
def opened(model: weights.Readable) -> attention.Opened:
    """config.json and the safetensors headers (a Hub model at the commit it was read at)."""
    return attention.open_model(model)


def _source(model: weights.Readable) -> str:
    if isinstance(model, hub.ConfigFile):
        return model.at_commit
    where = model.path if isinstance(model.path, str) else model.label  # an upload's bytes
    return f"{where}:{model.sha256}"


@st.cache_data(ttl=600, max_entries=64, show_spinner=False, hash_funcs={
    hub.ConfigFile: attrgetter("at_commit"), weights.LocalCheckpoint: _source})  # fmt: skip
def plan(model: weights.Readable, layer: int) -> attention.LayerPlan:
    """What reading `layer` takes (LoadError / NoHeadsView before anything is fetched)."""
    found = opened(model)
    return attention.plan_layer(found.config, found.tensors, layer=layer, label=found.label)


@st.cache_resource(max_entries=2, show_spinner="Reading the layer's query and key rows…",
                   hash_funcs={hub.ConfigFile: attrgetter("at_commit"),
                               weights.LocalCheckpoint: _source})  # fmt: skip
def layer(model: weights.Readable, index: int) -> attention.AttentionLayer:
    """The layer's weights, read once (a second session opening it reads nothing)."""
    return attention.read_planned(opened(model), plan(model, index))


def heads(found: attention.AttentionLayer, **params: Any) -> PatternHeads | RotaryHeads:
    """The layer's heads by its kind's step (`posviz.pipeline.HEADS_STEPS`), cached
    (`posviz.ui.cache`: keyed by the layer's sha256, byte-bounded, shared by all sessions)."""
    return cache.run(pipeline.HEADS_STEPS[found.kind], found, **params)
