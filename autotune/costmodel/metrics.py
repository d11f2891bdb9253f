"""Metrics of the field (TenSet/TLP protocol), implemented once. TVM-free."""

from __future__ import annotations

import time

import numpy as np


def top_k_score(latency: np.ndarray, score: np.ndarray, groups: np.ndarray, weights: dict, k: int) -> float:
    """TenSet top-k score of one model's tasks.

    sum_tasks weight * best_latency / sum_tasks weight * (best latency among the k programs the cost
    model ranks highest). 1.0 means the model's top k always contain the task's best program.
    ``weights`` maps group id -> task weight (how often the task occurs in the model).
    """
    num = den = 0.0
    for g in np.unique(groups):
        m = groups == g
        lat, sc = latency[m], score[m]
        best = float(np.min(lat))
        top = np.argsort(-sc, kind="stable")[:k]
        w = float(weights.get(g, 1.0))
        num += w * best
        den += w * float(np.min(lat[top]))
    return num / den if den > 0 else float("nan")


def pairwise_accuracy(latency: np.ndarray, score: np.ndarray, groups: np.ndarray) -> float:
    """Share of program pairs within a task (different latency) that the score orders correctly; a pair
    the score ties counts one half (a coin flip would order it), not as wrong: a model that cannot tell
    a task's programs apart scores 0.5 there, not 0."""
    right = total = 0
    for g in np.unique(groups):
        m = groups == g
        lat, sc = latency[m], score[m]
        dl = lat[:, None] - lat[None, :]  # > 0: i slower than j
        ds = sc[:, None] - sc[None, :]
        valid = dl > 0
        total += int(valid.sum())
        right += int(((ds < 0) & valid).sum()) + 0.5 * int(((ds == 0) & valid).sum())
    return right / total if total else float("nan")


def prediction_throughput(model, batch, repeats: int = 3) -> float:
    """Programs per second of ``model.predict`` on ``batch`` (best of ``repeats``)."""
    best = float("inf")
    model.predict(batch.subset(np.arange(min(len(batch), 64))))  # warm-up
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.predict(batch)
        best = min(best, time.perf_counter() - t0)
    return len(batch) / best
