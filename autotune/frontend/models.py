"""Resolve ``--model``: a zoo name, a saved torch.export program (.pt2) or an ONNX file (.onnx)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from autotune.errors import UserError


@dataclass
class LoadedModel:
    name: str
    exported: torch.export.ExportedProgram | None  # None for an ONNX model
    inputs: tuple[torch.Tensor, ...]
    source: str  # "zoo" | "pt2" | "onnx"
    module: torch.nn.Module | None = None  # the nn.Module when we have it (faster eager than exported)
    onnx_path: str | None = None

    def eager_module(self) -> torch.nn.Module:
        return self.module if self.module is not None else self.exported.module()

    def relax_module(self):
        """(Relax module with the weights as parameters, {"main": [weights]}): the one entry of every front end."""
        from autotune.frontend import relax as fe

        if self.source == "onnx":
            return fe.import_onnx(self.onnx_path, self.inputs)
        return fe.import_exported(self.exported)

    def reference(self) -> tuple[str, object]:
        """(name, run(*inputs) -> outputs as numpy arrays): what the tuned model's numerics and speed are read
        against -- torch eager for a torch model, ONNX Runtime (CPU) for an ONNX file."""
        if self.source == "onnx":
            import onnxruntime as ort

            session = ort.InferenceSession(self.onnx_path, providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            return "onnxruntime", lambda *xs: session.run(None, {n: x.numpy() for n, x in zip(names, xs)})
        eager = self.eager_module()

        def run(*xs):
            with torch.no_grad():
                return [t.detach().numpy() for t in _flat(eager(*xs))]

        return "torch_eager", run


def _flat(out) -> list[torch.Tensor]:
    """A model's outputs (a tensor, or nested lists/tuples of them) as one flat list."""
    return [out] if isinstance(out, torch.Tensor) else [t for item in out for t in _flat(item)]


def check_model_spec(spec: str) -> None:
    """Cheap validation of ``--model`` before anything slow starts."""
    from autotune import zoo

    if spec.endswith((".pt2", ".onnx")) or os.sep in spec:
        if not os.path.isfile(spec):
            raise UserError(f"--model {spec}: no such file (expected a zoo name, a torch.export .pt2 or an .onnx file)")
    elif spec not in zoo.MODELS:
        raise UserError(str(zoo.UnknownModelError(spec, zoo.list_models())))


def load_model(spec: str, batch_size: int = 1, input_shape=None, seed: int = 0) -> LoadedModel:
    from autotune import zoo

    if spec.endswith(".onnx"):
        return _load_onnx(spec, batch_size, input_shape, seed)
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


_ONNX_DTYPES = {1: torch.float32, 6: torch.int32, 7: torch.int64, 10: torch.float16, 11: torch.float64}


def _load_onnx(path: str, batch_size: int, input_shape, seed: int) -> LoadedModel:
    """An ONNX file with static input shapes: checked here (one line on anything wrong), inputs made from its graph."""
    if not os.path.exists(path):
        raise UserError(f"--model {path}: no such file (expected a zoo name, a torch.export .pt2 or an .onnx file)")
    if batch_size != 1 or input_shape is not None:
        raise UserError(f"--model {path}: an ONNX model has fixed input shapes; drop --batch-size/--input-shape")
    import onnx

    try:
        model = onnx.load(path)  # external weights (model.onnx.data) are read from beside the file
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 - protobuf, IO and checker errors alike: the file is not usable
        raise UserError(f"--model {path}: not a valid ONNX model ({str(err).splitlines()[0][:200]})") from None
    weights = {t.name for t in model.graph.initializer}
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for inp in (i for i in model.graph.input if i.name not in weights):
        t = inp.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        dtype = _ONNX_DTYPES.get(t.elem_type)
        if dtype is None or any(d is None for d in dims):
            raise UserError(f"--model {path}: input {inp.name!r} needs a static shape and a float or int type "
                            f"(has shape {dims}, ONNX type {t.elem_type}); export it with fixed shapes")
        inputs.append(torch.randn(dims, generator=gen).to(dtype) if dtype.is_floating_point
                      else torch.randint(0, 100, dims, generator=gen, dtype=dtype))
    name = os.path.splitext(os.path.basename(path))[0]
    return LoadedModel(name, None, tuple(inputs), "onnx", onnx_path=os.path.abspath(path))


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
