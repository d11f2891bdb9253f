"""Active-learning collection: measure only the programs a sampler picks (``autotune.collect --sampler``).

    python -m autotune.collect --out DS --sampler rdu --pool-per-task 256 --measure-fraction 0.1

1. **Pool** (TVM, nothing measured): per task, ``pool_per_task`` distinct random programs of the
   MetaSchedule design space (post-processed, as ReplayTrace draws them) with their per-store
   features. Stored in ``DS/active_pool/<task key>.npz`` (``traces``: the JSON list of trace texts,
   ``feats`` [n_stores, 164], ``offsets`` [n + 1]), so experiments can replay selections offline
   (``read_pool`` needs no TVM).
2. **Rounds**: ``measure_fraction`` of the whole pool is measured over ``rounds`` rounds. Before a
   round, samplers that read a model (``needs_model``) get a bootstrap ensemble of small XGBoost
   models fitted on the pool programs measured so far (the first round of such a sampler is
   random); the sampler picks the round's programs over all tasks (``sampling.Sampler``, per-task
   quotas); they are measured and appended to the dataset with ``sampler = "active:<name>"``.
Resumable: the pool is read back, a pool program counts as measured when its trace is a dataset row.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time

import numpy as np

from autotune.costmodel.inputs import stack_programs

logger = logging.getLogger("autotune.collect")
POOL_DIR = "active_pool"


# ------------------------------------------------------------------ stored pool (TVM-free)
def pool_path(root: str, key: str) -> str:
    return os.path.join(root, POOL_DIR, f"{key}.npz")


def save_task_pool(root: str, key: str, traces: list[str], feats: list[np.ndarray]) -> None:
    os.makedirs(os.path.join(root, POOL_DIR), exist_ok=True)
    store, offsets = stack_programs(feats)
    tmp = pool_path(root, key) + ".tmp.npz"
    np.savez_compressed(tmp, traces=np.asarray(json.dumps(traces)), feats=store, offsets=offsets)
    os.replace(tmp, pool_path(root, key))


def read_task_pool(root: str, key: str) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    path = pool_path(root, key)
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as data:
        return json.loads(str(data["traces"])), data["feats"], data["offsets"]


def read_pool(root: str) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """task key -> (traces, feats, offsets) of every stored task pool of a dataset."""
    folder = os.path.join(root, POOL_DIR)
    keys = (
        sorted(f[: -len(".npz")] for f in os.listdir(folder) if f.endswith(".npz") and ".tmp" not in f)
        if os.path.isdir(folder)
        else []
    )
    return {k: read_task_pool(root, k) for k in keys}


# ------------------------------------------------------------------ drawing candidates (TVM)
def draw_task_pool(
    info: dict, target, n: int, seed: int, taken: set[str]
) -> tuple[list[str], list[np.ndarray]]:
    """Up to ``n`` distinct random programs of the task (none of ``taken``) and their features."""
    from tvm.s_tir import meta_schedule as ms

    from autotune.collection.taskpool import task_module
    from autotune.tvmrt.database import to_py

    mod = task_module(info)
    ctx = ms.TuneContext(
        mod=mod,
        target=target,
        space_generator="post-order-apply",
        search_strategy="replay-trace",
        task_name=info["name"],
        num_threads=1,
        rand_state=seed,
    )
    spaces = ctx.space_generator.generate_design_space(mod)
    ctx.pre_tuning(
        max_trials=8 * n, num_trials_per_iter=n, design_spaces=spaces, database=None, cost_model=None
    )
    workload = ms.database.Workload(mod)
    extractor = ms.feature_extractor.PerStoreFeature()
    traces, cands = [], []
    for _ in range(8):  # a small design space repeats itself: stop after 8 draws
        batch = ctx.search_strategy.generate_measure_candidates()
        if not batch:
            break
        for cand in batch:
            record = ms.database.TuningRecord(cand.sch.trace, workload, None, target, cand.args_info)
            text = json.dumps(to_py(record.as_json()[0]), separators=(",", ":"))
            if text not in taken and len(traces) < n:
                taken.add(text)
                traces.append(text)
                cands.append(cand)
        if len(traces) >= n:
            break
        ctx.search_strategy.notify_runner_results(batch, [ms.runner.RunnerResult([1.0], None)] * len(batch))
    ctx.post_tuning()
    feats = [f.numpy().astype(np.float32) for f in extractor.extract_from(ctx, cands)] if cands else []
    return traces, feats


# ------------------------------------------------------------------ the rounds
class ActiveCollection:
    """Drives a ``Collector`` (its dataset writer, measurer and task list) with a sampler."""

    def __init__(
        self,
        collector,
        sampler: str,
        pool_per_task: int = 256,
        measure_fraction: float = 0.1,
        rounds: int = 4,
        seed: int = 0,
    ):
        from autotune.costmodel.sampling import create

        self.collector = collector
        self.sampler = create(sampler)
        self.sampler_name = sampler
        self.pool_per_task = pool_per_task
        self.measure_fraction = measure_fraction
        self.rounds = rounds
        self.seed = seed

    def run(
        self,
        max_tasks: int | None = None,
        only_models=None,
        only_keys: set[str] | None = None,
        deadline: float | None = None,
    ) -> dict:
        """The dataset's tasks (filtered and ordered as ``Collector.run`` does), pool, rounds."""
        c = self.collector
        tasks = c.select_tasks(max_tasks, only_models, only_keys)
        by_key = {t["key"]: t for t in tasks}
        measured_rows = _dataset_rows(c.root)  # task key -> [(trace, run_secs)]
        keys, traces, feats, offsets = self._pool(tasks, measured_rows, deadline)
        if not keys:
            return {"pool": 0, "measured": 0}
        latency = np.full(len(keys), np.nan)
        measured = np.zeros(len(keys), bool)
        by_trace = {(k, t): s for k, rows in measured_rows.items() for t, s in rows}
        for i, (k, t) in enumerate(zip(keys, traces)):
            if (k, t) in by_trace:
                measured[i] = True
                latency[i] = _mean(by_trace[(k, t)])
        goal = int(round(self.measure_fraction * len(keys)))
        per_round = max(1, math.ceil(goal / self.rounds))
        logger.info(
            "active collection (%s): pool %d programs over %d tasks, %d measured, goal %d in rounds of %d",
            self.sampler_name,
            len(keys),
            len(set(keys)),
            int(measured.sum()),
            goal,
            per_round,
        )
        from autotune.costmodel.inputs import ProgramBatch
        from autotune.costmodel.sampling import Pool, create

        task_ids = {k: i for i, k in enumerate(sorted(set(keys)))}
        groups = np.array([task_ids[k] for k in keys])
        pool = Pool(ProgramBatch.from_store(feats, offsets), groups)
        rng = np.random.default_rng([self.seed, int(measured.sum())])
        while measured.sum() < goal:
            if c.stop_requested or (deadline is not None and time.time() > deadline):
                logger.info("stopped; rerun the same command to resume")
                break
            k = int(min(per_round, goal - measured.sum()))
            model = self._model(pool, measured, latency, groups)
            if self.sampler.needs_model and model is None:
                picked = create("random").select(pool, measured, None, k, rng)
            else:
                picked = self.sampler.select(pool, measured, model, k, rng)
            for key in sorted({keys[i] for i in picked}):
                if c.stop_requested:
                    break
                rows = [i for i in picked if keys[i] == key]
                secs = self._measure(by_key[key], [traces[i] for i in rows])
                for i, s in zip(rows, secs):
                    measured[i] = True
                    latency[i] = _mean(s)
            logger.info("active round: measured %d / %d of the pool", int(measured.sum()), len(keys))
        return {"pool": len(keys), "measured": int(measured.sum())}

    def _pool(self, tasks, measured_rows, deadline):
        c = self.collector
        keys, traces, feats = [], [], []
        for n, info in enumerate(tasks):
            stored = read_task_pool(c.root, info["key"])
            if stored is None:
                if deadline is not None and time.time() > deadline:
                    break
                taken = {t for t, _ in measured_rows.get(info["key"], [])}  # earlier rows are not candidates
                t_list, f_list = draw_task_pool(info, c.target, self.pool_per_task, self.seed + n, taken)
                save_task_pool(c.root, info["key"], t_list, f_list)
                stored = read_task_pool(c.root, info["key"])
                logger.info(
                    "pool: task %d/%d %s: %d candidates", n + 1, len(tasks), info["name"], len(t_list)
                )
            t_list, f, off = stored
            keys += [info["key"]] * len(t_list)
            traces += t_list
            feats += [f[off[i] : off[i + 1]] for i in range(len(t_list))]
        offsets = np.concatenate([[0], np.cumsum([x.shape[0] for x in feats])]).astype(np.int64)
        store = np.concatenate(feats) if feats else np.zeros((0, 164), np.float32)
        return keys, traces, store, offsets

    def _model(self, pool, measured, latency, groups):
        """A bootstrap ensemble on the measured pool programs (None when the sampler reads no model or
        no task has two valid measured programs yet)."""
        if not self.sampler.needs_model:
            return None
        from autotune.costmodel.inputs import normalized_throughput
        from autotune.costmodel.sampling import BootstrapEnsemble

        ok = np.nonzero(measured & np.isfinite(latency))[0]
        if len(ok) == 0 or np.bincount(groups[ok]).max() < 2:
            return None
        y = normalized_throughput(latency[ok], groups[ok])
        return BootstrapEnsemble("xgb", n_members=4, seed=self.seed).fit(pool.batch.subset(ok), y, groups[ok])

    def _measure(self, info: dict, traces: list[str]) -> list[list[float] | None]:
        """Measure one task's picked programs, append them to the dataset; run_secs per program."""
        from tvm.s_tir import meta_schedule as ms

        from autotune.collection.taskpool import task_module
        from autotune.tvmrt.database import record_from_row

        c = self.collector
        mod = task_module(info)
        workload = ms.database.Workload(mod)
        target = c.target.export()
        cands = [
            record_from_row(t, None, target, info["args_info"], workload).as_measure_candidate()
            for t in traces
        ]
        outcomes, _, _ = c.measurer.measure(cands)
        now = time.time()
        rows = [
            {
                "task_key": info["key"],
                "workload_hash": info["workload_hash"],
                "trace": t,
                "run_secs": out.run_secs or [],
                "status": out.error_kind,
                "error": out.error_msg[:500],
                "sampler": f"active:{self.sampler_name}",
                "hardware_id": c.hw,
                "timestamp": now,
            }
            for t, out in zip(traces, outcomes)
        ]
        c.writer.append(rows)
        c._measured += len(rows)  # the collector's throughput record in the manifest counts them
        return [out.run_secs if out.ok else None for out in outcomes]


def _dataset_rows(root: str) -> dict[str, list]:
    from autotune.data.store import read_records

    try:
        table = read_records(root, verify=False)
    except FileNotFoundError:
        return {}
    out: dict[str, list] = {}
    for key, trace, secs in zip(
        table.column("task_key").to_pylist(),
        table.column("trace").to_pylist(),
        table.column("run_secs").to_pylist(),
    ):
        out.setdefault(key, []).append((trace, secs))
    return out


def _mean(secs) -> float:
    return float(np.mean(secs)) if secs else float("nan")
