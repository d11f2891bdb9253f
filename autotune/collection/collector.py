"""The collection engine behind ``python -m autotune.collect`` (TVM side)."""

from __future__ import annotations

import json
import logging
import math
import time

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

from autotune.cli import loadavg, versions  # noqa: E402
from autotune.collection.taskpool import ZOO_DATASET_MODELS, iter_pool, task_module  # noqa: E402
from autotune.data.store import DatasetWriter, read_records  # noqa: E402
from autotune.frontend import relax as fe  # noqa: E402
from autotune.progress import Progress  # noqa: E402
from autotune.tuning.costmodels import Resolved  # noqa: E402
from autotune.tuning.tuner import SearchConfig, tune  # noqa: E402
from autotune.tvmrt.database import record_from_row  # noqa: E402
from autotune.tvmrt.database import to_py as _json_de_tvm  # noqa: E402
from autotune.tvmrt.measure import Measurer  # noqa: E402
from autotune.tvmrt.target import detect_host, hardware_id, target_json  # noqa: E402

logger = logging.getLogger("autotune.collect")
TOP_UPS = 2  # extra searches of one visit when a search ends short of the visit's goal


def hardware_fingerprint(target, rpc_key: str | None = None) -> dict:
    from autotune.hardware import describe

    host = detect_host().as_json()
    return {
        "hardware_id": hardware_id(target, rpc_key),
        "target": target_json(target),
        "host": host,
        # what cost models spanning CPUs read (recomputed from target + host on load; kept here for readers)
        "descriptor": describe({"target": target_json(target), "host": host}),
        "measured_via": f"rpc:{rpc_key}" if rpc_key else "local",
        "versions": versions(),
        "loadavg_at_start": loadavg(),
    }


class StopCollection(Exception):
    """Raised between batches once a stop was requested (SIGINT/SIGTERM)."""


