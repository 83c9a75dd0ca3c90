"""A figure as a file: standalone HTML listing its settings, or PNG/SVG rendered by kaleido."""

from __future__ import annotations

import html
import json
import shutil
from typing import Any

import plotly.graph_objects as go

from posviz import _settings
from posviz.figures.layout import escape

__all__ = ["figure_html", "figure_image", "signed", "source_line", "static_image_browser"]


def figure_html(fig: go.Figure, settings: dict[str, Any]) -> str:
    """A standalone HTML page of `fig` (plotly.js inlined: opens offline) listing `settings`,
    the figure signed with its source (:func:`signed`)."""
    page = signed(fig, settings).to_html(full_html=True, include_plotlyjs=True)
    listing = html.escape(json.dumps(settings, indent=1), quote=False)
    return page.replace("<body>", f'<body>\n<pre id="posviz-settings">{listing}</pre>', 1)


#: Characters of a figure's source line at most (one line under a 1100-pixel figure).
SOURCE_CHARACTERS = 180


def source_line(settings: dict[str, Any]) -> str:
    """Which table (or config.json) a figure was made from, in one line: its tensor, shape,
    rows and source, the first 16 hex digits of its sha256, and posviz's version.

    Examples
    --------
    >>> table = {"tensor": "wpe", "shape": [1024, 768], "rows": "rows 0-1023 of 1024",
    ...          "source": "gpt2.safetensors", "sha256": "ab" * 32, "posviz_version": "0.2.0"}
    >>> source_line({"provenance": table})
    'wpe 1024 x 768, rows 0-1023 of 1024, gpt2.safetensors · sha256 abababababababab · posviz 0.2.0'
    >>> source_line({"provenance": [table, table | {"tensor": "wte"}]}).split(" · ")[1]
    'wte 1024 x 768, rows 0-1023 of 1024, gpt2.safetensors'
    """
    provenance = settings.get("provenance") or {}
    tables = provenance if isinstance(provenance, list) else [provenance]
    parts = [_named(t) for t in tables[:2]]
    if len(tables) > 2:
        parts = [f"{len(tables)} tables: " + ", ".join(_named(t, short=True) for t in tables)]
    elif len(tables) == 1 and tables[0].get("sha256"):
        parts.append(f"sha256 {str(tables[0]['sha256'])[:16]}")
    version = next((t["posviz_version"] for t in tables if t.get("posviz_version")), None)
    line = " · ".join([p for p in parts if p] + ([f"posviz {version}"] if version else []))
    return line if len(line) <= SOURCE_CHARACTERS else line[: SOURCE_CHARACTERS - 1] + "…"


def _named(where: dict[str, Any], *, short: bool = False) -> str:
    """One table's (or config.json's) name in a source line."""
    if "config" in where:
        layer = f" ({where['layer_type']})" if where.get("layer_type") else ""
        return f"{where.get('model', 'config.json')}{layer}: {where['config']}"
    name = str(where.get("label") or where.get("tensor") or "")
    if short:
        return name
    shape = where.get("shape")
    size = f" {shape[0]} x {shape[1]}" if shape else ""
    rows = f", {where['rows']}" if where.get("rows") else ""
    return f"{name}{size}{rows}, {where.get('source', '')}".strip(", ")


#: Pixels the source line takes under a figure.
_LINE = 24


def _colour_bars(fig: go.Figure) -> list[Any]:
    """The colour bars of `fig`'s colour axes."""
    return [fig.layout[name].colorbar for name in fig.layout if name.startswith("coloraxis")]


def signed(fig: go.Figure, settings: dict[str, Any]) -> go.Figure:
    """A copy of `fig` with :func:`source_line` under it, small and grey, so a figure pasted
    into a paper keeps its source; `fig` itself unchanged (the app caches it)."""
    line = source_line(settings)
    if not line:
        return fig
    copy = go.Figure(fig)
    bottom = copy.layout.margin.b if copy.layout.margin.b is not None else 80
    copy.update_layout(margin_b=bottom + _LINE)
    # What sits on the figure's bottom edge (a legend, a colour bar under a map) moves up.
    up = _LINE / (copy.layout.height or 450)
    for part in [copy.layout.legend, *_colour_bars(copy)]:
        if part.yref == "container":
            part.y = (part.y or 0) + up
    copy.add_annotation(
        text=escape(line),
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        xanchor="left",
        yanchor="bottom",
        yshift=-(bottom + _LINE - 2),
        showarrow=False,
        align="left",
        font={"size": 10, "color": "#777"},
    )
    return copy


def static_image_browser() -> str | None:
    """The Chromium kaleido would drive for PNG/SVG export (`BROWSER_PATH` first), or None."""
    candidates = [_settings.browser_path(), "chromium", "chromium-browser", "google-chrome"]
    return next((path for c in candidates if c and (path := shutil.which(c))), None)


def figure_image(
    fig: go.Figure,
    fmt: str,
    *,
    settings: dict[str, Any] | None = None,
    width: int = 1100,
    height: int | None = None,
) -> bytes:
    """`fig` as PNG (2x scale, for print) or SVG bytes, rendered by kaleido in Chromium;
    signed with the source `settings` name (:func:`signed`). `height`: the figure's own, or
    600 pixels."""
    scale = 2 if fmt == "png" else 1
    image = signed(fig, settings) if settings else fig
    height = height or fig.layout.height or 600
    return image.to_image(format=fmt, width=width, height=height, scale=scale)
