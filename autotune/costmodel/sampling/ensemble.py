"""A bootstrap ensemble of any cost model: a real spread for the uncertainty-based samplers.

``xgb`` and ``seq`` (one head) report spread 0. ``BootstrapEnsemble`` fits ``n_members`` copies,
each on a bootstrap resample of the programs drawn within every task (so every task keeps its size
and a ranking objective its groups), with its own seed. Ranking scores have no common scale, so
each member's scores are standardized by the mean and sd it gives its own training programs;
the score is the members' mean, the spread their standard deviation.
"""

from __future__ import annotations

import numpy as np

from ..base import CostModel
from ..ensemble import load_members, save_members
from ..inputs import ProgramBatch

SMALL_XGB = {"n_estimators": 80, "max_depth": 6, "learning_rate": 0.2, "subsample": 0.8, "nthread": 1}


def bootstrap_within_groups(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row indices: each task's rows resampled with replacement, as many as it has."""
    order = np.argsort(groups, kind="stable")
    _, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    owner = np.repeat(np.arange(len(starts)), counts)
    pick = starts[owner] + np.floor(rng.random(len(order)) * counts[owner]).astype(np.int64)
    return np.sort(order[pick])


class BootstrapEnsemble(CostModel):
    name = "bootstrap-ensemble"
    gives_spread = True  # (all 0 only when every member agrees, e.g. trained on one program per task)

    def __init__(
        self, kind: str = "xgb", n_members: int = 4, member_params: dict | None = None, seed: int = 0
    ):
        self.kind = kind
        self.n_members = n_members
        self.member_params = member_params
        self.seed = seed

    @property
    def uses_traces(self) -> bool:  # type: ignore[override]
        from .. import model_class

        return model_class(self.kind).uses_traces

    def _member(self, i: int) -> CostModel:
        from .. import create_seeded

        params = dict(
            SMALL_XGB if self.member_params is None and self.kind == "xgb" else self.member_params or {}
        )
        return create_seeded(self.kind, self.seed * 1000 + i, **params)

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        if self.n_members < 2:
            raise ValueError(f"BootstrapEnsemble: n_members must be >= 2 for a spread, got {self.n_members}")
        rng = np.random.default_rng(self.seed)
        self.members_, self.norm_ = [], []
        for i in range(self.n_members):
            rows = bootstrap_within_groups(groups, rng)
            member = self._member(i).fit(X.subset(rows), y[rows], groups[rows])
            own = member.predict(X)
            self.members_.append(member)
            self.norm_.append((float(own.mean()), float(own.std()) or 1.0))

    def _predict(self, X: ProgramBatch):
        scores = np.stack([(m.predict(X) - mu) / sd for m, (mu, sd) in zip(self.members_, self.norm_)])
        return scores.mean(0), scores.std(0)

    def _state(self, path: str) -> dict:
        return {"members": save_members(path, self.members_), "norm": self.norm_}

    def _restore(self, path: str, state: dict) -> None:
        self.members_ = load_members(path, state["members"])
        self.norm_ = [tuple(n) for n in state["norm"]]
