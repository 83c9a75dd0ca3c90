"""The Schemes page's model and its reads: the Hub (or a shared checkpoint) is read once per
model and revision for ten minutes, each read kept within the cache's byte bound. A scheme's
numbers are pipeline steps, cached by `posviz.ui.cache` as every other analysis."""

from __future__ import annotations

import numpy as np
import streamlit as st

from posviz import hub
from posviz.schemes import weights
from posviz.schemes.config import RelativeBiasSpec
from posviz.ui.cache import CACHE_SIZE

__all__ = [
    "HUB_MODEL",
    "bias_tensors",
    "hub_config",
    "hub_model",
    "set_hub_model",
    "stored_inv_freq",
]


#: The Hub model (repo, revision) the Schemes page shows.
HUB_MODEL = "schemes.opened"


def set_hub_model(repo: str, revision: str) -> None:
    st.session_state[HUB_MODEL] = (repo.strip(), revision.strip() or "main")


def hub_model() -> tuple[str, str] | None:
    """The Hub model named on the Schemes page, if any."""
    named = st.session_state.get(HUB_MODEL)
    return named if named and named[0] else None


@st.cache_data(
    ttl=600, max_entries=64, max_size=CACHE_SIZE, show_spinner="Reading config.json from the Hub…"
)
def hub_config(repo: str, revision: str) -> hub.ConfigFile:
    return hub.open_config(repo, revision)


@st.cache_data(ttl=600, max_size=CACHE_SIZE, show_spinner="Reading the bias tensors…")
def bias_tensors(opened: weights.Model, spec: RelativeBiasSpec) -> dict[str, np.ndarray]:
    return weights.bias_tensors(opened, spec)


@st.cache_data(ttl=600, max_size=CACHE_SIZE, show_spinner="Reading the inv_freq buffer…")
def stored_inv_freq(opened: weights.Model) -> tuple[str, np.ndarray] | None:
    return weights.stored_inv_freq(opened)
