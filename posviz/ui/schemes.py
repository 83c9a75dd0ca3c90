"""The Schemes page's model: where it comes from (a known model, the Hub, an upload, the shared
folder; a GGUF file's metadata standing for config.json), the widgets that follow it, and its
reads. The Hub (or a shared checkpoint) is read once per model and revision for ten minutes,
each read kept within the cache's byte bound. A scheme's numbers are pipeline steps, cached by
`posviz.ui.cache` as every other analysis."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from posviz import hub
from posviz._params import defaults
from posviz.embedding import LoadError
from posviz.models import remote, weights
from posviz.models.weights import (
    checkpoint_provenance,
    config_provenance,
    gguf_provenance,
    read_config,
)
from posviz.records import INV_FREQ_TOLERANCE
from posviz.schemes import alibi
from posviz.schemes.config import RelativeBiasSpec, Scheme, position_scheme
from posviz.schemes.gguf import keys_record
from posviz.schemes.presets import PRESETS
from posviz.schemes.rotary import RotaryFrequencies, RotarySpec, inv_freq_difference
from posviz.source import HubRef, Preset, Upload
from posviz.ui import loaders, state
from posviz.ui.cache import CACHE_SIZE
from posviz.ui.text import literal

__all__ = [
    "FOLLOWED",
    "HUB_MODEL",
    "SOURCES",
    "Shown",
    "alibi_distance",
    "bias_tensors",
    "choose_model",
    "follow",
    "hub_config",
    "hub_model",
    "inv_freq_check",
    "preset_rules",
    "scheme_of",
    "set_hub_model",
    "stored_inv_freq",
]

#: Where the page reads a model's config.json from; the shared folder when the server has one.
SOURCES = ("Known models", "Hub model", "config.json", "Shared folder")
#: The Hub model (repo, revision, GGUF file or None) the Schemes page shows.
HUB_MODEL = "schemes.opened"
#: For each widget that follows the model: the model its value was set for (`follow`).
FOLLOWED = "schemes.followed"
#: ALiBi's bias is shown to the model's context, or to alibi_bias's default distance, but to
#: no more than this many positions unless asked (its chart reads as well to here).
ALIBI_DISTANCE_SHOWN = 8192


@dataclass(frozen=True)
class Shown:
    """The model the Schemes page shows.

    Attributes
    ----------
    config : dict
        Its config.json, parsed (a GGUF's metadata, as config.json keys).
    provenance : dict
        Where the config.json was read (`posviz.models.weights.config_provenance`).
    label : str
        Its name in the overlay of several models.
    origin : str
        The source of a table opened from it.
    weights : Model or None
        Where a learned scheme's tensors are read (a Hub model, a shared checkpoint or GGUF).
    weights_place : str
        Where those are, in words ("from the Hub").
    """

    config: dict
    provenance: dict
    label: str
    origin: str
    weights: weights.Model | None = None
    weights_place: str = ""

    @property
    def identity(self) -> tuple[str, str]:
        """What tells one model from another: its config.json, by name and sha256."""
        return self.provenance["config"], self.provenance["sha256"]


def choose_model(shared: Path | None) -> Shown | None:
    """The source picker and the chosen source's inputs; the model they name, or None until
    one is named (or when it cannot be read: the page says why)."""
    sources = [s for s in SOURCES if s != "Shared folder" or shared]
    source = st.segmented_control(
        "Scheme of", sources, default=sources[0], key="schemes.source", bind="query-params"
    )
    if source == "Hub model":
        return _from_hub()
    if source == "Shared folder" and shared:
        return _from_shared(shared)
    if source == "config.json":
        return _from_upload()
    return _from_preset()


def _from_hub() -> Shown | None:
    with st.form("schemes.hub"):
        left, right = st.columns([3, 1])
        repo = left.text_input(
            "Model id",
            placeholder="meta-llama/Llama-3.1-8B",
            key="schemes.repo",
            help="A repo of GGUF files is read from its metadata: add :FILE.gguf or :QUANT "
            "(e.g. :Q4_K_M) to pick one, else the most precise file is read.",
        )
        revision = right.text_input("Revision", "main", key="schemes.revision")
        if st.form_submit_button("Open", type="primary"):
            set_hub_model(repo, revision)
    st.caption(
        "Only the model id and config.json travel (and, when asked, the few tensors "
        "a learned scheme needs)."
    )
    named = hub_model()
    if named is None:
        return None
    try:
        opened = hub_config(HubRef(*named))
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None
    # A GGUF's metadata stands for config.json: the keys read, each with the one it fed.
    gguf_keys = {"gguf_keys": keys_record(opened.keys)} if opened.gguf else {}
    provenance = config_provenance(opened.at_commit, opened.sha256, **gguf_keys)
    return Shown(opened.config, provenance, named[0], opened.source, opened, "from the Hub")


def _from_shared(root: Path) -> Shown | None:
    # Checkpoints saved with their config.json beside them (the config is read, then only the
    # tensors a scheme needs), or GGUF files (their metadata, then their rope tensors); every
    # message names them as the shared folder lists them.
    opened = loaders.shared_checkpoint(root, key="schemes.shared")
    if opened is None:
        return None
    if isinstance(opened, weights.LocalGGUF):
        provenance, place = gguf_provenance(opened), "from the GGUF file"
    else:
        provenance, place = checkpoint_provenance(opened), "from the checkpoint"
    return Shown(opened.config, provenance, opened.label, opened.label, opened, place)


def _from_upload() -> Shown | None:
    upload = st.file_uploader(
        "A model's config.json, or a GGUF file (its metadata stands for config.json)",
        type=["json", "gguf"],
        key="schemes.upload",
    )
    if upload is None:
        return None
    try:
        config, provenance, _ = state.once_per_upload(
            upload, "schemes.upload.read", lambda data, name: read_config(Upload(name, data))
        )
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None
    label = f"uploaded {upload.name}"
    return Shown(config, provenance, label, label)


def _from_preset() -> Shown:
    name = st.selectbox("Model", list(PRESETS), key="schemes.preset", bind="query-params")
    config, provenance, _ = read_config(Preset(name))
    return Shown(config, provenance, name, f"{name} (config.json excerpt built into posviz)")


def scheme_of(shown: Shown) -> Scheme | None:
    """`shown`'s position scheme, checked; None when config.json is refused (the page says
    why)."""
    try:
        return position_scheme(shown.config)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return None


def follow(model: Hashable, defaults: Mapping[str, Any]) -> None:
    """Set each widget of `defaults` (by key) to its default for `model` when its value was
    set for another model, or it has none: a new model opens at its own sequence length,
    rows, layer type... not at the last model's. Values set before any model was shown (a
    link's, a test's) are kept. Call it before the widgets are drawn, and draw them without a
    value of their own (it is theirs through the session state)."""
    followed = st.session_state.setdefault(FOLLOWED, {})
    for key, default in defaults.items():
        linked = key not in followed and key in st.query_params  # the link's, on opening it
        if not linked and (followed.get(key, model) != model or key not in st.session_state):
            st.session_state[key] = default
        followed[key] = model


def alibi_distance(scheme: Scheme) -> int:
    """The largest distance an ALiBi model opens at: see `ALIBI_DISTANCE_SHOWN`."""
    default = defaults(alibi.alibi_bias)["max_distance"]
    return min(scheme.context or default, ALIBI_DISTANCE_SHOWN)


def inv_freq_check(shown: Shown, f: RotaryFrequencies) -> None:
    """A toggle that reads a stored ``rotary_emb.inv_freq`` buffer of the model's weights (old
    conversions store one, sometimes wrongly) and says whether it matches config.json's."""
    if shown.weights is None:
        return
    follow(shown.identity, {"schemes.inv_freq": False})
    if not st.toggle(
        "Check a stored inv_freq buffer",
        key="schemes.inv_freq",
        help="Old conversions store rotary_emb.inv_freq, sometimes wrongly. Reads the "
        "safetensors headers, then only that buffer.",
    ):
        return
    try:
        stored = stored_inv_freq(shown.weights)
    except LoadError as error:
        st.error(literal(error), icon=":material/error:")
        return
    if stored is None:
        st.info("The checkpoint stores no inv_freq buffer (the usual case).")
        return
    name, values = stored
    difference = inv_freq_difference(values, f)
    text = f"{literal(name)}: largest relative difference from config.json's {difference:.3g}"
    if difference <= INV_FREQ_TOLERANCE:
        st.success(text + " (matches).", icon=":material/check:")
    else:
        st.error(text + ": it does not match; trust config.json.", icon=":material/error:")


