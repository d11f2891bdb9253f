"""``python -m autotune.collection.features DATASET``: derive and cache per-store features.

MetaSchedule's PerStoreFeature (164 numbers per buffer store) for every row, computed by
replaying the row's trace on its workload. Cached in ``DATASET/features/per_store.npz``
(format: ``autotune.data.feature_cache``, which the learning side reads without TVM), extended
incrementally as the dataset grows; never hand-edited.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from autotune.cli import run_main, setup_logging
from autotune.data.feature_cache import fingerprint, load_cached, save_cache, valid_prefix
from autotune.data.store import read_manifest, read_records, read_tasks
from autotune.errors import UserError

logger = logging.getLogger("autotune.features")


def per_row_features(root: str, batch: int = 128):
    """Features for every row, computing only rows not yet cached. Returns (feats, offsets)."""
    table = read_records(root)
    keys = table.column("task_key").to_pylist()
    traces = table.column("trace").to_pylist()
    feats, offsets, n_done = valid_prefix(root, keys, traces)
    if n_done == len(keys):
        return feats, offsets
    if load_cached(root) is not None and n_done == 0:
        logger.warning("feature cache does not match the dataset; recomputing")
    parts, offs = [feats], list(offsets)
    for mat in _extract(read_manifest(root), read_tasks(root), keys, traces, table, n_done, batch):
        parts.append(mat)
        offs.append(offs[-1] + mat.shape[0])
    feats = np.concatenate(parts, axis=0)
    offsets = np.asarray(offs, dtype=np.int64)
    save_cache(root, feats, offsets, fingerprint(keys, traces))
    return feats, offsets


def _extract(manifest, tasks, keys, traces, table, start, batch):
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from autotune.collection.taskpool import task_module
    from autotune.tvmrt.database import record_from_row

    target = tvm.target.Target(manifest["hardware"]["target"])
    extractor = ms.feature_extractor.PerStoreFeature()
    run_secs = table.column("run_secs").to_pylist()
    out: list[np.ndarray] = [None] * (len(keys) - start)  # type: ignore[list-item]
    by_task: dict[str, list[int]] = {}
    for i in range(start, len(keys)):
        by_task.setdefault(keys[i], []).append(i)
    for n_task, (key, rows) in enumerate(by_task.items()):
        mod = task_module(tasks[key])
        ctx = ms.TuneContext(mod=mod, target=target, task_name=tasks[key]["name"], num_threads=1)
        workload = ms.database.Workload(mod)
        for b in range(0, len(rows), batch):
            chunk = rows[b : b + batch]
            cands = [
                record_from_row(traces[i], run_secs[i], manifest["hardware"]["target"], tasks[key]["args_info"],
                                workload).as_measure_candidate()
                for i in chunk
            ]
            for i, feat in zip(chunk, extractor.extract_from(ctx, cands)):
                out[i - start] = feat.numpy().astype(np.float32)
        if n_task % 20 == 0:
            logger.info("features: %d/%d tasks", n_task + 1, len(by_task))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.collection.features", description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    args = ap.parse_args(argv)

    def body() -> int:
        from autotune.data.store import DatasetError

        setup_logging()
        try:
            feats, offsets = per_row_features(args.dataset)
        except DatasetError as err:
            raise UserError(str(err)) from None
        print(f"{len(offsets) - 1} rows, {feats.shape[0]} store rows x {feats.shape[1]} features cached")
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
