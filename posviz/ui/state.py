"""Which tables this session has loaded: plain session_state slots that survive page switches.

A simulated primary table is mirrored into the URL (``?sim=learned-like&n_positions=1024...``)
so a link reopens the same table; so is a model read from the Hub (``?hub=openai-community/gpt2
&revision=main&tensor=transformer.wpe.weight&rows=0:1024``); an uploaded one cannot be shared
that way and clears it.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from posviz import _settings, hub, simulate
from posviz.collection import Member, gather
from posviz.embedding import Embedding
from posviz.schemes import weights
from posviz.ui.text import literal

#: The table every page analyses, and the Compare page's second table.
PRIMARY, SECOND = "posviz.table", "posviz.second"
#: Positions the Boundaries page flagged: {"sha256", "positions", "rule"}.
FLAGS = "posviz.flags"

_DEFAULTS = {
    PRIMARY: ("learned-like", {"n_positions": 1024, "d_model": 768, "seed": 0}),
    SECOND: ("sinusoidal", {"n_positions": 1024, "d_model": 768}),
}


def current(slot: str = PRIMARY) -> Embedding:
    """The table in `slot`; on first use the one the URL names, else the one `posviz serve`
    was started on, else a simulated default."""
    if slot not in st.session_state:
        kind, options = _DEFAULTS[slot]
        linked = (_from_url() or _served()) if slot == PRIMARY else None
        st.session_state[slot] = linked or _simulated(kind, options, slot)
    return st.session_state[slot]


#: How each slot's table was simulated: {slot: (sha256, generator, options)}.
SIMULATED = "posviz.simulated"


def _simulated(kind: str, options: dict[str, Any], slot: str) -> Embedding:
    """`kind` simulated with `options`, remembered so the Simulate form can show them."""
    table = simulate.GENERATORS[kind](**options)
    st.session_state.setdefault(SIMULATED, {})[slot] = (table.sha256, kind, dict(options))
    return table


def simulation(slot: str = PRIMARY) -> tuple[str, dict[str, Any]] | None:
    """The generator and options that made the table in `slot`; None when it was loaded."""
    made = st.session_state.get(SIMULATED, {}).get(slot)
    return made[1:] if made and made[0] == current(slot).sha256 else None


def upload_limit() -> int:
    """This server's upload limit in bytes (server.maxUploadSize, in MB): also the most any
    read from the Hub may fetch, whoever asks (Data page, link, Collection, posviz serve)."""
    return st.get_option("server.maxUploadSize") * 10**6


def _served() -> Embedding | None:
    """The table `posviz serve PATH` names in the environment, loaded as an upload would be."""
    ref = _settings.served_table()
    if not ref:
        return None
    try:
        table = (
            hub.load(ref, max_bytes=upload_limit()) if hub.is_hub_ref(ref) else weights.load(ref)
        )
    except ValueError as error:  # LoadError included: the file changed since the server started
        # The name only: `ref` is the path on the server, not the visitor's business.
        name = ref if hub.is_hub_ref(ref) else Path(ref).name
        st.warning(
            f"{literal(repr(name))} was not opened ({literal(error)}); showing the default table."
        )
        return None
    if hub.is_hub_ref(ref):  # a model can be named in a link; a server's file cannot
        model = hub.parse_ref(ref)
        st.query_params.update(hub_link(model.repo, model.revision, table))
    return table


def set_table(table: Embedding, slot: str = PRIMARY, link: dict[str, str] | None = None) -> None:
    """Make `table` the one in `slot` for every page of this session; for the primary table,
    `link` (URL keys of a Hub model, see `hub_link`) goes into the URL."""
    st.session_state[slot] = table
    if slot == PRIMARY:
        _clear_url()
        st.query_params.update(link or {})


def hub_link(repo: str, revision: str, table: Embedding) -> dict[str, str]:
    """The URL keys that reopen `table`, read from the Hub model `repo` at `revision`."""
    link = {"hub": repo, "revision": revision, "tensor": table.name}
    link["rows"] = f"{table.row_start}:{table.row_start + table.shape[0]}"
    return link | ({"grid": f"{table.grid[0]}x{table.grid[1]}"} if table.grid else {})


def set_flags(table: Embedding, positions: list[int], rule: str) -> None:
    """Share the positions flagged on `table` (0-based rows) with the other pages."""
    st.session_state[FLAGS] = {"sha256": table.sha256, "positions": positions, "rule": rule}


def flags(table: Embedding) -> list[int]:
    """Positions flagged on `table`; none when the flags were made on another table."""
    shared = st.session_state.get(FLAGS)
    return shared["positions"] if shared and shared["sha256"] == table.sha256 else []


def set_simulated(kind: str, options: dict[str, Any], slot: str = PRIMARY) -> None:
    """Simulate `kind` with `options` into `slot`; for the primary table, name it in the URL."""
    st.session_state[slot] = _simulated(kind, options, slot)
    if slot == PRIMARY:
        _clear_url()
        st.query_params.update({"sim": kind} | {k: str(v) for k, v in options.items()})


def _clear_url() -> None:
    for key in ["sim", *_PARAMETERS, *_HUB_KEYS]:
        st.query_params.pop(key, None)


#: Every keyword any generator takes: the only URL keys read as simulation options.
_PARAMETERS = sorted(
    {
        name
        for generator in simulate.GENERATORS.values()
        for name in inspect.signature(generator).parameters
    }
)


_HUB_KEYS = ("hub", "revision", "tensor", "rows", "grid")


def _from_url() -> Embedding | None:
    """The simulated table the URL names, if its options are within the form's bounds, or the
    Hub model's table it names."""
    params = st.query_params
    if "hub" in params and hub.enabled():
        return _from_hub(params)
    kind = params.get("sim")
    if kind not in simulate.GENERATORS:
        return None
    try:
        return _simulated(kind, simulate.parse_options(kind, params.to_dict()), PRIMARY)
    except ValueError as error:  # LoadError included
        st.warning(
            f"The link's simulation was not made ({literal(error)}); showing the default table."
        )
        return None


