"""User-controlled text (file, tensor and URL values, messages quoting them) shown literally."""

from __future__ import annotations

import re

#: Every ASCII punctuation character: CommonMark lets a backslash make each one literal, which
#: turns links, images, emphasis, code spans, HTML, colour directives and math into plain text.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def literal(text: object) -> str:
    """`text` as Streamlit markdown that renders as exactly these characters.

    Examples
    --------
    >>> print(literal("![x](https://a.example/x.png) **b**"))
    \\!\\[x\\]\\(https\\:\\/\\/a\\.example\\/x\\.png\\) \\*\\*b\\*\\*
    """
    return _PUNCTUATION.sub(r"\\\1", str(text))
