"""E1 graph optimization: eager vs torch.compile (Inductor) vs TVM untuned / tuned, per workload.

    python -m experiments.survey.e1_graph_opt            # full run -> results/e1_cpu.json
    python -m experiments.survey.e1_graph_opt --quick --check
    python -m experiments.survey.e1_graph_opt --device cuda   # adds mode="reduce-overhead"

Every arm's output is checked against eager with the workload's (rtol, atol); speedups are the
median of per-round eager/arm ratios from alternating blocks (timing.alternate).
"""

from __future__ import annotations

import logging
import sys

import torch

from . import cli, timing, tvm_arm
from .workloads import WORKLOADS, build

log = logging.getLogger("survey.e1")

FULL = {"workloads": list(WORKLOADS), "tuned": ["bias_gelu_res_ln", "scale_mask_softmax", "matmul", "mlp"],
        "sweep": {"bias_gelu_res_ln": [1, 4, 16, 64], "mlp": [1, 4, 16, 64]},
        "rounds": 10, "block_s": 0.1, "max_s": 40.0, "trials": 48}
QUICK = {"workloads": ["ew_chain_4M", "tiny_graph", "bias_gelu_res_ln", "mlp"], "tuned": [],
         "sweep": {}, "batch": {"ew_chain_4M": 1}, "rounds": 5, "block_s": 0.05, "max_s": 10.0, "trials": 0}
DRY = {"workloads": ["ew_chain_1k", "mlp"], "tuned": [], "sweep": {"mlp": [1, 2]},
       "rounds": 2, "block_s": 0.01, "max_s": 2.0, "trials": 0}


def inductor_arms(model, device: str, dry_run: bool) -> dict:
    """torch.compile arms (explicit dynamic=False; reduce-overhead = CUDA graphs on a GPU)."""
    arms = {"inductor": torch.compile(model, dynamic=False)}
    if device == "cuda" or dry_run:
        arms["inductor_ro"] = torch.compile(model, dynamic=False, mode="reduce-overhead")
    return arms


def measure(name: str, batch: int | None, cfg: dict, args, tvm_mode: str) -> dict:
    """One workload at one batch size: all arms, numerics checked, alternating-block timing."""
    w = WORKLOADS[name]
    torch._dynamo.reset()
    model, inputs = build(name, batch, seed=args.seed, device=args.device)
    sync = timing.synchronizer(args.device)
    ref = model(*inputs)
    rec = {"workload": name, "kind": w.kind, "description": w.description,
           "batch": batch or w.default_batch, "input_shapes": [list(t.shape) for t in inputs],
           "first_call_s": {}, "compile_s": {}, "check": {}, "skipped": {}}
    arms = {"eager": lambda: model(*inputs)}
    for arm, compiled in inductor_arms(model, args.device, args.dry_run).items():
        rec["cache_dir_" + arm] = timing.fresh_cache_dir(f"e1-{name}-{arm}")  # fresh cache per arm
        first, out = timing.timed(lambda c=compiled: c(*inputs), sync)
        rec["first_call_s"][arm] = first
        rec["check"][arm] = timing.compare(out, ref, w.rtol, w.atol)
        arms[arm] = lambda c=compiled: c(*inputs)
    if tvm_mode != "none":
        reason = tvm_arm.unavailable(args.device)
        if reason:
            rec["skipped"]["tvm_untuned"] = rec["skipped"]["tvm_tuned"] = reason
        else:
            rm = tvm_arm.compile_relax(model, inputs)
            rec["compile_s"]["tvm_untuned"] = rm.compile_s
            rec["check"]["tvm_untuned"] = timing.compare(rm(*inputs), ref, w.rtol, w.atol)
            arms["tvm_untuned"] = rm.bind(inputs)
    if tvm_mode == "all" and "tvm_tuned" not in rec["skipped"]:
        api, reason = tvm_arm.tuning_api()
        if reason:
            rec["skipped"]["tvm_tuned"] = reason
        else:
            work_dir = timing.REPO / "runs" / "survey-tvm" / f"e1-{name}-b{rec['batch']}-t{cfg['trials']}"
            tm = api.tune_torch(model, inputs, target="llvm", trials=cfg["trials"], work_dir=str(work_dir),
                                seed=args.seed, num_threads=args.threads)
            rec["compile_s"]["tvm_tuned"] = tm.tuning_seconds + tm.compile_seconds
            rec["tuning"] = {"trials": cfg["trials"], "tuning_s": tm.tuning_seconds,
                             "compile_s": tm.compile_seconds, "work_dir": str(tm.work_dir)}
            arm = tvm_arm.TorchCallableArm(tm, inputs)
            rec["tuning"]["kernel_s"] = arm.kernel_s()
            rec["check"]["tvm_tuned"] = timing.compare(arm(*inputs), ref, w.rtol, w.atol)
            arms["tvm_tuned"] = arm.bind()
    rec["timing"] = timing.alternate(arms, baseline="eager", rounds=cfg["rounds"], block_s=cfg["block_s"],
                                     max_s=cfg["max_s"], sync=sync)
    speed = {a: round(r["median"], 3) for a, r in rec["timing"]["ratio"].items() if a != "eager"}
    log.info("%s b=%s speedup vs eager %s load %s", name, rec["batch"], speed, rec["timing"]["loadavg"])
    return rec


