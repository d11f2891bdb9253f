"""Which of the search's proposals to measure (``--batch-selection``, issue 13 item 3).

``greedy`` is MetaSchedule's own choice: the evolutionary search proposes ``--trials-per-round``
candidates (best predicted, plus eps-greedy random ones) and all are measured. Any other name is an
active-learning sampler of ``autotune.costmodel.sampling``: the search proposes ``oversample`` times
as many candidates, and the sampler picks ``--trials-per-round`` of them, seeing

- the pool: the proposals plus the programs of the task this run has measured (never picked; they
  are what the batch-aware samplers count as covered), in per-store feature space;
- the scores the run's cost model gives the proposals (its ``predict``: higher = predicted faster);
- a spread, for the samplers that need one (``rdu``, ``uncertainty``): a small bootstrap ensemble of
  XGBoost models fitted on the task's measured programs of this run, refitted every round. Until a
  task has ``MIN_MEASURED_FOR_SPREAD`` valid measurements those samplers fall back to the greedy choice
  (the log says so).
"""

from __future__ import annotations

import logging

import numpy as np

from autotune.costmodel.inputs import ProgramBatch
from autotune.costmodel.sampling import REGISTRY, BootstrapEnsemble, Pool, create

logger = logging.getLogger(__name__)

GREEDY = "greedy"
MIN_MEASURED_FOR_SPREAD = 8


def choices() -> list[str]:
    return [GREEDY, *REGISTRY]


class _Scores:
    """The sampler's view of a model: scores (and a spread) already computed for the pool's rows."""

    is_fitted = True

    def __init__(self, score: np.ndarray, spread: np.ndarray | None):
        self.score, self.spread = score, spread
        self.gives_spread = spread is not None

    def predict_with_spread(self, batch) -> tuple[np.ndarray, np.ndarray]:
        return self.score, self.spread if self.spread is not None else np.zeros_like(self.score)


class BatchSelector:
    """Per task: the features and latencies of what this run measured, and the choice of each round."""

    def __init__(self, name: str, oversample: int = 4, seed: int = 0):
        self.name, self.oversample, self.seed = name, oversample, seed
        self.sampler = None if name == GREEDY else create(name)
        self.measured: dict[str, tuple[list, list]] = {}  # task -> (per-program store features, latency s)
        self.stats = {"rounds": 0, "selected_rounds": 0, "fallback_rounds": 0}

    @property
    def proposals_per_round(self) -> int:
        return 1 if self.sampler is None else self.oversample

    def choose(self, task: str, store_feats: list[np.ndarray], scores: np.ndarray | None, k: int) -> np.ndarray:
        """Indices (into the proposals) of the ``k`` to measure."""
        self.stats["rounds"] += 1
        n = len(store_feats)
        if self.sampler is None or n <= k:
            return np.arange(min(k, n))
        feats, lat = self.measured.get(task, ([], []))
        spread = None
        if self.sampler.needs_spread:
            spread = self._spread(store_feats, feats, lat)
            if spread is None:
                self.stats["fallback_rounds"] += 1
                logger.debug("%s: %d measured so far, %s needs %d for a spread: greedy this round", task,
                             len(lat), self.name, MIN_MEASURED_FOR_SPREAD)
                return np.arange(k)
        if self.sampler.needs_model and scores is None:
            self.stats["fallback_rounds"] += 1
            return np.arange(k)
        every = list(store_feats) + list(feats)
        batch = ProgramBatch.from_programs(every)
        m = len(every) - n
        full_scores = np.concatenate([scores if scores is not None else np.zeros(n), np.zeros(m)])
        full_spread = None if spread is None else np.concatenate([spread, np.zeros(m)])
        pool = Pool(batch, np.zeros(len(every), np.int64))
        measured = np.arange(n, len(every))
        picked = self.sampler.select(pool, measured, _Scores(full_scores, full_spread), k=k,
                                     rng=self.seed * 7919 + self.stats["rounds"])
        self.stats["selected_rounds"] += 1
        return np.asarray(picked, np.int64)

    def record(self, task: str, store_feats: list[np.ndarray], latencies: list[float | None]) -> None:
        """What was measured (failed programs count as covered for diversity, not for the spread)."""
        feats, lat = self.measured.setdefault(task, ([], []))
        feats.extend(store_feats)
        lat.extend(latencies)

    def _spread(self, proposals: list[np.ndarray], feats: list, lat: list) -> np.ndarray | None:
        ok = [i for i, x in enumerate(lat) if x is not None]
        if len(ok) < MIN_MEASURED_FOR_SPREAD:
            return None
        train = ProgramBatch.from_programs([feats[i] for i in ok])
        secs = np.asarray([lat[i] for i in ok], np.float64)
        ens = BootstrapEnsemble("xgb", n_members=4, seed=self.seed)
        ens.fit(train, secs.min() / secs, np.zeros(len(ok), np.int64))  # normalized throughput (the contract's y)
        _, spread = ens.predict_with_spread(ProgramBatch.from_programs(proposals))
        return np.asarray(spread, np.float64)