class Collector:
    def __init__(self, root: str, target, fingerprint: dict, rpc=None, seed: int = 0):
        self.root, self.target, self.seed = root, target, seed
        self.hw = fingerprint["hardware_id"]
        self.writer = DatasetWriter(root, fingerprint, shard_rows=2048)
        self.measurer = Measurer(target, rpc=rpc)
        self.measurer.warm_up()
        self.stop_requested = False
        self._measured_rows: dict[str, list] = {}
        self._started = time.time()
        self._measured = 0
        self._search_logger = logging.getLogger("tvm.s_tir.meta_schedule.autotune_collect")

    def ensure_pool(self, models=None, n_synthetic: int = 200) -> None:
        manifest = self.writer.manifest  # a run killed while extracting left "task_pool_complete": false
        if self.writer.known_tasks() and manifest.get("task_pool_complete", True):
            logger.info("resuming: %d tasks already in %s", len(self.writer.known_tasks()), self.root)
            return
        manifest["task_pool_complete"] = False
        self.writer._write_manifest()
        t0 = time.time()
        n = 0
        for info in iter_pool(self.target, models=models or ZOO_DATASET_MODELS, n_synthetic=n_synthetic,
                              seed=self.seed):
            self.writer.add_task(info)  # tasks already there (an interrupted extraction) are skipped
            n += 1
        manifest["task_pool_complete"] = True
        self.writer._write_manifest()
        logger.info("task pool: %d distinct tasks in %.0f s", n, time.time() - t0)

    def _load_measured(self) -> dict[str, list]:
        """task key -> [(trace JSON, run_secs)] of every row on disk: read once per run, then kept
        up to date as batches are appended (visits seed their search from it without re-reading)."""
        table = read_records(self.root, verify=False)
        measured: dict[str, list] = {}
        for key, trace, secs in zip(table.column("task_key").to_pylist(), table.column("trace").to_pylist(),
                                    table.column("run_secs").to_pylist()):
            measured.setdefault(key, []).append((trace, secs))
        return measured

    def _programs(self, key: str) -> dict[str, list]:
        """A task's distinct programs on disk: trace JSON -> run_secs of its first valid row (of its first row
        where none is valid). Copies (the same trace measured again: rows before ccd6d80, or a search of
        another sitting re-proposing it) count once toward ``programs_per_task`` and seed the search once."""
        programs: dict[str, list] = {}
        for trace, secs in self._measured_rows.get(key, []):
            if trace not in programs or (not programs[trace] and secs):
                programs[trace] = secs
        return programs

    def select_tasks(self, max_tasks: int | None = None, only_models=None, only_keys=None) -> list[dict]:
        """The dataset's tasks to visit: filtered by key / model, zoo first, heaviest (FLOPs x weight) first."""
        tasks = list(self.writer.known_tasks().values())
        if only_keys is not None:
            tasks = [t for t in tasks if t["key"] in only_keys]
        if only_models:
            tasks = [t for t in tasks if any(m in only_models for m in t["models"])]
        tasks.sort(key=lambda t: (t["source"] != "zoo", -t["flops"] * max(t.get("model_weights", {}).values(),
                                                                           default=t["weight"])))
        return tasks[:max_tasks] if max_tasks else tasks

    def run(self, programs_per_task: int, pass_size: int = 32, random_fraction: float = 0.5,
            max_tasks: int | None = None, only_models=None, deadline: float | None = None,
            only_keys: set[str] | None = None, retry_exhausted: bool = False) -> None:
        """Visits the tasks pass by pass until each has ``programs_per_task`` distinct programs (rows
        repeating a program count once). A task whose visit found no new program (its design space is used
        up: a reshape has one schedule) is recorded in the manifest's ``exhausted_tasks`` with its count and
        skipped by later runs while that count stands (``retry_exhausted`` visits them again)."""
        tasks = self.select_tasks(max_tasks, only_models, only_keys)
        self._measured_rows = self._load_measured()
        counts = {key: len(self._programs(key)) for key in self._measured_rows}
        exhausted = self.writer.manifest.setdefault("exhausted_tasks", {})
        # entries written before programs were counted hold the task's row count: that stands too
        skip = set() if retry_exhausted else {
            t["key"] for t in tasks if counts.get(t["key"], 0) < programs_per_task
            and exhausted.get(t["key"]) in (counts.get(t["key"], 0), len(self._measured_rows.get(t["key"], [])))}
        if skip:
            logger.info("skipping %d tasks whose last visit found no new program (their design space is used up; "
                        "--retry-exhausted visits them)", len(skip))
        total = sum(counts.get(t["key"], 0) if t["key"] in skip else programs_per_task for t in tasks)
        done = sum(min(counts.get(t["key"], 0), programs_per_task) for t in tasks)
        progress = Progress(total, "collecting", done=done)
        n_passes = math.ceil(programs_per_task / pass_size)
        try:
            for p in range(n_passes):
                goal = min(programs_per_task, (p + 1) * pass_size)
                for info in tasks:
                    if self.stop_requested:
                        logger.info("stopped on request; rerun the same command to resume")
                        return
                    if deadline is not None and time.time() > deadline:
                        logger.info("time limit reached")
                        return
                    have = counts.get(info["key"], 0)
                    if have >= goal or info["key"] in skip:
                        continue
                    try:
                        self._visit(info, have, goal - have, random_fraction)
                    except StopCollection:
                        logger.info("stopped on request after the batch in flight; rerun to resume")
                        return
                    n_new = len(self._programs(info["key"])) - have  # new programs: the search measures no copy
                    if n_new == 0:
                        exhausted[info["key"]] = have
                        skip.add(info["key"])
                        total -= programs_per_task - have  # it stays at `have`
                    else:
                        exhausted.pop(info["key"], None)
                    counts[info["key"]] = have + n_new
                    done += min(n_new, max(programs_per_task - have, 0))
                    progress.update(done, f"pass {p + 1}/{n_passes}, {len(tasks)} tasks", total=total)
        finally:
            progress.close()

    def _visit(self, info: dict, have: int, need: int, random_fraction: float) -> None:
        mod = task_module(info)
        task = fe.Task(info["name"], mod, info["weight"], info["flops"], self.target)
        database = ms.database.MemoryDatabase()
        self._seed_database(database, info, mod)
        cost_model = ms.cost_model.XGBModel(num_tuning_cores=1, num_warmup_samples=8, tree_method="auto")
        n_rand = math.ceil(need * random_fraction)
        phases = [("random", "replay-trace", have + n_rand), ("evolutionary", "evolutionary", have + need)]
        measured = 0

        def sink(sampler):
            def on_measured(state, candidates, outcomes):
                nonlocal measured
                rows = []
                workload = database.commit_workload(mod)
                now = time.time()
                for cand, out in zip(candidates, outcomes):
                    record = ms.database.TuningRecord(cand.sch.trace, workload, None, self.target, cand.args_info)
                    trace = _json_de_tvm(record.as_json()[0])
                    rows.append({
                        "task_key": info["key"], "workload_hash": info["workload_hash"],
                        "trace": json.dumps(trace, separators=(",", ":")),
                        "run_secs": out.run_secs or [], "status": out.error_kind,
                        "error": out.error_msg[:500], "sampler": sampler, "hardware_id": self.hw,
                        "timestamp": now,
                    })
                self.writer.append(rows)
                self._measured_rows.setdefault(info["key"], []).extend(
                    (r["trace"], r["run_secs"]) for r in rows)
                measured += len(rows)
                self._measured += len(rows)
                if self.stop_requested:
                    raise StopCollection()
            return on_measured

        for sampler, kind, max_trials in phases:
            # MetaSchedule's search counts every candidate it proposed against its trial budget, copies of
            # programs measured before included; the tuner gives it room (tuner.PROPOSAL_SLACK), and where even
            # that runs out a search ends short of the goal: search again (another seed) while that adds programs
            for attempt in range(1 + TOP_UPS):
                if max_trials <= have + measured:
                    break
                before = measured
                tune([task], self.target, database, self.measurer, work_dir=self.root, max_trials=max_trials,
                     cost_model=Resolved.given(cost_model, "MetaSchedule XGBModel (collection)"),
                     search=SearchConfig(kind=kind, num_trials_per_iter=16, population_size=128,
                                         init_min_unmeasured=32),
                     seed=self.seed + have + attempt * 1_000_003, on_measured=sink(sampler),
                     task_loggers=[self._search_logger])
                if measured == before:
                    break
                if attempt and max_trials > have + measured:
                    logger.debug("%s: still %d short after top-up %d", info["name"], max_trials - have - measured, attempt)

    def _seed_database(self, database, info: dict, mod) -> None:
        """Earlier programs of this task go into the search's database, once each (the tuner counts the
        database's records toward a visit's trials): no re-measuring, warm start."""
        programs = self._programs(info["key"])
        if not programs:
            return
        workload = database.commit_workload(mod)
        target = self.target.export()
        for trace, secs in programs.items():
            database.commit_tuning_record(record_from_row(trace, secs, target, info["args_info"], workload))

    def close(self) -> None:
        """Record this run's throughput in the manifest, shut the pools down, compact the journal."""
        self.measurer.close()
        t = self.measurer.times
        runs = self.writer.manifest.setdefault("collection_runs", [])
        runs.append({
            "started": self._started, "ended": time.time(), "programs": self._measured,
            "build_s": t.build_s, "run_s": t.run_s,
            "wall_s": time.time() - self._started,
            "programs_per_hour": self._measured / max(time.time() - self._started, 1e-9) * 3600,
            "loadavg_end": loadavg(),
        })
        self.writer.close()
