"""Tuned TVM models against what a CPU user would pick instead: torch eager, ``torch.compile`` (Inductor, default
mode), frozen ``torch.compile`` (weight freezing, channels_last for CNNs) and ONNX Runtime (``_peers.py``).

    python benchmarks/vs_pytorch.py WORK_DIR [WORK_DIR ...] [--rounds 10] [--out benchmarks/results/vs_pytorch_<hw>]
    python benchmarks/vs_pytorch.py experiments/tuning_efficiency/results_real --arm auto --seed 0

Each WORK_DIR is a tuning work dir (its report.json names the model and seed; a folder of real-budget
results is searched for ``<model>/<arm>/seed<k>`` work dirs under runs/tuning_real/<this hardware id>). Per model, in one
process: the TVM build from the work dir's database, torch eager, and ``torch.compile`` are checked
against eager outputs, then timed in alternating rounds (every arm once per round, the fastest round read),
all with the target's threads. Also a per-task table: which tasks the tuned model spends its time in
(weight x best measured latency, from the database) and their GFLOP/s. Writes OUT.json and OUT.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _peers import frozen_compile, onnxruntime_session  # noqa: E402  (beside this file)

from autotune.cli import loadavg, versions, write_json  # noqa: E402
from autotune.timing import seconds_per_call  # noqa: E402

# peers beside torch eager and default torch.compile: name -> build(eager, inputs, threads) -> (run, out, build s)
PEERS = {"torch_compile_frozen": lambda eager, inputs, threads: frozen_compile(eager, inputs),
         "onnxruntime": onnxruntime_session}


def _seconds_per_call(fn, min_s: float = 0.2) -> float:
    return seconds_per_call(fn, min_s, warmup=1)


def machine_roofline(cores: int) -> dict:
    """This CPU's practical ceilings, measured: GEMM GFLOP/s (torch.mm 1024^3 fp32, best of 5) and copy
    bandwidth (torch copy of 256 MiB, best of 5: read + write bytes), with ``cores`` threads."""
    import torch

    torch.set_num_threads(cores)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    gemm = []
    for _ in range(5):
        t = _seconds_per_call(lambda: torch.mm(a, b), 0.3)
        gemm.append(2 * 1024**3 / t / 1e9)
    src, dst = torch.ones(64 * 1024 * 1024), torch.empty(64 * 1024 * 1024)
    bw = []
    for _ in range(5):
        t = _seconds_per_call(lambda: dst.copy_(src), 0.3)
        bw.append(2 * src.numel() * 4 / t / 1e9)
    return {"gemm_gflops": max(gemm), "copy_gb_s": max(bw), "threads": cores,
            "how": "torch.mm 1024^3 fp32 and a 256 MiB torch copy, best of 5 each"}


def task_bytes(tasks) -> dict[str, int]:
    """Each task's compulsory traffic: the bytes of its PrimFunc's arguments (read once, written once)."""
    import tvm

    out = {}
    for t in tasks:
        func = t.mod["main"]
        buffers = getattr(func, "buffer_map", None)  # TVM 0.27's tirx: the params carry shape and dtype
        total = 0
        for buf in (buffers.values() if buffers is not None else func.params):
            if getattr(buf, "shape", None) is None:
                continue
            n = 1
            for d in buf.shape:
                n *= int(d)
            total += n * tvm.DataType(str(buf.dtype)).bits // 8
        out[t.name] = total
    return out


def _flat(out) -> list[np.ndarray]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    if isinstance(out, np.ndarray):
        return [out]
    return [x for item in out for x in _flat(item)]


def _max_err(out, ref) -> float:
    a, b = _flat(out), _flat(ref)
    if len(a) != len(b):
        return float("inf")
    return max(float(np.max(np.abs(x.astype(np.float64) - y))) for x, y in zip(a, b))


def bench_model(work_dirs: list[str], rounds: int, roofline: dict | None = None) -> list[dict]:
    """Work dirs of one model (one row each): every TVM build, torch eager and torch.compile timed in the
    same alternating rounds, so the TVM builds compare with each other and with torch under the same load."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import torch
    from tvm.s_tir import meta_schedule as ms

    from autotune.frontend import relax as fe
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import hardware_id, parse_target, target_json

    reports = []
    for wd in work_dirs:
        with open(os.path.join(wd, "report.json"), encoding="utf-8") as f:
            reports.append(json.load(f))
    if len({(r["model"], int(r.get("seed") or 0)) for r in reports}) != 1:
        raise ValueError(f"one model and seed per group, got {[(r['model'], r.get('seed')) for r in reports]}")
    report = reports[0]
    target = parse_target("llvm")
    cores = int(target_json(target).get("num-cores", 1))
    os.environ["TVM_NUM_THREADS"] = str(cores)
    torch.set_num_threads(cores)
    model = load_model(report["model"], seed=int(report.get("seed") or 0))
    inputs = model.inputs
    eager = model.eager_module()
    with torch.no_grad():
        ref = eager(*inputs)
    mod, params = fe.import_exported(model.exported)
    mod = fe.bind_and_simplify(mod, params)
    nbytes, extracted = {}, {}  # by task name: extraction with the layout-free mark names tasks differently
    for rewrite, layout in sorted({(bool(r.get("layout_rewrite", False)), r.get("conv_layout") or "nchw")
                                   for r in reports}):
        extracted[rewrite, layout] = fe.extract_tasks(fe.convert_conv_layout(mod, layout), target, layout_rewrite=rewrite)
        nbytes |= task_bytes(extracted[rewrite, layout])
    runs, compile_s, errors = [], [], []
    for wd in work_dirs:
        db = ms.database.JSONDatabase(work_dir=wd)
        t0 = time.time()
        runs.append(fe.VMRunner(fe.compile_with_database(mod, target, db)))  # layout rewrite, conv layout: as db was tuned
        compile_s.append(time.time() - t0)
        errors.append(_max_err(runs[-1](*inputs), ref))
    t0 = time.time()
    compiled = torch.compile(eager)  # Inductor, default mode
    with torch.no_grad():
        out_compiled = compiled(*inputs)
    inductor_compile_s = time.time() - t0
    compile_err = _max_err(out_compiled, ref)

    def call_torch(m):
        def run():
            with torch.no_grad():
                m(*inputs)
        return run

    def call_tvm(run):
        return lambda: run.time(inputs, repeat=1, min_repeat_ms=200)[0]

    arms = {f"tvm{i}": call_tvm(r) for i, r in enumerate(runs)}
    arms |= {"torch_eager": lambda: _seconds_per_call(call_torch(eager)),
             "torch_compile": lambda: _seconds_per_call(call_torch(compiled))}
    peer_err, peer_build = {"torch_compile": compile_err}, {"torch_compile": inductor_compile_s}
    for name, build in PEERS.items():  # the strongest peers a CPU user would pick, timed in the same rounds
        run, out, build_s = build(eager, inputs, cores)
        arms[name] = lambda run=run: _seconds_per_call(run)
        peer_err[name], peer_build[name] = _max_err(out, ref), build_s
    samples: dict[str, list[float]] = {k: [] for k in arms}
    load_before = loadavg()
    for _ in range(rounds):
        for name, fn in arms.items():
            time.sleep(0.3)
            samples[name].append(fn() * 1e3)
    # the fastest round, as the tuning harness reads a sitting (interference on this VM only adds time)
    med = {k: min(v) for k, v in samples.items()}
    medians = {k: statistics.median(v) for k, v in samples.items()}
    load_after = loadavg()
    profiles = [r.profile(inputs, runs=3) for r in runs]  # after the timing: the hook's overhead stays out of it
    rows = []
    for i, (wd, rep) in enumerate(zip(work_dirs, reports)):
        lat = {"tvm_tuned": med[f"tvm{i}"], **{k: med[k] for k in ("torch_eager", "torch_compile", *PEERS)}}
        best_peer = min((k for k in lat if k != "tvm_tuned"), key=lambda k: lat[k])
        rows.append({
            "model": rep["model"], "work_dir": os.path.relpath(wd, ROOT), "seed": rep.get("seed"),
            "arm": rep.get("arm") or rep.get("cost_model_used") or rep.get("cost_model"),
            "layout_rewrite": bool(rep.get("layout_rewrite", False)),
            "conv_layout": rep.get("conv_layout") or "nchw",
            "trials": len(ms.database.JSONDatabase(work_dir=wd).get_all_tuning_records()),
            "hardware_id": hardware_id(target), "threads": cores, "rounds": rounds,
            "timed_with": [os.path.relpath(w, ROOT) for w in work_dirs],
            "latency_ms": lat, "statistic": "fastest round",
            "latency_ms_median": {"tvm_tuned": medians[f"tvm{i}"], **{k: medians[k] for k in lat if k != "tvm_tuned"}},
            "latency_ms_rounds": {"tvm_tuned": samples[f"tvm{i}"], **{k: samples[k] for k in lat if k != "tvm_tuned"}},
            "max_abs_error_vs_eager": {"tvm_tuned": errors[i], **peer_err},
            "compile_s": {"tvm": compile_s[i], "inductor_first_call": inductor_compile_s, **peer_build},
            "best_peer": best_peer, "tvm_vs_best_peer": lat[best_peer] / lat["tvm_tuned"],
            "tvm_vs_eager": lat["torch_eager"] / lat["tvm_tuned"], "tvm_vs_compile": lat["torch_compile"] / lat["tvm_tuned"],
            "tasks": task_profile(rep if rep.get("tasks") else
                                  {"tasks": db_tasks(wd, extracted[bool(rep.get("layout_rewrite", False)),
                                                                  rep.get("conv_layout") or "nchw"])},
                                  nbytes, roofline),
            "tasks_from": "report" if rep.get("tasks") else "database",
            "compiled_profile": profiles[i], "loadavg_before": load_before, "loadavg_after": load_after,
        })
    return rows


