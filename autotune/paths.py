"""Where the shipped datasets and models are (TVM-free): beside the package, whatever the working directory."""

from __future__ import annotations

import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # datasets/ and models/ beside the package
# AUTOTUNE_MODELS_DIR points elsewhere (a folder of <hardware id>/<kind>/ like models/)
DEFAULT_MODELS_DIR = os.environ.get("AUTOTUNE_MODELS_DIR") or os.path.join(REPO, "models")


def shown(path: str) -> str:
    """A folder as reports and cards name it: relative to the repository when inside it (the same in any clone)."""
    rel = os.path.relpath(os.path.abspath(path), REPO)
    return path if rel.startswith("..") else rel
