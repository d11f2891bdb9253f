"""The sampler contract: which unmeasured programs of a pool to measure next (TVM-free).

    sampler = create("rdu")
    picked = sampler.select(pool, measured, model, k, rng)   # indices into the pool

``pool`` is a ``Pool`` (programs + their task ids), a ``ProgramBatch`` (one task) or a feature
matrix [n, d] (one task); ``measured`` are the pool rows already measured (index array or bool
mask, ``None`` = none): they are never picked again and count as covered for the batch-aware
samplers. ``model`` is a fitted ``CostModel`` or ``None``; samplers that read it say so with
capability flags (``needs_model``, ``needs_spread``), which callers check instead of names.

``select`` returns ``min(k, unmeasured)`` unique int64 indices in the order they were picked,
the same ones for the same ``rng`` seed. Samplers with ``per_task`` share ``k`` among the tasks
(``task_quotas``: in proportion to each task's pool size, and never a lone program in a task,
which teaches a ranking model nothing) and choose within each task, where cost models rank.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..inputs import ProgramBatch
from .geometry import embed


@dataclass
class Pool:
    """Candidate programs: ``batch`` (what a model predicts on; optional for model-free samplers),
    ``groups`` [n] task ids, and ``features`` [n, d] (the space distances are taken in; by default
    an embedding of the batch's pack-summed per-store features, see ``geometry.embed``)."""

    batch: ProgramBatch | None
    groups: np.ndarray
    features: np.ndarray | None = None
    _emb: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.groups = np.asarray(self.groups)
        n = len(self.groups)
        if self.groups.ndim != 1:
            raise ValueError(f"Pool: groups must be 1-d [n], got shape {self.groups.shape}")
        if self.batch is None and self.features is None:
            raise ValueError("Pool: give a ProgramBatch or a feature matrix (or both)")
        if self.batch is not None and len(self.batch) != n:
            raise ValueError(f"Pool: batch has {len(self.batch)} programs but groups has {n}")
        if self.features is not None:
            self.features = np.asarray(self.features, dtype=np.float32)
            if self.features.ndim != 2 or self.features.shape[0] != n:
                raise ValueError(f"Pool: features must be [n={n}, d], got shape {self.features.shape}")

    def __len__(self) -> int:
        return len(self.groups)

    def embedding(self) -> np.ndarray:
        if self._emb is None:
            raw = self.features if self.features is not None else self.batch.packsum()
            self._emb = embed(raw)
        return self._emb


def as_pool(pool) -> Pool:
    if isinstance(pool, Pool):
        return pool
    if isinstance(pool, ProgramBatch):
        return Pool(pool, np.zeros(len(pool), np.int64))
    if isinstance(pool, np.ndarray):
        return Pool(None, np.zeros(len(pool), np.int64), features=pool)
    raise TypeError(
        f"pool must be a Pool, a ProgramBatch or a feature matrix [n, d], got {type(pool).__name__}"
    )


def measured_mask(measured, n: int) -> np.ndarray:
    if measured is None:
        return np.zeros(n, bool)
    arr = np.asarray(measured)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"measured: a bool mask must have shape ({n},), got {arr.shape}")
        return arr.copy()
    if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= n):
        raise ValueError(
            f"measured: indices must be integers in [0, {n}), got {arr.dtype} in [{arr.min()}, {arr.max()}]"
        )
    mask = np.zeros(n, bool)
    mask[arr.astype(np.int64)] = True
    return mask


def group_index(groups: np.ndarray) -> list[np.ndarray]:
    """Pool rows of each task, tasks in sorted id order."""
    order = np.argsort(groups, kind="stable")
    _, starts = np.unique(groups[order], return_index=True)
    return np.split(order, starts[1:])


