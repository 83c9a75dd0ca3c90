"""Which tables this session has loaded: plain session_state slots that survive page switches,
and the link (the page's URL) that reopens them.

Every run puts the current table's keys in the URL (:mod:`posviz.ui.links`: a simulation's
options, a Hub model's commit and tensor, a shared file's path, or, for a table no link can
carry, its name), so a link copied on any page reopens the same table; Compare's second table
too (keys prefixed ``second.``) once it is not the default one. A link that cannot reopen its
table says so on screen until another table is loaded.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import streamlit as st

from posviz import _settings, hub, models, simulate
from posviz.collection import Member, gather
from posviz.embedding import Embedding, LoadError
from posviz.source import HubRef, SharedFile, Source, parse_source
from posviz.ui import links
from posviz.ui.text import literal

#: The table every page analyses, and the Compare page's second table.
PRIMARY, SECOND = "posviz.table", "posviz.second"
#: Positions the Boundaries page flagged: {"sha256", "positions", "rule"}.
FLAGS = "posviz.flags"
_T = TypeVar("_T")

_DEFAULTS = {
    PRIMARY: ("learned-like", {"n_positions": 1024, "d_model": 768, "seed": 0}),
    SECOND: ("sinusoidal", {"n_positions": 1024, "d_model": 768}),
}
#: The URL keys of each slot's table start with this.
PREFIX = {PRIMARY: "", SECOND: "second."}
#: What each slot is called where a notice names it.
_CALLED = {PRIMARY: "", SECOND: "Compare's second table: "}


def current(slot: str = PRIMARY) -> Embedding:
    """The table in `slot`; on first use the one the URL names, else (for the primary table)
    the one `posviz serve` was started on, else a simulated default."""
    if slot not in st.session_state:
        linked, failed = _from_url(slot)
        served, unserved = _served() if slot == PRIMARY and linked is None else (None, None)
        kind, options = _DEFAULTS[slot]
        table = linked or served or _simulated(kind, options, slot)
        st.session_state[slot] = table
        if failed or unserved:
            shown = f"showing {literal(table.name)} ({literal(table.source)}) instead"
            _notice(slot, table, f"{failed or unserved}; {shown}.")
        else:
            _check_link(slot, table, linked=linked is not None)
    return st.session_state[slot]


#: How each slot's table was simulated: {slot: (sha256, generator, options)}.
SIMULATED = "posviz.simulated"
#: Where each slot's table came from, as link keys: {slot: (sha256, origin or None)}.
ORIGINS = "posviz.origins"
#: What each slot's link could not reopen, shown until the slot's table changes:
#: {slot: (sha256, text)}.
NOTICES = "posviz.notices"


def _simulated(kind: str, options: dict[str, Any], slot: str) -> Embedding:
    """`kind` simulated with `options`, remembered so the Simulate form and the link can show
    them."""
    table = simulate.GENERATORS[kind](**options)  # its origin: the simulation
    st.session_state.setdefault(SIMULATED, {})[slot] = (table.sha256, kind, dict(options))
    _set_origin(slot, table)
    return table


def simulation(slot: str = PRIMARY) -> tuple[str, dict[str, Any]] | None:
    """The generator and options that made the table in `slot`; None when it was loaded."""
    table = current(slot)  # first: on a session's first run it makes (and records) the default
    made = st.session_state.get(SIMULATED, {}).get(slot)
    return made[1:] if made and made[0] == table.sha256 else None


def once_per_upload(upload: Any, key: str, parse: Callable[[bytes, str], _T]) -> _T:
    """``parse(bytes, name)`` of an uploaded file, once per file (its file_id), kept in the
    session under `key`: a page runs again on every widget change, and a header of millions
    of tiny items takes seconds to read. A refusal is kept too, and raised on every run."""
    kept = st.session_state.get(key)
    if kept is None or kept[0] != upload.file_id:
        outcome: _T | LoadError
        try:
            outcome = parse(upload.getvalue(), upload.name)
        except LoadError as error:
            outcome = error
        kept = st.session_state[key] = (upload.file_id, outcome)
    if isinstance(kept[1], LoadError):
        raise kept[1]
    return kept[1]


def upload_limit() -> int:
    """This server's upload limit in bytes (server.maxUploadSize, in Streamlit's MB of 2**20
    bytes, as its uploader enforces it): also the most any read from the Hub may fetch,
    whoever asks (Data page, link, Collection, posviz serve)."""
    return st.get_option("server.maxUploadSize") * 2**20


def _served() -> tuple[Embedding | None, str | None]:
    """The table `posviz serve PATH` names in the environment, loaded as an upload would be;
    or why it could not be."""
    ref = _settings.served_table()
    if not ref:
        return None, None
    try:
        source = parse_source(ref)
        table = models.load(source, max_bytes=upload_limit())
    except ValueError as error:  # LoadError included: the file changed since the server started
        # The name only: `ref` is the path on the server, not the visitor's business.
        name = ref if ref.startswith("hf:") else Path(ref).name
        return None, f"{literal(repr(name))} was not opened ({literal(error)})"
    # A model can be named in a link; a server's file cannot (links.origin: by its name).
    _set_origin(PRIMARY, table)
    return table, None


def set_table(table: Embedding, slot: str = PRIMARY) -> None:
    """Make `table` the one in `slot` for every page of this session and name it in the URL.

    Its origin (`Embedding.origin`: a Hub model at its commit, a shared file, an upload)
    names it in the link. A table without one cut from the slot's table (the same source and
    tensor, other rows: a trim) keeps that table's origin; any other is named in words, a
    link cannot reopen it.
    """
    origin = table.origin
    if origin is None:
        before = st.session_state.get(slot)
        if before is not None and (before.source, before.name) == (table.source, table.name):
            origin = _origin(slot)
    st.session_state[slot] = table
    _set_origin(slot, table, origin)
    sync_url()


def _set_origin(slot: str, table: Embedding, origin: Source | None = None) -> None:
    st.session_state.setdefault(ORIGINS, {})[slot] = (table.sha256, origin or table.origin)


def _origin(slot: str) -> Source | None:
    """The origin of the table in `slot`, if it is known."""
    sha, origin = st.session_state.get(ORIGINS, {}).get(slot, ("", None))
    table = st.session_state.get(slot)
    return origin if table is not None and sha == table.sha256 else None


def link(slot: str = PRIMARY) -> dict[str, str]:
    """The URL keys (without the slot's prefix) that reopen the table in `slot`, or name it
    when no link can reopen it."""
    table = current(slot)
    made = st.session_state.get(SIMULATED, {}).get(slot)
    return links.keys(table, links.origin(_origin(slot)), made=made[0] if made else None)


def sync_url() -> None:
    """Put the tables' keys in the URL (the primary table's always, the second's when it is
    not the default one), replacing any a previous table left; other keys (a page's tab, a
    setting) stay."""
    wanted = {f"{PREFIX[PRIMARY]}{key}": value for key, value in link(PRIMARY).items()}
    if SECOND in st.session_state:
        second = link(SECOND)
        if second != _default_link(SECOND):
            wanted |= {f"{PREFIX[SECOND]}{key}": value for key, value in second.items()}
    for key in [k for k in st.query_params if _is_table_key(k) and k not in wanted]:
        del st.query_params[key]
    changed = {key: value for key, value in wanted.items() if st.query_params.get(key) != value}
    if changed:
        st.query_params.update(changed)


def _is_table_key(key: str) -> bool:
    return any(key.startswith(p) and key[len(p) :] in links.KEYS for p in PREFIX.values())


def _default_link(slot: str) -> dict[str, str]:
    kind, options = _DEFAULTS[slot]
    table = _default_table(slot)
    return links.keys(table, links.simulation(kind, options), made=table.sha256)


@st.cache_resource(show_spinner=False)
def _default_table(slot: str) -> Embedding:
    """The default table of `slot`, made once per server (only its sha256 is read)."""
    kind, options = _DEFAULTS[slot]
    return simulate.GENERATORS[kind](**options)


def notices() -> list[str]:
    """What the links that opened this session's tables could not reopen (markdown), while
    those tables are still shown."""
    kept = st.session_state.get(NOTICES, {})
    return [
        text
        for slot, (sha, text) in kept.items()
        if slot in st.session_state and st.session_state[slot].sha256 == sha
    ]


def _notice(slot: str, table: Embedding, text: str) -> None:
    st.session_state.setdefault(NOTICES, {})[slot] = (table.sha256, _CALLED[slot] + text)


def set_flags(table: Embedding, positions: list[int], rule: str) -> None:
    """Share the positions flagged on `table` (0-based rows) with the other pages."""
    st.session_state[FLAGS] = {"sha256": table.sha256, "positions": positions, "rule": rule}


def flags(table: Embedding) -> list[int]:
    """Positions flagged on `table`; none when the flags were made on another table."""
    shared = st.session_state.get(FLAGS)
    return shared["positions"] if shared and shared["sha256"] == table.sha256 else []


def set_simulated(kind: str, options: dict[str, Any], slot: str = PRIMARY) -> None:
    """Simulate `kind` with `options` into `slot` and name it in the URL."""
    st.session_state[slot] = _simulated(kind, options, slot)
    sync_url()


def _params(slot: str) -> dict[str, str]:
    """The URL's keys for `slot`'s table, its prefix removed."""
    prefix = PREFIX[slot]
    return {
        key[len(prefix) :]: value
        for key, value in st.query_params.to_dict().items()
        if key.startswith(prefix) and key[len(prefix) :] in links.KEYS
    }


def _from_url(slot: str) -> tuple[Embedding | None, str | None]:
    """The table the URL names for `slot` (a simulation within the form's bounds, a Hub
    model's tensor, a shared file's), or why it could not be made; (None, None) when the URL
    names none it can reopen."""
    params = _params(slot)
    what = next((origin for origin in links.REOPENED if origin in params), None)
    if what is None:
        return None, None
    try:
        return _OPENERS[what](slot, params), None
    except ValueError as error:  # LoadError included
        return None, f"{_FAILED[what]} ({literal(error)})"


def _check_link(slot: str, table: Embedding, *, linked: bool) -> None:
    """Say on screen when the URL named a table other than `table` (just opened in `slot`)."""
    params = _params(slot)
    if text := links.not_reopened(params, table, linked=linked):
        _notice(slot, table, literal(text))
    elif slot == PRIMARY and not params and st.query_params.to_dict():
        _notice(
            slot,
            table,
            "This link names no table (made before links carried one, or edited): showing "
            f"{literal(table.name)} ({literal(table.source)}).",
        )


def _from_simulation(slot: str, params: dict[str, str]) -> Embedding:
    kind = params["sim"]
    if kind not in simulate.GENERATORS:
        msg = f"sim={kind[:40]!r} is not one of {', '.join(simulate.GENERATORS)}"
        raise ValueError(msg)
    options = simulate.parse_options(kind, params)
    cut = links.recut(_simulated(kind, options, slot), params)
    _set_origin(slot, cut)
    return cut


def _from_hub(slot: str, params: dict[str, str]) -> Embedding:
    if not hub.enabled():
        msg = "this server does not read from the Hugging Face Hub (POSVIZ_HUB=off)"
        raise ValueError(msg)
    ref = HubRef(params["hub"], params.get("revision") or "main", params.get("file") or None)
    with st.spinner(f"Reading {ref} from the Hub…"):
        table = models.load(ref, links.parse_cut(params), max_bytes=upload_limit())
    _set_origin(slot, table)
    return table


def _from_shared(slot: str, params: dict[str, str]) -> Embedding:
    table = models.load(SharedFile(params["shared"]), links.parse_cut(params))
    _set_origin(slot, table)
    return table


_OPENERS = {"sim": _from_simulation, "hub": _from_hub, "shared": _from_shared}
_FAILED = {
    "sim": "The link's simulation was not made",
    "hub": "The link's model was not loaded",
    "shared": "The link's file of the shared folder was not opened",
}


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