def db_tasks(work_dir: str, tasks) -> list[dict]:
    """Task rows (as a report's "tasks") read off a work dir's database: each extracted task's best measured
    latency there. For databases written by stock MetaSchedule (its report has no task table); a task its
    tuning extracted differently has no record and no row."""
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=work_dir)
    rows = []
    for t in tasks:
        rec = db.query_tuning_record(t.mod, t.target, t.name)
        secs = [float(x) for x in (rec.run_secs or [])] if rec is not None else []
        if secs:
            rows.append({"name": t.name, "weight": t.weight, "flops": t.flops,
                         "best_latency_ms": float(np.mean(secs)) * 1e3})
    return rows


def task_profile(report: dict, nbytes: dict | None = None, roofline: dict | None = None) -> list[dict]:
    """Where the tuned model's time goes by the database's best latencies (weight x best), heaviest first,
    and how far each task is from its roofline: min(GEMM peak, arithmetic intensity x copy bandwidth)."""
    rows = []
    for t in report.get("tasks") or []:
        best = t.get("best_latency_ms")
        if best is None:
            continue
        row = {"name": t["name"], "weight": t["weight"], "best_ms": best, "total_ms": best * t["weight"],
               "gflops": (t["flops"] / (best * 1e-3) / 1e9) if t.get("flops") else None}
        b = (nbytes or {}).get(t["name"])
        if roofline and b:
            ai = (t.get("flops") or 0.0) / b
            bound = min(roofline["gemm_gflops"], ai * roofline["copy_gb_s"]) if ai else None
            # a task with no FLOPs (copies, reshapes) is bandwidth-bound: its floor is bytes / bandwidth
            floor_ms = (t["flops"] / bound / 1e6) if bound else b / roofline["copy_gb_s"] / 1e6
            row |= {"bytes": b, "intensity": ai, "roofline_gflops": bound, "roofline_ms": floor_ms,
                    "of_roofline": floor_ms / best}
        rows.append(row)
    total = sum(r["total_ms"] for r in rows) or 1.0
    for r in rows:
        r["share"] = r["total_ms"] / total
    return sorted(rows, key=lambda r: -r["total_ms"])


