"""Cost-model prediction throughput (programs/s) on this CPU, every model side by side.

    python benchmarks/predict_throughput.py                       # models/<dataset's hw>/*, 2 threads
    python benchmarks/predict_throughput.py --models seq,xgb --rounds 7

What the search pays per candidate it ranks: ``model.predict`` on the held-out models' programs of the
dataset (resnet50, mobilenet_v2, bert_base: real traces of the lengths the search sees), tiled to at
least ``--programs`` programs per call, features already extracted (as in the search, where features are
computed once per candidate for every model). Models are timed in alternating rounds (one call each per
round, order rotated) so load drifts hit every arm alike; each arm's median and best over rounds are
reported with the load. ``seq[no workers]`` is the shipped seq model with its row slices run in one
loop of multi-threaded ops instead of on one worker thread per core: that change's speedup, same run. Writes benchmarks/results/predict_throughput_<this machine's hardware id>.{json,md}.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from autotune.cli import git_commit, loadavg, run_main, versions, write_results  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS as HELD_OUT  # noqa: E402
from autotune.errors import UserError  # noqa: E402

TARGETS = {"seq": 20_000, "xgb": 50_000}  # issue 12's done-when (programs/s on this CPU); "seq": every sequence kind


@contextlib.contextmanager
def no_workers():
    from autotune.costmodel import seq

    saved = seq.INFER_WORKERS
    seq.INFER_WORKERS = False
    try:
        yield
    finally:
        seq.INFER_WORKERS = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--models-dir", default=None, help="default: models/<the dataset's hardware id>")
    ap.add_argument("--models", default=None, help="comma-separated kinds (default: every model in the folder)")
    ap.add_argument("--programs", type=int, default=20000, help="programs per predict call (at least)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch / XGBoost threads (the search's default)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    from autotune.costmodel import load
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.metrics import timed_in_turns
    from autotune.costmodel.train import is_sequence_model
    from autotune.data.splits import split_by_model

    if args.rounds < 1 or args.programs < 1 or args.threads < 1:
        raise UserError("--rounds, --programs and --threads: positive integers")
    from autotune.tvmrt.target import hardware_id, parse_target

    machine = hardware_id(parse_target("llvm"))  # where the timing runs (the models' hardware can differ)
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.store import DatasetError

    try:
        data = load_training_data(args.dataset)
    except (DatasetError, StaleFeatureCache) as err:
        raise UserError(str(err)) from None
    hw = data.manifest["hardware"]["hardware_id"]
    _, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, HELD_OUT)
    batch = data.select_tasks(sorted(set().union(*test_keys.values()))).batch
    reps = max(1, int(np.ceil(args.programs / len(batch))))
    big = batch.subset(np.tile(np.arange(len(batch)), reps))
    folder = args.models_dir or os.path.join(ROOT, "models", hw)
    kinds = args.models.split(",") if args.models else sorted(
        k for k in os.listdir(folder) if os.path.exists(os.path.join(folder, k, "model.json")))
    missing = [k for k in kinds if not os.path.exists(os.path.join(folder, k, "model.json"))]
    if missing or not kinds:
        raise UserError(f"--models: no model.json for {missing or 'any kind'} under {folder}")
    torch.set_num_threads(args.threads)
    arms = {}
    for kind in kinds:
        model = load(os.path.join(folder, kind))
        model.set_threads(args.threads)
        arms[kind] = (model, contextlib.nullcontext)
        if kind == "seq":
            arms["seq[no workers]"] = (model, no_workers)
    for model, ctx in arms.values():  # warm-up; then seq with and without workers must agree
        with ctx():
            model.predict(batch.subset(np.arange(min(len(batch), 512))))
    if "seq" in arms:
        small = batch.subset(np.arange(min(len(batch), 2000)))
        a = arms["seq"][0].predict(small)
        with no_workers():
            b = arms["seq"][0].predict(small)
        if not np.allclose(a, b, rtol=1e-4, atol=1e-4):
            raise SystemExit(f"seq: the worker threads disagree with one loop (max diff {np.abs(a - b).max():.2e})")
    def call(model, ctx):
        with ctx():
            model.predict(big)

    load_at = [loadavg()]
    seconds = timed_in_turns({n: functools.partial(call, *arms[n]) for n in arms}, args.rounds,
                             lambda: load_at.append(loadavg()))
    rows = {n: {"programs": len(big), "seconds": s, "median_programs_per_s": len(big) / statistics.median(s),
                "best_programs_per_s": len(big) / min(s)} for n, s in seconds.items()}
    if "seq[no workers]" in rows:
        rows["seq"]["speedup_vs_no_workers"] = (statistics.median(seconds["seq[no workers]"])
                                                / statistics.median(seconds["seq"]))
    meta = {"machine": machine, "dataset": os.path.relpath(args.dataset, ROOT), "dataset_hardware_id": hw,
            "models_dir": os.path.relpath(folder, ROOT), "held_out": HELD_OUT, "distinct_programs": len(batch), "threads": args.threads, "rounds": args.rounds,
            "loadavg": load_at, "versions": versions(), "git_commit": git_commit(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    cmd = "python benchmarks/predict_throughput.py" + (f" --models {args.models}" if args.models else "")
    lines = [f"# Cost-model prediction throughput on {machine}", "",
             f"Command: `{cmd}`; {len(big)} programs per call ({len(batch)} distinct held-out programs of "
             f"{meta['dataset']}, tiled; models of {meta['models_dir']}), {args.threads} threads, {args.rounds} alternating rounds; "
             f"load {load_at[0]} at start, {load_at[-1]} at end; commit {meta['git_commit']}.", "",
             "| model | programs/s (median) | best | target (issue 12) |", "|---|---|---|---|"]
    for n, row in rows.items():
        target = TARGETS.get(n, TARGETS["seq"] if is_sequence_model(n) else None)
        met = "" if target is None else f"≥ {target:,}: {'met' if row['median_programs_per_s'] >= target else 'not met'}"
        lines.append(f"| {n} | {row['median_programs_per_s']:,.0f} | {row['best_programs_per_s']:,.0f} | {met} |")
    if "speedup_vs_no_workers" in rows.get("seq", {}):
        lines += ["", f"seq's row slices on worker threads (one op per core) vs one loop of {args.threads}-thread ops: "
                  f"{rows['seq']['speedup_vs_no_workers']:.2f}x (median over rounds, same run, same predictions)."]
    name = f"predict_throughput_{machine}"
    write_results(os.path.join(args.out, name + ".json"), {"meta": meta, "rows": rows},
                  os.path.join(args.out, name + ".md"), "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
