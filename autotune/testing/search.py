"""The contract every search kind meets (``autotune.tuning.search.SEARCH_KINDS``).

Real TVM (design spaces, sampling, post-processing, the search's own bookkeeping) on a small
matmul, driven the way ``autotune.tuning.tuner`` drives it, with made-up latencies instead of
builds and runs: a few seconds per kind. tests/test_search_contract.py::

    @pytest.mark.parametrize("name", list(SEARCH_KINDS))
    @pytest.mark.parametrize("check", CHECKS)
    def test_search_contract(name, check, search_runs):
        check(name, search_runs(name))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm import te  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.cost_model import PyCostModel  # noqa: E402

from autotune.tuning.config import SearchConfig  # noqa: E402
from autotune.tuning.search import SEARCH_KINDS, SearchKind, search_kind  # noqa: E402

PER_ROUND = 8
ROUNDS = 3


@derived_object
class CountingCostModel(PyCostModel):
    """Random scores; counts what the search asks of it."""

    def __init__(self):
        super().__init__()
        self.predicted = 0
        self.updates = 0
        self.rng = np.random.default_rng(0)

    def load(self, path: str) -> None:
        pass

    def save(self, path: str) -> None:
        pass

    def update(self, context, candidates, results) -> None:
        self.updates += 1

    def predict(self, context, candidates) -> np.ndarray:
        self.predicted += len(candidates)
        return self.rng.random(len(candidates))


@dataclass
class SearchRun:
    """What one task's search proposed over ``ROUNDS`` rounds of ``PER_ROUND`` candidates."""

    config: SearchConfig
    strategy: object
    rounds: list[list] = field(default_factory=list)  # candidates per round
    model: CountingCostModel | None = None


def matmul(target):
    a = te.placeholder((64, 96), name="A")
    b = te.placeholder((96, 48), name="B")
    k = te.reduce_axis((0, 96), name="k")
    c = te.compute((64, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def drive(name: str) -> SearchRun:
    """Run kind ``name`` as the tuner does: pre_tuning, rounds of propose / (fake) measure / notify /
    commit / update the cost model, post_tuning."""
    target = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 1})
    config = SearchConfig(kind=name, num_trials_per_iter=PER_ROUND, population_size=32, init_min_unmeasured=16)
    mod = matmul(target)
    run = SearchRun(config, config.strategy(), model=CountingCostModel())
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", search_strategy=run.strategy,
                         task_name="mm", rand_state=1, num_threads=1)
    database = ms.database.MemoryDatabase()
    ctx.pre_tuning(max_trials=ROUNDS * PER_ROUND, num_trials_per_iter=PER_ROUND,
                   design_spaces=ctx.generate_design_space(), database=database, cost_model=run.model)
    workload = database.commit_workload(mod)
    for _ in range(ROUNDS):
        candidates = ctx.generate_measure_candidates()
        if not candidates:
            break
        run.rounds.append(list(candidates))
        results = [ms.runner.RunnerResult([1e-3 * (1 + j % 5)], None) for j in range(len(candidates))]
        ctx.notify_runner_results(candidates, results)
        run.model.update(ctx, candidates, results)
        for cand, result in zip(candidates, results):
            database.commit_tuning_record(
                ms.database.TuningRecord(cand.sch.trace, workload, result.run_secs, target, cand.args_info))
    ctx.post_tuning()
    return run


def check_declares_itself(name: str, run: SearchRun) -> None:
    cls = SEARCH_KINDS[name]
    assert issubclass(cls, SearchKind) and cls.name == name, f"{cls} is registered as {name!r}"
    assert isinstance(cls.uses_cost_model, bool) and cls.help.strip()
    assert search_kind(name).create(run.config) is not search_kind(name).create(run.config), "one strategy per task"
    assert isinstance(run.strategy, ms.search_strategy.SearchStrategy)


def check_rounds_within_budget(name: str, run: SearchRun) -> None:
    assert run.rounds, f"{name} proposed nothing"
    assert all(0 < len(r) <= PER_ROUND for r in run.rounds), [len(r) for r in run.rounds]
    assert sum(len(r) for r in run.rounds) >= PER_ROUND * 2, f"{name} ran dry on a 64x96x48 matmul"


def check_no_program_twice(name: str, run: SearchRun) -> None:
    hashes = [int(tvm_ffi.structural_hash(c.sch.mod)) for r in run.rounds for c in r]
    assert len(set(hashes)) == len(hashes), f"{name} proposed the same program twice"


def check_candidates_are_complete_programs(name: str, run: SearchRun) -> None:
    for cand in (c for r in run.rounds for c in r):
        assert len(cand.args_info) == 3  # A, B, C
        insts = [inst.kind.name for inst in cand.sch.trace.insts]
        assert "EnterPostproc" in insts, f"{name}: a candidate was not post-processed"


def check_cost_model_capability(name: str, run: SearchRun) -> None:
    """``uses_cost_model`` is a promise both ways: such a search asks the model, the others never do."""
    if SEARCH_KINDS[name].uses_cost_model:
        assert run.model.predicted > 0, f"{name} says it uses the cost model but never asked it"
    else:
        assert run.model.predicted == 0, f"{name} says it uses no cost model but asked it {run.model.predicted} times"


CHECKS = [check_declares_itself, check_rounds_within_budget, check_no_program_twice,
          check_candidates_are_complete_programs, check_cost_model_capability]
