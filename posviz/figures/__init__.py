"""Plotly figures, one module per core module of the same name: results in, go.Figure out.

Nothing is computed here beyond what display needs (decimation, colours, layout). Arrays go to
the browser as float32 (plotly sends numpy arrays as typed binary; float64 would double the
message for digits no screen shows). Titles state every choice that changed the numbers
(centring, metric, trimmed rows). `export` writes a figure to a file.
"""

from posviz.figures import (
    boundary,
    collection,
    compare,
    components,
    export,
    heads,
    layout,
    offsets,
    plan,
    probes,
    resample,
    scheme_diff,
    schemes,
    similarity,
    spectrum,
)

__all__ = [
    "boundary",
    "collection",
    "compare",
    "components",
    "export",
    "heads",
    "layout",
    "offsets",
    "plan",
    "probes",
    "resample",
    "scheme_diff",
    "schemes",
    "similarity",
    "spectrum",
]