def find_work_dirs(paths: list[str], arm: str, seed: int, hw: str) -> list[str]:
    out = []
    for p in paths:
        if os.path.exists(os.path.join(p, "report.json")) and os.path.exists(os.path.join(p, "database_tuning_record.json")):
            out.append(p)
            continue
        runs = os.path.join(ROOT, "runs", "tuning_real", hw)  # real_budget.py files work dirs by hardware
        for model in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
            wd = os.path.join(runs, model, arm, f"seed{seed}")
            if os.path.exists(os.path.join(wd, "report.json")):
                out.append(wd)
    return out


def _groups(work_dirs: list[str]) -> list[list[str]]:
    """Work dirs grouped by (model, seed), in first-seen order: each group is timed together."""
    groups: dict = {}
    for wd in work_dirs:
        with open(os.path.join(wd, "report.json"), encoding="utf-8") as f:
            rep = json.load(f)
        groups.setdefault((rep["model"], rep.get("seed")), []).append(wd)
    return list(groups.values())


def _roofline_line(roof: dict | None) -> str:
    if not roof:
        return "Roofline: not measured."
    return (f"This CPU, measured ({roof['how']}, {roof['threads']} threads): GEMM {roof['gemm_gflops']:.0f} GFLOP/s, "
            f"copy {roof['copy_gb_s']:.1f} GB/s.")


