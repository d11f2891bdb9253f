"""Active-learning samplers: the shared contract over every registered sampler, plus the pieces
(task quotas, the bootstrap ensemble, geometry). No TVM."""

import numpy as np
import pytest

from autotune.costmodel.sampling import REGISTRY, BootstrapEnsemble, create, task_quotas
from autotune.costmodel.sampling.geometry import kcenter_greedy, kmeans
from autotune.testing.sampling import SamplerContract, pool_and_model


class TestEverySampler(SamplerContract):
    pass


def test_registry_and_unknown_names():
    assert {"random", "uncertainty", "diversity", "representativeness", "rdu", "topk-biased"} <= set(REGISTRY)
    with pytest.raises(ValueError, match="valid: random"):
        create("nope")
    with pytest.raises(ValueError, match="valid: .*w_rep"):
        create("rdu", w_bogus=1.0)


@pytest.mark.parametrize(
    "sizes,have,k,expect",
    [
        ([10, 10, 10], [0, 0, 0], 6, [2, 2, 2]),
        ([30, 10], [0, 0], 8, [6, 2]),  # proportional to the pool
        ([10, 10], [5, 0], 5, [0, 5]),  # water-filling: the measured task is already past its share
        ([10, 10], [9, 10], 5, [1, 0]),  # no more than there is
    ],
)
def test_task_quotas(sizes, have, k, expect):
    q = task_quotas(np.array(sizes), np.array(have), k, np.random.default_rng(0))
    assert q.tolist() == expect


def test_task_quotas_pairs_lone_programs():
    q = task_quotas(np.full(10, 30), np.zeros(10, int), 6, np.random.default_rng(0))
    assert q.sum() == 6 and sorted(q.tolist()) == [0] * 7 + [2] * 3
    q = task_quotas(np.full(10, 30), np.zeros(10, int), 6, np.random.default_rng(0), min_per_task=1)
    assert sorted(q.tolist()) == [0] * 4 + [1] * 6


def test_ensemble_spread_is_real_and_saves(tmp_path):
    pool, measured, model = pool_and_model()
    score, spread = model.predict_with_spread(pool.batch)
    assert spread.shape == score.shape and (spread > 0).mean() > 0.9
    # the ensemble learned the hidden ranking on unmeasured programs
    from autotune.costmodel.metrics import pairwise_accuracy
    from autotune.testing.programs import synthetic

    _, lat, groups = synthetic()
    rest = ~measured
    assert pairwise_accuracy(lat[rest], score[rest], groups[rest]) > 0.62  # chance: 0.5
    model.save(str(tmp_path / "ens"))
    again = BootstrapEnsemble.load(str(tmp_path / "ens"))
    np.testing.assert_allclose(again.predict_with_spread(pool.batch)[1], spread, rtol=1e-6)
    with pytest.raises(ValueError, match="n_members"):
        BootstrapEnsemble(n_members=1).fit(pool.batch, np.ones(len(pool)), pool.groups)


def test_kcenter_and_kmeans_cover_clusters():
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], np.float32)
    x = np.concatenate([c + rng.normal(scale=0.1, size=(50, 2)) for c in centres]).astype(np.float32)
    picked = kcenter_greedy(x, 4, np.full(len(x), np.inf), first=0)
    assert sorted(set(picked // 50)) == [0, 1, 2, 3]
    _, labels = kmeans(x, 4, rng)
    assert len(np.unique(labels)) == 4 and all(
        len(np.unique(labels[i * 50 : (i + 1) * 50])) == 1 for i in range(4)
    )
