"""Tuning efficiency of each cost model on the held-out models (TenSet/TLP/TCL "search time speedup").

    python experiments/tuning_efficiency/run.py                 # full: 3 models x cost models x 3 seeds
    python experiments/tuning_efficiency/run.py --quick         # CI: tiny_mlp, 2 cost models, 1 seed

Every run is ``python -m autotune.tune`` in a fresh process (same budget, same search settings).
The curve of a run is read from its database, candidate by candidate in the order they were
measured (within a batch: the search's ranking order): the estimated end-to-end latency if every task
had been given only its first n candidates (sum over tasks of weight x best of its first n), against
the trials that takes. This is the per-task-budget view of TenSet's search-time speedup, and it needs
no "task not measured yet" guess (every task is measured in its first round). Seconds = trials x the
run's wall time per trial. Reported: trials and seconds each arm needs to reach the baseline's final
latency (stock MetaSchedule XGB, and the pretrained TenSet-MLP), paired by seed; the final curve value;
the real end-to-end latency of the compiled model. Writes results/*.json, results/README table and PNGs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import loadavg, seed_list, write_results  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402
from autotune.data.store import read_jsonl  # noqa: E402
from autotune.tuning.config import TRIALS_PER_ROUND_DEFAULT  # noqa: E402

# The harness's arm names predate the --cost-model families (autotune.tuning.costmodels): results are filed under
# these names, so they stay and are translated to the CLI here.
ARM_COST_MODELS = {"ms-xgb": ["--cost-model", "stock"], "ms-mlp": ["--cost-model", "mlp"],
                   "online-xgb": ["--cost-model", "xgb", "--online-update", "online"]}


def known_cost_model(name: str) -> bool:
    from autotune.costmodel import REGISTRY
    from autotune.tuning.costmodels import COST_MODELS

    return name in ARM_COST_MODELS or name in COST_MODELS or name in REGISTRY


def cost_model_flags(name: str, model_dir: str | None = None, hardware: str | None = None) -> list[str]:
    """An arm's cost model as autotune.tune flags: a family as is, an old arm name translated, a recipe (a REGISTRY
    kind such as ``seq-lstm``) or a transferred model's folder as its family with ``--cost-model-path``."""
    from autotune.costmodel import REGISTRY, family_of
    from autotune.tuning.costmodels import COST_MODELS

    if model_dir is None and name in ARM_COST_MODELS:
        return list(ARM_COST_MODELS[name])
    if model_dir is None and name in COST_MODELS:
        return ["--cost-model", name]
    if name not in REGISTRY:
        raise SystemExit(f"cost model {name!r}: not a family ({', '.join(COST_MODELS)}), an arm name "
                         f"({', '.join(ARM_COST_MODELS)}) or a recipe ({', '.join(REGISTRY)})")
    folder = model_dir or os.path.join("models", hardware or this_hardware(), name)
    return ["--cost-model", family_of(name), "--cost-model-path", folder]


