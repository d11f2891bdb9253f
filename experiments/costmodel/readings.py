"""Readings of other experiments' result files for the cost-model comparison, and issue 12's done-when targets.

    python experiments/costmodel/readings.py --dataset datasets/cpu-znver3-2c     # after make train-costmodel

Reads ``comparison.json`` (``python -m autotune.costmodel.train``), adds what the data curve
(``data_curve.py``), the top-1 loss analysis (``top1_analysis.py``) and the newest prediction-throughput
benchmark (``benchmarks/predict_throughput.py``) measured on the same dataset, checks issue 12's targets, and
writes the comparison again (``autotune.costmodel.comparison``). Kept out of the package: these are one
project's experiment files and one issue's targets, not something a user's training needs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import run_main  # noqa: E402
from autotune.costmodel.comparison import (  # noqa: E402
    compare,
    read_comparison,
    result_of_dataset,
    write_comparison,
)
from autotune.costmodel.train import is_sequence_model  # noqa: E402

BENCH_DIR = os.path.join("benchmarks", "results")
# issue 12's done-when targets (held-out, view "all", mean over seeds; throughput on this CPU)
TARGETS = {"seq_top1": 0.75, "seq_over_ms_xgb": 0.08, "seq_top5": 0.92, "seq_programs_per_s": 20_000,
           "xgb_programs_per_s": 50_000, "seeds": 3, "models_dir_mb": 40}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/readings.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join("datasets", "cpu-znver3-2c"))
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--results", default=None, help="folder of comparison.json (default: as make train-costmodel)")
    args = ap.parse_args(argv)
    return run_main(lambda: add_readings(args.dataset, args.models_dir, args.results))


def add_readings(dataset: str, models_dir: str, results: str | None) -> int:
    result, results = read_comparison(dataset, results, "--results")
    readings(result, models_dir, results)
    write_comparison(result, models_dir, results)
    return 0


def readings(result: dict, models_dir: str, results_dir: str) -> dict:
    """``result`` with done_when, data_curve and top1_losses added from the experiment files of its dataset."""
    from autotune.costmodel.comparison import folder_bytes

    size = folder_bytes(models_dir)
    result["done_when"] = done_when(result["rows"], size, latest_throughput_benchmark(
        os.path.join(models_dir, result["hardware_id"])), models_dir)
    result["data_curve"] = data_curve_reading(results_dir, result["dataset_manifest_sha256"])
    best = best_sequence_kind(result["rows"])
    result["top1_losses"] = best and top1_loss_reading(results_dir, result["dataset_manifest_sha256"], best)
    return result


def data_curve_reading(results_dir: str, manifest_hash: str, target: float = TARGETS["seq_top1"]) -> dict | None:
    """What ``experiments/costmodel/data_curve.py`` measured on the same dataset (``results_dir``/data_curve.json):
    per kind, held-out top-1 when fitted on every training program, its least-squares slope per doubling of
    programs per task, and — an extrapolation, labelled so — the programs per task at which that slope would
    reach ``target``. None without a (non-quick) result for this dataset."""
    got = result_of_dataset(os.path.join(results_dir, "data_curve.json"), manifest_hash)
    if got is None or got.get("quick"):
        return None
    kinds = {}
    for kind, slopes in got.get("slope_per_doubling", {}).items():
        full = [r for r in got.get("rows", []) if r["kind"] == kind and r["cap"] == "all" and "all_top1" in r]
        slope = slopes.get("all_top1")
        if not full or slope is None:
            continue
        top1, ppt = full[0]["all_top1"]["mean"], full[0]["programs_per_task"]
        need = ppt * 2 ** ((target - top1) / slope) if slope > 0 and top1 < target else None
        kinds[kind] = {"top1": top1, "programs_per_task": ppt, "slope_per_doubling": slope,
                       "slope_sd": got.get("slope_sd_over_seeds", {}).get(kind, {}).get("all_top1"),
                       "programs_per_task_for_target": need}
    sds = [r["all_top1"]["sd"] for r in got.get("rows", []) if r.get("all_top1", {}).get("sd") is not None]
    return {"path": os.path.join(results_dir, "data_curve.md"), "target": target, "kinds": kinds,
            "missing": len(got.get("missing", [])), "max_top1_sd": max(sds, default=None)} if kinds else None


def top1_loss_reading(results_dir: str, manifest_hash: str, kind: str) -> dict | None:
    """Where ``kind`` loses held-out top-1, as ``experiments/costmodel/top1_analysis.py`` measured it on the same
    dataset (``results_dir``/top1_analysis.json, the saved first-seed model): per held-out model its top-1, the
    share of the lost top-1 that picks >= ``catastrophic_ratio`` x slower than the task's best cost, how many tasks
    made such a pick, and the costliest task. None without a result for this dataset and kind."""
    got = result_of_dataset(os.path.join(results_dir, "top1_analysis.json"), manifest_hash)
    per = got and got.get("losses", {}).get(kind)
    if not per:
        return None
    models = {}
    for name, e in per.items():
        lost = 1.0 - e["top1"]
        worst = e["worst"][0] if e.get("worst") else None
        models[name] = {"top1": e["top1"], "catastrophic_share": e["loss_from_catastrophic"] / lost if lost > 0 else 0.0,
                        "catastrophic_tasks": e["catastrophic_tasks"], "tasks": e["tasks"],
                        "worst": worst and {"name": worst["name"], "loss_share": worst["loss_share"],
                                            "pick_over_best": worst["pick_over_best"]}}
    return {"path": os.path.join(results_dir, "top1_analysis.md"), "kind": kind, "ratio": got["catastrophic_ratio"],
            "card_commit": got.get("cards", {}).get(kind), "models": models}


def latest_throughput_benchmark(models_dir: str, bench_dir: str = BENCH_DIR) -> dict | None:
    """The newest ``benchmarks/predict_throughput.py`` result that timed the models of ``models_dir``
    (e.g. ``models/cpu-znver3-2c``): {"path", "machine", "time", "programs_per_s": {kind: median}}, or None.
    That benchmark times every model side by side in alternating rounds, alone on the machine: the reading
    the throughput targets mean; the number a training run records right after each fit shares the CPU
    with whatever else ran then."""
    import glob

    want = os.path.normpath(models_dir)
    best = None
    for path in glob.glob(os.path.join(bench_dir, "predict_throughput_*.json")):
        try:
            with open(path, encoding="utf-8") as f:
                got = json.load(f)
            meta, rows = got["meta"], got["rows"]
        except (OSError, ValueError, KeyError):
            continue
        if os.path.normpath(str(meta.get("models_dir", ""))) != want or not isinstance(rows, dict):
            continue
        if best is None or str(meta.get("time", "")) > best["time"]:
            best = {"path": os.path.join(bench_dir, os.path.basename(path))[: -len(".json")] + ".md",
                    "machine": meta.get("machine"), "time": str(meta.get("time", "")),
                    "programs_per_s": {k: v["median_programs_per_s"] for k, v in rows.items()
                                       if isinstance(v, dict) and "median_programs_per_s" in v}}
    return best


def best_sequence_kind(rows: list[dict]) -> str | None:
    """The sequence model with the highest mean held-out top-1 (view all) over its seeds; None without one."""
    def top1(row):
        return row["metrics"].get("over_seeds", {}).get("all", {}).get("mean", {}).get("top1")

    seqs = [r for r in rows if is_sequence_model(r["kind"]) and top1(r) is not None]
    return max(seqs, key=top1)["kind"] if seqs else None


def done_when(rows: list[dict], models_dir_bytes: int | None = None, benchmark: dict | None = None,
              models_dir: str | None = None) -> list[dict]:
    """Issue 12's targets checked against ``rows`` (and the size of the models folder):
    [{target, value, threshold, reached (None: not measured), detail, unit}]. With ``benchmark``
    (``latest_throughput_benchmark``), the programs/s targets read its side-by-side reading of the same
    saved models, and the detail gives the training run's own reading beside it."""
    by_kind = {r["kind"]: r for r in rows}

    def mean(row, metric):
        return row["metrics"].get("over_seeds", {}).get("all", {}).get("mean", {}).get(metric)

    best = by_kind.get(best_sequence_kind(rows))
    name = best["kind"] if best else "no sequence model"
    out = []

    def check(target, value, threshold, detail="", also=True, unit="score", at_most=False):
        reached = None if value is None else bool((value <= threshold if at_most else value >= threshold) and also)
        out.append({"target": target, "value": value, "threshold": threshold, "reached": reached, "detail": detail,
                    "unit": unit})

    check(f"best sequence model ({name}) mean top-1 ≥ {TARGETS['seq_top1']}", best and mean(best, "top1"),
          TARGETS["seq_top1"])
    ms = by_kind.get("ms-xgb")
    diff = compare(best, ms) if best and ms else {"n": 0}
    margin = diff.get("mean_diff")
    sd = diff.get("sd_diff")
    check(f"{name} − ms-xgb paired top-1 ≥ +{TARGETS['seq_over_ms_xgb']} and larger than its sd", margin,
          TARGETS["seq_over_ms_xgb"],
          "" if margin is None else f"± {'-' if sd is None else f'{sd:.3f}'} over {diff['n']} seed(s), "
          f"{'larger than its sd' if diff.get('clear') and margin > 0 else 'not larger than its sd'}",
          also=bool(diff.get("clear")) and margin is not None and margin > 0, unit="difference")
    check(f"best sequence model ({name}) mean top-5 ≥ {TARGETS['seq_top5']}", best and mean(best, "top5"),
          TARGETS["seq_top5"])
    def programs_per_s(row) -> tuple:
        if not row:
            return None, ""
        own = row["predict_programs_per_s"]
        bench = (benchmark or {}).get("programs_per_s", {}).get(row["kind"])
        if bench is None or benchmark["time"] < str(row.get("trained", "")):  # it timed an older model
            return own, ""
        return bench, (f"{benchmark['path']} on {benchmark['machine']}, every model side by side, median; this "
                       f"training run's own reading after the fit: {own:,.0f}")

    value, detail = programs_per_s(best)
    check(f"{name} programs/s ≥ {TARGETS['seq_programs_per_s']:,}", value, TARGETS["seq_programs_per_s"], detail,
          unit="count")
    value, detail = programs_per_s(by_kind.get("xgb"))
    check(f"xgb programs/s ≥ {TARGETS['xgb_programs_per_s']:,}", value, TARGETS["xgb_programs_per_s"], detail,
          unit="count")
    seeded = [len(r["seeds"]) for r in rows if r["seeds"] != [None]]
    check(f"every seeded model over ≥ {TARGETS['seeds']} seeds", min(seeded) if seeded else None, TARGETS["seeds"],
          unit="count")
    where = f" ({os.path.relpath(models_dir)})" if models_dir else ""  # the folder these models were written to
    check(f"models folder{where} ≤ {TARGETS['models_dir_mb']} MB", None if models_dir_bytes is None else models_dir_bytes / 1e6,
          TARGETS["models_dir_mb"], unit="MB", at_most=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
