"""Distances, coverage and density over program features (vectorised NumPy, no TVM)."""

from __future__ import annotations

import numpy as np

EMBED_DIMS = 32
DENSITY_REF = 512  # density is estimated against at most this many reference points
KMEANS_SAMPLE = 8000  # k-means is fitted on at most this many points (all are then assigned)


def embed(raw: np.ndarray, dims: int = EMBED_DIMS) -> np.ndarray:
    """Features -> a space where Euclidean distance means something: sign·log1p, columns
    standardized, then PCA (deterministic: eigenvectors of the covariance) to ``dims``."""
    x = np.asarray(raw, np.float64)
    x = np.sign(x) * np.log1p(np.abs(x))
    x = x - x.mean(0)
    std = x.std(0)
    keep = std > 1e-9
    x = x[:, keep] / std[keep]
    if x.shape[1] > dims and x.shape[0] > 1:
        vals, vecs = np.linalg.eigh(x.T @ x)
        top = vecs[:, np.argsort(vals)[::-1][:dims]]
        top *= np.where(top[np.abs(top).argmax(0), np.arange(top.shape[1])] < 0, -1.0, 1.0)  # fixed signs
        x = x @ top
    return np.ascontiguousarray(x, dtype=np.float32)


def sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances [len(a), len(b)] (clipped at 0)."""
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d, 0.0)


def min_dist(x: np.ndarray, ref: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Distance of every row of ``x`` to its nearest row of ``ref`` (inf when ``ref`` is empty)."""
    if len(ref) == 0:
        return np.full(len(x), np.inf)
    out = np.empty(len(x))
    for i in range(0, len(x), chunk):
        out[i : i + chunk] = np.sqrt(sq_dists(x[i : i + chunk], ref).min(1))
    return out


def kcenter_greedy(x: np.ndarray, q: int, dist: np.ndarray, first: int | None = None) -> np.ndarray:
    """Coreset by k-center greedy: ``q`` rows of ``x``, each the farthest from everything covered so far.

    ``dist`` [len(x)]: each row's distance to the already covered points (inf when nothing is covered,
    then ``first`` is taken first). Returns row positions in pick order."""
    dist = np.array(dist, dtype=np.float64)
    picked = []
    for step in range(q):
        j = (
            int(first)
            if step == 0 and first is not None and not np.isfinite(dist).any()
            else int(np.argmax(dist))
        )
        picked.append(j)
        dist = np.minimum(dist, np.sqrt(((x - x[j]) ** 2).sum(1)))
        dist[j] = -1.0
    return np.asarray(picked, np.int64)


def density(x: np.ndarray, rng: np.random.Generator, n_ref: int = DENSITY_REF) -> np.ndarray:
    """Gaussian kernel density of each row among the rows (against a random reference subset of at
    most ``n_ref``), bandwidth = median distance between reference points; in (0, 1]."""
    if len(x) <= 1:
        return np.ones(len(x))
    ref = x if len(x) <= n_ref else x[rng.choice(len(x), n_ref, replace=False)]
    ref_d = sq_dists(ref, ref)
    h2 = float(np.median(ref_d[np.triu_indices(len(ref), 1)])) if len(ref) > 1 else 1.0
    h2 = h2 if h2 > 1e-12 else 1.0
    out = np.empty(len(x))
    for i in range(0, len(x), 4096):
        out[i : i + 4096] = np.exp(-sq_dists(x[i : i + 4096], ref) / (2 * h2)).mean(1)
    return out


def kmeans(
    x: np.ndarray, n_clusters: int, rng: np.random.Generator, iters: int = 10, sample: int = KMEANS_SAMPLE
) -> tuple[np.ndarray, np.ndarray]:
    """k-means++ then Lloyd iterations on a random subset of at most ``sample`` rows; every row is
    then assigned. Returns (centres [K, d], labels [n])."""
    n_clusters = int(min(n_clusters, len(x)))
    fit = (
        x
        if len(x) <= max(sample, n_clusters)
        else x[rng.choice(len(x), max(sample, n_clusters), replace=False)]
    )
    centres = np.empty((n_clusters, x.shape[1]), x.dtype)
    centres[0] = fit[rng.integers(len(fit))]
    d2 = sq_dists(fit, centres[:1])[:, 0]
    for c in range(1, n_clusters):
        total = d2.sum()
        j = int(rng.choice(len(fit), p=d2 / total)) if total > 0 else int(rng.integers(len(fit)))
        centres[c] = fit[j]
        d2 = np.minimum(d2, sq_dists(fit, centres[c : c + 1])[:, 0])
    for _ in range(iters):
        labels = _assign(fit, centres)
        counts = np.bincount(labels, minlength=n_clusters)
        sums = np.zeros_like(centres, dtype=np.float64)
        np.add.at(sums, labels, fit)
        nonempty = counts > 0
        new = centres.copy()
        new[nonempty] = (sums[nonempty] / counts[nonempty, None]).astype(x.dtype)
        if np.allclose(new, centres):
            break
        centres = new
    return centres, _assign(x, centres)


def _assign(x: np.ndarray, centres: np.ndarray, chunk: int = 4096) -> np.ndarray:
    out = np.empty(len(x), np.int64)
    for i in range(0, len(x), chunk):
        out[i : i + chunk] = sq_dists(x[i : i + chunk], centres).argmin(1)
    return out


def within_rank(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Percentile rank of each value among ``values`` in [0, 1] (1 = largest; ties in random order)."""
    n = len(values)
    if n <= 1:
        return np.ones(n)
    order = np.lexsort((rng.random(n), values))
    out = np.empty(n)
    out[order] = np.arange(n) / (n - 1)
    return out