def this_hardware() -> str:
    """This machine's hardware id (``python -m autotune.env --hardware-id``): runs are filed under it, since
    compiled latencies of different CPUs do not compare (the sessions' machines differ)."""
    res = subprocess.run([sys.executable, "-m", "autotune.env", "--hardware-id"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return res.stdout.split()[-1]


def arm_flags(arm: str) -> list[str]:
    """An arm is a cost model (``xgb``), a cost model with an online-update mode (``xgb:finetune``),
    or ``optuna`` (the TPE search strategy, no cost model)."""
    if arm == "optuna":
        return ["--strategy", "optuna"]  # the optuna search asks no cost model (SearchKind.uses_cost_model)
    name, _, online = arm.partition(":")
    return cost_model_flags(name) + (["--online-update", online] if online else [])


def run_one(model: str, cost_model: str, seed: int, trials: int, work_root: str, extra: list[str] = (),
            run: bool = True) -> dict | None:
    wd = os.path.join(work_root, model, cost_model.replace(":", "-"), f"seed{seed}")
    report_path = os.path.join(wd, "report.json")
    stale = stale_reason(report_path, cost_model)
    if stale and run:  # made with an older pretrained model: keep it aside, measure again
        os.replace(wd, f"{wd}.stale-{int(time.time())}")
        print(f"{model} {cost_model} seed {seed}: rerun ({stale})", flush=True)
    if not os.path.exists(report_path) and not run:
        return None
    if not os.path.exists(report_path):  # resumable experiment: finished runs are kept
        cmd = [sys.executable, "-m", "autotune.tune", "--model", model, "--trials", str(trials),
               *arm_flags(cost_model), "--seed", str(seed), "--work-dir", wd, "--skip-untuned",
               "--bench-rounds", "3", "--first-round-trials", str(TRIALS_PER_ROUND_DEFAULT),  # whole rounds,
               *extra]  # as its results were made
        print(f"{time.strftime('%H:%M:%S')} {model} {cost_model} seed {seed}: {' '.join(cmd[1:])}", flush=True)
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if res.returncode != 0:
            return {"model": model, "cost_model": cost_model, "seed": seed,
                    "failed": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}"}
    with open(report_path) as f:
        report = json.load(f)
    trials_axis, curve = uniform_curve(task_sequences(wd, report), [t["weight"] for t in report["tasks"]])
    time_axis = [n * report["per_trial_s"] for n in trials_axis]
    return {"model": model, "cost_model": cost_model, "seed": seed, "trials": trials_axis, "elapsed_s": time_axis,
            "curve_ms": curve, "final_latency_ms": report["latency_ms"]["tvm_tuned"],
            "per_trial_s": report["per_trial_s"], "loadavg": report.get("loadavg"), **wall_per_trial(report)}


def stale_reason(report_path: str, cost_model: str) -> str | None:
    """Why a finished run no longer speaks for the current pretrained model (None: still valid)."""
    name = cost_model.partition(":")[0]
    if not os.path.exists(report_path) or name not in ("xgb", "xgb-reg", "seq", "seq-lstm", "seq-top", "ms-mlp", "ensemble", "auto"):
        return None
    with open(report_path) as f:
        report = json.load(f)
    used = report.get("cost_model_card") or {}
    hw_id = report.get("hardware_id")
    if hw_id is None:  # reports from before report.json recorded it (CPU runs only)
        tj = report.get("target") or {}
        hw_id = f"cpu-{tj.get('mcpu')}-{tj.get('num-cores', 1)}c"
    card_path = os.path.join(used.get("path") or os.path.join("models", hw_id, name), "card.json")
    if not os.path.isabs(card_path):
        card_path = os.path.join(ROOT, card_path)
    if not os.path.exists(card_path):
        return None
    with open(card_path) as f:
        trained = json.load(f).get("trained")
    if used.get("trained"):
        return None if used["trained"] == trained else f"model retrained {trained}, run used {used['trained']}"
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(report_path)))
    return f"model retrained {trained} after this run ({made})" if trained and trained > made else None


def task_sequences(wd: str, report: dict) -> list[list[float]]:
    """Per task (report order): the latency of every measured candidate in the order it was measured
    (the search's ranking order within a batch); failed candidates count as inf."""
    seqs: list[list[float]] = [[] for _ in report["tasks"]]
    for task, sec in task_records(wd, report):
        if task is not None:
            seqs[task].append(sec)
    return seqs


def task_records(wd: str, report: dict) -> list[tuple[int | None, float]]:
    """Every record of the database in measurement order: (its task's index in the report, None for a workload
    of no task there; mean run seconds, inf for a failed candidate)."""
    shash = [row[0] for row in read_jsonl(os.path.join(wd, "database_workload.json"))]
    index = {str(int(t["workload_hash"], 16)): i for i, t in enumerate(report["tasks"])}
    out = []
    for widx, rec in read_jsonl(os.path.join(wd, "database_tuning_record.json")):
        secs = [float(x) for x in (rec[1] or [])]
        out.append((index.get(shash[widx]), sum(secs) / len(secs) if secs and max(secs) < 1e9 else float("inf")))
    return out


def wall_per_trial(report: dict) -> dict:
    """Seconds per trial spent searching (cost model included) and building: the model must not
    become the bottleneck, and the programs it picks decide how long they take to build."""
    wall, n = report.get("wall_s") or {}, (report.get("trials") or {}).get("this_run") or 0
    if not n:
        return {}
    return {f"{k}_per_trial_s": wall[k] / n for k in ("search", "build", "run") if k in wall}


def uniform_curve(seqs: list[list[float]], weights: list[float]):
    """Estimated end-to-end latency (ms) if every task had been given its first n candidates, for n = 1..:
    sum over tasks of weight x best of its first n; x axis = trials that takes (sum of min(n, len))."""
    longest = max((len(q) for q in seqs), default=0)
    trials, curve = [], []
    for n in range(1, longest + 1):
        best = [min(q[:n]) if q else float("inf") for q in seqs]
        trials.append(sum(min(n, len(q)) for q in seqs))
        curve.append(sum(w * b for w, b in zip(weights, best)) * 1e3)
    return trials, curve


