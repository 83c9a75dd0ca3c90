"""`python -m posviz`: the command line of posviz.cli."""

from __future__ import annotations

from posviz.cli import main

if __name__ == "__main__":  # guarded so that importing every posviz module has no effect
    raise SystemExit(main())
