"""``python -m autotune.calibrate``: a cost model for this CPU from about ten minutes of measurements.

On a CPU without its own model (``models/<hardware id>/xgb``), it

1. picks tasks for coverage: ``--tasks`` of the shipped datasets' task pool (the tasks every CPU set
   shares), one nearest each k-means centre over what a task is (operator kind, FLOPs, bytes, arity),
   weighted by how often networks use it, so the calibration ranks the operators a network spends its
   time in — several programs per task (``--programs-per-task``), since ranking within a task is what
   is learned, and one or two programs of many tasks teach no ranking;
2. measures them into ``datasets/<hardware id>/`` with the collection engine (random and evolutionary
   samples per task, as every dataset of this project; resumable: the same command continues, a kill loses
   at most the batch in flight; ``--minutes`` bounds the measuring);
3. adapts the CPU-spanning model (``models/pooled/xgb``: trained on every CPU set with the hardware
   descriptor, ``autotune.hardware``) to the new programs — more boosting rounds on them, this CPU's
   descriptor set — or, without a pooled model, the nearest hardware's ``xgb``; a CPU whose dataset is
   already large (``OWN_MODEL_MIN_PROGRAMS``) gets a model trained on its own data alone;
4. writes ``models/<hardware id>/xgb`` with its card (dataset hash, descriptor, what it was adapted from),
   which ``autotune.tune --cost-model auto`` then uses and names.

The test networks' tasks (``splits.TEST_MODELS``) are left out of the calibration by default so the
project's tuning evaluation stays clean; ``--all-tasks`` keeps them.

    python -m autotune.calibrate                  # this CPU, ~10 minutes of measuring
    python -m autotune.calibrate --minutes 3 --tasks 24
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import time

import numpy as np

from autotune.cli import git_commit, loadavg, run_main, setup_logging, versions, write_json
from autotune.errors import UserError
from autotune.paths import REPO
from autotune.paths import shown as _shown

logger = logging.getLogger("autotune.calibrate")

DEFAULT_MINUTES = 10.0
DEFAULT_TASKS = 96
DEFAULT_PER_TASK = 12
# How the CPU-spanning model is adapted to the calibration programs: "finetune" (ADAPT_ROUNDS more rounds of the
# base's own trees) or "residual" (RESIDUAL: shallow trees added on top of the base's scores); the choice follows
# the leave-one-hardware-out table's calibration column on the validation networks (experiments/transfer/loho.py).
ADAPT = "finetune"
ADAPT_ROUNDS = 60
RESIDUAL = {"rounds": 80, "max_depth": 4, "learning_rate": 0.1}
OWN_MODEL_MIN_PROGRAMS = 5000  # a dataset this large trains its own model instead of adapting another's
POOLED = "pooled"
_OPS = ("conv2d", "depthwise", "matmul", "dense", "batch_matmul", "pool", "mean", "softmax", "norm", "erf",
        "tanh", "transpose", "reshape", "add", "multiply", "relu", "clip", "concat", "take")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.calibrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="llvm", help="'llvm' (this CPU, detected) or a JSON llvm target dict")
    ap.add_argument("--out", default=None, help="dataset folder (default: datasets/<hardware id>)")
    ap.add_argument("--models-dir", default=None, help="models folder (default: the shipped models/)")
    ap.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="measuring time (default: %(default)s)")
    ap.add_argument("--tasks", type=int, default=DEFAULT_TASKS, help="tasks measured (default: %(default)s)")
    ap.add_argument("--programs-per-task", type=int, default=DEFAULT_PER_TASK,
                    help="programs measured per task (default: %(default)s)")
    ap.add_argument("--all-tasks", action="store_true", help="also calibrate on the test networks' tasks")
    ap.add_argument("--force", action="store_true", help="calibrate even when this hardware has a model")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    return run_main(lambda: calibrate(args))


def _check(args) -> None:
    if not 0 < args.minutes <= 24 * 60:
        raise UserError(f"--minutes {args.minutes}: accepted: minutes of measuring in (0, 1440]")
    if args.tasks < 2:
        raise UserError(f"--tasks {args.tasks}: accepted: an integer >= 2 (tasks to measure)")
    if args.programs_per_task < 2:
        raise UserError(f"--programs-per-task {args.programs_per_task}: accepted: an integer >= 2 (a ranking "
                        "needs pairs)")


# ---- which tasks (TVM-free) ----

def pool_tasks(datasets_dir: str) -> dict[str, dict]:
    """Task key -> task record, over every shipped CPU dataset (they share one pool), without the tasks that
    teach no ranking: no FLOPs (pure data movement) or a design space some collection used up
    (``exhausted_tasks``: a reshape has one schedule)."""
    out: dict[str, dict] = {}
    if not os.path.isdir(datasets_dir):
        return out
    used_up: set = set()
    for name in sorted(os.listdir(datasets_dir)):
        path = os.path.join(datasets_dir, name, "tasks.jsonl")
        manifest = os.path.join(datasets_dir, name, "manifest.json")
        if name.startswith("cpu-") and os.path.exists(manifest):
            used_up |= set(_read_json(manifest).get("exhausted_tasks", {}))
        if name.startswith("cpu-") and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        task = json.loads(line)
                        out.setdefault(task["key"], task)
    return {k: t for k, t in out.items() if k not in used_up and float(t.get("flops", 0)) > 0}


def task_vector(task: dict) -> np.ndarray:
    """What a task is, for coverage: operator kinds in its name, log FLOPs, log bytes of its arguments, arity."""
    name = task.get("name", "")
    args = task.get("args_info") or []
    if isinstance(args, str):
        args = json.loads(args)
    elems = [math.prod(a[2]) if len(a) > 2 and isinstance(a[2], list) else 1 for a in args]
    ops = [float(bool(re.search(op, name))) for op in _OPS]
    return np.array(ops + [math.log2(1 + float(task.get("flops", 0))) / 4, math.log2(1 + 4 * sum(elems)) / 4,
                           len(args) / 4], np.float64)


def choose_tasks(tasks: dict[str, dict], n: int, seed: int, exclude_models=()) -> list[str]:
    """``n`` task keys for coverage: k-means over ``task_vector`` weighted by how often networks use each task
    (synthetic tasks count once) times its log FLOPs, the task nearest each centre. Deterministic for a seed."""
    from sklearn.cluster import KMeans

    keys = sorted(k for k, t in tasks.items() if not set(t.get("models", [])) & set(exclude_models))
    if len(keys) <= n:
        return keys
    X = np.stack([task_vector(tasks[k]) for k in keys])
    w = np.array([max(1.0, float(sum((tasks[k].get("model_weights") or {}).values())))
                  * math.log2(2 + float(tasks[k].get("flops", 0))) for k in keys])
    km = KMeans(n_clusters=n, n_init=4, random_state=seed).fit(X, sample_weight=w)
    chosen: list[str] = []
    for c in range(n):
        members = np.nonzero(km.labels_ == c)[0]
        if len(members):
            d = np.linalg.norm(X[members] - km.cluster_centers_[c], axis=1)
            chosen.append(keys[members[int(np.argmin(d - 1e-6 * w[members]))]])
    return sorted(set(chosen))


# ---- the run ----

def calibrate(args) -> int:
    _check(args)
    from autotune.tuning.costmodels import DEFAULT_MODELS_DIR, find_pretrained
    from autotune.tvmrt.target import hardware_id, parse_target

    target = parse_target(args.target)
    if target.kind.name != "llvm":
        raise UserError(f"--target: calibration is for CPUs (llvm targets); got {target.kind.name}")
    hw = hardware_id(target)
    models_dir = args.models_dir or DEFAULT_MODELS_DIR
    out = args.out or os.path.join(REPO, "datasets", hw)
    existing = find_pretrained("xgb", hw, models_dir)
    if existing and not args.force:
        print(f"{hw} has its model: {existing} (--force calibrates again)")
        return 0
    setup_logging(os.path.join(out, "logs"))
    from autotune.data.splits import TEST_MODELS

    have = _programs_in(out)
    if have < OWN_MODEL_MIN_PROGRAMS:
        tasks = pool_tasks(os.path.join(REPO, "datasets"))
        if not tasks:
            raise UserError(f"no task pool: {os.path.join(REPO, 'datasets')} has no CPU dataset's tasks.jsonl")
        chosen = choose_tasks(tasks, args.tasks, args.seed, () if args.all_tasks else TEST_MODELS)
        logger.info("calibrating %s: %d tasks x %d programs, at most %.1f minutes of measuring into %s", hw,
                    len(chosen), args.programs_per_task, args.minutes, out)
        _measure(out, target, [tasks[k] for k in chosen], args)
    from autotune.collection.features import per_row_features

    per_row_features(out)
    path = _fit(out, hw, models_dir, exclude=() if args.all_tasks else TEST_MODELS)
    print(f"calibrated cost model for {hw}: {path} (autotune.tune --cost-model auto uses it)")
    return 0


def _programs_in(root: str) -> int:
    from autotune.data.store import read_manifest

    try:
        return int(sum(s.get("rows", 0) for s in read_manifest(root).get("shards", {}).values()))
    except Exception:  # noqa: BLE001 - no dataset there yet
        return 0


def _measure(out: str, target, tasks: list[dict], args) -> None:
    from autotune.collection.collector import Collector, hardware_fingerprint
    from autotune.data.store import DatasetError, TaskInfo

    try:
        collector = Collector(out, target, hardware_fingerprint(target), seed=args.seed)
    except DatasetError as err:
        raise UserError(f"--out: {err}") from None
    known = collector.writer.known_tasks()
    fields = set(TaskInfo.__dataclass_fields__)
    for task in tasks:
        if task["key"] not in known:
            collector.writer.add_task(TaskInfo(**{k: v for k, v in task.items() if k in fields}))
    collector.writer.manifest["task_pool_complete"] = True
    collector.writer._write_manifest()

    def request_stop(signum, _frame):
        collector.stop_requested = True
        logger.info("stop requested (signal %d): finishing the batch in flight; rerun to resume", signum)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        collector.run(programs_per_task=args.programs_per_task, pass_size=max(2, args.programs_per_task // 3),
                      only_keys={t["key"] for t in tasks}, deadline=time.time() + args.minutes * 60)
    finally:
        collector.close()
    if collector.stop_requested:
        raise SystemExit(130)


def _fit(root: str, hw: str, models_dir: str, exclude=()) -> str:
    """Adapt (or, for a large dataset, train) this CPU's xgb on the dataset at ``root``; save and card it."""
    from autotune.costmodel import load
    from autotune.costmodel.data import load_training_data, manifest_sha256
    from autotune.costmodel.train import params_for
    from autotune.costmodel.xgb import XGBCostModel
    from autotune.hardware import describe, descriptor

    data = load_training_data(root)
    keep = [k for k in data.task_keys if not set(data.tasks[k]["models"]) & set(exclude)]
    part = data.select_tasks(keep)
    if len(part) == 0:
        raise UserError(f"{root}: no measured programs to calibrate on yet; rerun to measure")
    desc = descriptor(data.manifest["hardware"])
    base_path = os.path.join(models_dir, POOLED, "xgb")
    base_card: dict = {}
    if len(part) >= OWN_MODEL_MIN_PROGRAMS:
        model = XGBCostModel(**{**params_for("xgb"), "hardware_features": True}).fit(part.batch, part.y, part.groups)
        how = f"trained on this hardware's {len(part)} programs alone (at least {OWN_MODEL_MIN_PROGRAMS})"
    else:
        if not os.path.exists(os.path.join(base_path, "model.json")):
            from autotune.tuning.costmodels import nearest_pretrained
            from autotune.tvmrt.target import parse_target

            near = nearest_pretrained(parse_target(data.manifest["hardware"]["target"]), models_dir, kinds=("xgb",))
            if near is None:
                raise UserError(f"no model to adapt: neither {base_path} nor another CPU's xgb in {models_dir}")
            base_path = near[0]
        base = load(base_path)
        if getattr(base, "hardware_features", False):
            base.set_hardware(desc)
        if ADAPT == "residual" and hasattr(base, "boost_more"):
            model = base.boost_more(part.batch, part.y, part.groups, **RESIDUAL)
            added = f"{RESIDUAL['rounds']} trees of depth {RESIDUAL['max_depth']} (a residual)"
        else:
            model = base.fine_tune(part.batch, part.y, part.groups, steps=ADAPT_ROUNDS)
            added = f"{ADAPT_ROUNDS} boosting rounds"
        base_card = _read_json(os.path.join(base_path, "card.json"))
        how = f"{_shown(base_path)} + {added} on {len(part)} programs of this CPU"
    if getattr(model, "hardware_features", False):
        model.set_hardware(desc)
    out_dir = os.path.join(models_dir, hw, "xgb")
    model.save(out_dir)
    card = {"kind": "xgb", "params": model.get_params(), "dataset": _shown(root),
            "dataset_manifest_sha256": manifest_sha256(data.manifest), "hardware": data.manifest["hardware"],
            "hardware_descriptor": describe(data.manifest["hardware"]),
            "calibrated": {"how": how, "programs": len(part), "tasks": len(set(part.groups.tolist())),
                           "base": _shown(base_path) if base_card else None,
                           "base_dataset_manifest_sha256": base_card.get("dataset_manifest_sha256") or [
                               d.get("dataset_manifest_sha256") for d in base_card.get("datasets", [])],
                           "left_out_models": list(exclude)},
            "git_commit": git_commit(), "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": versions(), "loadavg": loadavg()}
    write_json(os.path.join(out_dir, "card.json"), card)
    logger.info("%s: %s", out_dir, how)
    return out_dir


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    raise SystemExit(main())
