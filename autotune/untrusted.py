"""Checks on files from elsewhere, made before anything in them is loaded (TVM-free).

``torch.export.load`` unpickles parts of a ``.pt2`` archive with ``weights_only=False``: weights
and constants marked ``use_pickle``, custom/opaque objects, and the sample inputs (it first tries
``weights_only=True`` and, when that fails, falls back to a full unpickle). A crafted ``.pt2`` can
therefore run code on load. ``check_pt2`` reads the archive as a zip and refuses it unless every
pickled part is one that ``torch.load(weights_only=True)`` accepts and nothing is marked for a
full unpickle, so ``torch.export.load`` never reaches those paths.
"""

from __future__ import annotations

import io
import json
import zipfile

from autotune.errors import UserError


class UnsafeFile(UserError, ValueError):
    """A file that would run code (or write outside its folder) if loaded as it is."""


def _safe_torch_load(data: bytes) -> bool:
    import torch

    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any failure means: not loadable without a full unpickle
        return False
    return True


def _config_problems(name: str, config: dict) -> list[str]:
    problems = []
    entries = config.get("config", {}) if isinstance(config, dict) else {}
    for fqn, meta in (entries.items() if isinstance(entries, dict) else []):
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("use_pickle"):
            problems.append(f"{fqn} is stored as a pickle")
        path_name = str(meta.get("path_name", ""))
        if "/constants/" in name and not path_name.startswith("tensor_"):
            problems.append(f"constant {fqn} is a pickled object ({path_name})")
    return problems


def check_pt2(path: str) -> None:
    """Raise UnsafeFile unless ``torch.export.load(path)`` would unpickle nothing beyond plain tensors."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return  # not a zip at all: torch.export.load refuses it without unpickling anything
    with archive:
        names = archive.namelist()
        if not any(n.endswith("/archive_format") or n == "archive_format" for n in names):
            raise UnsafeFile(f"{path}: not a .pt2 archive of the current format (torch.export.save of torch >= 2.7); "
                             "older archives are loaded through pickle: re-export the model")
        problems = []
        for name in names:
            if name.endswith("_config.json") and ("/weights/" in name or "/constants/" in name):
                try:
                    problems += _config_problems(name, json.loads(archive.read(name)))
                except ValueError:
                    problems.append(f"{name} is not JSON")
            elif name.endswith(".pt") and not _safe_torch_load(archive.read(name)):
                problems.append(f"{name} needs a full unpickle (torch.load weights_only=False)")
        if problems:
            raise UnsafeFile(f"{path}: refused, loading it would unpickle arbitrary objects (which can run code): "
                             f"{'; '.join(problems[:3])}{' ...' if len(problems) > 3 else ''}; "
                             "accepted: a .pt2 whose weights, constants and sample inputs are plain tensors")
