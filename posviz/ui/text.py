"""User-controlled text (file, tensor and URL values, messages quoting them) shown literally."""

from __future__ import annotations

import re
from collections.abc import Callable

import streamlit as st

from posviz._params import refusal_parts, refusal_text

#: Every ASCII punctuation character. Written as a numeric character reference it is plain text
#: to the markdown parser: no link, image, emphasis, code span, HTML, colour directive or math.
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
#: What GFM turns into links after parsing, in the decoded text, whatever was escaped: a
#: word joiner (U+2060, invisible) inside "http://", "www." and "a@b" breaks each pattern.
_AUTOLINKS = re.compile(r"(?i)(?<=https)(?=:)|(?<=http)(?=:)|(?<=www)(?=\.)|(?=@)")


def literal(text: object) -> str:
    """`text` as Streamlit markdown that renders as exactly these characters, without links.

    Examples
    --------
    >>> literal("[a](b)")
    '&#91;a&#93;&#40;b&#41;'
    >>> literal("http://x").startswith("http\\u2060&#58;")
    True
    """
    text = _AUTOLINKS.sub("\u2060", str(text))
    return _PUNCTUATION.sub(lambda match: f"&#{ord(match.group())};", text)


def show_refusal(
    refusal: Exception | str,
    *,
    lead: str = "",
    say: Callable[..., object] = st.error,
    icon: str = ":material/error:",
) -> None:
    """A refusal (an exception, or `posviz._params.refusal_text` of one) shown literally after
    `lead` (markdown), and the code it gives to run, if any, below it as a code block to copy:
    in the message's text its lines would run into one."""
    text = refusal if isinstance(refusal, str) else refusal_text(refusal)
    line, snippet = refusal_parts(text)
    say(lead + literal(line), icon=icon)
    if snippet:
        st.code(snippet, language="python")
