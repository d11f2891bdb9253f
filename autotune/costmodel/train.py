"""``python -m autotune.costmodel.train`` (``make train-costmodel``): train and compare cost models.

Trains every requested model on the dataset's training tasks (held-out models' tasks removed),
evaluates on each held-out model (TenSet top-1 / top-5, pairwise accuracy), measures prediction
throughput, saves each model with a card under ``--models-dir``, and writes a comparison table
(markdown + JSON) and a predicted-vs-measured PNG under ``--results``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import time

import numpy as np

from autotune.cli import git_commit, loadavg, run_main, setup_logging, versions, write_json, write_results
from autotune.data.splits import HELD_OUT_MODELS
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.train")
DEFAULT_MODELS = "xgb,xgb-reg,ms-xgb,ms-mlp,seq,random"
HPARAMS_DIR = os.path.join("models", "hparams")


def hparams_for(kind: str, hparams_dir: str = HPARAMS_DIR) -> dict:
    """Best hyperparameters found by ``make tune-costmodel-hparams`` (empty if none)."""
    path = os.path.join(hparams_dir, f"{kind}.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("params", {})


def evaluate(model, data, held_out: dict[str, list[str]]) -> dict:
    """TenSet top-1 / top-5 / pairwise per held-out model on all its programs, and their mean
    (``costmodel.evaluate``'s ``all`` view)."""
    from .evaluate import evaluate as evaluate_views

    return evaluate_views(model, data, held_out, views=("all",))["views"]["all"]


def _throughput(model, batch, min_n: int = 20000) -> float:
    from .metrics import prediction_throughput

    reps = max(1, int(np.ceil(min_n / max(len(batch), 1))))
    big = batch.subset(np.tile(np.arange(len(batch)), reps))
    return prediction_throughput(model, big)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, from: {DEFAULT_MODELS}")
    ap.add_argument("--held-out", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--results", default=os.path.join("experiments", "costmodel", "results"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1,
                    help="train each model this many times (seeds seed..seed+N-1) and report mean and spread; "
                         "the first seed's model is the one saved")
    ap.add_argument("--quick", action="store_true", help="small models/epochs (CI)")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    from . import REGISTRY, create
    from .data import load_training_data

    kinds = [k.strip() for k in args.models.split(",") if k.strip()]
    bad = [k for k in kinds if k not in REGISTRY]
    if bad:
        raise UserError(f"--models: unknown {bad}; valid: {', '.join(REGISTRY)}")
    setup_logging()
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.splits import split_by_model
    from autotune.data.store import DatasetError

    try:
        data = load_training_data(args.dataset)
    except (DatasetError, StaleFeatureCache) as err:
        raise UserError(str(err)) from None
    held = [m.strip() for m in args.held_out.split(",") if m.strip()]
    try:
        train_keys, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held)
    except ValueError as err:
        raise UserError(f"--held-out: {err}") from None
    train = data.select_tasks(train_keys)
    logger.info("train: %d programs over %d tasks; held out: %s", len(train), len(train_keys),
                {m: len(k) for m, k in test_keys.items()})
    hw = data.manifest["hardware"]["hardware_id"]
    manifest_hash = hashlib.sha256(json.dumps(data.manifest, sort_keys=True).encode()).hexdigest()
    rows = []
    test_all = data.select_tasks(sorted(set().union(*test_keys.values())))
    for kind in kinds:
        params = {**hparams_for(kind), **(_quick(kind) if args.quick else {})}
        if "seed" in create(kind).get_params():
            params.setdefault("seed", args.seed)
        model = create(kind, **params)
        t0 = time.time()
        model.fit(train.batch, train.y, train.groups)
        fit_s = time.time() - t0
        metrics = evaluate(model, data, test_keys)
        if args.seeds > 1 and "seed" in params:
            runs = [metrics["mean"]]
            for extra_seed in range(1, args.seeds):
                other = create(kind, **{**params, "seed": params["seed"] + extra_seed})
                other.fit(train.batch, train.y, train.groups)
                runs.append(evaluate(other, data, test_keys)["mean"])
            metrics["over_seeds"] = {
                "n": len(runs),
                "mean": {k: float(np.mean([r[k] for r in runs])) for k in ("top1", "top5", "pairwise")},
                "sd": {k: float(np.std([r[k] for r in runs], ddof=1)) for k in ("top1", "top5", "pairwise")},
            }
        thr = _throughput(model, test_all.batch)
        out_dir = os.path.join(args.models_dir, hw, kind)
        model.save(out_dir)
        card = {
            "kind": kind, "params": model.get_params(), "dataset": os.path.abspath(args.dataset),
            "dataset_manifest_sha256": manifest_hash, "hardware": data.manifest["hardware"],
            "git_commit": git_commit(), "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "train": {"programs": len(train), "tasks": len(train_keys), "fit_seconds": fit_s},
            "held_out": held, "metrics": metrics, "predict_programs_per_s": thr,
            "versions": versions(), "loadavg": loadavg(),
        }
        write_json(os.path.join(out_dir, "card.json"), card)
        logger.info("%s: top1 %.3f top5 %.3f pairwise %.3f, %.0f programs/s, fit %.0f s", kind,
                    metrics.get("mean", {}).get("top1", float("nan")), metrics.get("mean", {}).get("top5", float("nan")),
                    metrics.get("mean", {}).get("pairwise", float("nan")), thr, fit_s)
        rows.append({"kind": kind, "metrics": metrics, "predict_programs_per_s": thr, "fit_seconds": fit_s,
                     "trained": card["trained"], "params": card["params"]})
        if kind == kinds[0] or kind == "seq":
            _plot(model, data, test_keys, os.path.join(args.results, f"pred_vs_measured_{kind}.png"))
    rows = _keep_other_rows(os.path.join(args.results, "comparison.json"), rows, manifest_hash, held, args.quick)
    result = {"dataset": args.dataset, "hardware_id": hw, "dataset_manifest_sha256": manifest_hash,
              "train_programs": len(train), "held_out": held, "rows": rows, "seeds": args.seeds, "loadavg": loadavg(),
              "git_commit": git_commit(), "quick": args.quick}
    write_results(os.path.join(args.results, "comparison.json"), result, os.path.join(args.results, "comparison.md"),
                  markdown_table(result))
    return 0


