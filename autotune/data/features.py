"""``python -m autotune.data.features DATASET``: derive and cache per-store features.

MetaSchedule's PerStoreFeature (164 numbers per buffer store) for every row, computed by
replaying the row's trace on its workload. Cached in ``DATASET/features/per_store.npz``
(``feats`` float32 [n_stores, 164], ``offsets`` int64 [n_rows + 1], ``fingerprint``), extended
incrementally as the dataset grows; never hand-edited. Rows keep the order of ``read_records``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os

import numpy as np

from autotune.cli import run_main, setup_logging
from autotune.errors import UserError

logger = logging.getLogger("autotune.features")
FEATURE_VERSION = 1
CACHE = os.path.join("features", "per_store.npz")


def _fingerprint(keys, traces) -> str:
    h = hashlib.sha256()
    for k, t in zip(keys, traces):
        h.update(k.encode())
        h.update(hashlib.sha1(t.encode()).digest())
    return f"v{FEATURE_VERSION}:" + h.hexdigest()


def load_cached(root: str):
    """(feats, offsets) for the first n rows of the dataset, or None."""
    path = os.path.join(root, CACHE)
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as data:
        return data["feats"], data["offsets"], str(data["fingerprint"])


def per_row_features(root: str, batch: int = 128):
    """Features for every row, computing only rows not yet cached. Returns (feats, offsets)."""
    from autotune.data.store import read_manifest, read_records, read_tasks

    table = read_records(root)
    keys = table.column("task_key").to_pylist()
    traces = table.column("trace").to_pylist()
    cached = load_cached(root)
    n_done, parts, offsets = 0, [], [0]
    if cached is not None:
        feats, offs, fp = cached
        n_cached = len(offs) - 1
        if n_cached <= len(keys) and fp == _fingerprint(keys[:n_cached], traces[:n_cached]):
            n_done, parts, offsets = n_cached, [feats], list(offs)
        else:
            logger.warning("feature cache does not match the dataset; recomputing")
    if n_done < len(keys):
        new = _extract(root, read_manifest(root), read_tasks(root), keys, traces, table, n_done, batch)
        for mat in new:
            parts.append(mat)
            offsets.append(offsets[-1] + mat.shape[0])
        feats = np.concatenate(parts, axis=0) if parts else np.zeros((0, 164), np.float32)
        offsets_arr = np.asarray(offsets, dtype=np.int64)
        os.makedirs(os.path.join(root, "features"), exist_ok=True)
        tmp = os.path.join(root, CACHE + ".tmp.npz")
        np.savez_compressed(tmp, feats=feats.astype(np.float32), offsets=offsets_arr,
                            fingerprint=np.asarray(_fingerprint(keys, traces)))
        os.replace(tmp, os.path.join(root, CACHE))
        return feats, offsets_arr
    return parts[0], np.asarray(offsets, dtype=np.int64)


def _extract(root, manifest, tasks, keys, traces, table, start, batch):
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from autotune.taskpool import task_module

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
                ms.database.TuningRecord.from_json(
                    [json.loads(traces[i]), run_secs[i] or [1e10], manifest["hardware"]["target"],
                     tasks[key]["args_info"]], workload,
                ).as_measure_candidate()
                for i in chunk
            ]
            for i, feat in zip(chunk, extractor.extract_from(ctx, cands)):
                out[i - start] = feat.numpy().astype(np.float32)
        if n_task % 20 == 0:
            logger.info("features: %d/%d tasks", n_task + 1, len(by_task))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.data.features", description=__doc__.split("\n\n")[0])
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
