"""E3 dynamic shapes: a stream of N distinct shapes, static (one graph per shape) vs dynamic (one graph).

    python -m experiments.survey.e3_dynamic_shapes            # full run -> results/e3_cpu.json
    python -m experiments.survey.e3_dynamic_shapes --quick --check

Model: pre-LN FFN block (workloads.FFNBlock), input (batch, seq, hidden); seq takes N distinct values
(seeded, shuffled, never 0/1 or equal to batch). Each shape is called `calls` times as it arrives.
Cumulative cost = wall time of the stream incl. compiles; the value at N is the stream's first N
shapes. Inductor: static = torch.compile(dynamic=False) with recompile limits raised, dynamic =
dynamic=True; graphs counted by a counting backend wrapper and by dynamo's unique_graphs; fresh
TORCHINDUCTOR_CACHE_DIR per arm; one fresh process per repeat (arm order swapped between repeats),
Inductor's one-time init paid before the clock starts (reported). Steady state: per shape, the
dynamic/static latency ratio from alternating blocks (>1: dynamic slower).
TVM: Relax with a symbolic seq (torch.export.Dim) compiled once vs export+compile per shape.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time

import numpy as np
import torch

from . import cli, timing, tvm_arm
from .workloads import FFNBlock

log = logging.getLogger("survey.e3")

FULL = {"n": 24, "report_n": [5, 10, 24], "hidden": 256, "ffn": 1024, "batch": 4, "calls": 10,
        "repeats": 5, "rounds": 5, "block_s": 0.05, "tvm_n": 24, "tvm_calls": 2, "tvm_steady_every": 4,
        "seq_range": [8, 256]}
QUICK = dict(FULL, n=5, report_n=[5], repeats=1, rounds=3, tvm_n=5, tvm_steady_every=5, seq_range=[8, 96])
DRY = dict(FULL, n=3, report_n=[3], hidden=64, ffn=128, calls=2, repeats=1, rounds=2, block_s=0.01,
           tvm_n=3, tvm_steady_every=3, seq_range=[8, 32])
MARK = "E3CHILD "


def seq_list(cfg: dict, seed: int) -> list[int]:
    lo, hi = cfg["seq_range"]
    candidates = [s for s in range(max(lo, 2), hi + 1) if s != cfg["batch"]]
    return [int(s) for s in np.random.default_rng(seed).choice(candidates, size=cfg["n"], replace=False)]


class CountingBackend:
    """Inductor, counting completed compiles (a restarted analysis raises and is not counted)."""

    def __init__(self) -> None:
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        out = compile_fx(gm, example_inputs)
        self.compiles += 1
        return out


def stream(fn, xs: list[torch.Tensor], calls: int, sync, compiles=lambda: 0) -> list[dict]:
    """Each shape arrives and is called `calls` times; first call (incl. any compile) timed apart."""
    rows = []
    for x in xs:
        first, _ = timing.timed(lambda x=x: fn(x), sync)
        rest, _ = timing.timed(lambda x=x: [fn(x) for _ in range(calls - 1)], sync)
        rows.append({"seq": int(x.shape[1]), "first_s": first, "rest_s": rest, "total_s": first + rest,
                     "compiles_so_far": compiles()})
    return rows


def child(args, cfg: dict) -> int:
    """One repeat in one fresh process: eager, static and dynamic streams, then steady state."""
    from torch._dynamo.utils import counters

    timing.configure(args.threads, args.device)
    sync = timing.synchronizer(args.device)
    torch.manual_seed(args.seed)
    model = FFNBlock(cfg["hidden"], cfg["ffn"]).eval().to(args.device)
    g = torch.Generator().manual_seed(args.seed)
    xs = [torch.randn(cfg["batch"], s, cfg["hidden"], generator=g).to(args.device) for s in seq_list(cfg, args.seed)]
    refs = [model(x) for x in xs]
    x0 = torch.randn(16, device=args.device)
    init_s, _ = timing.timed(lambda: torch.compile(lambda t: t.sin() + 1, dynamic=False)(x0), sync)
    rec = {"order": args.child_order.split(","), "framework_init_s": init_s, "arms": {},
           "eager": stream(model, xs, cfg["calls"], sync)}
    compiled = {}
    for arm in rec["order"]:
        cache = timing.fresh_cache_dir(f"e3-{arm}")
        backend = CountingBackend()
        before = counters["stats"]["unique_graphs"]
        fn = torch.compile(model, backend=backend, dynamic=(arm == "dynamic"))
        rows = stream(fn, xs, cfg["calls"], sync, compiles=lambda b=backend: b.compiles)
        for row, x, ref in zip(rows, xs, refs, strict=True):
            row["check"] = timing.compare(fn(x), ref, 1e-4, 1e-4)
        compiled[arm] = fn
        rec["arms"][arm] = {"rows": rows, "backend_compiles": backend.compiles, "cache_dir": cache,
                            "dynamo_unique_graphs": counters["stats"]["unique_graphs"] - before,
                            "cache_hits": counters["inductor"].get("fxgraph_cache_hit", 0)}
    steady = []
    for x in xs:
        res = timing.alternate({"dynamic": lambda x=x: compiled["dynamic"](x),
                                "static": lambda x=x: compiled["static"](x), "eager": lambda x=x: model(x)},
                               baseline="dynamic", rounds=cfg["rounds"], block_s=cfg["block_s"], sync=sync)
        steady.append({"seq": int(x.shape[1]), "dyn_over_static": res["ratio"]["static"]["median"],
                       "t": {a: r["median"] for a, r in res["per_call_s"].items()}, "loadavg": res["loadavg"]})
    rec["steady"] = steady
    print(MARK + json.dumps(timing.json_safe(rec)), flush=True)
    return 0


def spawn(args, order: str) -> dict:
    cmd = ["--child-order", order, "--device", args.device, "--threads", str(args.threads), "--seed", str(args.seed),
           "--config-json", json.dumps(args.cfg)]
    return timing.child_result("experiments.survey.e3_dynamic_shapes", cmd, MARK, timeout=1800)


def cumulative(rows: list[dict]) -> list[float]:
    return [float(v) for v in np.cumsum([r["total_s"] for r in rows])]


def summarize(cum: dict[str, list[float]], report_n: list[int], graphs: dict | None = None) -> list[dict]:
    """Reduction of cumulative cost, dynamic vs static, at each reported N."""
    return [{"n": n, "static_s": cum["static"][n - 1], "dynamic_s": cum["dynamic"][n - 1],
             "graphs": {a: graphs[a][n - 1] for a in graphs} if graphs else None,
             "eager_s": cum["eager"][n - 1] if "eager" in cum else None,
             "reduction": 1 - cum["dynamic"][n - 1] / cum["static"][n - 1]} for n in report_n]


def inductor_part(args, cfg: dict, checks: cli.Checks) -> dict:
    repeats = []
    for r in range(cfg["repeats"]):
        repeats.append(spawn(args, "static,dynamic" if r % 2 == 0 else "dynamic,static"))
    n = cfg["n"]
    for rep in repeats:
        arms = rep["arms"]
        checks.expect(arms["static"]["backend_compiles"] == n and arms["static"]["dynamo_unique_graphs"] == n,
                      f"E3 static mode compiled one graph per shape ({n})",
                      (arms["static"]["backend_compiles"], arms["static"]["dynamo_unique_graphs"]))
        checks.expect(arms["dynamic"]["backend_compiles"] == 1 and arms["dynamic"]["dynamo_unique_graphs"] == 1,
                      "E3 dynamic mode compiled one graph",
                      (arms["dynamic"]["backend_compiles"], arms["dynamic"]["dynamo_unique_graphs"]))
        bad = [(a, row["seq"]) for a in arms for row in arms[a]["rows"] if not row["check"]["ok"]]
        checks.expect(not bad, "E3 compiled outputs match eager (rtol 1e-4, atol 1e-4)", bad)
    cum = {a: [statistics.median(c) for c in zip(*[cumulative(rep["arms"][a]["rows"]) for rep in repeats],
                                                  strict=True)] for a in ("static", "dynamic")}
    cum["eager"] = [statistics.median(c) for c in zip(*[cumulative(rep["eager"]) for rep in repeats], strict=True)]
    ratios = [s["dyn_over_static"] for rep in repeats for s in rep["steady"]]
    graphs = {a: [r["compiles_so_far"] for r in repeats[0]["arms"][a]["rows"]] for a in ("static", "dynamic")}
    out = {"repeats": repeats, "cumulative_s": cum, "summary": summarize(cum, cfg["report_n"], graphs),
           "steady_dyn_over_static": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
           "framework_init_s": [rep["framework_init_s"] for rep in repeats]}
    for s in out["summary"]:
        log.info("Inductor N=%d static %.2fs dynamic %.2fs reduction %.0f%%", s["n"], s["static_s"],
                 s["dynamic_s"], 100 * s["reduction"])
    log.info("steady dynamic/static median %.3f", out["steady_dyn_over_static"]["median"])
    return out


def tvm_part(args, cfg: dict, checks: cli.Checks) -> dict:
    reason = tvm_arm.unavailable(args.device)
    if reason:
        return {"skipped": reason}
    torch.manual_seed(args.seed)
    model = FFNBlock(cfg["hidden"], cfg["ffn"]).eval()
    g = torch.Generator().manual_seed(args.seed)
    xs = [torch.randn(cfg["batch"], s, cfg["hidden"], generator=g) for s in seq_list(cfg, args.seed)][: cfg["tvm_n"]]
    refs = [model(x) for x in xs]
    calls = cfg["tvm_calls"]
    rows = {"static": [], "dynamic": []}
    dyn, t0 = None, time.perf_counter()
    for x in xs:  # dynamic arm: compiled once, on the first shape's arrival
        t = time.perf_counter()
        if dyn is None:
            seq = torch.export.Dim("seq", min=2, max=max(cfg["seq_range"][1], 16))
            dyn = tvm_arm.compile_relax(model, (x,), dynamic_shapes={"x": {1: seq}})
        compile_s = time.perf_counter() - t
        run, _ = timing.timed(lambda x=x, dyn=dyn: [dyn(x) for _ in range(calls)], lambda: None)
        rows["dynamic"].append({"seq": int(x.shape[1]), "compile_s": compile_s, "run_s": run, "total_s": compile_s + run})
    statics = []
    for x in xs:  # static arm: export + compile bound to each shape
        rm = tvm_arm.compile_relax(model, (x,))
        run, _ = timing.timed(lambda x=x, rm=rm: [rm(x) for _ in range(calls)], lambda: None)
        rows["static"].append({"seq": int(x.shape[1]), "compile_s": rm.compile_s, "run_s": run,
                               "total_s": rm.compile_s + run})
        statics.append(rm)
    bad = [int(x.shape[1]) for x, ref, rm in zip(xs, refs, statics, strict=True)
           if not (timing.compare(rm(x), ref, 1e-4, 1e-4)["ok"] and timing.compare(dyn(x), ref, 1e-4, 1e-4)["ok"])]
    checks.expect(not bad, "E3 TVM static and symbolic outputs match eager", bad)
    steady = []
    for i in range(0, len(xs), cfg["tvm_steady_every"]):
        res = timing.alternate({"dynamic": dyn.bind((xs[i],)), "static": statics[i].bind((xs[i],))},
                               baseline="dynamic", rounds=cfg["rounds"], block_s=cfg["block_s"], max_s=20)
        steady.append({"seq": int(xs[i].shape[1]), "dyn_over_static": res["ratio"]["static"]["median"],
                       "t": {a: r["median"] for a, r in res["per_call_s"].items()}, "loadavg": res["loadavg"]})
    cum = {a: cumulative(r) for a, r in rows.items()}
    report_n = [n for n in cfg["report_n"] if n <= len(xs)]
    out = {"rows": rows, "cumulative_s": cum, "summary": summarize(cum, report_n), "steady": steady,
           "steady_dyn_over_static": {"median": statistics.median(s["dyn_over_static"] for s in steady)},
           "compiles": {"static": len(statics), "dynamic": 1}, "calls_per_shape": calls,
           "wall_s": time.perf_counter() - t0, "loadavg": timing.loadavg()}
    for s in out["summary"]:
        log.info("TVM N=%d static %.2fs dynamic %.2fs reduction %.0f%%", s["n"], s["static_s"], s["dynamic_s"],
                 100 * s["reduction"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__.splitlines()[0])
    p.add_argument("--shapes", type=int, help="number of distinct shapes N (default 24; quick 5)")
    p.add_argument("--repeats", type=int, help="fresh-process repeats per measurement")
    p.add_argument("--tvm", choices=("none", "untuned"), default="untuned")
    p.add_argument("--child-order", help=argparse.SUPPRESS)
    p.add_argument("--config-json", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_order:
        return child(args, json.loads(args.config_json))
    cfg = dict(DRY if args.dry_run else QUICK if args.quick else FULL)
    for key in ("rounds", "block_s", "repeats"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.shapes:
        if args.shapes < 2:
            p.error("--shapes must be >= 2")
        cfg.update(n=args.shapes, tvm_n=min(cfg["tvm_n"], args.shapes),
                   report_n=sorted({n for n in cfg["report_n"] if n < args.shapes} | {args.shapes}))
    args.cfg = cfg
    header = cli.setup(args)
    checks = cli.Checks()
    ind = inductor_part(args, cfg, checks)
    if not args.dry_run:
        last = ind["summary"][-1]
        checks.expect(last["reduction"] > 0, f"E3 dynamic cuts cumulative cost at N={last['n']}",
                      round(last["reduction"], 3))
    tvm = tvm_part(args, cfg, checks) if args.tvm != "none" else {"skipped": "--tvm none"}
    payload = {"experiment": "E3 dynamic shapes", **header, "config": cfg, "seqs": seq_list(cfg, args.seed),
               "inductor": ind, "tvm": tvm, "checks": checks.items, "loadavg_end": timing.loadavg()}
    log.info("wrote %s", timing.write_json(cli.out_path(args, "e3"), payload))
    return checks.finish(args.check)


if __name__ == "__main__":
    sys.exit(main())
