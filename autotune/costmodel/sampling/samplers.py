"""The samplers. Each ``_pick`` chooses ``q`` of one task's unmeasured rows ``cand`` given its measured
rows ``ref`` (see ``base.Sampler``); distances are in the pool's embedding."""

from __future__ import annotations

import numpy as np

from .base import Pool, Sampler
from .geometry import density, kcenter_greedy, kmeans, min_dist, sq_dists, within_rank


class RandomSampler(Sampler):
    """Uniform over the pool's unmeasured programs (what a collector without active learning does)."""

    name = "random"
    per_task = False

    def __init__(self) -> None:
        pass

    def _pick(self, pool, cand, ref, q, ctx, rng):
        return rng.choice(cand, size=q, replace=False)


class TaskRandomSampler(Sampler):
    """Uniform within each task, with the per-task quotas of the other samplers (an ablation: how much
    of a sampler's gain is only the spreading of the budget over tasks)."""

    name = "random-per-task"

    def __init__(self) -> None:
        pass

    def _pick(self, pool, cand, ref, q, ctx, rng):
        return rng.choice(cand, size=q, replace=False)


class UncertaintySampler(Sampler):
    """The programs the model is least sure about: largest spread of ``predict_with_spread``
    (ensemble / MC disagreement)."""

    name = "uncertainty"
    needs_model = True
    needs_spread = True

    def __init__(self) -> None:
        pass

    def _pick(self, pool, cand, ref, q, ctx, rng):
        order = np.lexsort((rng.random(len(cand)), -ctx["spread"][cand]))
        return cand[order[:q]]


class DiversitySampler(Sampler):
    """Coreset (k-center greedy): each pick is the program farthest from everything measured or
    picked in its task; the first of an unmeasured task is random."""

    name = "diversity"
    batch_aware = True

    def __init__(self) -> None:
        pass

    def _pick(self, pool, cand, ref, q, ctx, rng):
        x = pool.embedding()
        pos = kcenter_greedy(x[cand], q, min_dist(x[cand], x[ref]), first=int(rng.integers(len(cand))))
        return cand[pos]


class RepresentativenessSampler(Sampler):
    """Density: k-means of the task's programs into (measured + q) clusters; from each cluster that
    holds no measured program, largest first, the program nearest its centre (k-means centrality);
    any rest by kernel density."""

    name = "representativeness"
    batch_aware = True

    def __init__(self, iters: int = 10) -> None:
        self.iters = iters

    def _pick(self, pool, cand, ref, q, ctx, rng):
        x = pool.embedding()
        rows = np.concatenate([cand, ref])
        centres, labels = kmeans(x[rows], len(ref) + q, rng, iters=self.iters)
        covered = np.zeros(len(centres), bool)
        covered[labels[len(cand) :]] = True
        lab = labels[: len(cand)]
        d = np.sqrt(sq_dists(x[cand], centres)[np.arange(len(cand)), lab])
        sizes = np.bincount(labels, minlength=len(centres))
        picked = []
        for c in np.lexsort((rng.random(len(centres)), -sizes)):
            if covered[c] or len(picked) == q:
                continue
            members = np.nonzero(lab == c)[0]
            if len(members):
                picked.append(int(members[np.argmin(d[members])]))
        if len(picked) < q:
            rest = np.setdiff1d(np.arange(len(cand)), picked)
            dens = density(x[rows], rng)[: len(cand)][rest]
            picked += list(rest[np.lexsort((rng.random(len(rest)), -dens))][: q - len(picked)])
        return cand[np.asarray(picked, np.int64)]


class RDUSampler(Sampler):
    """TCL's representativeness + diversity + uncertainty, batch-aware.

    Per task: rep = rank of kernel density among the task's programs, unc = rank of the model's
    spread among the candidates (both in [0, 1]), div = distance to the nearest measured or
    already picked program of the task over the largest such distance (1 while nothing is
    covered). Greedy: pick argmax ``(w_rep·rep + w_unc·unc + 0.001) · div ** w_div``; a copy of a
    covered program has div 0, so one batch is not ten variants of one program (``w_div`` = 0
    turns the penalty off, larger values sharpen it)."""

    name = "rdu"
    needs_model = True
    needs_spread = True
    batch_aware = True

    def __init__(self, w_rep: float = 1.0, w_unc: float = 1.0, w_div: float = 1.0) -> None:
        self.w_rep = w_rep
        self.w_unc = w_unc
        self.w_div = w_div

    def _pick(self, pool: Pool, cand, ref, q, ctx, rng):
        x = pool.embedding()
        xc = x[cand]
        rows = np.concatenate([cand, ref])
        rep = within_rank(density(x[rows], rng)[: len(cand)], rng)
        unc = within_rank(ctx["spread"][cand], rng)
        base = self.w_rep * rep + self.w_unc * unc + 1e-3 + 1e-6 * rng.random(len(cand))  # random tie-break
        dist = min_dist(xc, x[ref])
        free = np.ones(len(cand), bool)
        picked = []
        for _ in range(q):
            div = np.ones(len(cand))
            if np.isfinite(dist).any():
                div = np.minimum(dist / max(float(dist[free].max()), 1e-12), 1.0)
            total = np.where(free, base * div**self.w_div, -np.inf)
            j = int(np.argmax(total))
            picked.append(j)
            free[j] = False
            dist = np.minimum(dist, np.sqrt(((xc - xc[j]) ** 2).sum(1)))
        return cand[np.asarray(picked, np.int64)]


class TopKBiasedSampler(Sampler):
    """BALTO's biased diversity: among the ``bias``·q distinct candidates the model predicts fastest,
    a k-center greedy coreset (the first pick of an unmeasured task is the predicted best)."""

    name = "topk-biased"
    needs_model = True
    batch_aware = True

    def __init__(self, bias: float = 3.0) -> None:
        self.bias = bias

    def _pick(self, pool, cand, ref, q, ctx, rng):
        x = pool.embedding()
        order = cand[np.lexsort((rng.random(len(cand)), -ctx["score"][cand]))]
        _, first = np.unique(x[order], axis=0, return_index=True)  # exact copies: keep the best-scored one
        distinct = np.zeros(len(order), bool)
        distinct[first] = True
        ranked = np.concatenate([order[distinct], order[~distinct]])
        top = ranked[: max(q, int(np.ceil(self.bias * q)))]
        pos = kcenter_greedy(x[top], q, min_dist(x[top], x[ref]), first=0)
        return top[pos]