def merge(previous: dict, new: dict) -> dict:
    """`new`'s records replace same (workload, batch) records of `previous`; the rest are kept in order."""
    merged = dict(new, merged_into=previous.get("started"), header_of_merged_run={
        k: previous.get(k) for k in ("started", "env", "config", "mode")})
    for key in ("workloads", "batch_sweep"):
        fresh = {(r["workload"], r["batch"]): r for r in new[key]}
        kept = [fresh.pop((r["workload"], r["batch"]), r) for r in previous[key]]
        merged[key] = kept + list(fresh.values())
    names = {c["what"] for c in new["checks"]}
    merged["checks"] = [c for c in previous["checks"] if c["what"] not in names] + new["checks"]
    return merged


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__.splitlines()[0])
    p.add_argument("--workloads", help=f"comma list; valid: {','.join(WORKLOADS)}")
    p.add_argument("--tvm", choices=("none", "untuned", "all"), default="all",
                   help="TVM arms: none, untuned only, or untuned + tuned (autotune.api) for --tuned")
    p.add_argument("--tuned", help="comma list of workloads for the tuned TVM arm")
    p.add_argument("--trials", type=int, help="MetaSchedule trials per tuned workload")
    p.add_argument("--no-sweep", action="store_true", help="skip the batch-size sweep")
    p.add_argument("--sweep-batches", help="comma list of batch sizes for the sweep workloads")
    p.add_argument("--merge", action="store_true",
                   help="update the measured workloads inside an existing output JSON, keep the others")
    args = p.parse_args(argv)
    cfg = dict(DRY if args.dry_run else QUICK if args.quick else FULL)
    for key in ("rounds", "block_s", "trials"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    for key in ("workloads", "tuned"):
        if getattr(args, key):
            cfg[key] = getattr(args, key).split(",")
    unknown = [n for n in cfg["workloads"] + cfg["tuned"] if n not in WORKLOADS]
    if unknown:
        p.error(f"unknown workloads {unknown}; valid: {', '.join(WORKLOADS)}")
    header = cli.setup(args)
    checks = cli.Checks()
    results, sweep = [], []
    out = cli.out_path(args, "e1")

    previous = timing.read_json(out) if args.merge and out.exists() else None

    def save(complete: bool) -> None:  # after every workload: a killed run keeps what it measured
        payload = {"experiment": "E1 graph optimization", **header, "config": cfg, "complete": complete,
                   "workloads": results, "batch_sweep": sweep, "checks": checks.items, "loadavg_end": timing.loadavg()}
        timing.write_json(out, merge(previous, payload) if previous else payload)

    for name in cfg["workloads"]:
        mode = args.tvm if args.tvm != "all" or name in cfg["tuned"] else "untuned"
        results.append(measure(name, cfg.get("batch", {}).get(name), cfg, args, mode))
        save(False)
    batches = [int(b) for b in args.sweep_batches.split(",")] if args.sweep_batches else None
    for name, default in ({} if args.no_sweep else cfg["sweep"]).items():
        for b in batches or default:
            sweep.append(measure(name, b, cfg, args, "none"))
            save(False)
    for rec in results + sweep:
        for arm, c in rec["check"].items():
            checks.expect(c["ok"], f"{rec['workload']} b={rec['batch']} {arm} matches eager", c)
    chain = [] if args.dry_run else [r for r in results if r["workload"] == "ew_chain_4M"]
    for rec in chain:  # the bandwidth-bound chain; at 1k elements Python call overhead decides
        ratio = rec["timing"]["ratio"]["inductor"]["median"]
        checks.expect(ratio > 1.0, f"{rec['workload']}: Inductor faster than eager", round(ratio, 3))
    save(True)
    log.info("wrote %s", out)
    return checks.finish(args.check)

if __name__ == "__main__":
    sys.exit(main())
