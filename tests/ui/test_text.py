"""posviz.ui.text.literal: user-controlled text (file, tensor and URL values, messages quoting
them) as markdown that shows exactly its characters: no markup survives, no link is made, and
the characters come back whole."""

from __future__ import annotations

import html
import re
import string

import pytest

from posviz.ui.text import literal

#: Text a file name, a tensor name or a link could carry to the page.
HOSTILE = [
    "[click](http://evil.example)",
    "![img](x.png)",
    "<script>alert(1)</script>",
    "**bold** _it_ `code` ~~gone~~",
    ":red[colour] $x^2$ $$y$$",
    "# heading\n> quote\n- item",
    "a\\*b &amp; &#91;",
    "www.example.com and me@example.com",
    "https://x.y/p?q=1#f",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_the_characters_come_back_whole(text):
    assert html.unescape(literal(text)).replace("\u2060", "") == text


@pytest.mark.parametrize("text", HOSTILE)
def test_no_markdown_or_html_character_is_left(text):
    bare = re.sub(r"&#\d+;", "", literal(text))  # the references are plain text to markdown
    assert not set(bare) & set(string.punctuation)


def test_each_punctuation_character_is_its_numeric_reference():
    shown = literal(string.punctuation).replace("\u2060", "")  # a joiner before "@"
    assert shown == "".join(f"&#{ord(c)};" for c in string.punctuation)
    assert literal("[a](b)") == "&#91;a&#93;&#40;b&#41;"


def test_autolinks_are_broken_by_an_invisible_word_joiner():
    joiner = "\u2060"
    assert literal("http://x").startswith(f"http{joiner}&#58;")
    assert literal("HTTPS://x").startswith(f"HTTPS{joiner}&#58;")
    assert literal("www.x").startswith(f"www{joiner}&#46;")
    assert literal("me@x") == f"me{joiner}&#64;x"
    assert joiner not in literal("whttp wwwx at example")  # only where a link would start


def test_letters_digits_spaces_and_other_scripts_stay_as_they_are():
    assert literal("Größe 1024 θ ρ 位置 step1000") == "Größe 1024 θ ρ 位置 step1000"


def test_any_value_is_shown_as_its_text():
    assert literal(3.5) == "3&#46;5"
    assert literal(None) == "None"
