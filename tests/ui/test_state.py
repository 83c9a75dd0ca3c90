"""posviz.ui.state, this session's tables in st.session_state (run here under AppTest, a
function as its script): an upload parsed once, flags kept for the table they were made on,
how a table was made and the link that reopens it kept through a trim, a link's notice shown
while its table is."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def run(script, **query: str) -> AppTest:
    at = AppTest.from_function(script, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_an_upload_is_parsed_once_per_file_and_a_refusal_raised_every_time():
    def script():
        from types import SimpleNamespace

        import streamlit as st

        from posviz.embedding import LoadError
        from posviz.ui import state

        calls = []

        def parse(data: bytes, name: str) -> int:
            calls.append(name)
            return len(data)

        def refuse(data: bytes, name: str) -> int:
            calls.append(name)
            msg = f"{name}: refused"
            raise LoadError(msg)

        first = SimpleNamespace(file_id="1", name="a.npy", getvalue=lambda: b"abc")
        second = SimpleNamespace(file_id="2", name="b.npy", getvalue=lambda: b"abcd")
        bad = SimpleNamespace(file_id="3", name="c.npy", getvalue=lambda: b"")
        parsed = [state.once_per_upload(u, "k", parse) for u in (first, first, second, second)]
        refusals = []
        for _ in range(2):
            try:
                state.once_per_upload(bad, "k", refuse)
            except LoadError as error:
                refusals.append(str(error))
        st.session_state["out"] = (parsed, calls, refusals)

    parsed, calls, refusals = run(script).session_state["out"]
    assert parsed == [3, 3, 4, 4]
    assert calls == ["a.npy", "b.npy", "c.npy"]  # each file parsed once, the refused one too
    assert refusals == ["c.npy: refused"] * 2


def test_flags_are_kept_for_the_table_they_were_made_on():
    def script():
        import streamlit as st

        from posviz import simulate
        from posviz.ui import state

        flagged, other = simulate.gaussian(32, 4, seed=1), simulate.gaussian(32, 4, seed=2)
        before = state.flags(flagged)
        state.set_flags(flagged, [0, 31], "|robust z| > 8")
        st.session_state["out"] = (before, state.flags(flagged), state.flags(other))

    assert run(script).session_state["out"] == ([], [0, 31], [])


def test_a_trim_keeps_the_link_to_its_simulation_and_a_table_no_link_carries_is_named():
    def script():
        import dataclasses

        import numpy as np
        import streamlit as st

        from posviz.embedding import Embedding
        from posviz.io import detect
        from posviz.ui import links, state

        options = {"n_positions": 64, "d_model": 8, "seed": 1}
        state.set_simulated("gaussian", options)
        made, table = state.simulation(), state.current()
        # Cut from the slot's table without an origin of its own (as a page's trim): it keeps
        # the table's.
        trimmed = dataclasses.replace(detect.trim_leading(table, 2), origin=None)
        state.set_table(trimmed)
        expected = links.keys(trimmed, links.simulation("gaussian", options), made=table.sha256)
        after_trim = (state.simulation(), state.link(), expected)
        loaded = Embedding.from_array(np.ones((16, 4)), name="wpe", source="upload.npy")
        state.set_table(loaded)
        named = (state.link(), links.keys(loaded, None, made=None))
        st.session_state["out"] = (made, after_trim, named, dict(st.query_params))

    made, (simulation, link, expected), (named, in_words), url = run(script).session_state["out"]
    assert made == ("gaussian", {"n_positions": 64, "d_model": 8, "seed": 1})
    assert simulation is None  # the trimmed table is not the simulation's own
    assert link == expected
    assert link["sim"] == "gaussian"
    assert named == in_words
    assert "sim" not in named
    assert url == named  # the URL names the table now shown, the simulation's keys gone


def test_a_links_notice_is_shown_while_its_table_is():
    def script():
        import streamlit as st

        from posviz import simulate
        from posviz.ui import state
        from posviz.ui.text import literal

        shown = state.current()
        first = state.notices()
        state.set_table(simulate.gaussian(32, 4))
        st.session_state["out"] = (literal(shown.name), first, state.notices())

    name, first, after = run(script, sim="nope").session_state["out"]
    (notice,) = first
    assert notice.startswith("The link's simulation was not made (sim")
    assert f"showing {name}" in notice
    assert after == []
