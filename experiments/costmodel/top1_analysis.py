"""Where held-out top-1 is lost, and what averaging the saved models' rankings gains (issue 12).

    python experiments/costmodel/top1_analysis.py [--dataset datasets/cpu-znver3-2c] [--models-dir models]

For every saved model of ``models/<hardware>/`` (the first seed of ``make train-costmodel``): per held-out
model, the tasks whose top-1 pick costs the most (weight x (latency of the pick - best latency), as a share
of the model's weighted latency with those picks: top-1 = 1 - the sum of those shares), and how much of
the loss comes from picks at least 2x slower than the task's best. Then rank-averaged ensembles of the saved
models (scores z-scored per task, summed) scored like a single model. Writes results/top1_analysis.{json,md}.
No training: it reads the saved models and the dataset's held-out programs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

import numpy as np  # noqa: E402

from autotune.cli import comma_list, git_commit, run_main, setup_logging, write_results  # noqa: E402
from autotune.errors import UserError  # noqa: E402

ENSEMBLE_KINDS = ("seq-lstm-distil", "seq-lstm-cos-x2", "seq-lstm-rows", "ms-xgb", "xgb")  # the best of each family
CATASTROPHIC = 2.0  # a pick this many times slower than the task's best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/top1_analysis.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--held-out", default=None, help="comma-separated held-out models (default: the TenSet three)")
    ap.add_argument("--worst", type=int, default=3, help="tasks listed per held-out model (default: %(default)s)")
    ap.add_argument("--members", default=",".join(ENSEMBLE_KINDS),
                    help="saved kinds the rank-averaged committees are drawn from (default: %(default)s)")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def per_task_losses(part, score: np.ndarray, model: str) -> list[dict]:
    """Per task of ``part``: its weight, best latency, the expected latency of the top-1 pick, and the loss
    share (weight x (pick - best) over the model's sum of weight x pick)."""
    from autotune.costmodel.metrics import expected_best_of_top_k

    weights = part.weights_for(model)
    rows = []
    for g in np.unique(part.groups):
        m = part.groups == g
        lat = part.latency[m]
        pick = expected_best_of_top_k(lat, score[m], 1)
        rows.append({"task": part.task_keys[g], "weight": float(weights.get(g, 1.0)), "best_s": float(lat.min()),
                     "pick_s": pick, "programs": int(m.sum())})
    total = sum(r["weight"] * r["pick_s"] for r in rows)
    for r in rows:
        r["loss_share"] = r["weight"] * (r["pick_s"] - r["best_s"]) / total
        r["pick_over_best"] = r["pick_s"] / r["best_s"]
    return sorted(rows, key=lambda r: -r["loss_share"])


def zscore_per_task(score: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = np.empty(len(score), dtype=np.float64)
    for g in np.unique(groups):
        m = groups == g
        s = score[m].astype(np.float64)
        out[m] = (s - s.mean()) / (s.std() + 1e-12)
    return out


def _main(args) -> int:
    setup_logging()
    from autotune.costmodel import REGISTRY, load
    from autotune.costmodel.data import load_training_data, manifest_sha256
    from autotune.costmodel.evaluate import score_part
    from autotune.data.splits import HELD_OUT_MODELS, split_by_model

    unknown = [k for k in comma_list(args.members) if k not in REGISTRY]
    if unknown or not comma_list(args.members):
        raise UserError(f"--members: {args.members!r}; give registered kinds, comma-separated: {', '.join(REGISTRY)}")
    data = load_training_data(args.dataset)
    hw = data.manifest["hardware"]["hardware_id"]
    folder = os.path.join(args.models_dir, hw)
    kinds = sorted(k for k in (os.listdir(folder) if os.path.isdir(folder) else [])
                   if os.path.exists(os.path.join(folder, k, "model.json")) and k != "random")
    if not kinds:
        raise UserError(f"--models-dir: no saved model under {folder}; run `make train-costmodel`")
    held_out = args.held_out.split(",") if args.held_out else HELD_OUT_MODELS
    try:
        _, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held_out)
    except ValueError as err:
        raise UserError(f"--held-out: {err}") from None
    held = data.select_tasks(sorted(set().union(*test_keys.values())))
    masks = {name: np.isin(held.groups, [data.task_keys.index(k) for k in keys]) for name, keys in test_keys.items()}
    parts = {name: held.subset(m) for name, m in masks.items()}  # read once: every model and ensemble scores them
    preds = {k: load(os.path.join(folder, k)).predict(held.batch) for k in kinds}

    def scores(score: np.ndarray) -> dict:
        per = {name: score_part(parts[name], score[m], name) for name, m in masks.items()}
        return {"per_model": {n: {"top1": v["top1"], "top5": v["top5"]} for n, v in per.items()},
                "mean_top1": float(np.mean([v["top1"] for v in per.values()])),
                "mean_top5": float(np.mean([v["top5"] for v in per.values()]))}

    losses = {}
    for kind in kinds:
        losses[kind] = {}
        for name, m in masks.items():
            rows = per_task_losses(parts[name], preds[kind][m], name)
            for r in rows:
                r["name"] = data.tasks[r["task"]]["name"]
            losses[kind][name] = {
                "top1": 1.0 - sum(r["loss_share"] for r in rows),
                "loss_from_catastrophic": sum(r["loss_share"] for r in rows if r["pick_over_best"] >= CATASTROPHIC),
                "catastrophic_tasks": sum(r["pick_over_best"] >= CATASTROPHIC for r in rows), "tasks": len(rows),
                "worst": rows[: args.worst]}
    members = [k for k in comma_list(args.members) if k in preds]  # registered kinds without a saved model: left out
    z = {k: zscore_per_task(preds[k], held.groups) for k in members}
    ensembles = {k: scores(preds[k]) for k in members}
    for r in range(2, len(members) + 1):
        for combo in itertools.combinations(members, r):
            ensembles[" + ".join(combo)] = scores(sum(z[k] for k in combo))
    result = {"dataset": os.path.relpath(args.dataset, ROOT), "hardware_id": hw, "models": kinds,
              "cards": {k: _card_commit(os.path.join(folder, k)) for k in kinds}, "losses": losses,
              "ensembles": ensembles, "catastrophic_ratio": CATASTROPHIC, "git_commit": git_commit(),
              "dataset_manifest_sha256": manifest_sha256(data.manifest), "held_out": list(held_out)}
    write_results(os.path.join(args.out, "top1_analysis.json"), result, os.path.join(args.out, "top1_analysis.md"),
                  markdown(result))
    return 0


def _card_commit(path: str) -> str | None:
    try:
        with open(os.path.join(path, "card.json"), encoding="utf-8") as f:
            return json.load(f).get("git_commit")
    except (OSError, ValueError):
        return None


def markdown(result: dict) -> str:
    lines = [f"# Where held-out top-1 is lost ({result['hardware_id']} data, saved first-seed models)", "",
             "Command: `python experiments/costmodel/top1_analysis.py`. Models: "
             + ", ".join(f"{k} (card commit {str(c)[:10]})" for k, c in result["cards"].items()) + ".", "",
             f"## Loss by task: share of the weighted latency lost to picks ≥ {result['catastrophic_ratio']:.0f}x "
             "slower than the task's best", "",
             "| model | held-out | top-1 | tasks with such a pick | their share of the loss | worst tasks (loss share, "
             "pick / best) |", "|---|---|---|---|---|---|"]
    for kind, per in result["losses"].items():
        for name, e in per.items():
            lost = 1.0 - e["top1"]
            worst = "; ".join(f"{w['name'][:28]} ({w['loss_share']:.3f}, {w['pick_over_best']:.1f}x)" for w in e["worst"])
            share = e["loss_from_catastrophic"] / lost if lost > 0 else 0.0
            lines.append(f"| {kind} | {name} | {e['top1']:.3f} | {e['catastrophic_tasks']}/{e['tasks']} | {share:.0%} "
                         f"| {worst} |")
    lines += ["", "## Rank-averaged ensembles of the saved models", "",
              "Scores z-scored within each task, summed; scored like one model (view `all`, per-model weights). "
              "One fit per member (its first seed): a difference under the seed spread of "
              "`results/comparison.md` is not a finding.", "",
              "| members | mean top-1 | mean top-5 |", "|---|---|---|"]
    for name, e in sorted(result["ensembles"].items(), key=lambda kv: -kv[1]["mean_top1"]):
        lines.append(f"| {name} | {e['mean_top1']:.3f} | {e['mean_top5']:.3f} |")
    return "\n".join(lines + [""])


if __name__ == "__main__":
    raise SystemExit(main())
