"""The app's pages: file, title, icon and tabs, in sidebar order.

`app.py` builds the navigation from it, each page draws its tabs from it
(`widgets.page_tabs`), and the tests and benchmarks list the pages and their tabs from it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAGES", "Page", "page"]


@dataclass(frozen=True)
class Page:
    """One page of the app.

    Attributes
    ----------
    name : str
        The file's stem, ``pages/<name>.py``; also the prefix of the page's widget keys (its
        open tab is kept under ``<name>.section``).
    title : str
        In the sidebar and the browser's tab.
    icon : str
        A Material icon, ``:material/<name>:``.
    tabs : tuple of str
        The page's tabs, drawn one at a time (empty: no tabs).
    """

    name: str
    title: str
    icon: str
    tabs: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        """The page's file, relative to the app's folder."""
        return f"pages/{self.name}.py"


PAGES = (
    Page(
        "spectrum",
        "Spectrum",
        ":material/ssid_chart:",
        ("Singular values", "Explained variance", "Reconstruction error"),
    ),
    Page(
        "similarity",
        "Similarity",
        ":material/grid_on:",
        ("Position x position", "Similarity vs offset", "One position vs all", "2-D grid"),
    ),
    Page(
        "components",
        "Components",
        ":material/timeline:",
        ("Over position", "Path", "Sinusoid fits", "Sinusoid span"),
    ),
    Page(
        "boundaries",
        "Boundaries & probes",
        ":material/border_outer:",
        ("Positions", "Tables", "Probes"),
    ),
    Page(
        "compare",
        "Compare",
        ":material/compare:",
        ("Spectra", "Similarity vs offset", "Similarity maps", "CKA, angles, Procrustes"),
    ),
    Page(
        "collection",
        "Collection",
        ":material/view_module:",
        (
            "Metrics",
            "Over training",
            "Spectra",
            "Offsets",
            "Similarity maps",
            "One table",
            "CKA map",
        ),
    ),
    Page("resample", "Resample", ":material/aspect_ratio:", ("Spectrum", "Similarity")),
    # Its tabs depend on the scheme shown (rotary, ALiBi, ...): the page keeps them itself.
    Page("schemes", "Schemes", ":material/waves:"),
    # Its tabs depend on the layer's kind (learned table, rotary, ALiBi, T5).
    Page("heads", "Heads", ":material/hub:"),
    Page("data", "Data", ":material/upload_file:"),
)


def page(name: str) -> Page:
    """The page whose file is ``pages/<name>.py``."""
    (found,) = [p for p in PAGES if p.name == name]
    return found
