"""Refusals that tell the user where to go (issue 44 items 2 and 3): a pickle's conversion shown
as code to copy on every page that can refuse one, a config.json pointed to the Schemes page."""

from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from posviz import simulate
from posviz.collection import Member
from posviz.ui import state
from tests import apptest
from tests.refusals import SNIPPET

PICKLE = ("model.pt", b"\x80\x04\x95 not really a pickle", "application/octet-stream")


def data_page() -> AppTest:
    at = apptest("app.py").run()
    return at.switch_page("pages/data.py").run()


def compare_page() -> AppTest:
    at = apptest("pages/compare.py")
    at.session_state["compare.second"] = True  # the second table's loader, opened
    return at.run()


def upload_to_data(at: AppTest) -> AppTest:
    return at.file_uploader(key="posviz.table.upload").set_value(PICKLE).run()


def upload_to_compare(at: AppTest) -> AppTest:
    return at.file_uploader(key="posviz.second.upload").set_value(PICKLE).run()


def collection_page() -> AppTest:
    at = apptest("pages/collection.py")
    at.session_state[state.COLLECTION] = [
        Member(f"sim-step{i}", simulate.learned_like(64, 16, seed=i)) for i in (1, 2)
    ]
    return at.run()


def upload_to_collection(at: AppTest) -> AppTest:
    at.file_uploader(key="collection.upload").set_value([PICKLE]).run()
    return at.button(key="collection.upload.add").click().run()


@pytest.mark.parametrize(
    ("page", "upload", "say"),
    [
        (data_page, upload_to_data, "error"),
        (compare_page, upload_to_compare, "error"),
        (collection_page, upload_to_collection, "warning"),
    ],
    ids=["data", "compare", "collection"],
)
def test_a_pickle_refusal_shows_its_conversion_as_code_to_copy(page, upload, say):
    # Formerly the snippet was part of the message, run into one line on screen
    # ("…import save_file save_file({…})"): pasted, a SyntaxError.
    at = upload(page())
    assert not at.exception, at.exception
    (refusal,) = [html.unescape(e.value) for e in getattr(at, say) if "pickle" in e.value]
    assert "\n" not in refusal
    assert refusal.endswith("then load that:")
    (code,) = at.code
    assert code.value == SNIPPET
    assert code.language == "python"
    compile(code.value, "<snippet>", "exec")


def test_a_config_json_on_the_data_page_points_to_the_schemes_page():
    # Formerly: "not a format posviz reads", with no word of where a config.json is read.
    at = data_page()
    config = b'{"model_type": "llama", "rope_theta": 10000.0, "hidden_size": 64}'
    at.file_uploader(key="posviz.table.upload").set_value(
        ("config.json", config, "application/json")
    ).run()
    assert not at.exception, at.exception
    (refusal,) = [html.unescape(e.value) for e in at.error]
    assert refusal.startswith("config.json is JSON, not a position table: ")
    assert "describes its position scheme" in refusal
    assert "the Schemes page" in refusal
    (link,) = at.get("page_link")
    assert link.proto.page == "schemes"  # the Schemes page of the app's navigation
    assert link.proto.page_script_hash
    assert "Schemes page" in link.proto.label
