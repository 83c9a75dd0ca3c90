"""A setting's widget is made from its core function: its bounds, default and docstring; every
number a page asks for is in its link."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from posviz import boundary, offsets, probes, simulate
from posviz.ui import inputs, pages
from tests import apptest


def documented(x, *, alpha: int = 1, beta: float = 0.5, gamma: int = 3) -> None:
    """A function.

    Parameters
    ----------
    x : ndarray
    alpha, beta : int
        Both, see :func:`~posviz.offsets.largest_offset` and ``n - 1``,
        over two lines.
    gamma : int

    Returns
    -------
    None
        Not a parameter.
    """


def test_the_docstring_describes_each_parameter_in_markdown():
    said = "Both, see `largest_offset` and `n - 1`, over two lines."
    assert inputs.described(documented, "alpha") == inputs.described(documented, "beta") == said
    assert inputs.described(documented, "gamma") is None  # named, not described
    assert inputs.described(documented, "None") is None  # the next section is not read
    assert "2w + 1" in inputs.described(boundary.outliers, "hampel_window")
    # Every setting the probes' widgets show is described on its own (once "See ...").
    for name in ("seed", "max_rows", "n_pairs", "repeats"):
        assert "See" not in inputs.described(probes.probe_with_controls, name)


def _window_page() -> None:
    from posviz import boundary, offsets
    from posviz.ui import inputs

    inputs.setting(offsets.offset_profile, "max_offset", "k", high=10, default=64, key="k")
    inputs.setting(offsets.offset_scores, "monotonicity_window", "w", high=5, key="w")
    inputs.setting(boundary.outliers, "threshold", "z", step=0.5, key="z")


def test_a_widget_takes_its_bounds_default_and_help_from_its_function():
    at = AppTest.from_function(_window_page).run()
    assert not at.exception, at.exception
    k, w, z = (at.number_input(key=key) for key in "kwz")
    # The function's own low end, the page's high one; the default moved into them.
    assert (k.min, k.max, k.value) == (1, 10, 10)
    assert (w.min, w.max, w.value) == (2, 5, 5)  # offset_scores' default 32 is above 5
    assert k.help == inputs.described(offsets.offset_profile, "max_offset")
    assert "Spearman" in w.help
    assert isinstance(w.value, int)
    assert (z.min, z.max, z.value, z.proto.format) == (1.0, 1e6, 8.0, "%g")
    # In the link, and kept across page switches.
    assert {x.proto.query_param_key for x in (k, w, z)} == {"k", "w", "z"}


def test_a_setting_the_function_does_not_have_is_refused_by_name():
    with pytest.raises(TypeError, match="offset_profile has no setting 'max_offst'"):
        inputs.setting(offsets.offset_profile, "max_offst", "k", key="k")
    with pytest.raises(TypeError, match="no default of its own"):
        inputs.setting(offsets.offset_profile, "max_offset", "k", key="k")


#: The numbers a page asks for that stay out of its link: an action's input (a button uses it
#: once: rows to trim, a table to add; the link names the table made).
ACTION_INPUTS = {
    "boundaries.trim",
    "collection.upload.drop",
    "collection.sim.d",
    "collection.schemes.rows",
}
#: Each page and each of its tabs (a page without tabs once).
SECTIONS = [(p, tab) for p in pages.PAGES for tab in p.tabs or [None]]


@pytest.mark.parametrize(("page", "section"), SECTIONS, ids=[f"{p.name}-{t}" for p, t in SECTIONS])
def test_every_number_on_a_page_is_in_its_link_with_a_tooltip(page, section):
    at = apptest(page.file)
    at.session_state["posviz.table"] = simulate.learned_like(64, 16, seed=0)
    if section:
        at.session_state[f"{page.name}.section"] = section
    at.run()
    assert not at.exception, at.exception
    for number in at.number_input:
        if number.key is None or number.key in ACTION_INPUTS:
            continue  # the loader's form: the link names its table by its own keys
        assert number.proto.query_param_key == number.key, number.key
        assert number.help, number.key