def _keep_other_rows(path: str, rows: list[dict], manifest_hash: str, held: list[str], quick: bool) -> list[dict]:
    """Retraining some models (``--models xgb``) keeps the other models' rows of the comparison when
    they were evaluated on the same dataset, split and mode; rows are kept in registry order."""
    if not os.path.exists(path):
        return rows
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except ValueError:
        return rows
    if (old.get("dataset_manifest_sha256"), old.get("held_out"), bool(old.get("quick"))) != (manifest_hash, held, quick):
        return rows
    new = {r["kind"] for r in rows}
    merged = [r for r in old.get("rows", []) if r.get("kind") not in new] + rows
    from . import REGISTRY

    order = {k: i for i, k in enumerate(REGISTRY)}
    return sorted(merged, key=lambda r: order.get(r["kind"], len(order)))


def _quick(kind: str) -> dict:
    return {"xgb": {"n_estimators": 40}, "xgb-reg": {"n_estimators": 40}, "ms-xgb": {"n_estimators": 40},
            "ms-mlp": {"epochs": 3}, "seq": {"epochs": 3}}.get(kind, {})


def markdown_table(result: dict) -> str:
    held = result["held_out"]
    seeds = max((r["metrics"].get("over_seeds", {}).get("n", 1) for r in result["rows"]), default=1)
    head = ["model"] + [f"{m} top-1" for m in held] + [f"{m} top-5" for m in held] + \
        ["mean top-1", "mean top-5", "mean pairwise", "predict programs/s", "fit s"] + \
        ([f"over {seeds} seeds: top-1 / top-5 / pairwise (mean ± sd)"] if seeds > 1 else [])
    lines = [f"# Cost models on {result['hardware_id']} (held-out models: {', '.join(held)})", "",
             f"Train programs: {result['train_programs']}. Dataset manifest sha256 {result['dataset_manifest_sha256'][:12]}, "
             f"commit {str(result['git_commit'])[:10]}, load {result['loadavg']}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["rows"]:
        m = r["metrics"]
        cells = [r["kind"]] + [_top1_cell(m[h]) if h in m else "-" for h in held] + \
            [f"{m[h]['top5']:.3f}" if h in m else "-" for h in held] + \
            [f"{m['mean'][k]:.3f}" if "mean" in m else "-" for k in ("top1", "top5", "pairwise")] + \
            [f"{r['predict_programs_per_s']:.0f}", f"{r['fit_seconds']:.0f}"] + \
            ([_seeds_cell(m.get("over_seeds"))] if seeds > 1 else [])
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Top-1 cells: the TenSet weighted score, and in brackets its 90% bootstrap interval over the "
              "model's tasks (tasks resampled; it shows how much the few heaviest tasks' single picks move it).",
              "Pairwise: share of a task's program pairs ordered right (ties in score count one half).", "",
              "Reproduce: `make train-costmodel` (see autotune/costmodel/train.py).", ""]
    return "\n".join(lines)


def _seeds_cell(over: dict | None) -> str:
    if not over:
        return "-"
    return " / ".join(f"{over['mean'][k]:.3f} ± {over['sd'][k]:.3f}" for k in ("top1", "top5", "pairwise"))


def _top1_cell(m: dict) -> str:
    lo_hi = m.get("top1_interval90")
    return f"{m['top1']:.3f} [{lo_hi[0]:.2f}–{lo_hi[1]:.2f}]" if lo_hi else f"{m['top1']:.3f}"


def _plot(model, data, test_keys, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = next(iter(test_keys))
    part = data.select_tasks(test_keys[name])
    if len(part) == 0:
        return
    biggest = np.bincount(part.groups).argmax()
    task = part.subset(part.groups == biggest)
    score = model.predict(task.batch)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(task.y, score, s=8, alpha=0.6)
    ax.set_xlabel("measured normalized throughput (best = 1)")
    ax.set_ylabel(f"{model.name} score")
    key = data.task_keys[biggest]
    ax.set_title(f"{name}: {data.tasks[key]['name'][:40]} ({len(task)} programs)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
