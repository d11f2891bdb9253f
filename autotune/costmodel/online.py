"""Online learning on top of a pretrained cost model, per task (TVM-free).

During tuning, every measured program of a task is new labelled data for exactly that task.
``OnlineLearner`` keeps them per task and turns them into a task-specific scorer with one
``OnlineUpdate`` strategy (``--online-update``); ``experiments/online_update/`` compares them on
held-out tasks of the dataset. The registered strategies (``ONLINE_UPDATES``):

- ``none``: the pretrained model only (no online learning).
- ``online``: ignore the pretrained model, fit a small ranking XGBoost on the task's programs
  (MetaSchedule's own behaviour, with our features).
- ``blend``: rank-average of the pretrained model and the online XGBoost (weight ``online_weight``).
- ``finetune``: a copy of the pretrained model trained further on the task's programs
  (``CostModel.fine_tune``: more boosting rounds / a few low-learning-rate epochs).
- ``residual``: the pretrained score, standardized and scaled by a least-squares slope, plus a
  small XGBoost regression fitted to what it gets wrong (standardized log throughput minus the
  scaled score).

Until a task has ``min_online`` measured programs, every strategy scores with the pretrained model
(or at random when there is none). Without a pretrained model, a strategy that uses one is
replaced by ``online`` (``OnlineLearner.mode`` says which strategy runs).

A new strategy: subclass ``OnlineUpdate``, decorate it with ``@register``; the contract suite in
``autotune.testing.online_update`` (run by tests/test_online_update_contract.py) covers it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import CostModel
from .inputs import ProgramBatch, normalized_throughput


@dataclass(frozen=True)
class OnlineSettings:
    """Knobs shared by the strategies (each reads the ones it needs)."""

    min_online: int = 16  # measured programs of a task before its scorer is fitted
    online_weight: float = 0.5  # blend: weight of the online model's ranks
    finetune_steps: int = 30  # finetune: boosting rounds / optimizer steps
    online_estimators: int = 60  # online/blend/residual: trees of the per-task XGBoost
    seed: int = 0


class OnlineUpdate(ABC):
    """How one task's measured programs become that task's scorer.

    Contract (checked for every registered strategy by ``autotune.testing.online_update``):
    - ``name``: the registry key (the ``--online-update`` value).
    - ``uses_pretrained``: False when the strategy ignores the pretrained model (it then reads only
      per-store features, and is what a learner without a pretrained model runs).
    - ``learns``: False when measured programs never change the scorer (``fit`` is never called).
    - ``fit(pretrained, X, latency)``: called by ``OnlineLearner.add`` after every measured batch once
      the task has ``min_online`` programs, with all of them; returns the task's fitted state (opaque).
      It must not change ``pretrained``.
    - ``predict(pretrained, state, X)``: higher-is-better scores for a non-empty ``X``, comparable within
      one call (one task's candidates); deterministic for a given state.
    """

    name: ClassVar[str]
    uses_pretrained: ClassVar[bool] = True
    learns: ClassVar[bool] = True

    def __init__(self, settings: OnlineSettings = OnlineSettings()):
        self.settings = settings

    @abstractmethod
    def fit(self, pretrained: CostModel | None, X: ProgramBatch, latency: np.ndarray): ...

    @abstractmethod
    def predict(self, pretrained: CostModel | None, state, X: ProgramBatch) -> np.ndarray: ...

    def _xgb(self, objective: str):
        from .xgb import XGBCostModel

        return XGBCostModel(objective=objective, n_estimators=self.settings.online_estimators, max_depth=6,
                            seed=self.settings.seed)


ONLINE_UPDATES: dict[str, type[OnlineUpdate]] = {}


def register(cls: type[OnlineUpdate]) -> type[OnlineUpdate]:
    ONLINE_UPDATES[cls.name] = cls
    return cls


def online_update(name: str, settings: OnlineSettings = OnlineSettings()) -> OnlineUpdate:
    if name not in ONLINE_UPDATES:
        raise ValueError(f"online mode: unknown {name!r}; valid: {', '.join(ONLINE_UPDATES)}")
    return ONLINE_UPDATES[name](settings)


def _one_task(latency: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    groups = np.zeros(len(latency), dtype=np.int64)
    return normalized_throughput(latency, groups), groups


@register
class NoUpdate(OnlineUpdate):
    """The pretrained model as it is."""

    name = "none"
    learns = False

    def fit(self, pretrained, X, latency):  # pragma: no cover - learns=False: never called
        raise AssertionError("'none' learns nothing")

    def predict(self, pretrained, state, X):
        return pretrained.predict(X)


@register
class OnlineOnly(OnlineUpdate):
    """A ranking XGBoost fitted to the task's programs; the pretrained model is ignored."""

    name = "online"
    uses_pretrained = False

    def fit(self, pretrained, X, latency):
        y, groups = _one_task(latency)
        return self._xgb("rank:pairwise").fit(X, y, groups)

    def predict(self, pretrained, state, X):
        return state.predict(X)


@register
class Blend(OnlineOnly):
    """Rank-average of the pretrained model and a per-task ranking XGBoost."""

    name = "blend"
    uses_pretrained = True

    def predict(self, pretrained, state, X):
        w = self.settings.online_weight
        return (1 - w) * rank01(pretrained.predict(X)) + w * rank01(state.predict(X))


@register
class FineTune(OnlineUpdate):
    """A copy of the pretrained model trained further on the task's programs."""

    name = "finetune"

    def fit(self, pretrained, X, latency):
        y, groups = _one_task(latency)
        return pretrained.fine_tune(X, y, groups, steps=self.settings.finetune_steps)

    def predict(self, pretrained, state, X):
        return state.predict(X)


@register
class Residual(OnlineUpdate):
    """The scaled pretrained score plus an XGBoost regression of what it gets wrong."""

    name = "residual"

    def fit(self, pretrained, X, latency):
        p = pretrained.predict(X)
        zp = _standardize(p, p)
        target = _standardize(-np.log(latency), -np.log(latency))
        slope = max(float(np.dot(zp, target) / (np.dot(zp, zp) + 1e-9)), 0.0)
        groups = np.zeros(len(latency), dtype=np.int64)
        return self._xgb("reg:squarederror").fit(X, target - slope * zp, groups), slope, p

    def predict(self, pretrained, state, X):
        resid, slope, ref = state
        return slope * _standardize(pretrained.predict(X), ref) + resid.predict(X)


MODES = tuple(ONLINE_UPDATES)  # ("none", "online", "blend", "finetune", "residual")


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
        # a CPU per program only when every part says which: a partly marked batch would mislabel the rest
        np.concatenate([b.hw for b in batches]) if all(b.hw is not None for b in batches) else None,
    )


