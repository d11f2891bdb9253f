"""The contract every online-update strategy meets (TVM-free, a few seconds for all of them).

tests/test_online_update_contract.py runs every check on every registered strategy::

    @pytest.mark.parametrize("name", list(ONLINE_UPDATES))
    @pytest.mark.parametrize("check", CHECKS)
    def test_online_update_contract(name, check, online_case):
        check(name, online_case)

The case: synthetic programs of 12 tasks; a pretrained XGBoost fitted on tasks 0-8 (good) and one
fitted on inverted labels (misleading); task 10 is the task being tuned: 24 of its programs are
"measured", the other 16 are the candidates to rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autotune.costmodel import CostModel, ProgramBatch, create
from autotune.costmodel.inputs import normalized_throughput
from autotune.costmodel.metrics import pairwise_accuracy
from autotune.costmodel.online import ONLINE_UPDATES, OnlineLearner, OnlineUpdate
from autotune.testing.programs import synthetic

TASK = "t10"
MIN_ONLINE = 16


@dataclass(frozen=True)
class OnlineCase:
    batch: ProgramBatch
    latency: np.ndarray
    groups: np.ndarray
    good: CostModel  # ranks the task's programs well (pairwise ~0.8)
    misleading: CostModel  # ranks them backwards (pairwise ~0.2)
    seen: np.ndarray  # indices of the task's measured programs
    rest: np.ndarray  # indices of the candidates to rank

    def accuracy(self, score: np.ndarray) -> float:
        return pairwise_accuracy(self.latency[self.rest], score, self.groups[self.rest])


def make_case(seed: int = 0) -> OnlineCase:
    batch, lat, groups = synthetic(seed=seed)
    old = groups < 9
    pretrained = {}
    for name, labels in (("good", lat), ("misleading", 1.0 / lat)):
        y = normalized_throughput(labels, groups)
        pretrained[name] = create("xgb", n_estimators=60).fit(batch.subset(old), y[old], groups[old])
    task = np.nonzero(groups == 10)[0]
    return OnlineCase(batch, lat, groups, pretrained["good"], pretrained["misleading"], task[:24], task[24:])


def _learner(name: str, case: OnlineCase, pretrained: CostModel | None = None, **kw) -> OnlineLearner:
    return OnlineLearner(case.good if pretrained is None else pretrained, mode=name, min_online=MIN_ONLINE, **kw)


def _measure(learner: OnlineLearner, case: OnlineCase, idx: np.ndarray) -> None:
    learner.add(TASK, case.batch.subset(idx), case.latency[idx])


def check_declares_itself(name: str, case: OnlineCase) -> None:
    cls = ONLINE_UPDATES[name]
    assert issubclass(cls, OnlineUpdate) and cls.name == name, f"{cls} is registered as {name!r}"
    assert isinstance(cls.uses_pretrained, bool) and isinstance(cls.learns, bool)
    assert (cls.__doc__ or "").strip(), f"{cls.__name__} needs a one-line docstring (what it does)"
    assert _learner(name, case).mode == name


def check_pretrained_scores_until_min_online(name: str, case: OnlineCase) -> None:
    learner = _learner(name, case)
    _measure(learner, case, case.seen[: MIN_ONLINE - 8])
    rest = case.batch.subset(case.rest)
    assert TASK not in learner.fitted
    np.testing.assert_allclose(learner.predict(TASK, rest), case.good.predict(rest))


def check_learns_from_the_task(name: str, case: OnlineCase) -> None:
    """After ``min_online`` programs: a state iff it learns; ranks well from a good model; a strategy
    that learns recovers much of the ranking when the pretrained model misleads."""
    rest = case.batch.subset(case.rest)
    for pretrained in (case.good, case.misleading):
        learner = _learner(name, case, pretrained)
        _measure(learner, case, case.seen[:8])
        _measure(learner, case, case.seen[8:])
        assert learner.programs(TASK) == len(case.seen)
        assert (TASK in learner.fitted) == ONLINE_UPDATES[name].learns
        score = learner.predict(TASK, rest)
        assert score.shape == (len(case.rest),) and np.all(np.isfinite(score))
        before, after = case.accuracy(pretrained.predict(rest)), case.accuracy(score)
        if pretrained is case.good:
            assert after > 0.7, f"{name}: pairwise {after:.2f} from a good pretrained model"
        elif ONLINE_UPDATES[name].learns:  # measured: +0.30 (blend) to +0.60 (online)
            assert after >= before + 0.15, f"{name} did not learn the task: pairwise {before:.2f} -> {after:.2f}"


def check_pretrained_model_untouched(name: str, case: OnlineCase) -> None:
    rest = case.batch.subset(case.rest)
    before = case.good.predict(rest)
    _measure(_learner(name, case), case, case.seen)
    np.testing.assert_array_equal(case.good.predict(rest), before)


def check_deterministic(name: str, case: OnlineCase) -> None:
    rest = case.batch.subset(case.rest)
    scores = []
    for _ in range(2):
        learner = _learner(name, case, seed=3)
        _measure(learner, case, case.seen)
        scores.append(learner.predict(TASK, rest))
    np.testing.assert_allclose(scores[0], scores[1])


def check_empty_batches(name: str, case: OnlineCase) -> None:
    learner = _learner(name, case)
    _measure(learner, case, case.seen[:0])
    assert learner.programs(TASK) == 0
    _measure(learner, case, case.seen)
    assert learner.predict(TASK, case.batch.subset([])).shape == (0,)


def check_without_pretrained(name: str, case: OnlineCase) -> None:
    """No pretrained model: a strategy that uses one is replaced by one that does not, on features only."""
    learner = OnlineLearner(None, mode=name, min_online=MIN_ONLINE)
    assert not learner.update.uses_pretrained and not learner.uses_traces
    assert learner.mode == (name if not ONLINE_UPDATES[name].uses_pretrained else "online")
    rest = case.batch.subset(case.rest)
    bare = ProgramBatch.from_store(rest.store_feats, rest.offsets)  # what the search passes: no traces
    assert learner.predict(TASK, bare).shape == (len(case.rest),)
    _measure(learner, case, case.seen)
    score = learner.predict(TASK, bare)
    assert np.all(np.isfinite(score)) and case.accuracy(score) > 0.7


CHECKS = [check_declares_itself, check_pretrained_scores_until_min_online, check_learns_from_the_task,
          check_pretrained_model_untouched, check_deterministic, check_empty_batches, check_without_pretrained]
