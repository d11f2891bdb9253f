"""torch.nn / torch.export programs to Relax, and Relax to MetaSchedule tasks.

One preparation sequence serves task extraction, compilation and the stock
``compile_relax``: parameters are bound as constants, BatchNorm is decomposed and
folded, then the module is legalized and fused exactly as ``compile_relax`` does, so
the workloads in the database match the functions compile sees.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import tvm  # noqa: E402
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
        import tvm_ffi

        return f"{tvm_ffi.structural_hash(self.mod) & 0xFFFFFFFFFFFFFFFF:016x}"


def export_torch(model: torch.nn.Module, example_inputs: tuple) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(model, tuple(example_inputs))


def import_exported(ep: torch.export.ExportedProgram) -> tuple[tvm.IRModule, dict]:
    """ExportedProgram to (Relax module with params as inputs, {"main": [params]})."""
    from tvm.relax.frontend.torch import from_exported_program

    mod = from_exported_program(ep, keep_params_as_input=True)
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


def compile_with_database(mod: tvm.IRModule, target, database=None, layout_rewrite: bool | None = None):
    """Compile a bound module: tuned where the database has records, untuned elsewhere. ``layout_rewrite``
    (default: as the database was tuned) packs the weights into the layouts the tuned programs chose, at
    compile time (the weights are constants), as ``static_shape_tuning_pipeline(cpu_weight_prepack=True)``."""
    if database is None:
        database = ms.database.MemoryDatabase()
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


def _flatten(result) -> list[np.ndarray]:
    if hasattr(result, "numpy"):
        return [result.numpy()]
    out = []
    for item in result:
        out.extend(_flatten(item))
    return out