def reach(run: dict, target_ms: float, axis: str) -> float | None:
    for x, c in zip(run[axis], run["curve_ms"]):
        if np.isfinite(c) and c <= target_ms:
            return x
    return None


def summarize(runs: list[dict], baselines=("ms-xgb", "ms-mlp")) -> dict:
    out = {}
    for model in sorted({r["model"] for r in runs}):
        mine = [r for r in runs if r["model"] == model and "failed" not in r]
        out[model] = {}
        for cm in sorted({r["cost_model"] for r in mine}):
            rs = [r for r in mine if r["cost_model"] == cm]
            out[model][cm] = {
                "final_curve_ms": float(np.mean([r["curve_ms"][-1] for r in rs])),
                "final_latency_ms": float(np.mean([r["final_latency_ms"] for r in rs])),
                "per_trial_s": float(np.mean([r["per_trial_s"] for r in rs])),
                **{k: float(np.mean([r[k] for r in rs])) for k in ("search_per_trial_s", "build_per_trial_s",
                                                                   "run_per_trial_s") if all(k in r for r in rs)},
                "seeds": len(rs),
            }
        for base in baselines:
            base_runs = {r["seed"]: r for r in mine if r["cost_model"] == base}
            if not base_runs:
                continue
            for cm, row in out[model].items():
                ours = {r["seed"]: r for r in mine if r["cost_model"] == cm}
                tr, tm, reached, per_seed, ratios, caps = [], [], 0, {}, [], []
                for seed, b in sorted(base_runs.items()):  # same seed, same task order: paired
                    if seed not in ours:
                        continue
                    target = b["curve_ms"][-1]  # the baseline's final latency (TenSet/TLP "search time speedup")
                    ratios.append(ours[seed]["curve_ms"][-1] / target)
                    nb, sb = reach(b, target, "trials"), reach(b, target, "elapsed_s")
                    # the largest speedup this budget can show: every task needs >= 1 candidate
                    caps.append(nb / ours[seed]["trials"][0])
                    no, so = reach(ours[seed], target, "trials"), reach(ours[seed], target, "elapsed_s")
                    per_seed[seed] = None if no is None else nb / no
                    if no is None:
                        continue
                    reached += 1
                    tr.append(nb / no)
                    tm.append(sb / so if so else float("nan"))
                row[f"reached_{base}_final"] = f"{reached}/{len(base_runs)}"
                # per seed: trials speedup (None: the baseline's final was not reached in the budget)
                row[f"per_seed_speedup_trials_vs_{base}"] = per_seed
                row[f"speedup_cap_vs_{base}"] = float(np.exp(np.mean(np.log(caps)))) if caps else None
                # final estimated latency at equal budget / the baseline's, geometric mean over paired seeds
                row[f"final_ratio_vs_{base}"] = float(np.exp(np.mean(np.log(ratios)))) if ratios else None
                row[f"speedup_trials_vs_{base}"] = float(np.exp(np.mean(np.log(tr)))) if tr and reached == len(
                    base_runs) else None
                row[f"speedup_time_vs_{base}"] = float(np.exp(np.nanmean(np.log(tm)))) if tm and reached == len(
                    base_runs) else None
    return out


