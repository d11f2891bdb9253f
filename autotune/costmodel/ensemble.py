"""A committee of different cost models (kind ``ensemble``): one score, and the members' disagreement.

Models of different families make some of their mistakes on different tasks (``experiments/costmodel/
results/top1_analysis.md`` lists, per model, the tasks where it picks a program >= 2x slower than the best),
so their average can rank better than each alone: on the held-out models the shipped committee has the
best pairwise accuracy and top-1 on unseen tasks of ``results/comparison.md``, its top-1 over all tasks level
with the best single models. ``EnsembleCostModel`` fits
every kind in ``members`` on the same data (each with the ensemble's seed, so member ``k`` of an
ensemble fitted with seed ``s`` is the model ``create(k, seed=s)`` would give), and puts their scores on
one scale before averaging: ranking objectives give scores with no common unit, so each member's score
is centred by its mean over the training programs and divided by its mean within-task standard
deviation there (the spread that matters for ranking inside a task). The scale is fixed at fit time, so
a program's score does not depend on which other programs are in the batch (MetaSchedule's search
compares scores across batches). The spread is the standard deviation of the members' scaled scores:
where the families disagree, the program is worth measuring (the uncertainty the samplers read).

A kind may repeat (``members=["seq-lstm"] * 3``, the registered ``seq-lstm-x3``): a seed ensemble, a deep
ensemble in the sense of Lakshminarayanan et al. 2017. The ``n`` copies of a kind in an ensemble fitted with
seed ``s`` get seeds ``s*n .. s*n + n-1`` (a kind that appears once keeps ``s``, as above), so ensembles of
different seeds share no member. Torch fits vary a lot with the seed (seq-lstm's held-out top-1 ranged
0.37-0.63 over three seeds on the main set); averaging seeds cut that spread to a quarter on the Rocket Lake
set without raising the mean (``experiments/costmodel/results/cpu-rocketlake-2c/comparison.md``).

``risk`` > 0 makes the score a lower confidence bound, mean - risk x spread: a program ranks high only
when the members agree it is fast. Held-out top-1 is lost mostly to a few picks several times slower than
the task's best (``results/top1_analysis.md``), the picks one member overrates; averaging keeps them near
the top, the bound pushes them down. The spread returned is the members' disagreement either way. Chosen on
validation networks it did not pay (``experiments/costmodel/risk_select.py``, results/cpu-rocketlake-2c/
risk_select.md: the mean was best), so no registered kind sets it.

Fine-tuning (the search's online update) fine-tunes every member that can be fine-tuned, on the same
data, and keeps the scales.
"""

from __future__ import annotations

import os

import numpy as np

from .base import CostModel, ModelFileError, NotFittedError, read_model_meta
from .inputs import ProgramBatch


def save_members(path: str, members: list[CostModel], prefix: str = "member") -> list[str]:
    """Saves each member in its own sub-folder of ``path``; returns the sub-folder names (in order)."""
    subs = []
    for i, member in enumerate(members):
        sub = f"{prefix}{i}"
        member.save(os.path.join(path, sub))
        subs.append(sub)
    return subs


def load_members(path: str, subs: list[str]) -> list[CostModel]:
    """The members ``save_members`` wrote, each loaded by the kind its own model.json names."""
    from . import load

    out = []
    for sub in subs:
        read_model_meta(os.path.join(path, sub))  # a missing or stale member names its own folder
        out.append(load(os.path.join(path, sub)))
    return out


