"""What the settings forms offer for a table of a given shape: each setting's bounds and default.

The analyses' signatures hold the defaults; a short table cannot take all of them (a window of
16 on a table of 10 rows). These fit them to the table. Both the pages' widgets and the report
read them, and the report draws without Streamlit, so they live in the core, not in
`posviz.ui` (whose package imports Streamlit).
"""

from __future__ import annotations

from posviz import boundary
from posviz._params import defaults

__all__ = ["boundary_defaults", "boundary_limits"]


def boundary_limits(shape: tuple[int, int]) -> dict[str, int]:
    """Largest value of each integer boundary setting that a table of this shape allows.

    A window or a shortest segment of more than half the table says nothing more; the
    boundary size leaves a middle; `n_directions_removed` leaves a residual.

    Examples
    --------
    >>> boundary_limits((20, 6))
    {'n_directions_removed': 5, 'hampel_window': 10, 'boundary_size': 9, 'min_size': 10}
    """
    n, d = shape
    half = max(1, n // 2)
    return {
        "n_directions_removed": min(n, d) - 1,
        "hampel_window": half,
        "boundary_size": max(1, (n - 1) // 2),
        "min_size": half,
    }


def boundary_defaults(shape: tuple[int, int]) -> dict[str, object]:
    """The default settings of the boundary functions for a table of this shape: each
    signature's default, within its :func:`boundary_limits`.

    Examples
    --------
    >>> d = boundary_defaults((20, 6))
    >>> d["hampel_window"], d["boundary_size"], d["min_size"], d["threshold"]
    (10, 8, 10, 8.0)
    """
    most = boundary_limits(shape)
    found = {
        **defaults(boundary.position_statistics),
        **defaults(boundary.outliers),
        **defaults(boundary.boundary_summary),
        **defaults(boundary.change_points),
    }
    return {name: min(value, most.get(name, value)) for name, value in found.items()}
