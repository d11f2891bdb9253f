"""Held-out evaluation that predicts search, not only TenSet's top-k (TVM-free).

Three views of each held-out model's programs:
- ``all``: every measured program of the model's tasks (TenSet/TLP top-1, top-5, pairwise);
- ``search``: only programs the evolutionary sampler produced (the region where the search ranks
  candidates; uniform random samples are mostly far slower and easy to rank);
- ``unseen``: without near-duplicate tasks: a held-out task that is also a task of a training model
  (resnet50's 3x3 convolutions of resnet18's shapes; bert_base's layers shared with vit_b16/gpt2), or
  whose arguments have exactly the shapes of a training task's (another epilogue over the same
  operands), tests recall more than generalisation.
Scores use each model's own task weights (``TrainingData.weights_for``).
"""

from __future__ import annotations

import json

import numpy as np

from .metrics import pairwise_accuracy, top_k_interval, top_k_score

VIEWS = ("all", "search", "unseen")
SEARCH_SAMPLERS = ("evolutionary",)
METRICS = ("top1", "top5", "pairwise")


def shared_with_training(tasks: dict[str, dict], keys, held_out) -> set[str]:
    """Near-duplicates among ``keys``: tasks a model outside ``held_out`` also contains, and tasks whose
    argument shapes equal those of a training-only task."""
    held = set(held_out)

    def signature(task):
        return tuple(sorted(json.dumps(a) for a in task.get("args_info", [])))

    train_sigs = {signature(t) for t in tasks.values() if not held & set(t["models"])}
    return {k for k in keys if any(m not in held for m in tasks[k]["models"]) or signature(tasks[k]) in train_sigs}


def view_of(data, model: str, keys, view: str, held_out):
    """The part of ``data`` a view scores for one held-out ``model`` (``keys``: the model's tasks)."""
    if view == "unseen":
        keys = sorted(set(keys) - shared_with_training(data.tasks, keys, held_out))
    part = data.select_tasks(keys)
    if view == "search":
        if part.sampler is None:
            raise ValueError("the data carries no sampler column; load it with load_training_data")
        part = part.subset(np.isin(part.sampler, SEARCH_SAMPLERS))
    elif view not in ("all", "unseen"):
        raise ValueError(f"unknown view {view!r}; valid: {', '.join(VIEWS)}")
    return part


def score_part(part, score: np.ndarray, model: str) -> dict:
    weights = part.weights_for(model)
    return {
        "top1": top_k_score(part.latency, score, part.groups, weights, 1),
        "top1_interval90": top_k_interval(part.latency, score, part.groups, weights, 1),
        "top5": top_k_score(part.latency, score, part.groups, weights, 5),
        "pairwise": pairwise_accuracy(part.latency, score, part.groups),
        "programs": len(part),
        "tasks": len(set(part.groups.tolist())),
    }


def evaluate(model, data, held_out: dict[str, list[str]], views=VIEWS) -> dict:
    """{view: {held-out model: metrics, "mean": {metric: mean over models}}}; the ``all`` view's entries
    are also at the top level (the layout of earlier result files)."""
    out: dict = {}
    for view in views:
        per = {}
        for name, keys in held_out.items():
            part = view_of(data, name, keys, view, held_out)
            if len(part) == 0 or len(set(part.groups.tolist())) == 0:
                continue
            per[name] = score_part(part, model.predict(part.batch), name)
        if per:
            per["mean"] = {k: float(np.mean([v[k] for v in per.values()])) for k in METRICS}
        out[view] = per
    return {**out.get("all", {}), "views": out}


def over_seeds(runs: list[dict]) -> dict:
    """Mean and sd of each view's mean metrics over training seeds (``runs``: evaluate() results, one per
    seed). A view is the same programs for every seed, so ``runs`` lists follow the order of ``runs``; a
    view with no programs is left out; sd is None for a single run (JSON has no NaN)."""
    views = runs[0].get("views", {})
    out = {}
    for view in views:
        vals = {k: [r["views"][view]["mean"][k] for r in runs if r["views"].get(view)] for k in METRICS}
        if not vals["top1"]:
            continue
        out[view] = {"n": len(vals["top1"]),
                     "mean": {k: float(np.mean(v)) for k, v in vals.items()},
                     "sd": {k: float(np.std(v, ddof=1)) if len(v) > 1 else None for k, v in vals.items()},
                     "runs": vals}
    return out


NO_SPREAD = 1e-12  # an sd this small is rounding of equal differences, not seed spread


def paired(a: list[float], b: list[float]) -> dict:
    """Paired comparison over seeds of two models' scores (same seeds, same split): mean difference a - b,
    its sd (None for one pair), and whether the difference is larger than its seed spread (|mean| > sd).
    Two deterministic models (or one scored on a single seed) differ by the same amount on every seed: sd 0
    says nothing about how the difference would vary, so it is not called clear (``no_spread`` marks it)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) == 0:
        return {"n": 0}
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else None
    no_spread = sd is not None and sd <= NO_SPREAD
    return {"n": int(len(d)), "mean_diff": float(d.mean()), "sd_diff": sd, "wins": int((d > 0).sum()),
            "clear": bool(sd is not None and not no_spread and abs(d.mean()) > sd), "no_spread": no_spread}