def markdown(results: dict) -> str:
    lines = ["# Tuned TVM models against the peers a CPU user would pick (this CPU, batch 1)", "",
             f"Command: `{results['command']}`; host {results['host']}; {results['versions']}.", "",
             _roofline_line(results.get("roofline")), "",
             "| model | work dir (arm, trials, layout rewrite, conv layout) | TVM tuned (ms) | torch eager (ms) | torch.compile (ms) | "
             "torch.compile, frozen (ms) | ONNX Runtime (ms) | TVM vs best peer | TVM vs eager | max abs err vs eager "
             "(TVM / compile / frozen / ORT) | load before / after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["models"]:
        if "failed" in r:
            lines.append(f"| {r['work_dir']} | failed: {r['failed']} |")
            continue
        lat, e = r["latency_ms"], r["max_abs_error_vs_eager"]
        ms = lambda k, lat=lat: f"{lat[k]:.2f}" if k in lat else "-"  # noqa: E731  (files from before the peers)
        err = " / ".join(f"{e[k]:.2g}" if k in e else "-" for k in ("tvm_tuned", "torch_compile", *PEERS))
        vs_best = f"{r['tvm_vs_best_peer']:.2f}x ({r['best_peer']})" if "best_peer" in r else "-"
        lines.append(f"| {r['model']} | {r['work_dir']} ({r['arm']}, {r['trials']}, {'on' if r.get('layout_rewrite') else 'off'}, {r.get('conv_layout', 'nchw')}) | {lat['tvm_tuned']:.2f} | "
                     f"{ms('torch_eager')} | {ms('torch_compile')} | {ms('torch_compile_frozen')} | {ms('onnxruntime')} | "
                     f"{vs_best} | {r['tvm_vs_eager']:.2f}x | {err} | {r['loadavg_before']} / {r['loadavg_after']} |")
    lines += ["", "Ratios > 1: TVM is faster. The fastest of the alternating rounds in one process (medians in the "
              "JSON), same threads for every arm; the work dirs of one model and seed are timed in the same rounds "
              "(one timing of each peer shared by their rows). torch.compile frozen: Inductor with "
              "`freezing=True`, channels_last for CNNs; ONNX Runtime: `torch.onnx.export(dynamo=True)`, CPU "
              "execution provider, `ORT_ENABLE_ALL`, intra-op threads = the target's cores.", ""]
    for r in results["models"]:
        if "failed" in r:
            continue
        lines += [f"## {r['model']} ({r['work_dir']}): where the tuned model's time goes", "",
                  "Database best latencies, as measured while tuning (a database tuned before the vectorizable "
                  "erf, autotune/tvmrt/fastmath.py 2026-12-03, holds GELU times with libm's scalar erff). "
                  "Roofline: min(measured GEMM peak, arithmetic intensity x measured copy bandwidth), intensity = "
                  "FLOPs / bytes of the task's arguments; 'of roofline' = the roofline's time / the best time.", "",
                  "| task | weight | best (ms) | weight x best (ms) | share | GFLOP/s | FLOP/byte | roofline (ms) | "
                  "of roofline |", "|---|---|---|---|---|---|---|---|---|"]
        for t in r["tasks"][:12]:
            gf = "-" if t["gflops"] is None else f"{t['gflops']:.1f}"
            ai = f"{t['intensity']:.1f}" if t.get("intensity") is not None else "-"
            floor = f"{t['roofline_ms']:.3f}" if t.get("roofline_ms") is not None else "-"
            frac = f"{t['of_roofline']:.0%}" if t.get("of_roofline") is not None else "-"
            lines.append(f"| {t['name']} | {t['weight']:g} | {t['best_ms']:.3f} | {t['total_ms']:.3f} | "
                         f"{t['share']:.1%} | {gf} | {ai} | {floor} | {frac} |")
        if r.get("tasks_from") == "database":
            lines.append("\n(Read off the database: stock MetaSchedule's report has no task table.)")
        lines += [""] + compiled_profile_lines(r)
    return "\n".join(lines)


def compiled_profile_lines(r: dict, top: int = 12) -> list[str]:
    """The compiled model's own time by VM call (VMRunner.profile) beside the database's estimate."""
    prof = r.get("compiled_profile")
    if not prof:
        return []
    calls = prof["calls"]
    db = {t["name"]: t["best_ms"] for t in r.get("tasks") or []}
    kernels = sum(c["ms"] for k, c in calls.items() if not k.startswith("vm.builtin."))
    builtins = sum(c["ms"] for k, c in calls.items() if k.startswith("vm.builtin."))
    est = sum(t["total_ms"] for t in r.get("tasks") or [])
    lines = [f"In the compiled model (VM instrument hook, {prof['total_ms']:.2f} ms per instrumented call vs "
             f"{r['latency_ms']['tvm_tuned']:.2f} ms timed): kernels {kernels:.2f} ms, VM builtins (allocation, "
             f"shape checks) {builtins:.2f} ms, the rest {prof['total_ms'] - kernels - builtins:.2f} ms; the database's "
             f"weight x best over its tasks: {est:.2f} ms. The hook costs every call some tens of microseconds "
             f"(Python), so small kernels read high here; the heavy ones are what it is for.", "",
             "| call | calls | in the model (ms) | share | database best x calls (ms) |", "|---|---|---|---|---|"]
    for name, c in list(calls.items())[:top]:
        task = name if name in db else name.removesuffix("_prepacked")  # layout rewrite: the kernel on packed weights
        ref = f"{db[task] * c['count']:.3f}" if task in db else "-"
        lines.append(f"| {name} | {c['count']:g} | {c['ms']:.3f} | {c['ms'] / prof['total_ms']:.1%} | {ref} |")
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="tuning work dirs, or a real-budget results folder")
    ap.add_argument("--arm", default="auto", help="with a results folder: which arm's work dirs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", default=None,
                    help="OUT.json / OUT.md (default: benchmarks/results/vs_pytorch_<this hardware id>)")
    args = ap.parse_args(argv)
    from autotune.tvmrt.target import detect_host, hardware_id, parse_target, target_json

    target = parse_target("llvm")
    hw = hardware_id(target)
    work_dirs = find_work_dirs(args.paths, args.arm, args.seed, hw)
    if not work_dirs:
        print(f"error: no tuning work dir (report.json + database) in {args.paths}", file=sys.stderr)
        return 2
    args.out = args.out or os.path.join(HERE, "results", f"vs_pytorch_{hw}")
    cores = int(target_json(target).get("num-cores", 1))
    results = {"command": " ".join(["python", "benchmarks/vs_pytorch.py", *(argv or sys.argv[1:])]),
               "host": detect_host().as_json(), "versions": versions(), "roofline": machine_roofline(cores),
               "models": []}
    for group in _groups(work_dirs):
        print(f"{time.strftime('%H:%M:%S')} {', '.join(group)}", flush=True)
        try:
            results["models"].extend(bench_model(group, args.rounds, results["roofline"]))
        except Exception as err:  # noqa: BLE001 - one model's failure is a row, the others still run
            results["models"].extend({"work_dir": wd, "failed": f"{type(err).__name__}: {err}"[:300]} for wd in group)
    write_json(args.out + ".json", results)
    with open(args.out + ".md", "w", encoding="utf-8") as f:
        f.write(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
