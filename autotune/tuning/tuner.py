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
import shutil
import time
from dataclasses import dataclass, field

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import numpy as np  # noqa: E402
import tvm_ffi  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from autotune.errors import UserError  # noqa: E402
from autotune.frontend.relax import Task  # noqa: E402
from autotune.progress import Progress  # noqa: E402
from autotune.tuning.config import SearchConfig  # noqa: E402  (re-exported: callers import it from here)
from autotune.tuning.costmodels import Resolved  # noqa: E402
from autotune.tuning.search_costmodel import LearnedCostModel  # noqa: E402
from autotune.tuning.selection import BatchSelector  # noqa: E402
from autotune.tvmrt.database import FAILED_RUN_SECS, RECORD_FILE, record_latency, to_py  # noqa: E402
from autotune.tvmrt.measure import Measurer  # noqa: E402
from autotune.tvmrt.target import target_cores  # noqa: E402

logger = logging.getLogger(__name__)
MAX_REPEAT_ROUNDS = 3  # rounds of nothing new before a task gives its budget up
# MetaSchedule's search strategies count every candidate they are told about against the max_trials given to
# pre_tuning, and remember only what they proposed themselves: over a database of earlier runs they propose
# programs measured before, which this tuner does not measure again (``_choose``) but which used up the search's
# count, so a task ended short of its budget (the Zen 3 collection, 2026-12-06: 282 of 285 visits, median 3).
# The search gets this many times the task's budget to count; the tuner's own budget (fresh programs) and
# MAX_REPEAT_ROUNDS still end the task.
PROPOSAL_SLACK = 2


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
    # trace key -> run_secs of every record of this task in the database: MetaSchedule's evolutionary search
    # only remembers what it measured itself ("TODO: add records from the database to avoid re-measuring"),
    # so a resumed run would measure and commit the same programs again
    measured: dict = field(default_factory=dict)
    repeat_rounds: int = 0  # consecutive rounds that proposed only programs already measured

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
    start: dict = field(default_factory=dict)  # {"trials": in the database, "task_best_s": [per task]} at start
    selection: dict = field(default_factory=dict)  # --batch-selection: its name and rounds picked / fallen back


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


def trace_key(trace) -> str:
    """The identity of a program inside its task, as the database stores it (``db check`` compares the same).

    Two things a fresh trace and the same trace read back from the database write differently, made
    canonical here (or a resumed layout-rewrite run measured its programs again): objects carried as
    serialized TVM graphs (the IndexMap of the ``TransformLayout`` that ``RewriteLayout`` adds: indented vs
    compact) and booleans (``Annotate(b, True)`` reads back as 1): every bool is written as 0/1."""
    return json.dumps(_canonical(to_py(trace.as_json())), separators=(",", ":"))


def _canonical(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, str) and value.startswith("{") and '"root_index"' in value:
        import tvm

        return tvm.ir.save_json(tvm.ir.load_json(value))
    return value


def records_by_workload(database) -> dict[int, list]:
    """All records of a database grouped by the structural hash of their workload.

    Hashed once per workload object, keyed by its handle: ``record.workload`` is a new Python wrapper on
    every access, so ``id()`` of it is reused across workloads (it once merged five tasks' records into two
    groups, so a resumed run gave tasks other tasks' trials and best latencies).
    """
    groups: dict[int, list] = {}
    hashes: dict[int, int] = {}
    for record in database.get_all_tuning_records():
        workload = record.workload
        key = workload.__chandle__()  # stays valid: the records kept in ``groups`` hold the workload
        if key not in hashes:
            hashes[key] = int(tvm_ffi.structural_hash(workload.mod))
        groups.setdefault(hashes[key], []).append(record)
    return groups