def plot_latency_panels(series: dict, path: str, what: str, row_size=(10, 3.2), dpi: int = 100) -> None:
    """Two panels per model, latency vs trials and vs tuning wall time (log scale), one line per entry of
    ``series`` = {model: [(label, trials, seconds, latency_ms, plot keywords), ...]} (also real_budget.py's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(series)
    fig, axes = plt.subplots(len(models), 2, figsize=(row_size[0], row_size[1] * len(models)), squeeze=False)
    for i, model in enumerate(models):
        for label, trials, seconds, ms, style in series[model]:
            axes[i][0].plot(trials, ms, label=label, **style)
            axes[i][1].plot(seconds, ms, label=label, **style)
        axes[i][0].set(title=f"{model}: {what} vs trials", xlabel="trials", ylabel="ms", yscale="log")
        axes[i][1].set(title=f"{model}: vs tuning wall time", xlabel="s", ylabel="ms", yscale="log")
        axes[i][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def plot(runs: list[dict], path: str) -> None:
    series: dict = {}
    for r in (r for r in runs if "failed" not in r):
        series.setdefault(r["model"], []).append((f"{r['cost_model']} s{r['seed']}", r["trials"], r["elapsed_s"],
                                                  r["curve_ms"], {"alpha": 0.8}))
    plot_latency_panels(series, path, "est. latency")


def markdown(summary: dict, meta: dict) -> str:
    lines = ["# Tuning efficiency", "", f"{meta}", "",
             "| model | arm | seeds | final est. latency (ms) | compiled latency (ms) | s/trial "
             "(search / build / run) | "
             "final est. / MS-XGB's | reached MS-XGB final | speedup (trials) vs MS-XGB, per seed | "
             "speedup (trials) vs MS-XGB (most this budget can show) | speedup (time) vs MS-XGB | "
             "reached MS-MLP final | speedup (trials) vs MS-MLP, per seed | speedup (trials) vs MS-MLP |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, f="{:.2f}x": "-" if v is None else f.format(v)  # noqa: E731

    def split(r):
        return " / ".join("-" if f"{k}_per_trial_s" not in r else f"{r[f'{k}_per_trial_s']:.2f}"
                          for k in ("search", "build", "run"))

    def seeds(d):
        return "-" if not d else ", ".join(f"s{k}: {'not reached' if v is None else f'{v:.2f}x'}" for k, v in d.items())

    for model, rows in summary.items():
        for cm, r in rows.items():
            lines.append(f"| {model} | {cm} | {r['seeds']} | {r['final_curve_ms']:.3f} | {r['final_latency_ms']:.3f} | "
                         f"{r['per_trial_s']:.2f} ({split(r)}) | {fmt(r.get('final_ratio_vs_ms-xgb'), '{:.3f}')} | "
                         f"{r.get('reached_ms-xgb_final', '-')} | "
                         f"{seeds(r.get('per_seed_speedup_trials_vs_ms-xgb'))} | "
                         f"{fmt(r.get('speedup_trials_vs_ms-xgb'))} (≤ {fmt(r.get('speedup_cap_vs_ms-xgb'))}) | "
                         f"{fmt(r.get('speedup_time_vs_ms-xgb'))} | "
                         f"{r.get('reached_ms-mlp_final', '-')} | {seeds(r.get('per_seed_speedup_trials_vs_ms-mlp'))} | "
                         f"{fmt(r.get('speedup_trials_vs_ms-mlp'))} |")
    return "\n".join(lines) + "\n"


def _check_args(args) -> None:
    from autotune.errors import UserError
    from autotune.zoo import list_models

    bad = [m for m in args.models.split(",") if m not in list_models()]
    if bad:
        raise UserError(f"--models: unknown {bad}; valid: {', '.join(list_models())}")
    seed_list(args.seeds)  # a UserError naming --seeds unless comma-separated integers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--cost-models", default="ms-xgb,xgb,seq,ms-mlp")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--work-root", default=os.path.join(ROOT, "runs", "tuning_efficiency"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--trials-per-round", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--summarize-only", action="store_true", help="tabulate the finished runs, start none")
    args = ap.parse_args(argv)
    if args.quick:
        args.models, args.cost_models, args.seeds, args.trials = "tiny_mlp", "ms-xgb,online-xgb,optuna", "0", 24
        args.work_root = os.path.join(args.work_root, "quick")
        args.out = os.path.join(args.work_root, "results")
    _check_args(args)
    extra = ["--trials-per-round", str(args.trials_per_round)] if args.trials_per_round else []
    runs = []
    t0 = time.time()
    load_start = loadavg()
    for seed in seed_list(args.seeds):  # seed-major: a partial run compares all arms
        for model in args.models.split(","):
            for cm in args.cost_models.split(","):
                res = run_one(model, cm, seed, args.trials, args.work_root, extra, run=not args.summarize_only)
                if res is not None:
                    runs.append(res)
    summary = summarize(runs)
    meta = {"trials": args.trials, "wall_s": time.time() - t0, "loadavg_start": load_start, "loadavg_end": loadavg(),
            "quick": args.quick, "command": " ".join(["python", "experiments/tuning_efficiency/run.py", *(argv or sys.argv[1:])])}
    write_results(os.path.join(args.out, "tuning_efficiency.json"), {"meta": meta, "summary": summary, "runs": runs},
                  os.path.join(args.out, "README.md"), markdown(summary, meta))
    plot(runs, os.path.join(args.out, "curves.png"))
    failed = [r for r in runs if "failed" in r]
    if failed:
        print("failed runs:", [(r["model"], r["cost_model"], r["failed"]) for r in failed])
    return 1 if failed else 0


if __name__ == "__main__":
    from autotune.cli import run_main

    raise SystemExit(run_main(main))  # bad arguments: one line, exit 2