def _from_hub(params: Any) -> Embedding | None:
    ref = f"hf:{params['hub']}@{params.get('revision') or 'main'}"
    start, _, stop = params.get("rows", "0:").partition(":")
    height, _, width = params.get("grid", "").partition("x")
    try:
        with st.spinner(f"Reading {ref} from the Hub…"):
            return hub.load(
                ref,
                tensor=params.get("tensor"),
                row_start=int(start or 0),
                row_stop=int(stop) if stop else None,
                grid=(int(height), int(width)) if width else None,
                max_bytes=upload_limit(),
            )
    except ValueError as error:  # LoadError included
        st.warning(
            f"The link's model was not loaded ({literal(error)}); showing the default table."
        )
        return None


# --- the collection -------------------------------------------------------------------------

#: The Collection page's members (list of Member) and the version of its label editor (a new
#: version redraws the editor with the members as they are now).
COLLECTION, COLLECTION_EDITOR = "posviz.collection", "posviz.collection.editor"
_COLLECTION_BYTES = "posviz.collection.bytes"


class _Held:
    """Bytes one session's collection holds; it lives as long as the session's state does."""

    nbytes = 0


#: Every live session's tally: a session that ends takes its tally with it.
_SESSIONS: weakref.WeakSet[_Held] = weakref.WeakSet()


def collection() -> list[Member]:
    """This session's collection (empty at first)."""
    return st.session_state.setdefault(COLLECTION, [])


def editor_version() -> int:
    return st.session_state.setdefault(COLLECTION_EDITOR, 0)


def set_collection(members: Sequence[Member], *, redraw: bool = True) -> None:
    """Make `members` this session's collection; `redraw` the label editor with them."""
    st.session_state[COLLECTION] = list(members)
    if redraw:
        st.session_state[COLLECTION_EDITOR] = editor_version() + 1
    _tally().nbytes = gather.held_bytes(members)


def _tally() -> _Held:
    held = st.session_state.setdefault(_COLLECTION_BYTES, _Held())
    _SESSIONS.add(held)
    return held


def server_collection_bytes() -> int:
    """Bytes of tables every live session's collection holds, this one's included."""
    _tally().nbytes = gather.held_bytes(collection())  # members a test or a link put there
    return sum(held.nbytes for held in list(_SESSIONS))


def add_to_collection(requests: Sequence[gather.Request]) -> None:
    """Load `requests` into this session's collection if they fit its and the server's
    budgets (see :func:`posviz.collection.gather.gather`); else raise LoadError, loading none."""
    members = gather.gather(requests, collection(), server_bytes=server_collection_bytes())
    set_collection(members)