def tune(
    tasks: list[Task],
    target,
    database,
    measurer: Measurer,
    *,
    work_dir: str,
    max_trials: int,
    cost_model: Resolved,
    trials_per_task: int | None = None,
    search: SearchConfig | None = None,
    seed: int = 0,
    on_progress: Progress | None = None,
    on_measured=None,
    task_loggers: list | None = None,
) -> tuple[list[TaskState], TuneStats]:
    """Tune ``tasks`` until ``max_trials`` (all runs together) are in the database.

    ``cost_model``: from ``autotune.tuning.costmodels.resolve`` (or ``Resolved.given``); its model learns
    from every measured batch; a search kind that uses a cost model needs one.
    ``on_measured(state, candidates, outcomes)`` is called after every measured batch.
    """
    search = search or SearchConfig()
    if cost_model.model is None and search.uses_cost_model:
        raise ValueError(f"the {search.kind} search needs a cost model (autotune.tuning.costmodels.resolve)")
    run = _TuneRun(target, database, measurer, cost_model.model, search, on_progress, on_measured)
    if isinstance(database, ms.database.JSONDatabase):
        run.record_file = os.path.join(work_dir, RECORD_FILE)
    loggers = task_loggers or [search_logger(work_dir)] * len(tasks)
    run.start(tasks, loggers, max_trials, trials_per_task or max_trials, seed)
    try:
        run.loop()
    finally:
        run.finish()
    return run.states, run.stats


