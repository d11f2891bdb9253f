"""The transfer-method contract (TVM-free): a cost model for new hardware from a source model.

A ``TransferMethod`` turns a cost model trained on *source* hardware and a few measured programs of
the *target* hardware into a cost model for the target::

    method = transfer.create("ckd", seed=0)
    model = method.transfer(source_model, TransferInputs(target=labeled, source=replay, unlabeled=pool))

Contract (``autotune.testing.transfer`` checks it for every registered method):

- hyperparameters are explicit ``__init__`` keywords stored unchanged (``get_params``);
- ``transfer`` returns a *new*, fitted ``CostModel`` of the source model's kind and hyperparameters
  (so ``costmodel.load`` reads it back and the tuner uses it like any model); the source model is never
  modified; the same inputs and ``seed`` give the same model;
- ``TransferInputs.target`` holds the measured target programs (``y`` = normalized throughput, groups =
  task ids); ``source`` holds source-hardware programs with their source measurements (replay; used by
  ``mtl`` and ``ckd``); ``unlabeled`` holds target programs without measurements (``ckd``). A method
  that needs an input it did not get raises ``TransferError``;
- ``supports(model)`` returns None when the method can transfer that model, else the reason it cannot.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..base import CostModel, NotFittedError
from ..inputs import ProgramBatch


class TransferError(ValueError):
    """A transfer that cannot run: an unsupported model kind or a missing input (the message says which)."""


@dataclass(frozen=True)
class Programs:
    """Programs of one hardware: ``y`` (normalized throughput, best of its task = 1) or None when the
    programs are not measured; ``groups`` are task ids (ranking compares programs of one task)."""

    batch: ProgramBatch
    groups: np.ndarray
    y: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.batch, ProgramBatch):
            raise TypeError(f"Programs.batch must be a ProgramBatch, got {type(self.batch).__name__}")
        n = len(self.batch)
        if np.shape(self.groups) != (n,) or (self.y is not None and np.shape(self.y) != (n,)):
            raise ValueError(f"Programs: groups and y must have shape ({n},) to match the batch")
        if self.y is not None and not np.all(np.isfinite(self.y)):
            raise ValueError("Programs: y has NaN/inf; drop failed programs first")

    def __len__(self) -> int:
        return len(self.batch)

    def subset(self, idx) -> Programs:
        idx = np.asarray(idx)
        return Programs(self.batch.subset(idx), np.asarray(self.groups)[idx],
                        None if self.y is None else np.asarray(self.y)[idx])


@dataclass(frozen=True)
class TransferInputs:
    target: Programs  # measured target programs (the share of the target a user paid to measure)
    source: Programs | None = None  # source programs with their source measurements (replay)
    unlabeled: Programs | None = None  # target programs nobody measured (inputs only)

    def __post_init__(self) -> None:
        if self.target.y is None or len(self.target) == 0:
            raise ValueError("TransferInputs.target must hold measured programs (y given, at least one)")
        if self.source is not None and self.source.y is None:
            raise ValueError("TransferInputs.source must carry the source measurements (y)")


class TransferMethod(ABC):
    """Base class: subclasses set ``name``, define ``__init__`` keywords and implement ``_transfer``."""

    name: str = "base"
    needs_source_model: bool = True

    def get_params(self) -> dict:
        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self"}

    def supports(self, model: CostModel | type[CostModel]) -> str | None:
        """None if this method can transfer ``model`` (an instance or class), else why not."""
        return None

    def transfer(self, source_model: CostModel | None, inputs: TransferInputs) -> CostModel:
        if not isinstance(inputs, TransferInputs):
            raise TypeError(f"inputs must be TransferInputs, got {type(inputs).__name__}")
        if source_model is None:
            if self.needs_source_model:
                raise TransferError(f"{self.name}: needs a trained source model")
        else:
            if not isinstance(source_model, CostModel):
                raise TypeError(f"source_model must be a CostModel, got {type(source_model).__name__}")
            if not source_model.is_fitted:
                raise NotFittedError(f"{self.name}: the source model is not fitted")
            reason = self.supports(source_model)
            if reason:
                raise TransferError(f"{self.name} cannot transfer a {source_model.name!r} model: {reason}")
        model = self._transfer(source_model, inputs)
        model.fitted_ = True
        return model

    @abstractmethod
    def _transfer(self, source_model: CostModel | None, inputs: TransferInputs) -> CostModel: ...


def sample_fraction(groups: np.ndarray, fraction: float, rng: np.random.Generator, min_per_task: int = 2) -> np.ndarray:
    """Indices of ``round(fraction * n)`` programs to measure on the target, spent in whole task batches.

    Tasks come in random order; each chosen task gets ``max(min_per_task, round(fraction * its size))``
    random programs (capped by its size and by what is left of the budget), so every measured task has
    a pair to rank (a uniform draw of 1% would leave most tasks with one program, useless for ranking).
    ``fraction`` 1 returns every program. Sorted indices.
    """
    groups = np.asarray(groups)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n = len(groups)
    if fraction >= 1.0:
        return np.arange(n)
    budget = max(min_per_task, int(round(fraction * n)))
    chosen: list[np.ndarray] = []
    for g in rng.permutation(np.unique(groups)):
        if budget <= 0:
            break
        members = np.nonzero(groups == g)[0]
        k = min(len(members), max(min_per_task, int(round(fraction * len(members)))), budget)
        if k < min(min_per_task, len(members)):
            continue  # not enough budget left for a rankable batch of this task; a smaller task may fit
        chosen.append(rng.choice(members, size=k, replace=False))
        budget -= k
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, np.int64)
