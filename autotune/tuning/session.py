"""One tuning session: import -> tasks -> tune -> compile -> check -> time, and its report."""

from __future__ import annotations

import logging
import os
import statistics
import time

import numpy as np
import torch

from autotune.frontend.models import LoadedModel
from autotune.progress import Progress
from autotune.tvmrt.startup import fast_start

fast_start("llvm")

from autotune.cli import loadavg  # noqa: E402
from autotune.frontend import relax as fe  # noqa: E402
from autotune.tuning.tuner import SearchConfig, make_cost_model, tune  # noqa: E402
from autotune.tvmrt.database import open_json_database  # noqa: E402
from autotune.tvmrt.measure import Measurer  # noqa: E402
from autotune.tvmrt.target import detect_host, target_json  # noqa: E402

logger = logging.getLogger("autotune.tuning.session")
_POOL_IDLE_S = 0.5  # TVM's worker threads spin for a while after a call; let them sleep


class TuneSession:
    def __init__(
        self, model: LoadedModel, target, work_dir: str, seed: int = 0, measurer: Measurer | None = None,
        t_start=None,
    ):
        self.model, self.target, self.work_dir, self.seed = model, target, work_dir, seed
        self.measurer = measurer
        self.t_start = t_start or time.time()
        self.kind = str(target.kind.name)
        self.cores = int(target_json(target).get("num-cores", 1)) if self.kind == "llvm" else 1

    def prepare(self):
        mod, params = fe.import_exported(self.model.exported)
        mod = fe.bind_and_simplify(mod, params)
        return mod, fe.extract_tasks(mod, self.target)

    def run(
        self,
        trials: int,
        trials_per_task: int | None = None,
        trials_per_round: int = 16,
        cost_model=None,
        cost_model_name: str = "ms-xgb",
        time_untuned: bool = True,
        bench_rounds: int = 5,
        search: SearchConfig | None = None,
    ) -> dict:
        t0 = time.time()
        mod, tasks = self.prepare()
        t_import = time.time() - t0
        logger.info(
            "%s: %d tasks, %.2f GFLOP per inference (import %.1f s)",
            self.model.name, len(tasks), sum(t.flops * t.weight for t in tasks) / 1e9, t_import,
        )
        database = open_json_database(self.work_dir)
        measurer = self.measurer or Measurer(self.target)
        progress = Progress(trials, f"tuning {self.model.name}")
        t_tune = time.time()
        try:
            states, stats = tune(
                tasks, self.target, database, measurer,
                work_dir=self.work_dir, max_trials=trials, trials_per_task=trials_per_task,
                cost_model=cost_model if cost_model is not None else make_cost_model("ms-xgb", self.cores),
                search=search or SearchConfig(num_trials_per_iter=trials_per_round),
                seed=self.seed, on_progress=progress,
            )
        finally:
            progress.close()
            measurer.close()
        t_tune = time.time() - t_tune
        t0 = time.time()
        tuned_exe = fe.compile_with_database(mod, self.target, database)
        t_compile = time.time() - t0
        lib_path = os.path.join(self.work_dir, f"{self.model.name}.so")
        _export(tuned_exe, lib_path)
        untuned_exe = fe.compile_with_database(mod, self.target) if time_untuned else None
        t0 = time.time()
        arms, numerics = self._check_and_time(tuned_exe, untuned_exe, bench_rounds)
        t_bench = time.time() - t0
        startup = (stats.first_measured_at - self.t_start) if stats.first_measured_at else None
        return {
            "model": self.model.name,
            "inputs": [{"shape": list(x.shape), "dtype": str(x.dtype)} for x in self.model.inputs],
            "target": target_json(self.target),
            "host": detect_host().as_json(),
            "seed": self.seed,
            "cost_model": cost_model_name,
            "trials": {
                "requested": trials,
                "in_database": sum(s.trials for s in states),
                "this_run": stats.trials_this_run,
                "failed": sum(s.failures for s in states),
            },
            "tasks": [_task_row(s) for s in states],
            "latency_ms": arms,
            "speedup": {
                "tuned_vs_untuned": _ratio(arms.get("tvm_untuned"), arms["tvm_tuned"]),
                "tuned_vs_torch_eager": _ratio(arms["torch_eager"], arms["tvm_tuned"]),
            },
            "numerics": numerics,
            "wall_s": {
                "startup_to_first_measurement": startup,
                "import_and_extract": t_import,
                "tuning": t_tune,
                "search": stats.search_s,
                "build": stats.build_s,
                "run": stats.run_s,
                "compile": t_compile,
                "benchmark": t_bench,
                "total": time.time() - self.t_start,
            },
            "per_trial_s": (t_tune / stats.trials_this_run) if stats.trials_this_run else None,
            "history": {"columns": ["trials", "elapsed_s", "task", "task_best_s"], "rows": stats.history},
            "library": lib_path,
            "database": self.work_dir,
            "loadavg": loadavg(),
        }

    def _check_and_time(self, tuned_exe, untuned_exe, rounds: int):
        inputs = self.model.inputs
        torch.set_num_threads(self.cores)
        eager = self.model.eager_module()
        with torch.no_grad():
            ref = [t.detach().numpy() for t in _as_list(eager(*inputs))]
        tuned = fe.VMRunner(tuned_exe)
        out = tuned(*inputs)
        numerics = _compare(out, ref)
        arms = {"tvm_tuned": lambda: tuned.time(inputs, repeat=1, min_repeat_ms=100)[0]}
        if untuned_exe is not None:
            untuned = fe.VMRunner(untuned_exe)
            numerics["untuned_max_abs_error"] = _compare(untuned(*inputs), ref)["max_abs_error"]
            arms["tvm_untuned"] = lambda: untuned.time(inputs, repeat=1, min_repeat_ms=0)[0]
        arms["torch_eager"] = lambda: _time_torch(eager, inputs)
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
        n, t0 = 0, time.perf_counter()
        while True:
            module(*inputs)
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_s:
                return elapsed / n


def _as_list(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    flat = []
    for item in out:
        flat.extend(_as_list(item))
    return flat


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