class _TuneRun:
    """One call of ``tune``: the task states, the budget left, and one search round at a time."""

    def __init__(self, target, database, measurer: Measurer, model, search: SearchConfig, on_progress, on_measured):
        self.target, self.database, self.measurer, self.model, self.search = target, database, measurer, model, search
        self.on_progress, self.on_measured = on_progress, on_measured
        self.stats = TuneStats()
        self._keys: dict = {}  # id(proposal) -> trace key, for the batch in hand (_choose)
        self.record_file: str | None = None  # a JSONDatabase's record file: every commit is checked to land
        self.selector = BatchSelector(search.batch_selection, search.selection_oversample)
        self.extractor = ms.feature_extractor.PerStoreFeature() if self.selector.sampler is not None else None
        self.states: list[TaskState] = []
        self.remaining = 0
        self.total_done = 0

    def start(self, tasks: list[Task], loggers: list, max_trials: int, per_task_cap: int, seed: int) -> None:
        self.t_start = time.perf_counter()
        self.selector.seed = seed
        existing = records_by_workload(self.database)
        for i, (task, task_logger) in enumerate(zip(tasks, loggers)):
            records = existing.get(int(tvm_ffi.structural_hash(task.mod)), [])
            self.states.append(self._state(task, task_logger, records, per_task_cap, (seed * 1_000_003 + i)))
        self.stats.start = {"trials": sum(s.trials for s in self.states), "task_best_s": [s.best_s for s in self.states]}
        self.set_budget(max_trials)
        self.stats.search_s += time.perf_counter() - self.t_start
        self._progress()

    def set_budget(self, max_trials: int) -> None:
        """Trials this run can still measure: ``max_trials`` less what is in the database, and no more than
        the tasks' caps leave (``--trials-per-task 16 --trials 100000`` on 10 tasks: 160, not 100,000)."""
        self.total_done = sum(s.trials for s in self.states)
        self.remaining = min(max(max_trials - self.total_done, 0), sum(s.budget for s in self.states))
        for state in self.states:
            state.done = state.budget <= 0 or self.remaining <= 0

    def reachable(self) -> int:
        """Trials in the database when this run ends, as far as known now (a task whose search space is
        exhausted gives its budget up)."""
        return self.total_done + min(self.remaining, sum(s.budget for s in self.states if not s.done))

    def _state(self, task: Task, task_logger, records: list, per_task_cap: int, rand: int) -> TaskState:
        ctx = ms.TuneContext(
            mod=task.mod,
            target=self.target,
            space_generator="post-order-apply",
            search_strategy=self.search.strategy(),
            task_name=task.name,
            logger=task_logger,
            rand_state=rand % (2**31 - 1),
            num_threads=target_cores(self.target),
        )
        lat = [x for x in (record_latency(r) for r in records) if x is not None]
        state = TaskState(task, ctx, budget=max(per_task_cap - len(records), 0), trials=len(records))
        state.best_s = min(lat) if lat else None
        state.failures = len(records) - len(lat)
        state.measured = {trace_key(r.trace): list(r.run_secs or []) for r in records}
        if state.best_s is not None:
            state.history.append(state.best_s)
        return state

    def loop(self) -> None:
        while self.remaining > 0:
            active = [s for s in self.states if not s.done]
            if not active:
                break
            state = _next_task(active)
            n = self._round(state)
            self.remaining -= n
            state.budget -= n
            state.done = state.done or state.budget <= 0
            self.total_done += n
            self.stats.trials_this_run += n
            if n:
                self.stats.history.append([self.total_done, time.perf_counter() - self.t_start,
                                           self.states.index(state), state.best_s])
            if n or state.done:  # a task whose search space ran out gives its budget up: a new total
                self._progress()

    def _round(self, state: TaskState) -> int:
        """One search round of ``state``'s task: propose, measure, learn, commit. Returns trials measured."""
        t0 = time.perf_counter()
        if not state.started:  # lazily: the first measurement comes sooner
            per_iter = self.search.num_trials_per_iter * self.selector.proposals_per_round
            state.ctx.pre_tuning(max_trials=state.budget * PROPOSAL_SLACK, num_trials_per_iter=per_iter,
                                 design_spaces=state.ctx.generate_design_space(), database=self.database,
                                 cost_model=self.model)
            state.started = True
        candidates = state.ctx.generate_measure_candidates()
        self.stats.search_s += time.perf_counter() - t0
        if not candidates:
            state.done = True
            return 0
        candidates, fresh, feats = self._choose(state, list(candidates),
                                                min(self._cap(state), self.search.num_trials_per_iter))
        outcomes, runner_results = [], []
        if fresh:
            outcomes, _builder_results, runner_results = self.measurer.measure(fresh)
        if fresh and self.stats.first_measured_at is None:
            self.stats.first_measured_at = time.time()
        t0 = time.perf_counter()
        results = self._with_repeats(state, candidates, fresh, runner_results, self._keys)
        state.ctx.notify_runner_results(candidates, results)  # one call, in the search's order
        if self.model is not None:
            self.model.update(state.ctx, candidates, results)
        self.stats.search_s += time.perf_counter() - t0
        if not fresh:  # the search keeps proposing what earlier runs measured: its space is used up
            state.repeat_rounds += 1
            state.done = state.repeat_rounds >= MAX_REPEAT_ROUNDS
            return 0
        state.repeat_rounds = 0
        size = self._record_bytes()
        _commit(self.database, state, fresh, outcomes, self.target)
        self._check_written(size, len(fresh))
        if feats is not None:
            self.selector.record(state.task.name, feats, [sum(o.run_secs) / len(o.run_secs) if o.ok else None
                                                          for o in outcomes])
        if self.on_measured is not None:
            self.on_measured(state, fresh, outcomes)
        return len(fresh)

    def _choose(self, state: TaskState, proposed: list, cap: int) -> tuple[list, list, list | None]:
        """(candidates the search is told about, the fresh ones among them to measure, their per-store
        features or None). Greedy: the first ``cap`` proposals. A sampler (``--batch-selection``): ``cap``
        of the fresh proposals, picked with the run's cost-model scores; the unpicked ones are not told."""
        if self.selector.sampler is None:
            proposed = proposed[:cap]
        # one key per proposal; a program proposed twice in one batch (ReplayTrace samples with
        # replacement: small spaces repeat) is measured once, the copy gets the same result
        self._keys = {id(c): trace_key(c.sch.trace) for c in proposed}
        old, batch = [], set()
        for c in proposed:
            key = self._keys[id(c)]
            old.append(key in state.measured or key in batch)
            batch.add(key)
        fresh = [c for c, o in zip(proposed, old) if not o]
        if self.selector.sampler is None:
            return proposed, fresh, None
        repeats = [c for c, o in zip(proposed, old) if o and self._keys[id(c)] in state.measured]
        if not fresh:
            return repeats, [], None
        t0 = time.perf_counter()
        feats = [f.numpy().astype("float32") for f in self.extractor.extract_from(state.ctx, fresh)]
        scores = None
        if self.model is not None:
            # our models take the features extracted above; MetaSchedule's (ms-xgb) extract their own
            own = isinstance(self.model, LearnedCostModel)
            scores = [float(x) for x in (self.model.predict(state.ctx, fresh, feats) if own
                                         else self.model.predict(state.ctx, fresh))]
        idx = self.selector.choose(state.task.name, feats, None if scores is None else np.asarray(scores), cap)
        self.stats.search_s += time.perf_counter() - t0
        chosen = [fresh[i] for i in idx]
        return repeats + chosen, chosen, [feats[i] for i in idx]

    @staticmethod
    def _with_repeats(state: TaskState, candidates: list, fresh: list, fresh_results: list, keys: dict) -> list:
        """Runner results for every candidate: measured now, or (a program an earlier run measured: not
        measured or committed again) the stored run times, what a measurement would have told the search."""
        if len(fresh) == len(candidates):
            return list(fresh_results)
        by_id = {id(c): r for c, r in zip(fresh, fresh_results)}
        by_key = {keys[id(c)]: r for c, r in zip(fresh, fresh_results)}  # a copy within this batch
        results = []
        for cand in candidates:
            key = keys[id(cand)]
            if id(cand) in by_id or key in by_key:
                results.append(by_id.get(id(cand)) or by_key[key])
                continue
            secs = [float(getattr(x, "value", x)) for x in state.measured[key]]
            ok = bool(secs) and min(secs) < FAILED_RUN_SECS
            results.append(ms.runner.RunnerResult(secs if ok else None, None if ok else "failed in an earlier run"))
        logger.debug("%s: %d proposed programs were measured by an earlier run or earlier in this batch; "
                     "not measured again",
                     state.task.name, len(candidates) - len(fresh))
        return results

    def _record_bytes(self) -> int:
        return os.path.getsize(self.record_file) if self.record_file and os.path.exists(self.record_file) else 0

    def _check_written(self, before: int, n: int) -> None:
        """MetaSchedule's JSONDatabase appends with an unchecked ofstream: on a full disk the records were
        silently dropped while the run went on measuring. Stop instead, keeping what was written."""
        if self.record_file is None:
            return
        with open(self.record_file, "rb") as f:  # only what this commit appended
            f.seek(before)
            lines = f.read().count(b"\n")
        if lines >= n:
            return
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(self.record_file))).free
        raise UserError(
            f"{self.record_file}: {n - lines} of {n} measured records did not reach the file ({free} bytes "
            f"free on its disk; disk full?); what was written before is kept: free space and run the same "
            f"command again to resume (python -m autotune.db check WORK_DIR reports a torn last line)"
        )

    def _cap(self, state: TaskState) -> int:
        cap = min(self.remaining, state.budget)
        if state.trials == 0:  # first visit: leave budget for every task's first round
            untouched = sum(1 for s in self.states if s.trials == 0 and not s.done)
            cap = min(cap, max(4, self.remaining // max(untouched, 1)), self.search.first_round_trials or cap)
        return cap

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress.update(self.total_done, _best_text(self.states), total=self.reachable())

    def finish(self) -> None:
        for state in self.states:
            if state.started:
                state.ctx.post_tuning()
        self.stats.build_s, self.stats.run_s = self.measurer.times.build_s, self.measurer.times.run_s
        self.stats.selection = {"name": self.selector.name, **self.selector.stats}


def _next_task(active: list[TaskState]) -> TaskState:
    untouched = [s for s in active if s.new_trials == 0 and s.best_s is None]
    if untouched:
        return untouched[0]
    return max(active, key=lambda s: s.gain())


def _commit(database, state: TaskState, candidates, outcomes, target) -> None:
    workload = database.commit_workload(state.task.mod)
    for cand, outcome in zip(candidates, outcomes):
        secs = outcome.run_secs if outcome.ok else [FAILED_RUN_SECS]
        state.measured[trace_key(cand.sch.trace)] = list(secs)
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
