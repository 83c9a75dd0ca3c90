"""The Schemes page's cached core calls: a scheme's numbers are computed once per setting and
shared by all sessions; the Hub (or a shared checkpoint) is read once per model and revision
for ten minutes."""

from __future__ import annotations

import numpy as np
import streamlit as st

from posviz import hub
from posviz.schemes import weights
from posviz.schemes.alibi import AlibiBias, alibi_bias
from posviz.schemes.record import is_decoder_bias
from posviz.schemes.relative import RelativeBias, relative_bias
from posviz.schemes.rotary import (
    RotaryDecay,
    RotaryFrequencies,
    RotaryOverlay,
    RotarySpec,
    rotary_decay,
    rotary_frequencies,
    rotary_overlay,
)

__all__ = [
    "HUB_MODEL",
    "alibi",
    "bias_tensors",
    "decay",
    "frequencies",
    "hub_config",
    "hub_model",
    "overlay",
    "set_hub_model",
    "stored_inv_freq",
    "t5_bias",
]


#: The Hub model (repo, revision) the Schemes page shows.
HUB_MODEL = "schemes.opened"


def set_hub_model(repo: str, revision: str) -> None:
    st.session_state[HUB_MODEL] = (repo.strip(), revision.strip() or "main")


def hub_model() -> tuple[str, str] | None:
    """The Hub model named on the Schemes page, if any."""
    named = st.session_state.get(HUB_MODEL)
    return named if named and named[0] else None


@st.cache_data(max_entries=64, show_spinner=False)
def frequencies(spec: RotarySpec, *, context: int | None) -> RotaryFrequencies:
    return rotary_frequencies(spec, context=context)


@st.cache_data(max_entries=32, show_spinner="Computing B(Δ) and RoFormer's bound…")
def decay(spec: RotarySpec, *, context: int | None) -> RotaryDecay:
    return rotary_decay(rotary_frequencies(spec, context=context))


@st.cache_data(max_entries=16, show_spinner="Computing the models' B(Δ)…")
def overlay(specs: dict[str, RotarySpec]) -> RotaryOverlay:
    return rotary_overlay(specs)


@st.cache_data(max_entries=32, show_spinner=False)
def alibi(n_heads: int, *, alibi_bias_max: float, max_distance: int) -> AlibiBias:
    return alibi_bias(n_heads, alibi_bias_max=alibi_bias_max, max_distance=max_distance)


@st.cache_data(ttl=600, max_entries=64, show_spinner="Reading config.json from the Hub…")
def hub_config(repo: str, revision: str) -> hub.ConfigFile:
    return hub.open_config(repo, revision)


@st.cache_data(ttl=600, max_entries=16, show_spinner="Reading the bias tensors…")
def bias_tensors(opened: weights.Model) -> dict[str, np.ndarray]:
    return weights.bias_tensors(opened)


@st.cache_data(ttl=600, max_entries=16, show_spinner="Reading the inv_freq buffer…")
def stored_inv_freq(opened: weights.Model) -> tuple[str, np.ndarray] | None:
    return weights.stored_inv_freq(opened)


@st.cache_data(max_entries=32, show_spinner=False)
def t5_bias(weight: np.ndarray, name: str, *, max_distance: int) -> RelativeBias:
    return relative_bias(weight, bidirectional=not is_decoder_bias(name), max_distance=max_distance)
