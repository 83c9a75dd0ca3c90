"""What every figure is checked for, shared by the figure modules' tests: labels kept as the
characters typed (never markup plotly would draw), log axes labelled at every decade."""

from __future__ import annotations

import re

import numpy as np

from posviz import figures

#: Labels that plotly would draw as markup: a CSS url() that fetches a host, and a link.
HOSTILE = (
    '<span style="background:url(http://x/y)">a</span>',
    '<a href="http://x/y">b</a> & c',
)
#: The markup the house layout itself writes.
HOUSE_TAGS = {"<br>", "<sup>", "</sup>", "<extra>", "</extra>"}


def strings(value: object) -> list[str]:
    """Every string in a figure's JSON tree (titles, names, hovers, texts, tick texts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def assert_labels_literal(fig, labels=HOSTILE) -> None:
    text = strings(fig.to_plotly_json())
    tags = {tag for s in text for tag in re.findall(r"<[^<>]*>", s)}
    assert tags <= HOUSE_TAGS, tags - HOUSE_TAGS
    escaped = [figures.layout.escape(label) for label in labels]
    for label in escaped:  # every label still there, as the characters typed
        assert any(label in s for s in text), label


def decades(axis) -> list[float]:
    """The labelled ticks of a log axis, checked: whole decades spanning the axis's range, each
    labelled 10ⁿ (one style on every log axis), none skipped; the 2-9 multiples as unlabelled
    minor ticks of the same ruler."""
    assert axis.type == "log"
    values = list(axis.tickvals)
    exponents = np.log10(values)
    np.testing.assert_allclose(exponents, np.round(exponents), atol=1e-12)
    exponents = np.round(exponents).astype(int)
    assert list(np.diff(exponents)) == [1] * (len(exponents) - 1)  # every decade
    assert list(axis.range) == [exponents[0], exponents[-1]]
    assert len(values) >= 2
    for exponent, text in zip(exponents, axis.ticktext, strict=True):
        assert text == "10" + str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    # Ticks drawn as a ruler: the minor ones shorter, in the same direction.
    assert axis.ticks == axis.minor.ticks == "outside"
    assert axis.showline  # the ruler's line: the minor ticks hang from it, not in space
    assert axis.minor.ticklen < axis.ticklen
    if len(values) <= 11:
        minor = np.log10(axis.minor.tickvals)
        assert {round(10 ** (m - np.floor(m + 1e-9))) for m in minor} == set(range(2, 10))
    return values
