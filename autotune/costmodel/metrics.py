"""Metrics of the field (TenSet/TLP protocol), implemented once. TVM-free."""

from __future__ import annotations

import math
import time

import numpy as np

TIE_RTOL = 1e-6  # scores this close count as tied (float noise, e.g. from a different batch composition)


def expected_best_of_top_k(lat: np.ndarray, score: np.ndarray, k: int, rtol: float = TIE_RTOL) -> float:
    """The best (lowest) latency among the ``k`` programs scored highest, in expectation over the order of
    programs the score ties: every program strictly above the k-th score is in, and the rest of the k are
    drawn uniformly from the programs tied with it. (Taking the first tied program in input order made
    the score depend on how the programs happened to be ordered or batched.)"""
    k = min(k, len(lat))
    order = np.argsort(-score, kind="stable")
    kth = float(score[order[k - 1]])
    tied = np.abs(score - kth) <= rtol * max(1.0, abs(kth))
    above = (score > kth) & ~tied
    best_above = float(np.min(lat[above])) if above.any() else np.inf
    pool = np.sort(lat[tied])
    r, t = k - int(above.sum()), len(pool)
    # P(the best of r draws without replacement from t is the i-th smallest) = C(t-i, r-1) / C(t, r)
    total = math.comb(t, r)
    prob = np.array([math.comb(t - i, r - 1) / total for i in range(1, t + 1)])
    return float(np.sum(prob * np.minimum(pool, best_above)))


def _top_k_terms(latency, score, groups, weights, k):
    """Per task: (weight * best latency, weight * expected best latency among the model's top k)."""
    nums, dens = [], []
    for g in np.unique(groups):
        m = groups == g
        lat, sc = latency[m], score[m]
        w = float(weights.get(g, 1.0))
        nums.append(w * float(np.min(lat)))
        dens.append(w * expected_best_of_top_k(lat, sc, k))
    return np.asarray(nums), np.asarray(dens)


def top_k_score(latency: np.ndarray, score: np.ndarray, groups: np.ndarray, weights: dict, k: int) -> float:
    """TenSet top-k score of one model's tasks.

    sum_tasks weight * best_latency / sum_tasks weight * (best latency among the k programs the cost
    model ranks highest; ties in the score are broken at random, in expectation: see
    ``expected_best_of_top_k``). 1.0 means the model's top k always contain the task's best program.
    ``weights`` maps group id -> task weight (how often the task occurs in the model).
    """
    num, den = _top_k_terms(latency, score, groups, weights, k)
    return float(num.sum() / den.sum()) if den.sum() > 0 else float("nan")


def task_mean_top_k(latency: np.ndarray, score: np.ndarray, groups: np.ndarray, k: int) -> float:
    """Mean over tasks of best latency / expected best latency among the ``k`` programs ranked highest: every
    task counts once, whatever its weight or runtime (the weighted ``top_k_score`` of a network is decided by
    its few heaviest tasks; this one is the steadier objective to choose between models on a few networks)."""
    num, den = _top_k_terms(latency, score, groups, {}, k)
    return float(np.mean(num / den)) if len(den) else float("nan")


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


def timed_in_turns(calls: dict, rounds: int, after_round=None) -> dict[str, list[float]]:
    """Seconds of every call in ``calls`` (name -> no-argument callable) per round, the calls taking turns
    with the order rotated each round, so that load drifting on a shared machine hits every arm alike.
    ``after_round`` (e.g. recording the load) runs after each round, outside the timed calls."""
    names = list(calls)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            calls[n]()
            seconds[n].append(time.perf_counter() - t0)
        if after_round is not None:
            after_round()
    return seconds


def prediction_throughput(model, batch, repeats: int = 3) -> float:
    """Programs per second of ``model.predict`` on ``batch`` (best of ``repeats``)."""
    best = float("inf")
    model.predict(batch.subset(np.arange(min(len(batch), 64))))  # warm-up
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.predict(batch)
        best = min(best, time.perf_counter() - t0)
    return len(batch) / best