class OnlineLearner:
    """Per-task measured programs -> per-task scorers, with one ``OnlineUpdate`` strategy."""

    def __init__(self, pretrained: CostModel | None, mode: str = "finetune", min_online: int = 16,
                 online_weight: float = 0.5, finetune_steps: int = 30, online_estimators: int = 60, seed: int = 0):
        self.settings = OnlineSettings(min_online, online_weight, finetune_steps, online_estimators, seed)
        update = online_update(mode, self.settings)
        if pretrained is None and update.uses_pretrained:
            update = online_update("online", self.settings)  # nothing to fine-tune or correct
        self.pretrained = pretrained
        self.update = update
        self.data: dict[str, list] = {}  # task -> [batches, latencies]
        self.fitted: dict[str, object] = {}  # task -> the strategy's fitted state

    @property
    def mode(self) -> str:
        """The strategy that runs (``online`` when one that needs a pretrained model had none)."""
        return self.update.name

    @property
    def min_online(self) -> int:
        return self.settings.min_online

    @property
    def uses_traces(self) -> bool:
        """Whether predict/add need the trace tokens (the online models read per-store features only)."""
        return self.pretrained is not None and self.pretrained.uses_traces and self.update.uses_pretrained

    def programs(self, task: str) -> int:
        return sum(len(x) for x in self.data.get(task, [[], []])[1])

    def add(self, task: str, batch: ProgramBatch, latency: np.ndarray) -> None:
        """Record measured programs (seconds, finite) of ``task`` and refit its scorer."""
        if len(batch) == 0:
            return
        store = self.data.setdefault(task, [[], []])
        store[0].append(batch)
        store[1].append(np.asarray(latency, dtype=np.float64))
        if not self.update.learns or self.programs(task) < self.min_online:
            return
        store[0] = [concat_batches(store[0])]  # keep one merged batch
        store[1] = [np.concatenate(store[1])]
        self.fitted[task] = self.update.fit(self.pretrained, store[0][0], store[1][0])

    def predict(self, task: str, batch: ProgramBatch) -> np.ndarray:
        """Higher is better; comparable within one call (one task's candidates)."""
        if len(batch) == 0:
            return np.zeros(0)
        if task in self.fitted:
            return self.update.predict(self.pretrained, self.fitted[task], batch)
        if self.pretrained is None:
            seed = self.settings.seed
            return np.random.default_rng([seed, len(batch), self.programs(task)]).random(len(batch))
        return self.pretrained.predict(batch)
