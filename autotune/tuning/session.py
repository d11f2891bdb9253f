"""One tuning session: import -> tasks -> tune -> compile -> check -> time, and its report."""

from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from autotune.frontend.models import LoadedModel
from autotune.progress import Progress
from autotune.timing import seconds_per_call
from autotune.tvmrt.startup import fast_start

fast_start("llvm")

from autotune.cli import loadavg, versions  # noqa: E402
from autotune.frontend import relax as fe  # noqa: E402
from autotune.tuning.config import TuneConfig, resolve_conv_layout, resolve_layout_rewrite  # noqa: E402
from autotune.tuning.costmodels import Resolved  # noqa: E402
from autotune.tuning.tuner import tune  # noqa: E402
from autotune.tvmrt.database import open_json_database  # noqa: E402
from autotune.tvmrt.measure import Measurer  # noqa: E402
from autotune.tvmrt.target import detect_host, hardware_id, target_cores, target_json  # noqa: E402

logger = logging.getLogger("autotune.tuning.session")
_POOL_IDLE_S = 0.5  # TVM's worker threads spin for a while after a call; let them sleep


@dataclass
class _Timings:
    import_s: float = 0.0
    tune_s: float = 0.0
    compile_s: float = 0.0
    bench_s: float = 0.0


class TuneSession:
    """One model on one target: ``run(cost_model)`` tunes with ``config`` and returns report.json's dict."""

    def __init__(self, model: LoadedModel, target, work_dir: str, config: TuneConfig | None = None,
                 measurer: Measurer | None = None, t_start=None):
        self.model, self.target, self.work_dir = model, target, work_dir
        self.config = config or TuneConfig(model=model.name)
        self.seed = self.config.seed
        self.measurer = measurer
        self.t_start = t_start or time.time()
        self.cores = target_cores(target)
        # the CLI resolved auto against the work dir already (on/off); elsewhere auto is the target's default
        self.layout_rewrite = resolve_layout_rewrite(self.config.layout_rewrite, target.kind.name, None, work_dir)
        self.conv_layout = resolve_conv_layout(self.config.conv_layout, target.kind.name, None, work_dir)

    def prepare(self):
        mod, params = self.model.relax_module()
        mod = fe.convert_conv_layout(fe.bind_and_simplify(mod, params), self.conv_layout)
        return mod, fe.extract_tasks(mod, self.target, layout_rewrite=self.layout_rewrite)

    def run(self, cost_model: Resolved) -> dict:
        """Tune (resuming from the work dir), compile, check numerics, time; the report of what ran."""
        times = _Timings()
        t0 = time.time()
        mod, tasks = self.prepare()
        times.import_s = time.time() - t0
        logger.info(
            "%s: %d tasks, %.2f GFLOP per inference (import %.1f s)",
            self.model.name, len(tasks), sum(t.flops * t.weight for t in tasks) / 1e9, times.import_s,
        )
        database = open_json_database(self.work_dir)
        states, stats = self._tune(tasks, database, cost_model, times)
        t0 = time.time()
        tuned_exe = fe.compile_with_database(mod, self.target, database, layout_rewrite=self.layout_rewrite,
                                             conv_layout=self.conv_layout)
        times.compile_s = time.time() - t0
        self.tuned_exe = tuned_exe  # the API hands it on as a callable
        lib_path = os.path.join(self.work_dir, f"{self.model.name}.so")
        _export(tuned_exe, lib_path)
        untuned_exe = (fe.compile_with_database(mod, self.target, conv_layout=self.conv_layout)
                       if self.config.time_untuned else None)
        t0 = time.time()
        arms, numerics = self._check_and_time(tuned_exe, untuned_exe, self.config.bench_rounds)
        times.bench_s = time.time() - t0
        return self._report(cost_model, states, stats, times, arms, numerics, lib_path)

    def _tune(self, tasks, database, cost_model: Resolved, times: _Timings):
        config = self.config
        own = self.measurer is None  # a measurer the caller passed is the caller's to close
        measurer = self.measurer or Measurer(self.target)
        progress = Progress(config.trials, f"tuning {self.model.name}", done=None)  # the tuner sets both
        t0 = time.time()
        try:
            return tune(
                tasks, self.target, database, measurer,
                work_dir=self.work_dir, max_trials=config.trials, trials_per_task=config.trials_per_task,
                cost_model=cost_model, search=config.search, seed=self.seed, on_progress=progress,
            )
        finally:
            times.tune_s = time.time() - t0
            progress.close()
            if own:
                measurer.close()

    def _report(self, cost_model: Resolved, states, stats, times: _Timings, arms: dict, numerics: dict,
                lib_path: str) -> dict:
        """report.json, in one place, from what ran (the resolved cost model, the search config used)."""
        startup = (stats.first_measured_at - self.t_start) if stats.first_measured_at else None
        return {
            "model": self.model.name,
            "inputs": [{"shape": list(x.shape), "dtype": str(x.dtype)} for x in self.model.inputs],
            "target": target_json(self.target),
            "hardware_id": hardware_id(self.target),
            "host": detect_host().as_json(),
            "seed": self.seed,
            **cost_model.report(),
            "search": dataclasses.asdict(self.config.search),
            "batch_selection": stats.selection,
            "layout_rewrite": self.layout_rewrite,
            "conv_layout": self.conv_layout,
            "trials": {
                "requested": self.config.trials,
                "in_database": sum(s.trials for s in states),
                "this_run": stats.trials_this_run,
                "failed": sum(s.failures for s in states),
            },
            "tasks": [_task_row(s) for s in states],
            "latency_ms": arms,
            "speedup": {
                "tuned_vs_untuned": _ratio(arms.get("tvm_untuned"), arms["tvm_tuned"]),
                "tuned_vs_torch_eager": _ratio(arms.get("torch_eager"), arms["tvm_tuned"]),
                **({"tuned_vs_onnxruntime": _ratio(arms["onnxruntime"], arms["tvm_tuned"])}
                   if "onnxruntime" in arms else {}),
            },
            "numerics": numerics,
            "wall_s": {
                "startup_to_first_measurement": startup,
                "import_and_extract": times.import_s,
                "tuning": times.tune_s,
                "search": stats.search_s,
                "build": stats.build_s,
                "run": stats.run_s,
                "compile": times.compile_s,
                "benchmark": times.bench_s,
                "total": time.time() - self.t_start,
            },
            "per_trial_s": (times.tune_s / stats.trials_this_run) if stats.trials_this_run else None,
            "history": {"columns": ["trials", "elapsed_s", "task", "task_best_s"], "rows": stats.history,
                        "start": stats.start},
            "library": lib_path,
            "database": self.work_dir,
            "loadavg": loadavg(),
            "versions": versions(),
        }

    def _check_and_time(self, tuned_exe, untuned_exe, rounds: int):
        inputs = self.model.inputs
        torch.set_num_threads(self.cores)
        ref_name, reference = self.model.reference()
        ref = [np.asarray(x) for x in reference(*inputs)]
        tuned = fe.VMRunner(tuned_exe)
        out = tuned(*inputs)
        numerics = _compare(out, ref)
        arms = {"tvm_tuned": lambda: tuned.time(inputs, repeat=1, min_repeat_ms=100)[0]}
        if untuned_exe is not None:
            untuned = fe.VMRunner(untuned_exe)
            numerics["untuned_max_abs_error"] = _compare(untuned(*inputs), ref)["max_abs_error"]
            arms["tvm_untuned"] = lambda: untuned.time(inputs, repeat=1, min_repeat_ms=0)[0]
        if ref_name == "torch_eager":
            eager = self.model.eager_module()
            arms["torch_eager"] = lambda: _time_torch(eager, inputs)
        else:  # the reference runtime itself (ONNX Runtime for an .onnx model)
            arms[ref_name] = lambda: seconds_per_call(lambda: reference(*inputs))
        samples: dict[str, list[float]] = {k: [] for k in arms}
        for fn in arms.values():  # warm-up
            fn()
        for _ in range(rounds):  # alternating blocks: each round times every arm once
            for name, fn in arms.items():
                time.sleep(_POOL_IDLE_S)
                samples[name].append(fn())
        result = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
        result.setdefault("tvm_untuned", None)
        result["rounds"] = rounds
        result["threads"] = self.cores
        return result, numerics


