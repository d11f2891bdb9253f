"""A small programmatic API: tune or compile a torch.nn.Module with TVM, get a torch-like callable.

    from autotune.api import tune_torch, compile_torch
    tm = tune_torch(model, (x,), target="llvm", trials=64, work_dir="runs/mlp")
    y = tm(x)                     # torch.Tensor (or a tuple of them)
    tm.tuning_seconds, tm.compile_seconds, tm.work_dir
    cm = compile_torch(model, (x,), database_dir="runs/mlp")   # re-use a database (warm cache)
"""

from __future__ import annotations

import os
import time

import torch

from autotune.frontend.models import LoadedModel


class CompiledModel:
    """A compiled Relax VM executable that takes and returns torch tensors."""

    def __init__(self, runner, compile_seconds: float, tuning_seconds: float = 0.0, work_dir: str | None = None):
        self._runner = runner
        self.compile_seconds = compile_seconds
        self.tuning_seconds = tuning_seconds
        self.work_dir = work_dir

    def __call__(self, *inputs):
        outs = [torch.from_numpy(o) for o in self._runner(*inputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def time(self, inputs, **kwargs) -> list[float]:
        """Seconds per call from TVM's time_evaluator (see frontend.VMRunner.time)."""
        return self._runner.time(inputs, **kwargs)


def _prepare(model: torch.nn.Module, example_inputs: tuple, target, num_threads: int | None):
    from autotune.tvmrt.target import parse_target

    if num_threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(num_threads)
    tgt = parse_target(target, num_cores=num_threads) if isinstance(target, str | dict) else target
    with torch.no_grad():
        exported = torch.export.export(model.eval(), tuple(example_inputs))
    loaded = LoadedModel(type(model).__name__, exported, tuple(example_inputs), "api", model)
    from autotune.frontend import relax as fe

    mod, params = fe.import_exported(exported)
    return tgt, loaded, fe.bind_and_simplify(mod, params)


def compile_torch(model: torch.nn.Module, example_inputs: tuple, *, target="llvm", database_dir: str | None = None,
                  num_threads: int | None = None) -> CompiledModel:
    """Compile untuned (``database_dir=None``) or with the MetaSchedule database in ``database_dir``."""
    from autotune.frontend import relax as fe
    from autotune.tvmrt.database import open_json_database

    tgt, _, mod = _prepare(model, example_inputs, target, num_threads)
    t0 = time.perf_counter()
    database = open_json_database(database_dir) if database_dir else None
    exe = fe.compile_with_database(mod, tgt, database)
    return CompiledModel(fe.VMRunner(exe), time.perf_counter() - t0, work_dir=database_dir)


def tune_torch(model: torch.nn.Module, example_inputs: tuple, *, target="llvm", trials: int, work_dir: str,
               seed: int = 0, num_threads: int | None = None, trials_per_round: int = 16,
               cost_model: str = "ms-xgb") -> CompiledModel:
    """Tune with MetaSchedule (our loop: pooled builder, resume from ``work_dir``) and compile."""
    from autotune.frontend import relax as fe
    from autotune.tuning.tuner import SearchConfig, make_cost_model, tune
    from autotune.tvmrt.database import open_json_database
    from autotune.tvmrt.measure import Measurer
    from autotune.tvmrt.target import hardware_id, target_json

    tgt, _, mod = _prepare(model, example_inputs, target, num_threads)
    cores = int(target_json(tgt).get("num-cores", 1))
    tasks = fe.extract_tasks(mod, tgt)
    database = open_json_database(work_dir)
    measurer = Measurer(tgt)
    t0 = time.perf_counter()
    try:
        tune(tasks, tgt, database, measurer, work_dir=work_dir, max_trials=trials,
             cost_model=make_cost_model(cost_model, cores, hw_id=hardware_id(tgt)),
             search=SearchConfig(num_trials_per_iter=trials_per_round), seed=seed)
    finally:
        measurer.close()
    tuning = time.perf_counter() - t0
    t0 = time.perf_counter()
    exe = fe.compile_with_database(mod, tgt, database)
    return CompiledModel(fe.VMRunner(exe), time.perf_counter() - t0, tuning, work_dir)
