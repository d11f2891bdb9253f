"""torch.nn / torch.export programs to Relax, and Relax to MetaSchedule tasks.

One preparation sequence serves task extraction, compilation and the stock
``compile_relax``: parameters are bound as constants, BatchNorm is decomposed and
folded, then the module is legalized and fused exactly as ``compile_relax`` does, so
the workloads in the database match the functions compile sees.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

logger = logging.getLogger(__name__)


@dataclass
class Task:
    """One tuning task: a fused TIR workload, its weight in the model and its FLOPs."""

    name: str
    mod: tvm.IRModule
    weight: int
    flops: float
    target: object

    @property
    def workload_hash(self) -> str:
        return f"{tvm_ffi.structural_hash(self.mod) & 0xFFFFFFFFFFFFFFFF:016x}"


def export_torch(model: torch.nn.Module, example_inputs: tuple) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(model, tuple(example_inputs))


def import_exported(ep: torch.export.ExportedProgram) -> tuple[tvm.IRModule, dict]:
    """ExportedProgram to (Relax module with params as inputs, {"main": [params]})."""
    from tvm.relax.frontend.torch import from_exported_program

    mod = from_exported_program(ep, keep_params_as_input=True)
    return relax.frontend.detach_params(mod)


def import_onnx(path: str, inputs) -> tuple[tvm.IRModule, dict]:
    """An ONNX file to (Relax module with params as inputs, {"main": [params]}), as ``import_exported`` gives a
    torch model: the same bind / layout / fuse flow and database keys follow. An operator TVM's ONNX front end does
    not convert is a ``UserError`` naming it."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    from autotune.errors import UserError

    model = onnx.load(path)
    weights = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    shapes = {n: list(x.shape) for n, x in zip(names, inputs)}
    dtypes = {n: str(x.dtype).removeprefix("torch.") for n, x in zip(names, inputs)}
    try:
        mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=True)
    except Exception as err:  # noqa: BLE001 - TVM raises its own error types for unsupported operators
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise UserError(f"--model {path}: TVM's ONNX front end cannot convert it ({first})") from None
    return relax.frontend.detach_params(mod)


def bind_and_simplify(mod: tvm.IRModule, params: dict) -> tvm.IRModule:
    """Bind weights as constants, decompose BatchNorm for inference, fold constants."""
    if params and params.get("main"):
        mod = relax.transform.BindParams("main", _param_dict(mod, params["main"]))(mod)
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.transform.FoldConstant(),
        ]
    )(mod)


CONV_LAYOUTS = ("nchw", "nhwc")
_CONV_BLOCKS = {"nhwc": ("conv2d_nhwc", "group_conv2d_nhwc"), "nchw": ("conv2d_nchw", "group_conv2d_nchw")}


def convert_conv_layout(mod: tvm.IRModule, layout: str) -> tvm.IRModule:
    """The bound module with its 2-D convolutions in ``layout`` (``nchw``: unchanged). ``nhwc``: Relax's
    ``ConvertLayout`` (data NHWC, kernel OHWI; transposes only at the model's ends) and the constant weights'
    transposes folded. ``clip`` (ReLU6) has no layout rule in ConvertLayout, which would wrap every clip in a
    transpose pair (mobilenet_v2: 13 extra memory-bound tasks); it is rewritten as maximum/minimum first.
    Idempotent: a module converted already is returned as it is."""
    if layout not in CONV_LAYOUTS:
        raise ValueError(f"conv layout {layout!r}: expected one of {', '.join(CONV_LAYOUTS)}")
    if layout == "nchw":
        return mod
    mod = _clip_as_min_max(mod)
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})(mod)
    return relax.transform.FoldConstant()(mod)


def _clip_as_min_max(mod: tvm.IRModule) -> tvm.IRModule:
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    pattern = is_op("relax.clip")(wildcard(), wildcard(), wildcard())

    def rewrite(call, _matches):
        x, lo, hi = call.args
        dtype = str(x.ty.dtype)
        return relax.op.minimum(relax.op.maximum(x, relax.const(float(lo.value), dtype)),
                                relax.const(float(hi.value), dtype))

    mod = mod.clone()  # rewrite_call gives new functions; the caller's module is not changed
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod[gv] = rewrite_call(pattern, rewrite, func)
    return mod


