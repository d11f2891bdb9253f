"""Cut a small pair of datasets (same tasks, two hardware) out of two full ones, with their feature
caches, for the quick (CI) form of experiment T3. TVM-free: rows and feature rows are copied.

    .venv/bin/python experiments/transfer/make_slice.py \
        --src datasets/cpu-znver3-2c --dst datasets/cpu-x86-64-v2-1c --out experiments/transfer/data

Keeps ``--per-model`` tasks of each held-out model, ``--train-tasks`` other tasks (both datasets must have
them) and at most ``--programs`` valid programs per task and dataset (random, ``--seed``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autotune.data.feature_cache import fingerprint, read_features, save_cache  # noqa: E402
from autotune.data.schema import RECORD_SCHEMA, STATUS_OK  # noqa: E402
from autotune.data.store import mean_latency, read_manifest, read_records, read_tasks  # noqa: E402


def pick_tasks(src: str, dst: str, held_out: list[str], per_model: int, n_train: int, rng) -> list[str]:
    """Task keys both datasets measured (>= 4 valid programs in each): ``per_model`` of every held-out
    model, ``n_train`` of the tasks no held-out model uses."""
    usable = None
    for root in (src, dst):
        table = read_records(root)
        ok = np.isfinite(mean_latency(table)) & (np.array(table.column("status").to_pylist()) == STATUS_OK)
        keys, counts = np.unique(np.array(table.column("task_key").to_pylist())[ok], return_counts=True)
        have = set(keys[counts >= 4].tolist())
        usable = have if usable is None else usable & have
    tasks = read_tasks(dst)
    chosen: list[str] = []
    for model in held_out:
        cands = sorted(k for k in usable if model in tasks[k]["models"] and k not in chosen)
        chosen += rng.choice(cands, size=min(per_model, len(cands)), replace=False).tolist()
    train = sorted(k for k in usable if not any(m in tasks[k]["models"] for m in held_out))
    chosen += rng.choice(train, size=min(n_train, len(train)), replace=False).tolist()
    return sorted(chosen)


def write_slice(root: str, out: str, keys: list[str], programs: int, rng) -> int:
    table = read_records(root)
    feats, offsets = read_features(root, table.column("task_key").to_pylist(), table.column("trace").to_pylist())
    lat = mean_latency(table)
    task_col = np.array(table.column("task_key").to_pylist())
    keep = []
    for k in keys:
        rows = np.nonzero((task_col == k) & np.isfinite(lat) & (lat > 0))[0]
        keep += sorted(rng.choice(rows, size=min(programs, len(rows)), replace=False).tolist())
    keep = np.array(keep, np.int64)
    part = table.take(pa.array(keep))
    os.makedirs(os.path.join(out, "shards"), exist_ok=True)
    shard = os.path.join(out, "shards", "part-00000.parquet")
    pq.write_table(part.cast(RECORD_SCHEMA), shard, compression="zstd")
    manifest = read_manifest(root)
    with open(shard, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    manifest["shards"] = {"shards/part-00000.parquet": {"rows": len(keep), "sha256": sha}}
    manifest["counts"] = {"records": len(keep), "valid": len(keep), "tasks": len(keys)}
    full = hashlib.sha256(json.dumps(read_manifest(root), sort_keys=True).encode()).hexdigest()
    manifest["sliced_from"] = {"dataset": os.path.relpath(root, ROOT), "manifest_sha256": full,
                               "programs_per_task": programs, "tool": "experiments/transfer/make_slice.py"}
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    open(os.path.join(out, "journal.jsonl"), "w").close()
    tasks = read_tasks(root)
    with open(os.path.join(out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for k in keys:
            f.write(json.dumps({**tasks[k], "tvmscript": ""}) + "\n")  # the workload stays; the text is only for humans
    sizes = offsets[keep + 1] - offsets[keep]
    rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in keep])
    new_offsets = np.concatenate([[0], np.cumsum(sizes)])
    save_cache(out, feats[rows], new_offsets, fingerprint(part.column("task_key").to_pylist(),
                                                          part.column("trace").to_pylist()))
    return len(keep)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--out", default=os.path.join("experiments", "transfer", "data"))
    ap.add_argument("--held-out", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--per-model", type=int, default=4)
    ap.add_argument("--train-tasks", type=int, default=40)
    ap.add_argument("--programs", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    keys = pick_tasks(args.src, args.dst, args.held_out.split(","), args.per_model, args.train_tasks, rng)
    for root in (args.src, args.dst):
        name = read_manifest(root)["hardware"]["hardware_id"]
        n = write_slice(root, os.path.join(args.out, name), keys, args.programs, rng)
        print(f"{os.path.join(args.out, name)}: {n} programs over {len(keys)} tasks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
