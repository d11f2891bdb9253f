"""Resolve ``--model``: a zoo name or a saved torch.export program (.pt2)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from autotune.errors import UserError


@dataclass
class LoadedModel:
    name: str
    exported: torch.export.ExportedProgram
    inputs: tuple[torch.Tensor, ...]
    source: str  # "zoo" | "pt2"
    module: torch.nn.Module | None = None  # the nn.Module when we have it (faster eager than exported)

    def eager_module(self) -> torch.nn.Module:
        return self.module if self.module is not None else self.exported.module()


def check_model_spec(spec: str) -> None:
    """Cheap validation of ``--model`` before anything slow starts."""
    from autotune import zoo

    if spec.endswith(".pt2") or os.sep in spec:
        if not os.path.isfile(spec):
            raise UserError(f"--model {spec}: no such file (expected a zoo name or a torch.export .pt2 file)")
    elif spec not in zoo.MODELS:
        raise UserError(str(zoo.UnknownModelError(spec, zoo.list_models())))


def load_model(spec: str, batch_size: int = 1, input_shape=None, seed: int = 0) -> LoadedModel:
    from autotune import zoo

    if spec.endswith(".pt2") or os.sep in spec:
        return _load_pt2(spec, batch_size, input_shape, seed)
    try:
        module, inputs = zoo.get_model(spec, batch_size=batch_size, input_shape=input_shape, seed=seed)
    except zoo.UnknownModelError as err:
        raise UserError(str(err)) from None
    except ValueError as err:
        raise UserError(f"--model {spec}: {err}") from None
    with torch.no_grad():
        exported = torch.export.export(module, tuple(inputs))
    return LoadedModel(spec, exported, tuple(inputs), "zoo", module)


def _load_pt2(path: str, batch_size: int, input_shape, seed: int) -> LoadedModel:
    from autotune import zoo

    if not os.path.exists(path):
        raise UserError(f"--model {path}: no such file (expected a zoo name or a torch.export .pt2 file)")
    try:
        exported = zoo.load_exported(path)
    except ValueError as err:
        raise UserError(str(err).splitlines()[0]) from None
    if batch_size != 1 or input_shape is not None:
        raise UserError(f"--model {path}: a .pt2 program has fixed input shapes; drop --batch-size/--input-shape")
    inputs = _example_inputs(exported, seed)
    name = os.path.splitext(os.path.basename(path))[0]
    return LoadedModel(name, exported, inputs, "pt2")


def _example_inputs(exported: torch.export.ExportedProgram, seed: int) -> tuple[torch.Tensor, ...]:
    example = getattr(exported, "example_inputs", None)
    if example is not None:
        args, kwargs = example
        if not kwargs and all(isinstance(a, torch.Tensor) for a in args):
            return tuple(args)
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for spec in exported.graph_signature.input_specs:
        if spec.kind != torch.export.graph_signature.InputKind.USER_INPUT:
            continue
        node = next(n for n in exported.graph.nodes if n.name == spec.arg.name)
        val = node.meta["val"]
        if val.dtype.is_floating_point:
            inputs.append(torch.randn(tuple(val.shape), generator=gen, dtype=val.dtype))
        else:
            inputs.append(torch.randint(0, 100, tuple(val.shape), generator=gen, dtype=val.dtype))
    return tuple(inputs)
