"""posviz: an interactive microscope for transformer position embeddings.

The core (everything but ``posviz.ui``) is plain numpy/scipy and never imports Streamlit.
"""

from __future__ import annotations

import os

# numpy and scipy each bundle an OpenBLAS whose idle threads spin for 2^28 cycles (~0.1 s)
# before sleeping; every hand-over between them (a numpy product, then a scipy LAPACK call)
# then runs against the other's spinning threads on the same cores. 2^20 cycles: the
# spectrum at 1024 x 768 takes 31 ms instead of 49 ms. Read when numpy first loads, so set
# here, before it does (a value already in the environment wins). With it, two BLAS threads
# beat one for the probes and compare() too (1024 x 768: 0.33 vs 0.37 s, 0.19 vs 0.24 s).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

from posviz.embedding import Embedding, LoadError

__version__ = "0.1.0"
__all__ = ["Embedding", "LoadError", "__version__"]
