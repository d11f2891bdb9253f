"""The tuning loop: MetaSchedule's evolutionary search driven task by task from Python.

Why not ``ms.tune_tasks``: we need per-task budgets that count trials already in the
database (resume), a builder that keeps its pool, progress with ETA, and the wall time
split into search / build / run. The pieces are MetaSchedule's own (TuneContext,
EvolutionarySearch, CostModel, JSONDatabase); only the scheduling is ours: one round for
every task, then rounds go to the task with the largest expected gain
(weight x best latency x recent relative improvement, as Ansor's gradient scheduler).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import tvm_ffi  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from autotune.frontend.relax import Task  # noqa: E402
from autotune.progress import Progress  # noqa: E402
from autotune.tvmrt.database import FAILED_RUN_SECS, record_latency  # noqa: E402
from autotune.tvmrt.measure import Measurer  # noqa: E402

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchConfig:
    """Evolutionary-search settings sized for small budgets.

    benchmarks/results/search_round_cost.md (resnet50, 16 candidates per round): population 256 x 2
    generations costs ~10 s of search per round with a pretrained model (feature extraction of every
    scored candidate dominates), about what measuring the 16 candidates costs; 128 x 1 costs ~3.3 s.
    """

    num_trials_per_iter: int = 16
    population_size: int = 128
    genetic_num_iters: int = 1
    init_min_unmeasured: int = 48
    init_measured_ratio: float = 0.2
    eps_greedy: float = 0.05
    kind: str = "evolutionary"  # "replay-trace": uniform random samples; "optuna": TPE over the decisions

    def strategy(self):
        if self.kind == "replay-trace":
            return ms.search_strategy.ReplayTrace()
        if self.kind == "optuna":
            from autotune.tuning.optuna_search import OptunaSearch

            return OptunaSearch()
        return ms.search_strategy.EvolutionarySearch(
            population_size=self.population_size,
            init_measured_ratio=self.init_measured_ratio,
            init_min_unmeasured=self.init_min_unmeasured,
            genetic_num_iters=self.genetic_num_iters,
            eps_greedy=self.eps_greedy,
        )


@dataclass
class TaskState:
    task: Task
    ctx: object
    budget: int  # trials this task may still use in this run
    trials: int = 0  # trials in the database (earlier runs included)
    new_trials: int = 0
    failures: int = 0
    best_s: float | None = None
    history: list[float] = field(default_factory=list)  # best latency after each round
    done: bool = False
    started: bool = False  # pre_tuning called

    def gain(self) -> float:
        """Expected saving of one more round: weight x best x recent relative improvement."""
        if self.best_s is None:
            return math.inf
        if len(self.history) >= 2 and self.history[-2] > 0:
            rate = max((self.history[-2] - self.history[-1]) / self.history[-2], 0.02)
        else:
            rate = 0.5
        return self.task.weight * self.best_s * rate


@dataclass
class TuneStats:
    search_s: float = 0.0
    build_s: float = 0.0
    run_s: float = 0.0
    first_measured_at: float | None = None  # time.time() when the first candidate was measured
    trials_this_run: int = 0
    # after every measured batch: [trials in database, seconds since tuning started, task index, task best s]
    history: list = field(default_factory=list)


def search_logger(work_dir: str) -> logging.Logger:
    """One logger for the search of all tasks, to work_dir/logs/search.log.

    Not MetaSchedule's ``get_loggers_from_work_dir``: its dictConfig re-reads the handlers already on
    its global logger and fails on unnamed ones (e.g. a second run in the same process).
    """
    log = logging.getLogger("tvm.s_tir.meta_schedule.autotune_search")
    path = os.path.abspath(os.path.join(work_dir, "logs", "search.log"))
    if not any(getattr(h, "baseFilename", None) == path for h in log.handlers):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    return log


def records_by_workload(database) -> dict[int, list]:
    """All records of a database grouped by the structural hash of their workload."""

    groups: dict[int, list] = {}
    hashes: dict[int, int] = {}
    for record in database.get_all_tuning_records():
        key = id(record.workload)
        if key not in hashes:
            hashes[key] = int(tvm_ffi.structural_hash(record.workload.mod))
        groups.setdefault(hashes[key], []).append(record)
    return groups


STRATEGIES = ("evolutionary", "optuna", "replay-trace")
COST_MODELS = ("auto", "ms-xgb", "xgb", "seq", "ms-mlp", "online-xgb", "random")
PRETRAINED = ("xgb", "seq", "ms-mlp")


def find_pretrained(kind: str, hw_id: str, models_dir: str = "models") -> str | None:
    path = os.path.join(models_dir, hw_id, kind)
    return path if os.path.exists(os.path.join(path, "model.json")) else None


def make_cost_model(name: str, num_cores: int, hw_id: str | None = None, models_dir: str = "models",
                    path: str | None = None, online: str = "finetune"):
    """A MetaSchedule cost model for ``--cost-model``.

    ``ms-xgb``: stock MetaSchedule XGBModel (online only). ``xgb``/``seq``/``ms-mlp``: our
    pretrained model for this hardware (models/<hardware_id>/<kind>) + online learning.
    ``online-xgb``: our ranking XGBoost, online only. ``auto`` (the CLI default): the pretrained
    sequence model for this hardware if there is one (the best arm of
    experiments/tuning_efficiency/), else pretrained xgb, else ms-xgb (and it says so).
    """
    from autotune.errors import UserError

    if name == "auto":
        found = [k for k in ("seq", "xgb") if hw_id and find_pretrained(k, hw_id, models_dir)]
        if path:
            from autotune.costmodel.base import ModelFileError, read_model_meta

            try:
                name = read_model_meta(path)["kind"]
            except ModelFileError as err:
                raise UserError(str(err)) from None
        elif found:
            name = found[0]
        else:
            logger.info("no pretrained cost model for %s in %s/: tuning with MetaSchedule's online XGBoost",
                        hw_id, models_dir)
            name = "ms-xgb"
    if name == "ms-xgb":
        return ms.cost_model.XGBModel(num_tuning_cores=num_cores, tree_method="auto", num_warmup_samples=32)
    if name == "random":
        return ms.cost_model.RandomModel()
    from autotune.tuning.search_costmodel import LearnedCostModel

    if name == "online-xgb":
        return LearnedCostModel(pretrained=None)
    if name not in PRETRAINED:
        raise UserError(f"--cost-model: unknown {name!r}; valid: {', '.join(COST_MODELS)}")
    from autotune.costmodel import load
    from autotune.costmodel.base import ModelFileError

    explicit = path is not None
    path = path or (find_pretrained(name, hw_id, models_dir) if hw_id else None)
    if path is None:
        others = sorted(d for d in os.listdir(models_dir) if os.path.isdir(os.path.join(models_dir, d, name))) \
            if os.path.isdir(models_dir) else []
        logger.warning(
            "--cost-model %s: no pretrained %s model for %s in %s/ (found for: %s); tuning with an online-only "
            "model learned from this run's measurements (train one with make train-costmodel)",
            name, name, hw_id, models_dir, ", ".join(others) or "none",
        )
        return LearnedCostModel(pretrained=None)
    card = os.path.join(path, "card.json")
    if hw_id and os.path.exists(card):
        with open(card, encoding="utf-8") as f:
            made_for = json.load(f).get("hardware", {}).get("hardware_id")
        if made_for and made_for != hw_id:
            if not explicit:  # pragma: no cover - models/<hw_id>/ holds a card for another hardware
                logger.warning("%s was trained for %s, not %s: online-only", path, made_for, hw_id)
                return LearnedCostModel(pretrained=None)
            raise UserError(
                f"--cost-model {name}: {path} was trained for {made_for}, not {hw_id}; use a model for this "
                "target or --cost-model ms-xgb"
            )
    try:
        model = load(path)
    except ModelFileError as err:
        raise UserError(str(err)) from None
    logger.info("cost model: pretrained %s from %s, updated online (%s)", name, path, online)
    learned = LearnedCostModel(pretrained=model, online=online)
    learned.pretrained_card = pretrained_card(path)
    return learned


def pretrained_card(path: str) -> dict:
    """Which trained model a run used (for reports: results made with an older model are stale)."""
    card_path = os.path.join(path, "card.json")
    card = {}
    if os.path.exists(card_path):
        with open(card_path, encoding="utf-8") as f:
            card = json.load(f)
    return {"path": path, "kind": card.get("kind"), "trained": card.get("trained"),
            "git_commit": card.get("git_commit"), "dataset_manifest_sha256": card.get("dataset_manifest_sha256")}


def tune(
    tasks: list[Task],
    target,
    database,
    measurer: Measurer,
    *,
    work_dir: str,
    max_trials: int,
    trials_per_task: int | None = None,
    cost_model=None,
    search: SearchConfig | None = None,
    seed: int = 0,
    on_progress: Progress | None = None,
    on_measured=None,
    task_loggers: list | None = None,
) -> tuple[list[TaskState], TuneStats]:
    """Tune ``tasks`` until ``max_trials`` (all runs together) are in the database.

    ``on_measured(state, candidates, outcomes)`` is called after every measured batch.
    """
    search = search or SearchConfig()
    stats = TuneStats()
    num_cores = int(target.attrs.get("num-cores", 1)) if target.kind.name == "llvm" else 1
    if cost_model is None:
        cost_model = make_cost_model("ms-xgb", num_cores)
    per_task_cap = trials_per_task or max_trials
    loggers = task_loggers or [search_logger(work_dir)] * len(tasks)
    states: list[TaskState] = []
    existing = records_by_workload(database)
    t_search = time.perf_counter()
    for i, (task, task_logger) in enumerate(zip(tasks, loggers)):
        records = existing.get(int(tvm_ffi.structural_hash(task.mod)), [])
        lat = [x for x in (record_latency(r) for r in records) if x is not None]
        ctx = ms.TuneContext(
            mod=task.mod,
            target=target,
            space_generator="post-order-apply",
            search_strategy=search.strategy(),
            task_name=task.name,
            logger=task_logger,
            rand_state=(seed * 1_000_003 + i) % (2**31 - 1),
            num_threads=num_cores,
        )
        state = TaskState(task, ctx, budget=max(per_task_cap - len(records), 0), trials=len(records))
        state.best_s = min(lat) if lat else None
        state.failures = len(records) - len(lat)
        if state.best_s is not None:
            state.history.append(state.best_s)
        states.append(state)
    total_done = sum(s.trials for s in states)
    remaining = max(max_trials - total_done, 0)
    for state in states:
        state.done = state.budget <= 0 or remaining <= 0
    stats.search_s += time.perf_counter() - t_search
    if on_progress is not None:
        on_progress.update(total_done, _best_text(states))
    try:
        while remaining > 0:
            active = [s for s in states if not s.done]
            if not active:
                break
            state = _next_task(active)
            t0 = time.perf_counter()
            if not state.started:  # lazily: the first measurement comes sooner
                state.ctx.pre_tuning(
                    max_trials=state.budget,
                    num_trials_per_iter=search.num_trials_per_iter,
                    design_spaces=state.ctx.generate_design_space(),
                    database=database,
                    cost_model=cost_model,
                )
                state.started = True
            candidates = state.ctx.generate_measure_candidates()
            stats.search_s += time.perf_counter() - t0
            if not candidates:
                state.done = True
                continue
            cap = min(remaining, state.budget)
            if state.trials == 0:  # first visit: leave budget for every task's first round
                untouched = sum(1 for s in states if s.trials == 0 and not s.done)
                cap = min(cap, max(4, remaining // max(untouched, 1)))
            candidates = list(candidates)[:cap]
            outcomes, _builder_results, runner_results = measurer.measure(candidates)
            if stats.first_measured_at is None:
                stats.first_measured_at = time.time()
            t0 = time.perf_counter()
            state.ctx.notify_runner_results(candidates, runner_results)
            cost_model.update(state.ctx, candidates, runner_results)
            stats.search_s += time.perf_counter() - t0
            _commit(database, state, candidates, outcomes, target)
            if on_measured is not None:
                on_measured(state, candidates, outcomes)
            n = len(candidates)
            remaining -= n
            state.budget -= n
            state.done = state.budget <= 0
            total_done += n
            stats.trials_this_run += n
            stats.history.append(
                [total_done, time.perf_counter() - t_search, states.index(state), state.best_s]
            )
            if on_progress is not None:
                on_progress.update(total_done, _best_text(states))
    finally:
        for state in states:
            if state.started:
                state.ctx.post_tuning()
        stats.build_s, stats.run_s = measurer.times.build_s, measurer.times.run_s
    return states, stats


def _next_task(active: list[TaskState]) -> TaskState:
    untouched = [s for s in active if s.new_trials == 0 and s.best_s is None]
    if untouched:
        return untouched[0]
    return max(active, key=lambda s: s.gain())


def _commit(database, state: TaskState, candidates, outcomes, target) -> None:
    workload = database.commit_workload(state.task.mod)
    for cand, outcome in zip(candidates, outcomes):
        secs = outcome.run_secs if outcome.ok else [FAILED_RUN_SECS]
        database.commit_tuning_record(
            ms.database.TuningRecord(cand.sch.trace, workload, secs, target, cand.args_info)
        )
        if outcome.ok:
            latency = sum(secs) / len(secs)
            if state.best_s is None or latency < state.best_s:
                state.best_s = latency
        else:
            state.failures += 1
    state.trials += len(candidates)
    state.new_trials += len(candidates)
    if state.best_s is not None:
        state.history.append(state.best_s)


def _best_text(states: list[TaskState]) -> str:
    known = [s for s in states if s.best_s is not None]
    if not known:
        return ""
    total = sum(s.task.weight * s.best_s for s in known)
    return f"tasks' sum {total * 1e3:.2f} ms ({len(known)}/{len(states)} tasks measured)"
