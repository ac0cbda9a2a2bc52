"""Old import paths kept for one release: each is a module that warns once when imported and re-exports the new."""

from __future__ import annotations

import warnings


def warn_moved(old: str, new: str, removed_in: str = "0.5.0") -> None:
    """Warn that module ``old`` is now ``new`` (a :class:`DeprecationWarning` pointing at the importer)."""
    warnings.warn(f"{old} moved to {new} in 0.4.0; the old path goes in {removed_in}. Import {new} instead.",
                  DeprecationWarning, stacklevel=3)
