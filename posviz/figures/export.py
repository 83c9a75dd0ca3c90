"""A figure as a file: standalone HTML listing its settings, or PNG/SVG rendered by kaleido."""

from __future__ import annotations

import html
import json
import shutil
from typing import Any

import plotly.graph_objects as go

from posviz import _settings

__all__ = ["figure_html", "figure_image", "static_image_browser"]


def figure_html(fig: go.Figure, settings: dict[str, Any]) -> str:
    """A standalone HTML page of `fig` (plotly.js inlined: opens offline) listing `settings`."""
    page = fig.to_html(full_html=True, include_plotlyjs=True)
    listing = html.escape(json.dumps(settings, indent=1), quote=False)
    return page.replace("<body>", f'<body>\n<pre id="posviz-settings">{listing}</pre>', 1)


def static_image_browser() -> str | None:
    """The Chromium kaleido would drive for PNG/SVG export (`BROWSER_PATH` first), or None."""
    candidates = [_settings.browser_path(), "chromium", "chromium-browser", "google-chrome"]
    return next((path for c in candidates if c and (path := shutil.which(c))), None)


def figure_image(fig: go.Figure, fmt: str, *, width: int = 1100, height: int = 600) -> bytes:
    """`fig` as PNG (2x scale, for print) or SVG bytes, rendered by kaleido in Chromium."""
    scale = 2 if fmt == "png" else 1
    return fig.to_image(format=fmt, width=width, height=height, scale=scale)
