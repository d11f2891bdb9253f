"""Where the shipped datasets and models are (TVM-free): beside the package, whatever the working directory."""

from __future__ import annotations

import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # datasets/ and models/ beside the package
# AUTOTUNE_MODELS_DIR points elsewhere (a folder of <hardware id>/<kind>/ like models/)
DEFAULT_MODELS_DIR = os.environ.get("AUTOTUNE_MODELS_DIR") or os.path.join(REPO, "models")
