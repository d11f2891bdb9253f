"""What one evolutionary-search round costs, by population / generations and cost model.

    python benchmarks/search_round_cost.py                      # resnet50's 3 heaviest tasks
    python benchmarks/search_round_cost.py --model mobilenet_v2 --tasks 2

With few trials per task the search's fixed cost per round decides whether wall time goes to
measuring. This times ``generate_measure_candidates`` (+ the cost model's update) for the first
rounds of real tasks under each setting. Programs are NOT measured here: each round's candidates
get a synthetic latency (their index), which is enough to time the search and the model update
but says nothing about the quality of what is found (that is experiments/tuning_efficiency/).
Writes benchmarks/results/search_round_cost.{json,md}; compare with a round's measuring time
(16 candidates x ~0.5-1 s here, benchmarks/results/tune_loop_quiet.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from autotune.cli import loadavg, versions, write_json  # noqa: E402

SETTINGS = [(256, 2), (128, 2), (128, 1), (64, 1)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cost-models", default="ms-xgb,xgb,seq")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm.s_tir import meta_schedule as ms

    from autotune.frontend.models import load_model
    from autotune.tuning.config import SearchConfig
    from autotune.tuning.costmodels import resolve
    from autotune.tuning.session import TuneSession
    from autotune.tvmrt.target import parse_target, target_cores

    target = parse_target("llvm")
    cores = target_cores(target)
    _, tasks = TuneSession(load_model(args.model), target, "/tmp").prepare()
    tasks = sorted(tasks, key=lambda t: -t.flops * t.weight)[: args.tasks]
    rows = []
    load_start = loadavg()
    for cm_name in args.cost_models.split(","):
        for pop, iters in SETTINGS:
            search = SearchConfig(population_size=pop, genetic_num_iters=iters, init_min_unmeasured=min(48, pop))
            per_round = []
            for i, task in enumerate(tasks):
                cost_model = resolve(cm_name, target).model
                ctx = ms.TuneContext(mod=task.mod, target=target, space_generator="post-order-apply",
                                     search_strategy=search.strategy(), task_name=task.name, rand_state=i + 1,
                                     num_threads=cores)
                db = ms.database.MemoryDatabase()
                ctx.pre_tuning(max_trials=1000, num_trials_per_iter=16, design_spaces=ctx.generate_design_space(),
                               database=db, cost_model=cost_model)
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    cands = ctx.generate_measure_candidates()
                    results = [ms.runner.RunnerResult([1e-3 * (1 + j)], None) for j in range(len(cands))]
                    ctx.notify_runner_results(cands, results)
                    cost_model.update(ctx, cands, results)
                    per_round.append(time.perf_counter() - t0)
                ctx.post_tuning()
            row = {"cost_model": cm_name, "population": pop, "generations": iters,
                   "first_round_s": sum(per_round[:: args.rounds]) / len(tasks),
                   "later_round_s": sum(x for k, x in enumerate(per_round) if k % args.rounds) /
                   max(1, len(per_round) - len(tasks))}
            rows.append(row)
            print(row, flush=True)
    res = {"model": args.model, "tasks": [t.name for t in tasks], "rounds": args.rounds, "rows": rows,
           "loadavg_start": load_start, "loadavg_end": loadavg(), "versions": versions(),
           "command": "python benchmarks/search_round_cost.py " + " ".join(argv or sys.argv[1:])}
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "search_round_cost.json"), res)
    lines = [f"Search cost per round (16 candidates), {args.model}'s {len(tasks)} heaviest tasks, mean over tasks; "
             f"load {load_start} -> {res['loadavg_end']}. `{res['command']}`", "",
             "| cost model | population | generations | first round (s) | later rounds (s) |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['cost_model']} | {r['population']} | {r['generations']} | {r['first_round_s']:.2f} | "
                     f"{r['later_round_s']:.2f} |")
    with open(os.path.join(args.out, "search_round_cost.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
