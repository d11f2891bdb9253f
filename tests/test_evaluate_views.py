"""Held-out views (all / search-produced programs / tasks no training model shares), hand-computed."""

import json

import numpy as np
import pytest

from autotune.costmodel.data import TrainingData
from autotune.costmodel.evaluate import evaluate, over_seeds, paired, shared_with_training
from autotune.costmodel.inputs import N_STORE_FEATS, ProgramBatch


class ColumnModel:
    """Predicts the first store feature: the test writes the score it wants there."""

    def predict(self, batch):
        return batch.packsum()[:, 0].astype(float)


def _data(scores, latency, groups, sampler, tasks, keys):
    n = len(scores)
    feats = np.zeros((n, N_STORE_FEATS), np.float32)
    feats[:, 0] = scores
    trace = json.dumps([[["Split", ["l1"], [], ["l2"]]], []])
    batch = ProgramBatch.from_traces([trace] * n, feats, np.arange(n + 1))
    return TrainingData(batch, np.asarray(latency, float), np.asarray(groups), keys, tasks, {},
                        np.asarray(sampler, dtype=object))


def test_views_hand_computed():
    # task a: only in held-out m (weight 1); task b: in m (weight 3) and in training model r (shared)
    tasks = {"a": {"name": "a", "models": ["m"], "model_weights": {"m": 1}, "args_info": [[1, 2]]},
             "b": {"name": "b", "models": ["m", "r"], "model_weights": {"m": 3, "r": 1}, "args_info": [[5]]}}
    lat = [1.0, 2.0, 8.0, 10.0, 20.0, 40.0]
    grp = [0, 0, 0, 1, 1, 1]
    smp = ["random", "evolutionary", "evolutionary", "random", "evolutionary", "evolutionary"]
    # the model ranks: task a -> 2.0 first; task b -> 20.0 first
    score = [0.0, 1.0, 0.5, 0.0, 1.0, 0.5]
    data = _data(score, lat, grp, smp, tasks, ["a", "b"])
    assert shared_with_training(tasks, ["a", "b"], ["m"]) == {"b"}
    # a training-only task with a's argument shapes makes a a near-duplicate too
    twin = {**tasks, "c": {"name": "c", "models": ["r"], "model_weights": {"r": 1}, "args_info": [[1, 2]]}}
    assert shared_with_training(twin, ["a", "b"], ["m"]) == {"a", "b"}
    res = evaluate(ColumnModel(), data, {"m": ["a", "b"]})
    # all: (1*1 + 3*10) / (1*2 + 3*20)
    assert res["m"]["top1"] == pytest.approx(31 / 62)
    # search view: task a best of {2, 8} = 2 picked 2 -> 1; task b best of {20, 40} = 20 picked -> 1
    assert res["views"]["search"]["m"]["top1"] == pytest.approx(1.0)
    # unseen view: only task a -> 1/2
    assert res["views"]["unseen"]["m"]["top1"] == pytest.approx(0.5)
    assert res["views"]["unseen"]["m"]["tasks"] == 1


def test_over_seeds_and_paired():
    runs = [{"views": {"all": {"mean": {"top1": v, "top5": 0.9, "pairwise": 0.7}}}} for v in (0.5, 0.6, 0.7)]
    agg = over_seeds(runs)["all"]
    assert agg["n"] == 3 and agg["mean"]["top1"] == pytest.approx(0.6) and agg["sd"]["top1"] == pytest.approx(0.1)
    p = paired([0.6, 0.7, 0.8], [0.5, 0.5, 0.6])
    assert p["mean_diff"] == pytest.approx(0.5 / 3) and p["wins"] == 3
    assert p["clear"] is True  # diffs 0.1, 0.2, 0.2: mean 0.167 > sd 0.058
    assert paired([0.6, 0.5], [0.5, 0.6])["clear"] is False
    # two deterministic models: the same difference on every seed is no evidence of a margin over seed spread
    same = paired([0.7, 0.7, 0.7], [0.1, 0.1, 0.1])
    assert same["clear"] is False and same["no_spread"] is True and same["mean_diff"] == pytest.approx(0.6)
    assert p["no_spread"] is False
