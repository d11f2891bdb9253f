"""``python -m autotune.costmodel.pooled``: one cost model over every CPU dataset, told which CPU each label is from.

Trains a family (``xgb`` or ``ms-mlp``) with ``hardware_features`` (``autotune.hardware``: the CPU descriptor and
how each program meets that CPU) on the union of the CPU datasets, each (CPU, task) its own ranking group with
labels normalised within it, the test networks' tasks left out on every CPU (as the per-hardware models leave
them out). Writes ``models/pooled/<kind>/`` with a card naming every dataset and its manifest hash: the model
``autotune.calibrate`` adapts to a new CPU. Hyperparameters: the family's shipped recipe (``params_for``).

    python -m autotune.costmodel.pooled --kind xgb
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import numpy as np

from autotune.cli import comma_list, git_commit, loadavg, run_main, setup_logging, versions, write_json
from autotune.errors import UserError

POOLED = "pooled"
KINDS = ("xgb", "ms-mlp")


def main(argv=None) -> int:
    from autotune.paths import DEFAULT_MODELS_DIR, REPO

    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.pooled", description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=None, help="comma-separated CPU datasets (default: every datasets/cpu-*)")
    ap.add_argument("--kind", default="xgb", choices=KINDS)
    ap.add_argument("--models-dir", default=DEFAULT_MODELS_DIR)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    paths = comma_list(args.datasets) if args.datasets else sorted(glob.glob(os.path.join(REPO, "datasets", "cpu-*")))
    return run_main(lambda: train_pooled(paths, args.kind, os.path.join(args.models_dir, POOLED, args.kind), args.seed))


def pooled_parts(paths: list[str], exclude_models) -> tuple[list, list]:
    """(training parts, their TrainingData) of each CPU dataset: tasks of ``exclude_models`` dropped."""
    from autotune.costmodel.data import load_training_data
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.store import DatasetError

    parts, datas = [], []
    for path in paths:
        try:
            data = load_training_data(path)
        except (DatasetError, StaleFeatureCache) as err:
            raise UserError(f"--datasets: {err}") from None
        if data.batch.hw is None:
            raise UserError(f"--datasets: {path} is not a CPU dataset; accepted: CPU (llvm) datasets")
        keep = [k for k in data.task_keys if not set(data.tasks[k]["models"]) & set(exclude_models)]
        parts.append(data.select_tasks(keep))
        datas.append(data)
    return parts, datas


def stack(parts: list):
    """(batch, y, groups): every (CPU, task) its own group, labels normalised within it."""
    from autotune.costmodel.online import concat_batches

    ys, groups, base = [], [], 0
    for part in parts:
        ys.append(part.y)
        groups.append(part.groups + base)
        base += len(part.task_keys)
    return concat_batches([p.batch for p in parts]), np.concatenate(ys), np.concatenate(groups)


def train_pooled(paths: list[str], kind: str, out_dir: str, seed: int = 0) -> int:
    from autotune.costmodel import create
    from autotune.costmodel.data import manifest_sha256
    from autotune.costmodel.train import params_for
    from autotune.data.splits import TEST_MODELS
    from autotune.hardware import describe

    if len(paths) < 2:
        raise UserError(f"--datasets: {len(paths)} CPU dataset(s) found; a pooled model needs at least two")
    setup_logging()
    parts, datas = pooled_parts(paths, TEST_MODELS)
    batch, y, groups = stack(parts)
    started = time.time()
    model = create(kind, **{**params_for(kind), "seed": seed, "hardware_features": True}).fit(batch, y, groups)
    model.save(out_dir)
    card = {"kind": kind, "params": model.get_params(), "hardware_id": None, "hardware": None,
            "datasets": [{"dataset": os.path.relpath(p), "hardware_id": d.manifest["hardware"]["hardware_id"],
                          "dataset_manifest_sha256": manifest_sha256(d.manifest), "programs": len(part),
                          "tasks": len(set(part.groups.tolist())), "hardware_descriptor": describe(d.manifest["hardware"])}
                         for p, d, part in zip(paths, datas, parts)],
            "held_out": list(TEST_MODELS), "train": {"programs": len(y), "fit_seconds": round(time.time() - started, 1)},
            "git_commit": git_commit(), "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": versions(), "loadavg": loadavg()}
    write_json(os.path.join(out_dir, "card.json"), card)
    print(f"{out_dir}: {kind} over {len(paths)} CPU datasets, {len(y)} programs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
