"""posviz: an interactive microscope for transformer position embeddings.

The core (everything but ``posviz.ui``) is plain numpy/scipy and never imports Streamlit.
"""

from __future__ import annotations

from posviz.embedding import Embedding, LoadError

__version__ = "0.1.0"
__all__ = ["Embedding", "LoadError", "__version__"]
