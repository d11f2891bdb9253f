"""How long does each sampler take to pick 10% of a dataset? (issue target: <= 60 s for 25,000 programs)

    python experiments/active_learning/selection_time.py [--dataset datasets/cpu-znver3-2c]

Pool: every valid program of the dataset, grouped by task. Samplers that read a model get a
bootstrap ensemble (4 small XGBoost models, 1 thread) fitted on a random 2% first; its fit is
timed apart. One thread for NumPy/BLAS (set before NumPy loads). Writes results/selection_time.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import git_commit, loadavg, write_json  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--fraction", type=float, default=0.10)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.sampling import REGISTRY, BootstrapEnsemble, Pool, create

    data = load_training_data(args.dataset)
    n = len(data)
    k = int(round(args.fraction * n))
    rng = np.random.default_rng(0)
    start = rng.random(n) < 0.02
    t0 = time.perf_counter()
    sub = data.subset(start)
    model = BootstrapEnsemble("xgb", n_members=4, seed=0).fit(sub.batch, sub.y, sub.groups)
    fit_s = time.perf_counter() - t0
    rows = []
    for name in REGISTRY:
        sampler = create(name)
        pool = Pool(data.batch, data.groups)  # fresh: the embedding is part of the timed work
        t0 = time.perf_counter()
        out = sampler.select(pool, start, model if sampler.needs_model else None, k, rng=0)
        secs = time.perf_counter() - t0
        rows.append({"sampler": name, "seconds": secs, "picked": len(out)})
        print(f"{name:20s} {secs:6.2f} s for {len(out)} of {n} programs", flush=True)
    result = {
        "dataset": args.dataset,
        "programs": n,
        "tasks": len(np.unique(data.groups)),
        "k": k,
        "ensemble_fit_s_on_2pct": fit_s,
        "rows": rows,
        "loadavg": loadavg(),
        "commit": git_commit(),
        "threads": 1,
    }
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "selection_time.json"), result)
    lines = [
        f"# Selection time: {k} of {n} programs ({args.fraction:.0%}, {result['tasks']} tasks), 1 thread",
        "",
        f"Load average at the end: {result['loadavg']} (2 shared cores). Model-reading samplers use a "
        f"bootstrap ensemble fitted on a random 2% in {fit_s:.1f} s (not included below).",
        "",
        "| sampler | seconds | target <= 60 s |",
        "|---|---|---|",
    ]
    lines += [
        f"| {r['sampler']} | {r['seconds']:.1f} | {'yes' if r['seconds'] <= 60 else 'NO'} |" for r in rows
    ]
    lines += ["", "Reproduce: `python experiments/active_learning/selection_time.py`", ""]
    with open(os.path.join(args.out, "selection_time.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
