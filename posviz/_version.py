"""posviz's version: one place, read by the package, provenance records and the build."""

__version__ = "0.2.0"
