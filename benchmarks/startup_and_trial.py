"""Benchmarks of the tune loop itself (issue: tune a whole model end to end).

    python benchmarks/startup_and_trial.py [--quick] [--skip-models] [--stock-timeout 300]

1. GEMM 512^3, 128 trials: start-up to first measured candidate and per-trial wall time with
   its split, for autotune vs stock MetaSchedule (as shipped) vs stock with only the import fix.
   Arms run one after another in fresh processes on the same machine; load is recorded.
2. Whole models (resnet18, resnet50) at a fixed budget through ``python -m autotune.tune``:
   tuned vs untuned TVM vs torch eager, timed side by side in one process.
Writes benchmarks/results/tune_loop.json and benchmarks/results/tune_loop.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from autotune.cli import loadavg, versions, write_results  # noqa: E402


def _run(cmd: list[str], timeout: float) -> tuple[int, float]:
    t0 = time.time()
    try:
        rc = subprocess.run(cmd, cwd=ROOT, timeout=timeout, capture_output=True, text=True).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    return rc, time.time() - t0


def gemm_arm(script: str, trials: int, timeout: float, extra: list[str]) -> dict:
    tmp = tempfile.mkdtemp(prefix="bench_gemm_")
    out = os.path.join(tmp, "result.json")
    load_before = loadavg()
    rc, wall = _run([sys.executable, os.path.join(HERE, script), "--trials", str(trials),
                     "--work-dir", os.path.join(tmp, "wd"), "--out", out, *extra], timeout)
    if rc == 0 and os.path.exists(out):
        with open(out) as f:
            result = json.load(f)
    else:
        arm = "stock" if script == "_stock_gemm.py" and not extra else script
        result = {"arm": arm, "trials": trials, "failed": f"exit {rc} after {wall:.0f} s (timeout {timeout} s)"}
        # count whatever the stock run managed to measure before it was stopped
        rec = os.path.join(tmp, "wd", "database_tuning_record.json")
        if os.path.exists(rec):
            with open(rec) as f:
                rows = [json.loads(x) for x in f if x.strip()]
            result["valid_trials"] = sum(1 for r in rows if min(r[1][1]) < 1e9)
        else:
            result["valid_trials"] = 0
    result["process_wall_s"] = wall
    result["loadavg_before"], result["loadavg_after"] = load_before, loadavg()
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def tune_report(model: str, flags: list[str], timeout: float) -> tuple[dict | None, int, float]:
    """``python -m autotune.tune --model MODEL *flags`` in a fresh work dir: (its report or None, exit
    code, process wall seconds)."""
    tmp = tempfile.mkdtemp(prefix=f"bench_{model}_")
    rc, wall = _run([sys.executable, "-m", "autotune.tune", "--model", model, "--work-dir", tmp, *flags], timeout)
    path = os.path.join(tmp, "report.json")
    report = None
    if rc == 0 and os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    shutil.rmtree(tmp, ignore_errors=True)
    return report, rc, wall


def model_arm(model: str, trials: int) -> dict:
    report, rc, wall = tune_report(model, ["--trials", str(trials), "--bench-rounds", "5"], timeout=4 * 3600)
    if report is None:
        return {"model": model, "failed": f"exit {rc}"}
    keep = ("model", "trials", "latency_ms", "speedup", "numerics", "wall_s", "per_trial_s", "loadavg")
    return {k: report[k] for k in keep} | {"tasks": len(report["tasks"]), "process_wall_s": wall}


def startup_arm(model: str) -> dict:
    """Start-up of a real model: process start -> first measured candidate, model import included."""
    load_before = loadavg()
    report, rc, _ = tune_report(model, ["--trials", "16", "--skip-untuned", "--bench-rounds", "1"], timeout=1800)
    if report is None:
        return {"model": model, "failed": f"exit {rc}"}
    return {"model": model, "startup_to_first_measurement_s": report["wall_s"]["startup_to_first_measurement"],
            "import_and_extract_s": report["wall_s"]["import_and_extract"], "tasks": len(report["tasks"]),
            "loadavg_before": load_before, "loadavg_after": loadavg()}


def markdown(results: dict) -> str:
    lines = ["# Tune-loop benchmarks", "", f"Host: {results['host']}; versions: {results['versions']}", ""]
    lines += ["## GEMM 512^3 fp32, start-up and per-trial cost", "",
              "| arm | trials (valid) | start-up to 1st measurement (s) | per trial (s) | split (s) | best GFLOP/s | load before |",
              "|---|---|---|---|---|---|---|"]
    for r in results["gemm"]:
        split = r.get("split_s") or {k: round(v, 1) for k, v in (r.get("profile_s") or {}).items()
                                     if k in ("SendToBuilder", "SendToRunner", "MeasureCallback/UpdateCostModel",
                                             "EvoSearch/SampleInitPopulation", "EvoSearch/Evolve/Mutation")}
        split_txt = ", ".join(f"{k} {v:.1f}" for k, v in split.items()) if split else r.get("failed", "")
        st = r.get("startup_to_first_measurement_s")
        lines.append(
            f"| {r['arm']} | {r['trials']} ({r.get('valid_trials', '?')}) | "
            f"{st:.1f} |" if st is not None else f"| {r['arm']} | {r['trials']} ({r.get('valid_trials', '?')}) | none |"
        )
        pt, gf = r.get("per_trial_s"), r.get("best_gflops")
        lines[-1] += f" {pt:.2f} |" if pt else " - |"
        lines[-1] += f" {split_txt} | {gf:.1f} |" if gf else f" {split_txt} | - |"
        lines[-1] += f" {r.get('loadavg_before')} |"
    if results.get("startup"):
        lines += ["", "## Start-up on a real model (process start to first measured candidate, import included)", "",
                  "| model | tasks | start-up (s) | of which import + task extraction (s) | load before |", "|---|---|---|---|---|"]
        for r in results["startup"]:
            if "failed" in r:
                lines.append(f"| {r['model']} | failed: {r['failed']} | | | |")
            else:
                lines.append(f"| {r['model']} | {r['tasks']} | {r['startup_to_first_measurement_s']:.1f} | "
                             f"{r['import_and_extract_s']:.1f} | {r['loadavg_before']} |")
    if results.get("models"):
        lines += ["", "## Whole models, batch 1, this CPU", "",
                  "| model | trials | tasks | untuned TVM (ms) | tuned TVM (ms) | torch eager (ms) | tuned vs untuned | tuned vs eager | max abs err | tuning wall (s) | per trial (s) | start-up (s) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["models"]:
            if "failed" in r:
                lines.append(f"| {r['model']} | failed: {r['failed']} |")
                continue
            lat, sp, w = r["latency_ms"], r["speedup"], r["wall_s"]
            lines.append(
                f"| {r['model']} | {r['trials']['this_run']} | {r['tasks']} | {lat.get('tvm_untuned') or float('nan'):.1f} | "
                f"{lat['tvm_tuned']:.2f} | {lat['torch_eager']:.2f} | {sp['tuned_vs_untuned'] or float('nan'):.1f}x | "
                f"{sp['tuned_vs_torch_eager']:.2f}x | {r['numerics']['max_abs_error']:.2g} | {w['tuning']:.0f} | "
                f"{r['per_trial_s']:.2f} | {w['startup_to_first_measurement']:.1f} |"
            )
    if results.get("withdrawn"):
        lines += ["", f"Withdrawn: {results['withdrawn']['what']} — {results['withdrawn']['why']}"]
    lines += ["", "Reproduce: `python benchmarks/startup_and_trial.py` (see the script's docstring).", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--model-trials", type=int, default=500)
    ap.add_argument("--models", default="resnet18,resnet50")
    ap.add_argument("--stock-timeout", type=float, default=300)
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--skip-gemm", action="store_true")
    ap.add_argument("--startup-models", default="resnet18", help="comma list; '' to skip")
    ap.add_argument("--keep-models-from", default=None, help="reuse the 'models' rows of an earlier result JSON")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tune_loop"))
    args = ap.parse_args()
    from autotune.tvmrt.target import detect_host

    results = {"host": detect_host().as_json(), "versions": versions(), "started": time.strftime("%F %T"),
               "gemm": [], "models": [], "startup": []}
    if not args.skip_gemm:
        results["gemm"].append(gemm_arm("_ours_gemm.py", args.trials, 1800, []))
        results["gemm"].append(gemm_arm("_stock_gemm.py", args.trials, 1800, ["--import-fix"]))
        results["gemm"].append(gemm_arm("_stock_gemm.py", args.trials, args.stock_timeout, []))
    for model in [m for m in args.startup_models.split(",") if m]:
        results["startup"].append(startup_arm(model))
    if not args.skip_models:
        for model in args.models.split(","):
            results["models"].append(model_arm(model, args.model_trials))
    elif args.keep_models_from:
        with open(args.keep_models_from) as f:
            results["models"] = json.load(f).get("models", [])
    write_results(args.out + ".json", results, args.out + ".md", markdown(results))


if __name__ == "__main__":
    main()
