"""The random baseline: scores are noise (what a search without a cost model ranks by)."""

from __future__ import annotations

import numpy as np

from .base import CostModel
from .inputs import ProgramBatch


class RandomCostModel(CostModel):
    uses_traces = False
    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        self.calls_ = 0

    def _predict(self, X: ProgramBatch):
        self.calls_ = getattr(self, "calls_", 0) + 1
        rng = np.random.default_rng([self.seed, self.calls_])
        return rng.random(len(X)), np.zeros(len(X))

    def _fine_tune_from(self, base, X, y, groups, steps) -> None:
        self.calls_ = 0  # noise does not learn

    def _state(self, path: str) -> dict:
        return {}

    def _restore(self, path: str, state: dict) -> None:
        self.calls_ = 0