def preset_rules(names: list[str]) -> dict[str, tuple[RotarySpec, dict[str, Any]]]:
    """Each known model's main rotary rule, with its provenance (the config.json, the model's
    label and the layer type the rule is of), by name: the overlay's other models."""
    rules = {}
    for name in names:
        _, where, _ = read_config(Preset(name))
        spec = position_scheme(PRESETS[name]).rotary[0]
        rules[name] = (spec, {**where, "model": name, "layer_type": spec.layer_type})
    return rules


def set_hub_model(repo: str, revision: str) -> None:
    """Name the Schemes page's Hub model: ``REPO`` or, in a repo of GGUF files,
    ``REPO:FILE.gguf`` or ``REPO:QUANT``."""
    repo, _, file = repo.strip().partition(":")
    st.session_state[HUB_MODEL] = (repo.strip(), revision.strip() or "main", file.strip() or None)


def hub_model() -> tuple[str, str, str | None] | None:
    """The Hub model (repo, revision, GGUF file or None) named on the Schemes page, if any."""
    named = st.session_state.get(HUB_MODEL)
    return named if named and named[0] else None


@st.cache_data(
    ttl=600, max_entries=64, max_size=CACHE_SIZE, show_spinner="Reading config.json from the Hub…"
)
def hub_config(ref: HubRef) -> hub.ConfigFile:
    return remote.open_config(ref)


@st.cache_data(ttl=600, max_size=CACHE_SIZE, show_spinner="Reading the bias tensors…")
def bias_tensors(opened: weights.Model, spec: RelativeBiasSpec) -> dict[str, np.ndarray]:
    return weights.bias_tensors(opened, spec)


@st.cache_data(ttl=600, max_size=CACHE_SIZE, show_spinner="Reading the inv_freq buffer…")
def stored_inv_freq(opened: weights.Model) -> tuple[str, np.ndarray] | None:
    return weights.stored_inv_freq(opened)
