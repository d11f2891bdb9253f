"""Online learning on top of a pretrained cost model, per task (TVM-free).

During tuning, every measured program of a task is new labelled data for exactly that task.
``OnlineLearner`` keeps them per task and turns them into a task-specific scorer; the modes are
the options the tuning-efficiency issue asks to compare (``experiments/online_update/`` measures
them on held-out tasks of the dataset):

- ``none``: the pretrained model only (no online learning).
- ``online``: ignore the pretrained model, fit a small ranking XGBoost on the task's programs
  (MetaSchedule's own behaviour, with our features).
- ``blend``: rank-average of the pretrained model and the online XGBoost (weight ``online_weight``).
- ``finetune``: a copy of the pretrained model trained further on the task's programs
  (``CostModel.fine_tune``: more boosting rounds / a few low-learning-rate epochs).
- ``residual``: the pretrained score, standardized and scaled by a least-squares slope, plus a
  small XGBoost regression fitted to what it gets wrong (standardized log throughput minus the
  scaled score).

Until a task has ``min_online`` measured programs, every mode scores with the pretrained model
(or at random when there is none).
"""

from __future__ import annotations

import numpy as np

from .base import CostModel
from .inputs import ProgramBatch, normalized_throughput

MODES = ("none", "online", "blend", "finetune", "residual")


def rank01(x: np.ndarray) -> np.ndarray:
    if len(x) <= 1:
        return np.ones(len(x), dtype=np.float64)
    return np.argsort(np.argsort(x, kind="stable"), kind="stable") / (len(x) - 1)


def _standardize(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return (x - ref.mean()) / (ref.std() + 1e-9)


def concat_batches(batches: list[ProgramBatch]) -> ProgramBatch:
    if len(batches) == 1:
        return batches[0]
    length = max(b.kinds.shape[1] for b in batches)

    def pad(a, value=0):
        width = [(0, 0), (0, length - a.shape[1])] + [(0, 0)] * (a.ndim - 2)
        return np.pad(a, width, constant_values=value)

    offsets, base = [np.zeros(1, np.int64)], 0
    for b in batches:
        offsets.append(b.offsets[1:] + base)
        base += b.offsets[-1]
    return ProgramBatch(
        np.concatenate([pad(b.kinds) for b in batches]), np.concatenate([pad(b.numeric) for b in batches]),
        np.concatenate([b.lengths for b in batches]), np.concatenate([b.store_feats for b in batches]),
        np.concatenate(offsets),
    )


class OnlineLearner:
    def __init__(self, pretrained: CostModel | None, mode: str = "finetune", min_online: int = 16,
                 online_weight: float = 0.5, finetune_steps: int = 30, online_estimators: int = 60, seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"online mode: unknown {mode!r}; valid: {', '.join(MODES)}")
        if pretrained is None and mode in ("finetune", "residual", "blend", "none"):
            mode = "online"  # nothing to fine-tune or correct
        self.pretrained = pretrained
        self.mode = mode
        self.min_online = min_online
        self.online_weight = online_weight
        self.finetune_steps = finetune_steps
        self.online_estimators = online_estimators
        self.seed = seed
        self.data: dict[str, list] = {}  # task -> [batches, latencies]
        self.fitted: dict[str, tuple] = {}  # task -> what predict needs

    @property
    def uses_traces(self) -> bool:
        """Whether predict/add need the trace tokens (the online models read per-store features only)."""
        return self.pretrained is not None and self.pretrained.uses_traces and self.mode != "online"

    def programs(self, task: str) -> int:
        return sum(len(x) for x in self.data.get(task, [[], []])[1])

    def add(self, task: str, batch: ProgramBatch, latency: np.ndarray) -> None:
        """Record measured programs (seconds, finite) of ``task`` and refit its scorer."""
        if len(batch) == 0:
            return
        store = self.data.setdefault(task, [[], []])
        store[0].append(batch)
        store[1].append(np.asarray(latency, dtype=np.float64))
        n = self.programs(task)
        if self.mode == "none" or n < self.min_online:
            return
        X = concat_batches(store[0])
        store[0] = [X]  # keep one merged batch
        lat = np.concatenate(store[1])
        store[1] = [lat]
        groups = np.zeros(n, dtype=np.int64)
        y = normalized_throughput(lat, groups)
        if self.mode in ("online", "blend"):
            self.fitted[task] = (self._xgb("rank:pairwise").fit(X, y, groups),)
        elif self.mode == "finetune":
            self.fitted[task] = (self.pretrained.fine_tune(X, y, groups, steps=self.finetune_steps),)
        elif self.mode == "residual":
            p = self.pretrained.predict(X)
            zp = _standardize(p, p)
            target = _standardize(-np.log(lat), -np.log(lat))
            slope = max(float(np.dot(zp, target) / (np.dot(zp, zp) + 1e-9)), 0.0)
            resid = self._xgb("reg:squarederror").fit(X, target - slope * zp, groups)
            self.fitted[task] = (resid, slope, p)

    def _xgb(self, objective: str):
        from .xgb import XGBCostModel

        return XGBCostModel(objective=objective, n_estimators=self.online_estimators, max_depth=6,
                            seed=self.seed)

    def predict(self, task: str, batch: ProgramBatch) -> np.ndarray:
        """Higher is better; comparable within one call (one task's candidates)."""
        if len(batch) == 0:
            return np.zeros(0)
        fitted = self.fitted.get(task)
        if fitted is None:
            if self.pretrained is None:
                return np.random.default_rng([self.seed, len(batch), self.programs(task)]).random(len(batch))
            return self.pretrained.predict(batch)
        if self.mode in ("online", "finetune"):
            return fitted[0].predict(batch)
        if self.mode == "blend":
            base = rank01(self.pretrained.predict(batch))
            return (1 - self.online_weight) * base + self.online_weight * rank01(fitted[0].predict(batch))
        resid, slope, ref = fitted
        return slope * _standardize(self.pretrained.predict(batch), ref) + resid.predict(batch)
