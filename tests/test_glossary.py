"""The glossary: one line for each word the pages show without explaining it there."""

from __future__ import annotations

import ast
import html

import pytest

from posviz.glossary import GLOSSARY, TOPICS
from tests import ROOT, apptest

#: Words a new user met unexplained (issue 36, item 5).
UNEXPLAINED = [
    "pairs beyond L₀",
    "kept",
    "blended",
    "divided",
    "resolution floor",
    "Gram route",
    "falls until k",
    "length (0)",
    "ringing peaks",
    "skill",
]


@pytest.mark.parametrize("term", UNEXPLAINED)
def test_every_word_a_reader_asked_about_has_its_line(term):
    assert term in GLOSSARY


def test_each_entry_is_one_line():
    for term, line in GLOSSARY.items():
        assert "\n" not in line, term
        assert line.endswith("."), term
        assert 20 <= len(line) <= 160, (term, len(line))
    assert sum(len(terms) for terms in TOPICS.values()) == len(GLOSSARY)  # no term twice


def test_the_similarity_pages_scores_are_in_it():
    tree = ast.parse((ROOT / "pages/similarity.py").read_text())
    (scores,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SCORES"
    ]
    labels = [key.value for key in scores.keys]
    assert "falls until k" in labels
    for label in labels:
        for word in label.split(" / "):
            assert word in GLOSSARY, word


def test_the_app_draws_the_glossary_in_the_sidebar():
    # app.py draws it after every page; the browser test opens it on another page.
    at = apptest("app.py").run()
    assert not at.exception, at.exception
    shown = "\n".join(m.value for m in at.sidebar.markdown)
    for term in ("Gram route", "ringing peaks", "pairs beyond L"):
        assert term in html.unescape(shown), term


def test_the_spectrum_pages_metrics_are_in_it():
    # Three of its four metrics had no line.
    from posviz.export import column_label
    from posviz.spectrum import DEFINITIONS

    for key in DEFINITIONS:
        assert column_label(key) in GLOSSARY, key
