"""Stock MetaSchedule on a 512^3 fp32 GEMM (run in its own process by startup_and_trial.py).

    python benchmarks/_stock_gemm.py --trials N --work-dir D [--import-fix] [--out result.json]

Without --import-fix this is stock TVM 0.27 as a tutorial user runs it (tensor-intrinsic import,
LocalBuilder respawning its pool); with it, only the start-up fix is applied (our fast_start in
the main process and as the builder/runner initializer), everything else stock.
"""

import argparse
import json
import time

from _gemm import gemm_module

T0 = time.time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--import-fix", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    init = None
    if args.import_fix:
        from autotune.tvmrt.startup import fast_start, worker_initializer_llvm

        fast_start("llvm")
        init = worker_initializer_llvm
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.target import codegen

    n = 512
    mod = gemm_module(n)
    target = tvm.target.Target({"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu()), "num-cores": 2})
    first = {}

    @derived_object
    class FirstResult(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            for r in runner_results:
                if r.run_secs is not None and "t" not in first:
                    first["t"] = time.time() - T0

    builder = ms.builder.LocalBuilder(initializer=init) if init else "local"
    runner = ms.runner.LocalRunner(initializer=init) if init else "local"
    callbacks = [*ms.measure_callback.MeasureCallback.create("default"), FirstResult()]
    t_tune = time.time()
    with ms.Profiler() as prof:
        db = ms.tune_tir(
            mod, target, args.work_dir, max_trials_global=args.trials, num_trials_per_iter=64,
            builder=builder, runner=runner, measure_callbacks=callbacks,
        )
    wall = time.time() - t_tune
    recs = db.get_all_tuning_records()
    valid = [float(r.run_secs[0]) for r in recs if r.run_secs and float(r.run_secs[0]) < 1e9]
    flops = 2 * n**3
    out = {
        "arm": "stock+import-fix" if args.import_fix else "stock",
        "trials": args.trials,
        "valid_trials": len(valid),
        "startup_to_first_measurement_s": first.get("t"),
        "tuning_wall_s": wall,
        "per_trial_s": wall / args.trials,
        "best_gflops": flops / min(valid) / 1e9 if valid else None,
        "profile_s": {k: float(v) for k, v in prof.get().items()},
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