def tuned_conv_layout(database) -> str | None:
    """The convolution layout ``database``'s tasks were extracted in (None: it holds no convolution)."""
    if database is None:
        return None
    seen = set()
    for record in database.get_all_tuning_records():
        key = int(tvm_ffi.structural_hash(record.workload.mod))
        if key in seen:
            continue
        seen.add(key)
        text = record.workload.mod.script()
        for layout, blocks in _CONV_BLOCKS.items():
            if any(f'"{b}"' in text for b in blocks):
                return layout
    return None


def _param_dict(mod: tvm.IRModule, values: list) -> dict:
    func = mod["main"]
    n_inputs = int(func.attrs["num_input"]) if func.attrs and "num_input" in func.attrs else 0
    return dict(zip(list(func.params)[n_inputs:], values))


def _fuse_passes(target, layout_rewrite: bool) -> list:
    from tvm.relax import pipeline

    try:
        dispatch = list(pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    return [
        *dispatch,
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        # the weights' TIR buffers marked layout-free: MetaSchedule's RewriteLayout postprocessor (in the
        # default llvm space, a no-op without this mark) may then pick their layout, packed at compile time
        *([relax.transform.AttachAttrLayoutFreeBuffers()] if layout_rewrite else []),
    ]


def fuse_for_tuning(mod: tvm.IRModule, target, layout_rewrite: bool = False) -> tvm.IRModule:
    """The exact legalize/fuse sequence ``compile_relax`` runs before applying a database (``layout_rewrite``:
    the one of ``relax.pipeline.static_shape_tuning_pipeline(..., cpu_weight_prepack=True)``)."""
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(_fuse_passes(target, layout_rewrite))(mod)


def extract_tasks(mod: tvm.IRModule, target, layout_rewrite: bool = False) -> list[Task]:
    """Tasks of a bound, simplified module (``bind_and_simplify``), heaviest first. ``layout_rewrite``: the
    tasks' weight buffers are marked layout-free (``compile_with_database`` then packs the weights)."""
    fused = fuse_for_tuning(mod, target, layout_rewrite)
    extracted = ms.relax_integration.extract_tasks(fused, target)
    tasks = []
    for ext in extracted:
        task_mod = ext.dispatched[0]
        if task_mod.attrs is not None and task_mod.attrs.get("tirx.is_scheduled", False):
            continue
        tasks.append(Task(ext.task_name, task_mod, int(ext.weight), task_flops(task_mod), target))
    tasks.sort(key=lambda t: -t.flops * t.weight)
    return tasks


def task_flops(mod: tvm.IRModule) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(mod))
    except Exception:  # some workloads (e.g. pure copies) have no estimate
        return 0.0


LAYOUT_FREE_ATTR = "layout_free_buffers"


def uses_layout_rewrite(database) -> bool:
    """Whether ``database`` was tuned on layout-rewrite tasks (their workloads carry the layout-free mark)."""
    if database is None:
        return False
    for record in database.get_all_tuning_records():
        for func in record.workload.mod.functions.values():
            if func.attrs is not None and LAYOUT_FREE_ATTR in func.attrs:
                return True
        return False  # one database, one way of extracting its tasks: the first record tells
    return False


def compile_with_database(mod: tvm.IRModule, target, database=None, layout_rewrite: bool | None = None,
                          conv_layout: str | None = None):
    """Compile a bound module: tuned where the database has records, untuned elsewhere. ``layout_rewrite``
    (default: as the database was tuned) packs the weights into the layouts the tuned programs chose, at
    compile time (the weights are constants), as ``static_shape_tuning_pipeline(cpu_weight_prepack=True)``.
    ``conv_layout`` (default: as the database was tuned, else the module's own): ``convert_conv_layout``."""
    if database is None:
        database = ms.database.MemoryDatabase()
    mod = convert_conv_layout(mod, conv_layout or tuned_conv_layout(database) or "nchw")
    if layout_rewrite is None:
        layout_rewrite = uses_layout_rewrite(database)
    if not layout_rewrite:
        return ms.relax_integration.compile_relax(database, mod, target, params=None)
    return _compile_prepacked(database, mod, target)