def _time_torch(module, inputs, min_s: float = 0.1) -> float:
    with torch.no_grad():
        return seconds_per_call(lambda: module(*inputs), min_s)


def _compare(out: list[np.ndarray], ref: list[np.ndarray]) -> dict:
    if len(out) != len(ref):
        return {"max_abs_error": float("inf"), "max_rel_error": float("inf"), "outputs": len(out)}
    abs_err = max(float(np.max(np.abs(o.astype(np.float64) - r))) for o, r in zip(out, ref))
    scale = max(float(np.max(np.abs(r))) for r in ref) or 1.0
    return {"max_abs_error": abs_err, "max_rel_error": abs_err / scale, "outputs": len(out)}


def _ratio(a, b):
    return (a / b) if a and b else None


def _task_row(state) -> dict:
    t = state.task
    best = state.best_s
    return {
        "name": t.name,
        "workload_hash": t.workload_hash,
        "flops": t.flops,
        "weight": t.weight,
        "trials": state.trials,
        "failed": state.failures,
        "best_latency_ms": best * 1e3 if best else None,
        "best_gflops": (t.flops / best / 1e9) if best and t.flops else None,
    }


def _export(executable, path: str) -> None:
    target = executable if hasattr(executable, "export_library") else executable.mod
    target.export_library(path)
