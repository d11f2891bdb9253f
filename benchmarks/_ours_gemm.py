"""autotune's tuning loop on the same 512^3 fp32 GEMM (run by startup_and_trial.py)."""

import argparse
import json
import time

from _gemm import gemm_module

T0 = time.time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials-per-round", type=int, default=64, help="64 = stock tune_tir's num_trials_per_iter")
    args = ap.parse_args()
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")

    from autotune.frontend.relax import Task, task_flops
    from autotune.tuning.costmodels import resolve
    from autotune.tuning.tuner import SearchConfig, tune
    from autotune.tvmrt.database import open_json_database
    from autotune.tvmrt.measure import Measurer
    from autotune.tvmrt.target import parse_target

    target = parse_target("llvm")
    measurer = Measurer(target)
    measurer.warm_up()
    n = 512
    mod = gemm_module(n)
    task = Task("gemm512", mod, 1, task_flops(mod), target)
    db = open_json_database(args.work_dir)
    t_tune = time.time()
    try:
        states, stats = tune([task], target, db, measurer, work_dir=args.work_dir, max_trials=args.trials,
                             cost_model=resolve("stock", target),
                             search=SearchConfig(num_trials_per_iter=args.trials_per_round, population_size=512,
                                                 genetic_num_iters=4))
    finally:
        measurer.close()
    wall = time.time() - t_tune
    best = states[0].best_s
    out = {
        "arm": f"autotune ({args.trials_per_round}/round, stock population)",
        "trials": args.trials,
        "valid_trials": states[0].trials - states[0].failures,
        "startup_to_first_measurement_s": stats.first_measured_at - T0 if stats.first_measured_at else None,
        "tuning_wall_s": wall,
        "per_trial_s": wall / args.trials,
        "best_gflops": task.flops / best / 1e9 if best else None,
        "split_s": {"search": stats.search_s, "build": stats.build_s, "run": stats.run_s},
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
