"""Metrics of the field (TenSet/TLP protocol), implemented once. TVM-free."""

from __future__ import annotations

import time

import numpy as np


def _top_k_terms(latency, score, groups, weights, k):
    """Per task: (weight * best latency, weight * best latency among the model's top k)."""
    nums, dens = [], []
    for g in np.unique(groups):
        m = groups == g
        lat, sc = latency[m], score[m]
        top = np.argsort(-sc, kind="stable")[:k]
        w = float(weights.get(g, 1.0))
        nums.append(w * float(np.min(lat)))
        dens.append(w * float(np.min(lat[top])))
    return np.asarray(nums), np.asarray(dens)


def top_k_score(latency: np.ndarray, score: np.ndarray, groups: np.ndarray, weights: dict, k: int) -> float:
    """TenSet top-k score of one model's tasks.

    sum_tasks weight * best_latency / sum_tasks weight * (best latency among the k programs the cost
    model ranks highest). 1.0 means the model's top k always contain the task's best program.
    ``weights`` maps group id -> task weight (how often the task occurs in the model).
    """
    num, den = _top_k_terms(latency, score, groups, weights, k)
    return float(num.sum() / den.sum()) if den.sum() > 0 else float("nan")


def top_k_interval(latency, score, groups, weights, k: int, n_boot: int = 2000, level: float = 0.9,
                   seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval of ``top_k_score`` over the model's tasks (tasks resampled with replacement).

    The weighted score is dominated by a model's heaviest tasks; with few tasks and few programs per
    task one pick moves it by tenths, and this interval says by how much."""
    num, den = _top_k_terms(latency, score, groups, weights, k)
    if len(num) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    boot = num[idx].sum(1) / den[idx].sum(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


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
