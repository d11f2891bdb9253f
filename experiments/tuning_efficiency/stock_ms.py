"""Stock MetaSchedule as a user runs it: ``ms.relax_integration.tune_relax`` with its default search.

    python experiments/tuning_efficiency/stock_ms.py --model resnet50 --trials-per-task 32 \
        --work-dir runs/tuning_real/resnet50/stock-ms/seed0 --seed 0

The honest baseline of issue 15: MetaSchedule's own loop (gradient task scheduler, 64 candidates per
iteration, evolutionary search with its default population, online XGBModel, JSONDatabase), changed
only where stock TVM 0.27 cannot run at all on these machines (shared/TVM_NOTES.md):
- the module handed to ``tune_relax`` is legalized and fused first (its own ``extract_tasks`` finds 0
  tasks otherwise) — the same module ``autotune.tune`` tunes, so the databases are comparable;
- the builder/runner workers get the start-up fix (``LocalBuilder(initializer=...)``, otherwise every
  build times out importing the tensor intrinsics);
- the target is the detected host CPU (``mcpu``, cores), not generic x86-64;
- ``num_trials_per_iter`` is at most the per-task budget (64, the default, otherwise): the gradient
  scheduler's warm-up gives each task one full iteration in turn, so at 32 trials per task and 64 per
  iteration the budget ends with half of the tasks never measured (their default schedules would then
  decide the comparison, not the search).
Writes ``report.json`` in the work dir: tasks (weights, FLOPs), trials, wall time, and the measured
history (records in the database vs seconds since tuning started). A run that did not finish is
started again from scratch (stock MetaSchedule does not resume a budget). ``--layout-rewrite``: the weights
marked layout-free first, as ``relax.pipeline.static_shape_tuning_pipeline(..., cpu_weight_prepack=True)``
does (what TVM's docs recommend on CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from autotune.cli import loadavg, versions, write_json  # noqa: E402


def _time_log(history: list, t0: float):
    """A MeasureCallback that records (candidates measured so far, seconds since t0) after each batch."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class TimeLog(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            done = (history[-1][0] if history else 0) + len(runner_results)
            history.append([done, time.time() - t0])

    return TimeLog()


NUM_TRIALS_PER_ITER = 64  # tune_relax's default candidates per task per iteration (capped at the per-task budget)
# Protocol v2's value (arms ``+iter8``): the gradient scheduler spends its first pass on one batch per task,
# chosen before any measurement of the run joins, and the XGBModel scores randomly until it holds 100 samples.
# At 8 per task that pass is 1/4 of a 32-per-task budget and leaves >= 100 samples for any model of >= 13 tasks
# (bert_base 18, the CNNs 30+), so the stock model guides the other >= 3/4 (at 16 only half; at 32 none).
V2_TRIALS_PER_ITER = 8


def run_stock(model_name: str, work_dir: str, trials_per_task: int, seed: int,
              num_trials_per_iter: int = NUM_TRIALS_PER_ITER,
              batch_size: int = 1, layout_rewrite: bool = False, conv_layout: str = "nchw") -> dict:
    from autotune.tvmrt.startup import fast_start, worker_initializer_llvm

    fast_start("llvm")
    from tvm.s_tir import meta_schedule as ms

    from autotune.frontend import relax as fe
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import hardware_id, parse_target, target_json

    target = parse_target("llvm")
    cores = int(target_json(target).get("num-cores", 1))
    os.environ.setdefault("TVM_NUM_THREADS", str(cores))
    model = load_model(model_name, batch_size=batch_size, seed=seed)
    mod, params = fe.import_exported(model.exported)
    mod = fe.convert_conv_layout(fe.bind_and_simplify(mod, params), conv_layout)
    tasks = fe.extract_tasks(mod, target, layout_rewrite=layout_rewrite)
    fused = fe.fuse_for_tuning(mod, target, layout_rewrite=layout_rewrite)
    budget = trials_per_task * len(tasks)
    num_trials_per_iter = min(num_trials_per_iter, trials_per_task)
    if os.path.exists(work_dir):  # an unfinished earlier run: stock MetaSchedule cannot resume a budget
        shutil.rmtree(work_dir)
    os.makedirs(work_dir)
    history: list = []
    t0 = time.time()
    with target:
        ms.relax_integration.tune_relax(
            mod=fused, params={}, target=target, work_dir=work_dir, max_trials_global=budget,
            num_trials_per_iter=num_trials_per_iter, seed=seed,
            builder=ms.builder.LocalBuilder(initializer=worker_initializer_llvm),
            runner=ms.runner.LocalRunner(initializer=worker_initializer_llvm),
            measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), _time_log(history, t0)],
        )
    wall = time.time() - t0
    report = {
        "arm": "stock-ms", "model": model.name, "seed": seed, "hardware_id": hardware_id(target),
        "target": target_json(target), "trials_per_task": trials_per_task, "budget": budget,
        "num_trials_per_iter": num_trials_per_iter, "layout_rewrite": layout_rewrite,
        "conv_layout": conv_layout,
        "tasks": [{"name": t.name, "workload_hash": t.workload_hash, "flops": t.flops, "weight": t.weight}
                  for t in tasks],
        "trials": {"this_run": history[-1][0] if history else 0},
        "wall_s": {"tuning": wall},
        "history": {"columns": ["trials", "elapsed_s"], "rows": history},
        "versions": versions(), "loadavg_end": loadavg(),
    }
    write_json(os.path.join(work_dir, "report.json"), report)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--trials-per-task", type=int, default=32)
    ap.add_argument("--num-trials-per-iter", type=int, default=64, help="stock default: 64")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout-rewrite", action="store_true", help="cpu_weight_prepack=True's layout-free weights")
    ap.add_argument("--conv-layout", default="nchw", choices=("nchw", "nhwc"),
                    help="the model's convolutions converted to this layout before tuning (nchw: as the user wrote it)")
    args = ap.parse_args(argv)
    report = run_stock(args.model, args.work_dir, args.trials_per_task, args.seed, args.num_trials_per_iter,
                       layout_rewrite=args.layout_rewrite, conv_layout=args.conv_layout)
    print(json.dumps({k: report[k] for k in ("model", "budget", "trials", "wall_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
