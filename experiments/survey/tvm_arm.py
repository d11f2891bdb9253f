"""TVM arms of the survey: untuned Relax, symbolic-shape Relax, and the tuned arm via autotune.api.

TVM is imported lazily (through autotune.tvmrt.startup.fast_start, first) so the torch-only parts
of the experiments also run where TVM is absent, e.g. on the lent GPU machine's image.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


def unavailable(device: str = "cpu") -> str | None:
    """Why the TVM arms cannot run here, or None if they can."""
    if device != "cpu":
        return "TVM arms run on the CPU only (the GPU image has no TVM)"
    try:
        from autotune.tvmrt.startup import fast_start

        fast_start("llvm")
    except Exception as err:  # noqa: BLE001 - any import failure means: skip, with the reason
        return f"tvm not importable: {err!r}"
    return None


def host_target(num_cores: int = 1):
    """LLVM target for this CPU (never plain llvm: that is generic x86 without AVX2)."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm

    mcpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": num_cores})


def _to_tvm(inputs):
    import tvm

    return [tvm.runtime.from_dlpack(t.contiguous()) for t in inputs]


def _to_torch(out):
    if hasattr(out, "__dlpack__"):
        return torch.from_dlpack(out).clone()
    return tuple(_to_torch(o) for o in out)


def _unwrap(out):
    return out[0] if isinstance(out, tuple) and len(out) == 1 else out


@dataclass
class RelaxModel:
    """A compiled Relax VM function with its parameters; times of each compile stage."""

    fn: object
    params: list
    export_s: float
    import_s: float
    build_s: float
    notes: dict = field(default_factory=dict)

    @property
    def compile_s(self) -> float:
        return self.export_s + self.import_s + self.build_s

    def bind(self, inputs):
        """A no-argument callable on pre-converted inputs (what the timing loop calls)."""
        args = _to_tvm(inputs) + self.params
        fn = self.fn
        return lambda: fn(*args)

    def __call__(self, *inputs):
        return _unwrap(_to_torch(self.fn(*(_to_tvm(inputs) + self.params))))


def compile_relax(model, inputs, target=None, dynamic_shapes=None) -> RelaxModel:
    """torch.export -> Relax -> tvm.compile with no tuning (CPU: no schedule applied at all)."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    target = target or host_target()
    t0 = time.perf_counter()
    ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes)
    t1 = time.perf_counter()
    mod = from_exported_program(ep, keep_params_as_input=True)
    mod, params = relax.frontend.detach_params(mod)
    t2 = time.perf_counter()
    exe = tvm.compile(mod, target=target)
    vm = relax.VirtualMachine(exe, tvm.cpu())
    t3 = time.perf_counter()
    return RelaxModel(vm["main"], list(params.get("main", [])), t1 - t0, t2 - t1, t3 - t2,
                      {"target": str(target.export() if hasattr(target, "export") else target)})


def tuning_api():
    """autotune.api (the project's MetaSchedule wrapper), or the reason it cannot be used."""
    try:
        from autotune import api
    except ImportError as err:
        return None, f"autotune.api not available ({err})"
    missing = [n for n in ("tune_torch", "compile_torch") if not hasattr(api, n)]
    if missing:
        return None, f"autotune.api lacks {missing}"
    return api, None


class TorchCallableArm:
    """Adapts a tune_torch/compile_torch result (tm(*torch_tensors)) to the timing loop."""

    def __init__(self, obj, inputs):
        self.obj, self.inputs = obj, tuple(inputs)

    def bind(self):
        obj, inputs = self.obj, self.inputs
        return lambda: obj(*inputs)

    def kernel_s(self) -> float | None:
        """TVM time_evaluator seconds per call, without the torch<->TVM conversion the callable pays."""
        if not hasattr(self.obj, "time"):
            return None
        import statistics

        return statistics.median(self.obj.time(self.inputs))

    def __call__(self, *inputs):
        return self.obj(*inputs)