def within_task_scale(score: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """(mean, mean within-task sd) of ``score`` over tasks with >= 2 programs; sd 1 when no task spreads."""
    score = np.asarray(score, dtype=np.float64)
    order = np.argsort(groups, kind="stable")
    _, starts, counts = np.unique(np.asarray(groups)[order], return_index=True, return_counts=True)
    sds = [score[order[s:s + c]].std() for s, c in zip(starts, counts) if c >= 2]
    sd = float(np.mean(sds)) if sds else 0.0
    return float(score.mean()), (sd if sd > 0 else 1.0)


class EnsembleCostModel(CostModel):
    name = "ensemble"
    gives_spread = True

    # the committee chosen on validation networks within 10 MB (experiments/costmodel/results/ensemble_select.md)
    def __init__(self, members: list[str] | tuple[str, ...] = ("xgb-reg", "ms-mlp", "seq-top"),
                 member_params: dict | None = None, seed: int = 0, risk: float = 0.0):
        if not (isinstance(risk, (int, float)) and np.isfinite(risk) and risk >= 0):
            raise ValueError(f"ensemble: risk must be a number >= 0 (0: the members' mean); got {risk!r}")
        self.members = list(members)
        self.member_params = member_params
        self.seed = seed
        self.risk = float(risk)

    @property
    def uses_traces(self) -> bool:  # type: ignore[override]
        from . import model_class

        return any(model_class(k).uses_traces for k in self.members)

    def _check(self) -> None:
        from . import REGISTRY, model_class

        bad = [k for k in self.members if k not in REGISTRY or model_class(k) is EnsembleCostModel]
        if len(self.members) < 2 or bad:
            raise ValueError(f"ensemble: members must be 2 or more kinds (a kind may repeat: seeds) from "
                             f"{', '.join(k for k in REGISTRY if model_class(k) is not EnsembleCostModel)}; "
                             f"got {self.members}")

    def member_seeds(self) -> list[int]:
        """Each member's seed: the ensemble's seed for a kind that appears once; copy ``j`` of a kind that
        appears ``n`` times gets ``seed*n + j``."""
        counts = {k: self.members.count(k) for k in self.members}
        seen: dict[str, int] = {}
        out = []
        for k in self.members:
            j = seen[k] = seen.get(k, -1) + 1
            out.append(self.seed * counts[k] + j if counts[k] > 1 else self.seed)
        return out

    def _member(self, kind: str, seed: int) -> CostModel:
        from . import create_seeded

        member = create_seeded(kind, seed, **(self.member_params or {}).get(kind, {}))
        return member.set_threads(self.threads_) if getattr(self, "threads_", None) else member

    def set_threads(self, n: int) -> CostModel:
        """Threads of every member, fitted or fitted later."""
        self.threads_ = int(n)
        for member in getattr(self, "members_", []):
            member.set_threads(n)
        return self

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        self._check()
        self.members_ = [self._member(k, s).fit(X, y, groups, latency=self.fit_latency_) for k, s in zip(self.members, self.member_seeds())]
        self.norm_ = [within_task_scale(m.predict(X), groups) for m in self.members_]

    @classmethod
    def from_fitted(cls, members: list[CostModel], X: ProgramBatch, groups: np.ndarray, seed: int = 0,
                    risk: float = 0.0) -> EnsembleCostModel:
        """The ensemble whose members are the already fitted ``members`` (``X``, ``groups``: the programs they
        were fitted on, which set each member's scale as ``fit`` does). Members fitted with seeds
        ``member_seeds()`` give the model ``fit`` would have made, without fitting again."""
        from . import registered_kind

        if not members or not all(m.is_fitted for m in members):
            raise NotFittedError("EnsembleCostModel.from_fitted: every member must be fitted")
        ens = cls(members=[registered_kind(m) for m in members], seed=seed, risk=risk)
        ens._check()
        ens.members_ = list(members)
        ens.norm_ = [within_task_scale(m.predict(X), np.asarray(groups)) for m in members]
        ens.fitted_ = True
        return ens

    def member_scores(self, X: ProgramBatch) -> np.ndarray:
        """(members, programs): each member's score on the common scale."""
        if not self.is_fitted:
            raise NotFittedError("EnsembleCostModel is not fitted; call fit() or load() first")
        return self.common_scale([m.predict(X) for m in self.members_])

    def common_scale(self, raw: list[np.ndarray]) -> np.ndarray:
        """(members, programs): the members' own predictions ``raw`` on the common scale (their stored norms)."""
        return np.stack([(r - mu) / sd for r, (mu, sd) in zip(raw, self.norm_)])

    def combine(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ensemble's score and spread from ``member_scores``' (members, programs)."""
        spread = scores.std(0)
        return scores.mean(0) - self.risk * spread, spread

    def _predict(self, X: ProgramBatch):
        return self.combine(self.member_scores(X))

    def _fine_tune_from(self, base, X, y, groups, steps) -> None:
        members = []
        for member in base.members_:
            try:
                members.append(member.fine_tune(X, y, groups, steps=steps))
            except NotImplementedError:  # a member that cannot learn more keeps its pretrained scores
                members.append(member)
        self.members_, self.norm_ = members, list(base.norm_)

    def _state(self, path: str) -> dict:
        return {"members": save_members(path, self.members_), "norm": self.norm_}

    def _restore(self, path: str, state: dict) -> None:
        from . import registered_kind

        self.members_ = load_members(path, state["members"])
        self.norm_ = [tuple(n) for n in state["norm"]]
        kinds = [registered_kind(m) for m in self.members_]
        if kinds != self.members or len(self.norm_) != len(kinds):
            raise ModelFileError(f"{path}: its member folders hold {kinds}, its model.json names {self.members}")
