"""Loading saved ``torch.export`` programs (.pt2)."""

from __future__ import annotations

import logging
import os

import torch


def load_exported(path: str) -> torch.export.ExportedProgram:
    """``torch.export.load`` with a one-line ValueError for a missing or unreadable file."""
    if not os.path.isfile(path):
        raise ValueError(f"cannot load torch.export program {path!r}: no such file")
    from autotune.untrusted import check_pt2

    check_pt2(path)  # torch.export.load unpickles parts of the archive: refuse any that could run code
    export_logger = logging.getLogger("torch.export")
    level = export_logger.level
    export_logger.setLevel(logging.CRITICAL)  # torch logs a traceback before raising
    try:
        program = torch.export.load(path)
    except Exception as err:  # torch raises many types for garbage input
        reason = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(
            f"cannot load torch.export program {path!r}: {type(err).__name__}: {reason}"
        ) from err
    finally:
        export_logger.setLevel(level)
    if not isinstance(program, torch.export.ExportedProgram):
        raise ValueError(f"cannot load torch.export program {path!r}: not an ExportedProgram")
    return program
