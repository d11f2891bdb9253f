"""E2 compile overhead: cold/warm Inductor compile times, break-even N*, TVM tuning as overhead.

    python -m experiments.survey.e2_compile_overhead            # full run -> results/e2_cpu.json
    python -m experiments.survey.e2_compile_overhead --quick --check

Inductor: each measurement is a fresh process (so no in-memory cache survives). "cold" gets a new,
empty TORCHINDUCTOR_CACHE_DIR; "warm" is a second process on the same directory (FX graph and
AOTAutograd caches hit). In each process a trivial function is compiled first ("framework init":
imports, toolchain checks), then the workload: compile_s = first call - steady call.
N* = compile_s / (t_eager - t_compiled), inf where compiled is not faster. Process start-up
(interpreter + import torch) is reported separately.
TVM: tuning time (+ compile) is the overhead; N*(trials) per budget against eager and against
untuned TVM; re-using the MetaSchedule database (compile_torch(database_dir=...)) is the warm cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time

from . import cli, timing, tvm_arm
from .workloads import WORKLOADS, build

log = logging.getLogger("survey.e2")

FULL = {"workloads": list(WORKLOADS), "repeats": 2, "rounds": 8, "block_s": 0.1,
        "tvm_workloads": ["bias_gelu_res_ln", "mlp"], "budgets": [8, 16, 32]}
QUICK = {"workloads": ["ew_chain_4M"], "batch": {"ew_chain_4M": 1}, "repeats": 1, "rounds": 5,
         "block_s": 0.05, "tvm_workloads": ["ew_chain_4M"], "budgets": []}
DRY = {"workloads": ["ew_chain_1k"], "repeats": 1, "rounds": 2, "block_s": 0.01,
       "tvm_workloads": [], "budgets": []}
MARK = "E2CHILD "


def child(args) -> int:
    """One fresh process: framework init, then the workload's compile and steady-state timing."""
    ready_s = time.time() - args.spawn_time  # interpreter start + imports, before any work
    import torch
    from torch._dynamo.utils import counters

    timing.configure(args.threads, args.device)
    sync = timing.synchronizer(args.device)
    w = WORKLOADS[args.child]
    model, inputs = build(args.child, args.batch, seed=args.seed, device=args.device)
    ref = model(*inputs)
    x = torch.randn(8, device=args.device)
    init_s, _ = timing.timed(lambda: torch.compile(lambda t: t * 2 + 1, dynamic=False)(x), sync)
    compiled = torch.compile(model, dynamic=False)
    first_s, out = timing.timed(lambda: compiled(*inputs), sync)
    res = timing.alternate({"eager": lambda: model(*inputs), "inductor": lambda: compiled(*inputs)},
                           baseline="eager", rounds=args.rounds, block_s=args.block_s, sync=sync)
    t_eager = res["per_call_s"]["eager"]["median"]
    t_comp = res["per_call_s"]["inductor"]["median"]
    compile_s = first_s - t_comp
    rec = {"workload": args.child, "batch": args.batch or w.default_batch, "ready_s": ready_s,
           "framework_init_s": init_s, "first_call_s": first_s, "compile_s": compile_s,
           "t_eager": t_eager, "t_compiled": t_comp, "speedup": res["ratio"]["inductor"]["median"],
           "n_star": timing.break_even(compile_s, t_eager, t_comp),
           "n_star_incl_init": timing.break_even(compile_s + init_s, t_eager, t_comp),
           "check": timing.compare(out, ref, w.rtol, w.atol), "timing": res,
           "inductor_counters": dict(counters["inductor"]), "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}
    print(MARK + json.dumps(timing.json_safe(rec)), flush=True)
    return 0


def spawn(args, cfg: dict, name: str, cache_dir: str) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    cmd = ["--child", name, "--device", args.device, "--threads", str(args.threads), "--seed", str(args.seed),
           "--rounds", str(cfg["rounds"]), "--block-s", str(cfg["block_s"])]
    if cfg.get("batch", {}).get(name):
        cmd += ["--batch", str(cfg["batch"][name])]
    cmd += ["--spawn-time", repr(time.time())]
    return timing.child_result("experiments.survey.e2_compile_overhead", cmd, MARK, timeout=900, env=env)


def startup_cost(n: int = 3) -> dict:
    """Process start-up alone: a bare interpreter and one that imports torch (median of n)."""
    out = {}
    for label, code in (("python", "pass"), ("python_import_torch", "import torch")):
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            ts.append(time.perf_counter() - t0)
        out[label + "_s"] = statistics.median(ts)
    out["loadavg"] = timing.loadavg()
    return out


def _median(recs: list[dict], key: str) -> float:
    vals = [float(r[key]) for r in recs]
    return statistics.median(vals)


def aggregate(name: str, runs: dict[str, list[dict]]) -> dict:
    """Compile times per arm (median over repeats); steady-state times pooled over every process
    (cold and warm processes run the same compiled code), so both N* share one denominator."""
    pooled = runs["cold"] + runs["warm"]
    steady = {k: _median(pooled, k) for k in ("t_eager", "t_compiled", "speedup")}
    row = {"workload": name, "kind": WORKLOADS[name].kind, "runs": runs, "steady": steady}
    for arm, recs in runs.items():
        row[arm] = {k: _median(recs, k) for k in ("compile_s", "framework_init_s", "ready_s")}
        row[arm]["n_star"] = timing.break_even(row[arm]["compile_s"], steady["t_eager"], steady["t_compiled"])
        row[arm]["n_star_incl_init"] = timing.break_even(row[arm]["compile_s"] + row[arm]["framework_init_s"],
                                                         steady["t_eager"], steady["t_compiled"])
    return row


def inductor_part(args, cfg: dict, checks: cli.Checks, save=lambda rows: None) -> list[dict]:
    rows = []
    for name in cfg["workloads"]:
        runs = {"cold": [], "warm": []}
        for rep in range(cfg["repeats"]):
            cache = timing.fresh_cache_dir(f"e2-{name}-r{rep}")
            runs["cold"].append(spawn(args, cfg, name, cache))
            runs["warm"].append(spawn(args, cfg, name, cache))
        row = aggregate(name, runs)
        for arm, recs in runs.items():
            for r in recs:
                checks.expect(r["check"]["ok"], f"E2 {name} {arm}: compiled matches eager", r["check"])
        hits = sum(r["inductor_counters"].get("fxgraph_cache_hit", 0) for r in runs["warm"])
        checks.expect(hits > 0, f"E2 {name}: warm processes hit the FX graph cache", hits)
        log.info("%s cold %.2fs warm %.2fs speedup %.2f N*cold %s N*warm %s", name, row["cold"]["compile_s"],
                 row["warm"]["compile_s"], row["steady"]["speedup"], row["cold"]["n_star"], row["warm"]["n_star"])
        rows.append(row)
        save(rows)
    return rows


def tvm_part(args, cfg: dict, checks: cli.Checks) -> dict:
    if not cfg["tvm_workloads"]:
        return {"skipped": "not in this mode"}
    reason = tvm_arm.unavailable(args.device)
    if reason:
        return {"skipped": reason}
    api, api_reason = tvm_arm.tuning_api()
    out = {"workloads": [], "tuned_skipped": api_reason if cfg["budgets"] else "no budgets in this mode"}
    for name in cfg["tvm_workloads"]:
        w = WORKLOADS[name]
        model, inputs = build(name, cfg.get("batch", {}).get(name), seed=args.seed)
        ref = model(*inputs)
        rm = tvm_arm.compile_relax(model, inputs)
        checks.expect(timing.compare(rm(*inputs), ref, w.rtol, w.atol)["ok"], f"E2 TVM {name} untuned matches")
        arms = {"eager": lambda m=model, i=inputs: m(*i), "tvm_untuned": rm.bind(inputs)}
        res = timing.alternate(arms, baseline="eager", rounds=cfg["rounds"], block_s=cfg["block_s"], max_s=30)
        t = {a: r["median"] for a, r in res["per_call_s"].items()}
        row = {"workload": name, "untuned": {"compile_s": rm.compile_s, "export_s": rm.export_s,
                                             "import_s": rm.import_s, "build_s": rm.build_s, "t": t["tvm_untuned"],
                                             "n_star_vs_eager": timing.break_even(rm.compile_s, t["eager"],
                                                                                  t["tvm_untuned"])},
               "t_eager": t["eager"], "budgets": []}
        if api and cfg["budgets"]:  # untuned through the same torch-callable path as the tuned arm
            ua = api.compile_torch(model, inputs, target="llvm", num_threads=args.threads)
            arms = dict(arms, tvm_untuned_api=lambda ua=ua, i=inputs: ua(*i))
            row["untuned_api"] = {"compile_s": ua.compile_seconds}
        for trials in cfg["budgets"] if api else []:
            row["budgets"].append(tuned_budget(api, args, model, inputs, ref, w, arms, trials, cfg, checks))
        out["workloads"].append(row)
        log.info("TVM %s untuned compile %.2fs t %.4f vs eager %.4f; budgets %s", name, rm.compile_s,
                 t["tvm_untuned"], t["eager"], [(b["trials"], round(b["speedup_vs_eager"], 2)) for b in row["budgets"]])
    return out


def tuned_budget(api, args, model, inputs, ref, w, arms, trials, cfg, checks) -> dict:
    work_dir = timing.REPO / "runs" / "survey-tvm" / f"e2-{w.name}-t{trials}-{timing.stamp()}"
    tm = api.tune_torch(model, inputs, target="llvm", trials=trials, work_dir=str(work_dir), seed=args.seed,
                        num_threads=args.threads)
    cm = api.compile_torch(model, inputs, target="llvm", database_dir=str(tm.work_dir), num_threads=args.threads)
    for label, obj in (("tuned", tm), ("warm_db", cm)):
        checks.expect(timing.compare(obj(*inputs), ref, w.rtol, w.atol)["ok"], f"E2 TVM {w.name} {label} t={trials}")
    timed_arms = dict(arms, tvm_tuned=lambda: tm(*inputs), tvm_warm_db=lambda: cm(*inputs))
    res = timing.alternate(timed_arms, baseline="eager", rounds=cfg["rounds"], block_s=cfg["block_s"], max_s=30)
    t = {a: r["median"] for a, r in res["per_call_s"].items()}
    overhead = tm.tuning_seconds + tm.compile_seconds
    return {"trials": trials, "tuning_s": tm.tuning_seconds, "compile_s": tm.compile_seconds,
            "overhead_s": overhead, "warm_compile_s": cm.compile_seconds, "t_tuned": t["tvm_tuned"],
            "t_warm_db": t["tvm_warm_db"], "t_untuned": t["tvm_untuned_api"], "t_untuned_harness": t["tvm_untuned"],
            "kernel_s": tvm_arm.TorchCallableArm(tm, inputs).kernel_s(),
            "speedup_vs_eager": res["ratio"]["tvm_tuned"]["median"],
            "speedup_vs_untuned": t["tvm_untuned_api"] / t["tvm_tuned"],
            "n_star_vs_eager": timing.break_even(overhead, t["eager"], t["tvm_tuned"]),
            "n_star_vs_untuned": timing.break_even(overhead, t["tvm_untuned_api"], t["tvm_tuned"]),
            "n_star_warm_vs_eager": timing.break_even(cm.compile_seconds, t["eager"], t["tvm_warm_db"]),
            "work_dir": str(tm.work_dir), "loadavg": res["loadavg"]}


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__.splitlines()[0])
    p.add_argument("--workloads", help=f"comma list; valid: {','.join(WORKLOADS)}")
    p.add_argument("--repeats", type=int, help="fresh-process repeats per measurement")
    p.add_argument("--budgets", help="comma list of MetaSchedule trial budgets for the TVM part")
    p.add_argument("--tvm-only", action="store_true",
                   help="run only the TVM part; keep the Inductor part of the existing output JSON")
    p.add_argument("--child", help="(internal) measure one workload in this process and print JSON")
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--spawn-time", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    cfg = dict(DRY if args.dry_run else QUICK if args.quick else FULL)
    for key in ("rounds", "block_s", "repeats"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.workloads:
        cfg["workloads"] = args.workloads.split(",")
    if args.budgets:
        cfg["budgets"] = [int(b) for b in args.budgets.split(",")]
    unknown = [n for n in cfg["workloads"] + cfg["tvm_workloads"] if n not in WORKLOADS]
    if unknown:
        p.error(f"unknown workloads {unknown}; valid: {', '.join(WORKLOADS)}")
    header = cli.setup(args)
    checks = cli.Checks()
    out = cli.out_path(args, "e2")
    previous = timing.read_json(out) if args.tvm_only and out.exists() else None
    if args.tvm_only and previous is None:
        p.error(f"--tvm-only needs an existing {out} to keep the Inductor part of")
    startup = previous["startup"] if previous else startup_cost(1 if args.dry_run else 3)

    def save(rows, tvm=None, complete=False):  # after every workload: a killed run keeps what it measured
        timing.write_json(out, {"experiment": "E2 compile overhead", **header, "config": cfg, "complete": complete,
                                "startup": startup, "inductor": rows, "tvm": tvm or {"skipped": "not reached"},
                                "checks": checks.items, "loadavg_end": timing.loadavg(),
                                "inductor_part_from": previous["started"] if previous else None})

    if previous:
        rows = previous["inductor"]
        checks.items += [c for c in previous["checks"] if not c["what"].startswith("E2 TVM")]
    else:
        rows = inductor_part(args, cfg, checks, save)
        if not args.dry_run:
            for row in rows:
                checks.expect(row["warm"]["compile_s"] < row["cold"]["compile_s"],
                              f"E2 {row['workload']}: warm-cache compile faster than cold",
                              (round(row["warm"]["compile_s"], 2), round(row["cold"]["compile_s"], 2)))
    tvm = tvm_part(args, cfg, checks)
    save(rows, tvm, complete=True)
    log.info("wrote %s", out)
    return checks.finish(args.check)


if __name__ == "__main__":
    sys.exit(main())
