"""A small programmatic API: tune or compile a torch.nn.Module with TVM, get a torch-like callable.

    from autotune.api import tune_torch, tune_onnx, compile_torch
    tm = tune_torch(model, (x,), target="llvm", trials=64, work_dir="runs/mlp")
    om = tune_onnx("model.onnx", trials=64, work_dir="runs/onnx")      # an ONNX file with static shapes
    y = tm(x)                     # torch.Tensor (or a tuple of them)
    tm.tuning_seconds, tm.compile_seconds, tm.work_dir
    cm = compile_torch(model, (x,), database_dir="runs/mlp")   # re-use a database (warm cache)
"""

from __future__ import annotations

import time

import torch

from autotune.frontend.models import LoadedModel
from autotune.tuning.config import FIRST_ROUND_TRIALS_DEFAULT


class CompiledModel:
    """A compiled Relax VM executable that takes and returns torch tensors."""

    def __init__(self, runner, compile_seconds: float, tuning_seconds: float = 0.0, work_dir: str | None = None):
        self._runner = runner
        self.compile_seconds = compile_seconds
        self.tuning_seconds = tuning_seconds
        self.work_dir = work_dir
        self.cost_model_used: str | None = None  # tune_torch: what --cost-model resolved to

    def __call__(self, *inputs):
        outs = [torch.from_numpy(o) for o in self._runner(*inputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def time(self, inputs, **kwargs) -> list[float]:
        """Seconds per call from TVM's time_evaluator (see frontend.VMRunner.time)."""
        return self._runner.time(inputs, **kwargs)


def _prepare(model: torch.nn.Module, example_inputs: tuple, target, num_threads: int | None):
    """The target (threads for TVM's runtime pool taken from it, as the CLI does) and the exported model."""
    from autotune.tvmrt.target import parse_target, use_target_threads

    tgt = parse_target(target, num_cores=num_threads) if isinstance(target, str | dict) else target
    use_target_threads(tgt, num_threads, check=True)  # unset, TVM runs 1 thread on a 2-core machine
    with torch.no_grad():
        exported = torch.export.export(model.eval(), tuple(example_inputs))
    return tgt, LoadedModel(type(model).__name__, exported, tuple(example_inputs), "api", model)


def compile_torch(model: torch.nn.Module, example_inputs: tuple, *, target="llvm", database_dir: str | None = None,
                  num_threads: int | None = None) -> CompiledModel:
    """Compile untuned (``database_dir=None``) or with the MetaSchedule database in ``database_dir`` (its
    layout rewrite and convolution layout: as it was tuned).

    The runtime uses the target's cores (``num_threads`` overrides; a TVM_NUM_THREADS set before the
    first TVM call is kept)."""
    from autotune.frontend import relax as fe
    from autotune.tvmrt.database import open_json_database

    tgt, loaded = _prepare(model, example_inputs, target, num_threads)
    mod = fe.bind_and_simplify(*loaded.relax_module())
    t0 = time.perf_counter()
    database = open_json_database(database_dir) if database_dir else None
    exe = fe.compile_with_database(mod, tgt, database)
    return CompiledModel(fe.VMRunner(exe), time.perf_counter() - t0, work_dir=database_dir)


def tune_torch(model: torch.nn.Module, example_inputs: tuple, *, target="llvm", trials: int, work_dir: str,
               seed: int = 0, num_threads: int | None = None, trials_per_round: int = 16,
               first_round_trials: int | None = FIRST_ROUND_TRIALS_DEFAULT, cost_model: str = "auto", online_update: str = "finetune",
               layout_rewrite: str = "auto", conv_layout: str = "auto") -> CompiledModel:
    """Tune and compile through the CLI's own pipeline (``autotune.tune.run_session``: the work-dir lock, the
    layouts as ``work_dir`` was tuned, resume, report.json, tuning curve), without timing the untuned model.

    ``cost_model`` / ``online_update``: as the CLI's ``--cost-model`` / ``--online-update``
    (``autotune.tuning.costmodels``); ``tm.cost_model_used`` says what was used. ``layout_rewrite``: as the
    CLI's ``--layout-rewrite`` (auto: as ``work_dir`` was tuned, else the target's default); ``conv_layout`` as
    ``--conv-layout``, the same way; ``first_round_trials`` as ``--first-round-trials`` (None: a whole round)."""
    config = _config(type(model).__name__, locals())
    tgt, loaded = _prepare(model, example_inputs, config.target, config.num_cores)
    return _tune_loaded(loaded, tgt, config)


def tune_onnx(path: str, *, target="llvm", trials: int, work_dir: str, seed: int = 0, num_threads: int | None = None,
              trials_per_round: int = 16, first_round_trials: int | None = FIRST_ROUND_TRIALS_DEFAULT,
              cost_model: str = "auto", online_update: str = "finetune", layout_rewrite: str = "auto",
              conv_layout: str = "auto") -> CompiledModel:
    """``tune_torch`` for an ONNX file with static input shapes (TVM's Relax ONNX front end; numerics and speed read
    against ONNX Runtime, as ``--model x.onnx``). The returned model takes and returns torch tensors."""
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import parse_target, use_target_threads

    config = _config(path, locals())
    loaded = load_model(path, seed=seed)
    tgt = parse_target(target, num_cores=num_threads) if isinstance(target, str | dict) else target
    use_target_threads(tgt, num_threads, check=True)
    return _tune_loaded(loaded, tgt, config)


def _config(name: str, args: dict):
    from autotune.tuning.config import SearchConfig, TuneConfig

    search = SearchConfig(num_trials_per_iter=args["trials_per_round"], first_round_trials=args["first_round_trials"])
    return TuneConfig(model=name, target=args["target"], trials=args["trials"], work_dir=args["work_dir"],
                      seed=args["seed"], cost_model=args["cost_model"], online_update=args["online_update"],
                      num_cores=args["num_threads"], search=search, layout_rewrite=args["layout_rewrite"],
                      conv_layout=args["conv_layout"], time_untuned=False, bench_rounds=1)


def _tune_loaded(loaded: LoadedModel, tgt, config) -> CompiledModel:
    from autotune.frontend import relax as fe
    from autotune.tune import run_session
    from autotune.tuning.costmodels import resolve
    from autotune.tvmrt.measure import Measurer

    resolved = resolve(config.cost_model, tgt, online=config.online_update,
                       uses_cost_model=config.search.uses_cost_model)
    measurer = Measurer(tgt)
    try:
        report, session = run_session(config, tgt, measurer, resolved, loaded)
    finally:
        measurer.close()
    wall = report["wall_s"]
    compiled = CompiledModel(fe.VMRunner(session.tuned_exe), wall["compile"], wall["tuning"], config.work_dir)
    compiled.cost_model_used = resolved.used
    return compiled
