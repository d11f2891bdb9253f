"""Re-score the shipped cost models with per-model task weights and the search-predicting views.

    python experiments/costmodel/rescore.py [--dataset datasets/cpu-znver3-2c] [--models-dir models]

No retraining: every saved model under models/<hardware>/<kind>/ is evaluated on the dataset's held-out
models (views ``all``, ``search``, ``unseen``: autotune.costmodel.evaluate), next to the score its card
recorded with the old one-weight-per-task data. Writes results/rescored.json and results/rescored.md.
"""

from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import git_commit, loadavg, write_results  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402


def rescore(dataset: str, models_dir: str) -> dict:
    from autotune.costmodel import load
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.evaluate import evaluate, shared_with_training
    from autotune.data.splits import split_by_model

    data = load_training_data(dataset)
    _, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, HELD_OUT_MODELS)
    hw = data.manifest["hardware"]["hardware_id"]
    rows = []
    for kind in sorted(os.listdir(os.path.join(models_dir, hw))):
        path = os.path.join(models_dir, hw, kind)
        if not os.path.exists(os.path.join(path, "model.json")):
            continue
        with open(os.path.join(path, "card.json"), encoding="utf-8") as f:
            card = json.load(f)
        res = evaluate(load(path), data, test_keys)
        rows.append({"kind": kind, "old_mean": (card.get("metrics") or {}).get("mean"),
                     "old_per_model": {m: {k: card["metrics"][m][k] for k in ("top1", "top5")}
                                       for m in HELD_OUT_MODELS if m in card.get("metrics", {})},
                     "views": res["views"]})
    near = {m: len(shared_with_training(data.tasks, keys, HELD_OUT_MODELS)) for m, keys in test_keys.items()}
    return {"dataset": dataset, "hardware_id": hw, "near_duplicates": near,
            "tasks": {m: len(k) for m, k in test_keys.items()}, "rows": rows,
            "git_commit": git_commit(), "loadavg": loadavg()}


def markdown(res: dict) -> str:
    held = list(res["tasks"])
    lines = [f"# Shipped cost models re-scored with per-model task weights ({res['hardware_id']})", "",
             "Command: `python experiments/costmodel/rescore.py`. Views: `all` = every measured program of a "
             "held-out model's tasks; `search` = only programs the evolutionary sampler produced; `unseen` = "
             "without near-duplicate tasks (" + ", ".join(f"{m} {res['near_duplicates'][m]}/{res['tasks'][m]}"
                                                         for m in held) + "). Old = the card's score (one weight per task).", "",
             "| model | old mean top-1 | new mean top-1 (all) | " + " | ".join(f"{m} top-1 old → new" for m in held)
             + " | mean top-5 (all) | mean top-1 (search) | mean top-5 (search) | mean top-1 (unseen) | mean pairwise (search) |",
             "|" + "---|" * (8 + len(held))]
    for r in res["rows"]:
        v = r["views"]
        per = " | ".join(f"{r['old_per_model'].get(m, {}).get('top1', float('nan')):.3f} → {v['all'][m]['top1']:.3f}"
                         if m in v["all"] else "-" for m in held)
        old = (r["old_mean"] or {}).get("top1")
        lines.append(f"| {r['kind']} | {'-' if old is None else f'{old:.3f}'} | {v['all']['mean']['top1']:.3f} | {per} | "
                     f"{v['all']['mean']['top5']:.3f} | {v['search']['mean']['top1']:.3f} | {v['search']['mean']['top5']:.3f} | "
                     f"{v['unseen']['mean']['top1']:.3f} | {v['search']['mean']['pairwise']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join("datasets", "cpu-znver3-2c"))
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    res = rescore(args.dataset, args.models_dir)
    write_results(os.path.join(args.out, "rescored.json"), res, os.path.join(args.out, "rescored.md"), markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
