"""Does the offline ranking of cost models predict which one tunes best? (issue 12, item 2)

    python experiments/costmodel/offline_vs_tuning.py

The same model files are scored both ways: ``results/rescored.json`` (held-out top-1 / top-5 / pairwise of
the models in ``models/cpu-znver3-2c``, per-model task weights, views ``all`` and ``search``) and
``experiments/tuning_efficiency/results/tuning_efficiency.json`` (those models guiding MetaSchedule, 160
trials per model, 3 seeds: compiled latency of the tuned model, mean over seeds). Per held-out model, every
offline metric's order of the cost models is compared with the tuning order (lower compiled latency = better)
by Kendall's tau and by whether the two agree on the best model. Writes results/offline_vs_tuning.{json,md}.
No training, no TVM: it reads the two result files.
"""

from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import git_commit, run_main, write_results  # noqa: E402
from autotune.errors import UserError  # noqa: E402

METRICS = (("all", "top1"), ("all", "top5"), ("all", "pairwise"), ("search", "top1"), ("search", "top5"),
           ("search", "pairwise"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/offline_vs_tuning.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rescored", default=os.path.join(HERE, "results", "rescored.json"))
    ap.add_argument("--tuning", default=os.path.join(ROOT, "experiments", "tuning_efficiency", "results",
                                                     "tuning_efficiency.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b of two score lists (higher = better in both)."""
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def compare(rescored: dict, tuning: dict) -> dict:
    offline = {r["kind"]: r["views"] for r in rescored["rows"]}
    out = {}
    for model, arms in tuning["summary"].items():
        kinds = [k for k in arms if k in offline and model in offline[k].get("all", {})]
        if len(kinds) < 3:
            continue
        tuned = {k: arms[k]["final_latency_ms"] for k in kinds}
        best_tuned = min(kinds, key=tuned.get)
        entry = {"cost_models": kinds, "final_latency_ms": tuned, "best_by_tuning": best_tuned, "metrics": {}}
        for view, metric in METRICS:
            score = {k: offline[k][view][model][metric] for k in kinds if model in offline[k].get(view, {})}
            if len(score) != len(kinds):
                continue
            best = max(kinds, key=score.get)
            entry["metrics"][f"{metric} ({view})"] = {
                "scores": score, "best": best, "agrees_on_best": best == best_tuned,
                "kendall_tau": kendall_tau([score[k] for k in kinds], [-tuned[k] for k in kinds])}
        out[model] = entry
    return out


def markdown(result: dict) -> str:
    per = result["per_model"]
    names = list(next(iter(per.values()))["metrics"])
    lines = ["# Offline ranking vs tuning: do the held-out scores pick the model that tunes best?", "",
             "Command: `python experiments/costmodel/offline_vs_tuning.py`. Offline: `results/rescored.json` (the "
             f"model files of `models/cpu-znver3-2c` as of commit {str(result['rescored_commit'])[:10]}, per-model task "
             "weights; `experiments/costmodel/rescore.py` rescores whatever is there now, so rerun it only with the "
             "files the tuning used). Tuning: "
             "`experiments/tuning_efficiency/results/tuning_efficiency.json` (the same model files guiding "
             "MetaSchedule, 160 trials per model, compiled latency mean over 3 seeds). Cell: Kendall's tau between "
             "the metric's order of the cost models and the tuning order (1 = same order, -1 = reversed; 4 models: "
             "steps of 1/3), and ✓ where the metric's best model is the one that tuned fastest.", "",
             "| held-out model | tuned fastest (ms) | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for model, e in per.items():
        best = e["best_by_tuning"]
        cells = []
        for n in names:
            m = e["metrics"].get(n)
            cells.append("-" if m is None else f"{m['kendall_tau']:+.2f}{' ✓' if m['agrees_on_best'] else ''}")
        lines.append(f"| {model} | {best} ({e['final_latency_ms'][best]:.1f}) | " + " | ".join(cells) + " |")
    mean_tau = result["mean_tau"]
    lines += ["", "Mean tau over the held-out models: " + ", ".join(f"{n} {mean_tau[n]:+.2f}" for n in names) + ".",
              f"Best metric by mean tau: {result['best_metric']}; agreement on the best model: "
              + ", ".join(f"{n} {result['agree_count'][n]}/{len(per)}" for n in names) + ".",
              "Small sample: 4 cost models on 3 held-out models (a tau moves in steps of 1/3), and the arms' compiled "
              "latencies differ by less than their seed spread in places (the tuning table gives each seed).", ""]
    return "\n".join(lines)


def _main(args) -> int:
    for path in (args.rescored, args.tuning):
        if not os.path.exists(path):
            raise UserError(f"{path} does not exist (run experiments/costmodel/rescore.py and "
                            "experiments/tuning_efficiency/run.py)")
    with open(args.rescored, encoding="utf-8") as f:
        rescored = json.load(f)
    with open(args.tuning, encoding="utf-8") as f:
        tuning = json.load(f)
    per = compare(rescored, tuning)
    if not per:
        raise UserError("no held-out model is in both files with at least 3 cost models")
    names = list(next(iter(per.values()))["metrics"])
    mean_tau = {n: sum(e["metrics"][n]["kendall_tau"] for e in per.values()) / len(per) for n in names}
    agree = {n: sum(e["metrics"][n]["agrees_on_best"] for e in per.values()) for n in names}
    result = {"per_model": per, "mean_tau": mean_tau, "agree_count": agree,
              "best_metric": max(names, key=mean_tau.get), "rescored_commit": rescored.get("git_commit"),
              "git_commit": git_commit()}
    write_results(os.path.join(args.out, "offline_vs_tuning.json"), result,
                  os.path.join(args.out, "offline_vs_tuning.md"), markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
