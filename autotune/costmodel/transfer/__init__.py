"""Cross-hardware transfer of cost models (TVM-free): one contract (``base.TransferMethod``), several
methods, registered by name.

    from autotune.costmodel import transfer
    target_model = transfer.create("ckd", seed=0).transfer(source_model, transfer.TransferInputs(...))

``python -m autotune.costmodel.transfer`` (``make transfer-costmodel``) runs one transfer from a saved
model to a dataset of the target hardware and writes ``models/<target hardware>/<kind>/``.
"""

from __future__ import annotations

import importlib

from .base import Programs, TransferError, TransferInputs, TransferMethod, sample_fraction

# name -> (module, class)
REGISTRY: dict[str, tuple[str, str]] = {
    "zero-shot": ("autotune.costmodel.transfer.methods", "ZeroShot"),
    "scratch": ("autotune.costmodel.transfer.methods", "Scratch"),
    "finetune": ("autotune.costmodel.transfer.methods", "FineTune"),
    "mtl": ("autotune.costmodel.transfer.methods", "MTL"),
    "ckd": ("autotune.costmodel.transfer.methods", "CKD"),
}


def method_class(name: str) -> type[TransferMethod]:
    if name not in REGISTRY:
        raise ValueError(f"unknown transfer method {name!r}; valid: {', '.join(REGISTRY)}")
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def create(name: str, **params) -> TransferMethod:
    return method_class(name)(**params)


__all__ = ["REGISTRY", "Programs", "TransferError", "TransferInputs", "TransferMethod", "create", "method_class",
           "sample_fraction"]