def _compile_prepacked(database, mod: tvm.IRModule, target):
    """``compile_relax``'s pipeline with the weight prepack of ``static_shape_tuning_pipeline``."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu  # compile_relax's lists (its fallback on llvm)

    lower = cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target)

    @tvm.transform.module_pass(opt_level=3)
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return tvm.transform.Sequential(lower)(prepack(mod, target))

    with target, database, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=_pipeline)


def prepack(mod: tvm.IRModule, target) -> tvm.IRModule:
    """Fused with layout-free marks, the database in context applied, each tuned program's layout-rewrite
    block split into its own function and folded over the constant weights (run under ``with database``)."""
    mod = tvm.transform.Sequential(_fuse_passes(target, True))(mod)
    mod = relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(mod)
    mod = relax.transform.SplitLayoutRewritePreproc()(mod)
    mod = relax.transform.FoldConstant()(mod)
    return relax.transform.DeadCodeElimination()(mod)


class VMRunner:
    """Runs a compiled Relax executable on numpy/torch inputs and times it."""

    def __init__(self, executable, device=None):
        self.device = device or tvm.cpu()
        self.vm = relax.VirtualMachine(executable, self.device)

    def _tensors(self, inputs) -> list:
        out = []
        for x in inputs:
            arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
            out.append(tvm.runtime.tensor(arr, self.device))
        return out

    def __call__(self, *inputs) -> list[np.ndarray]:
        result = self.vm["main"](*self._tensors(inputs))
        return _flatten(result)

    def time(self, inputs, number: int = 1, repeat: int = 5, min_repeat_ms: int = 50) -> list[float]:
        self.vm.set_input("main", *self._tensors(inputs))
        timer = self.vm.time_evaluator(
            "invoke_stateful", self.device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms
        )
        return [float(r) for r in timer("main").results]

    def profile(self, inputs, runs: int = 3) -> dict:
        """Where a call of the compiled model spends its time, measured in the model itself: every VM call
        (a tuned kernel, a packed library call, an allocation) timed from the VM's instrument hook before
        and after it, over ``runs`` calls after one warm-up. Returns ``{"total_ms": mean wall ms per call
        (instrumented), "calls": {symbol: {"count": calls per model call, "ms": ms per model call}}}`` (means
        over the runs, so the calls add up to at most total_ms);
        the part of total_ms no call accounts for is the VM's own work and the hook's overhead."""
        runs = max(1, runs)
        args = self._tensors(inputs)
        per_symbol: dict[str, list[float]] = {}
        started: list[tuple[str, float]] = []

        def hook(func, symbol, before_run, ret_value, *call_args):  # noqa: ARG001 (the VM's signature)
            if before_run:
                started.append((str(symbol), time.perf_counter()))
            elif started:
                name, t0 = started.pop()
                per_symbol.setdefault(name, []).append(time.perf_counter() - t0)
            return 0  # VMInstrumentReturnKind.NO_OP

        self.vm["main"](*args)  # warm-up, not instrumented
        self.vm.set_instrument(tvm.runtime.convert(hook) if hasattr(tvm.runtime, "convert") else hook)
        totals = []
        try:
            for _ in range(runs):
                t0 = time.perf_counter()
                self.vm["main"](*args)
                totals.append(time.perf_counter() - t0)
        finally:
            self.vm.set_instrument(None)
        calls = {k: {"count": len(v) / runs, "ms": sum(v) / runs * 1e3} for k, v in per_symbol.items()}
        return {"total_ms": float(np.mean(totals)) * 1e3,
                "calls": dict(sorted(calls.items(), key=lambda kv: -kv[1]["ms"]))}


def _flatten(result) -> list[np.ndarray]:
    if hasattr(result, "numpy"):
        return [result.numpy()]
    out = []
    for item in result:
        out.extend(_flatten(item))
    return out
