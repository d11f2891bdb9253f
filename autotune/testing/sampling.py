"""The contract every active-learning sampler passes (``autotune.costmodel.sampling.REGISTRY``).

tests/test_sampling.py subclasses ``SamplerContract``; its ``sampler_name`` fixture runs every
test over every registered sampler, so a new sampler is checked by registering it. TVM-free.
"""

from __future__ import annotations

import numpy as np
import pytest

from autotune.costmodel import create as create_model
from autotune.costmodel.inputs import N_STORE_FEATS, ProgramBatch, normalized_throughput
from autotune.costmodel.sampling import REGISTRY, BootstrapEnsemble, Pool, create
from autotune.testing.programs import synthetic

SMALL = {"n_estimators": 20, "max_depth": 4, "nthread": 1}


def pool_and_model(n_tasks: int = 12, per_task: int = 40, seed: int = 0):
    """A synthetic pool (tasks of ``per_task`` programs), a random quarter of each task measured,
    and a bootstrap ensemble fitted on the measured part."""
    batch, lat, groups = synthetic(n_tasks, per_task, seed)
    measured = np.random.default_rng(seed).random(len(groups)) < 0.25
    model = BootstrapEnsemble("xgb", n_members=3, member_params=SMALL, seed=seed)
    m = np.nonzero(measured)[0]
    model.fit(batch.subset(m), normalized_throughput(lat[m], groups[m]), groups[m])
    return Pool(batch, groups), measured, model


def copies_pool(n_tasks: int = 6, distinct: int = 8, copies: int = 4, seed: int = 0) -> Pool:
    """Each task: ``distinct`` programs, each present ``copies`` times (identical features)."""
    rng = np.random.default_rng(seed)
    feats = rng.random((n_tasks * distinct, N_STORE_FEATS)).astype(np.float32) * 10
    feats = np.repeat(feats, copies, axis=0)
    groups = np.repeat(np.arange(n_tasks), distinct * copies)
    batch = ProgramBatch.from_store(feats, np.arange(len(feats) + 1))
    return Pool(batch, groups)


class SamplerContract:
    @pytest.fixture(params=list(REGISTRY))
    def sampler_name(self, request) -> str:
        return request.param

    @pytest.fixture(scope="class")
    @classmethod
    def setup(cls):
        return pool_and_model()

    def _model(self, sampler, model):
        return model if sampler.needs_model else None

    def test_k_unique_valid_unmeasured(self, sampler_name, setup):
        pool, measured, model = setup
        sampler = create(sampler_name)
        for k in (1, 7, 48):
            out = sampler.select(pool, measured, self._model(sampler, model), k, rng=0)
            assert out.dtype == np.int64 and out.shape == (k,)
            assert len(np.unique(out)) == k
            assert out.min() >= 0 and out.max() < len(pool)
            assert not measured[out].any(), "picked a measured program"

    def test_deterministic_for_a_seed(self, sampler_name, setup):
        pool, measured, model = setup
        sampler = create(sampler_name)
        m = self._model(sampler, model)
        a = sampler.select(pool, measured, m, 30, rng=3)
        np.testing.assert_array_equal(a, sampler.select(pool, measured, m, 30, rng=np.random.default_rng(3)))
        # measured given as indices or as a mask: the same
        np.testing.assert_array_equal(a, sampler.select(pool, np.nonzero(measured)[0], m, 30, rng=3))

    def test_k_beyond_the_pool(self, sampler_name, setup):
        pool, measured, model = setup
        sampler = create(sampler_name)
        m = self._model(sampler, model)
        out = sampler.select(pool, measured, m, 10**6, rng=0)
        np.testing.assert_array_equal(np.sort(out), np.nonzero(~measured)[0])
        assert sampler.select(pool, measured, m, 0, rng=0).shape == (0,)
        assert sampler.select(pool, np.ones(len(pool), bool), m, 5, rng=0).shape == (0,)

    def test_bad_input(self, sampler_name, setup):
        pool, measured, model = setup
        sampler = create(sampler_name)
        m = self._model(sampler, model)
        for bad_k in (-1, 2.5, True):
            with pytest.raises(ValueError, match="k must be"):
                sampler.select(pool, measured, m, bad_k, rng=0)
        with pytest.raises(ValueError, match="measured"):
            sampler.select(pool, [len(pool)], m, 3, rng=0)
        with pytest.raises(ValueError, match="measured"):
            sampler.select(pool, measured[:-1], m, 3, rng=0)

    def test_capabilities(self, sampler_name, setup):
        pool, measured, model = setup
        sampler = create(sampler_name)
        if sampler.needs_model:
            with pytest.raises(ValueError, match=f"{sampler_name}.*fitted cost model"):
                sampler.select(pool, measured, None, 5, rng=0)
        else:  # model-free samplers work on bare features, one task
            feats = pool.batch.packsum()
            out = sampler.select(feats, None, None, 9, rng=0)
            assert len(np.unique(out)) == 9
        if sampler.needs_spread:
            plain = create_model("xgb", **SMALL)
            m = np.nonzero(measured)[0]
            plain.fit(pool.batch.subset(m), np.ones(len(m)), pool.groups[m])
            with pytest.raises(ValueError, match="BootstrapEnsemble"):
                sampler.select(pool, measured, plain, 5, rng=0)

    def test_shares_k_among_tasks(self, sampler_name, setup):
        pool, _, model = setup
        sampler = create(sampler_name)
        n_tasks = len(np.unique(pool.groups))
        out = sampler.select(pool, None, self._model(sampler, model), 2 * n_tasks, rng=1)
        counts = np.bincount(pool.groups[out], minlength=n_tasks)
        if sampler.per_task:  # equal tasks, 2 programs each
            assert (counts == 2).all(), counts
            odd = sampler.select(pool, None, self._model(sampler, model), n_tasks - 1, rng=1)
            assert not (np.bincount(pool.groups[odd], minlength=n_tasks) == 1).sum() > 1, (
                "lone programs in tasks"
            )

    @pytest.mark.parametrize("aware_name", [name for name, cls in REGISTRY.items() if cls.batch_aware])
    def test_batch_aware_never_picks_copies(self, aware_name, setup):
        _, _, model = setup
        sampler = create(aware_name)
        pool = copies_pool()
        emb = pool.embedding()
        program = np.unique(emb, axis=0, return_inverse=True)[1].ravel()  # copies share an id
        measured = np.zeros(len(pool), bool)
        measured[:: 8 * 4] = True  # one program per task measured
        out = sampler.select(pool, measured, self._model(sampler, model), 3 * 6, rng=0)
        chosen = np.concatenate([program[out], program[measured]])
        assert len(np.unique(chosen)) == len(chosen), "picked two copies of one program"