def task_quotas(
    sizes: np.ndarray, have: np.ndarray, k: int, rng: np.random.Generator, min_per_task: int = 2
) -> np.ndarray:
    """How many of ``k`` new programs each task gets.

    ``sizes`` [G] programs per task in the pool, ``have`` [G] of them already measured. Tasks are
    filled to the same share of their pool (water-filling: a task already past it gets none), the
    largest remainders rounding up (ties in random order). A task left with exactly one program
    (useless for a ranking objective) is paired with another such task: the one that wanted more
    gets a second program, the other none. Returns ints summing to min(k, unmeasured)."""
    sizes, have = np.asarray(sizes, np.int64), np.asarray(have, np.int64)
    avail = sizes - have
    k = int(min(k, avail.sum()))
    quota = np.zeros(len(sizes), np.int64)
    if k == 0:
        return quota
    lo, hi = 0.0, 1.0  # water level t: task g wants clip(t * size - have, 0, avail); t = 1 wants all
    for _ in range(60):
        t = (lo + hi) / 2
        lo, hi = (t, hi) if np.clip(t * sizes - have, 0, avail).sum() < k else (lo, t)
    want = np.clip(hi * sizes - have, 0, avail)
    quota = np.minimum(np.floor(want + 1e-9).astype(np.int64), avail)
    tie = rng.random(len(sizes))
    while quota.sum() > k:  # float slack at the level: trim the smallest remainders
        cand = np.nonzero(quota > 0)[0]
        i = cand[np.lexsort((tie[cand], (want - quota)[cand]))[0]]
        quota[i] -= 1
    while quota.sum() < k:  # largest remainders round up
        room = np.nonzero(quota < avail)[0]
        order = room[np.lexsort((tie[room], -(want - quota)[room]))]
        quota[order[: k - quota.sum()]] += 1
    if min_per_task > 1:
        lone_new = np.nonzero((quota == 1) & (have == 0))[0]
        lone = np.nonzero((have + quota == 1) & (quota < avail))[0]
        donors = list(lone_new[np.lexsort((tie[lone_new], want[lone_new]))])  # least wanted first
        takers = list(lone[np.lexsort((tie[lone], -want[lone]))])  # most wanted first
        while donors and takers:
            t = takers.pop(0)
            if t in donors:
                donors.remove(t)
            if not donors:
                break
            d = donors.pop(0)
            if d in takers:
                takers.remove(d)
            quota[d] -= 1
            quota[t] += 1
    return quota


class Sampler(ABC):
    """Base class. Subclasses set the capability flags and implement ``_pick`` (one task's choice);
    ``_prepare`` computes what they need over the whole pool once (predictions, spread)."""

    name: str = "base"
    needs_model: bool = False  # select() reads a fitted model (model=None is an error)
    needs_spread: bool = False  # ... with an uncertainty: model.gives_spread, or some spread > 0
    per_task: bool = True  # k is shared among tasks by task_quotas, choice is within a task
    batch_aware: bool = False  # never picks two copies of one program (or a copy of a measured one)
    #                            while distinct candidates remain in the task
    min_per_task: int = 2

    def get_params(self) -> dict:
        import inspect

        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self"}

    def select(self, pool, measured=None, model=None, k: int = 1, rng=None) -> np.ndarray:
        pool = as_pool(pool)
        n = len(pool)
        mask = measured_mask(measured, n)
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ValueError(f"k must be an integer >= 0, got {k!r}")
        rng = np.random.default_rng(rng)
        k = int(min(k, n - mask.sum()))
        if k == 0:
            return np.zeros(0, np.int64)
        ctx = self._prepare(pool, model)
        if not self.per_task:
            free = np.nonzero(~mask)[0]
            out = self._pick(pool, free, np.nonzero(mask)[0], k, ctx, rng)
        else:
            rows = group_index(pool.groups)
            quotas = task_quotas(
                [len(r) for r in rows], [int(mask[r].sum()) for r in rows], k, rng, self.min_per_task
            )
            out = [
                self._pick(pool, r[~mask[r]], r[mask[r]], int(q), ctx, rng)
                for r, q in zip(rows, quotas)
                if q > 0
            ]
            out = np.concatenate(out) if out else np.zeros(0, np.int64)
        out = np.asarray(out, np.int64)
        if len(out) != k or len(np.unique(out)) != k or mask[out].any():  # a bug in a sampler, not user input
            raise RuntimeError(
                f"sampler {self.name!r} returned {len(out)} picks for k={k} (duplicates or measured rows)"
            )
        return out

    def _prepare(self, pool: Pool, model) -> dict:
        if not self.needs_model:
            return {}
        if model is None or not getattr(model, "is_fitted", False):
            raise ValueError(
                f"sampler {self.name!r} needs a fitted cost model (got "
                f"{'None' if model is None else 'an unfitted ' + type(model).__name__})"
            )
        if pool.batch is None:
            raise ValueError(
                f"sampler {self.name!r} needs the pool's ProgramBatch (the model predicts on it)"
            )
        score, spread = model.predict_with_spread(pool.batch)
        if self.needs_spread and not getattr(model, "gives_spread", False) and not np.any(spread > 0):
            raise ValueError(
                f"sampler {self.name!r} needs a model with an uncertainty estimate; "
                f"{type(model).__name__} reports spread 0 (wrap it: sampling.BootstrapEnsemble)"
            )
        return {"score": score, "spread": spread}

    @abstractmethod
    def _pick(
        self, pool: Pool, cand: np.ndarray, ref: np.ndarray, q: int, ctx: dict, rng: np.random.Generator
    ) -> np.ndarray:
        """``q`` of the candidate rows ``cand`` (0 < q <= len(cand)), given measured rows ``ref``
        of the same task (all tasks when not ``per_task``); pool indices in pick order."""
