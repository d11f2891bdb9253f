"""The contract every transfer method passes (``autotune.costmodel.transfer``), on tiny synthetic data.

Two synthetic hardware share tasks but rank programs differently (another best tile size, half of the
informative store features weighted differently), so a model must learn from target data to rank
target programs well. ``tests/test_transfer_contract.py`` runs ``check_method`` for every registered
method and every cost-model kind it supports. No TVM; seconds per case.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np

from autotune.costmodel import create, load
from autotune.costmodel.inputs import N_STORE_FEATS, ProgramBatch, normalized_throughput
from autotune.costmodel.metrics import pairwise_accuracy
from autotune.costmodel.transfer import REGISTRY, Programs, TransferError, TransferInputs, method_class
from autotune.costmodel.transfer import create as create_method
from autotune.testing.programs import tile_program

KINDS = ("xgb", "seq", "ms-mlp")
SOURCE_PARAMS = {"xgb": {"n_estimators": 60}, "seq": {"epochs": 12, "num_threads": 1},
                 "ms-mlp": {"epochs": 15, "num_threads": 1}}
METHOD_PARAMS = {"finetune": {"steps": 80, "rounds": 40}, "mtl": {"steps": 80, "replay": 400},
                 "ckd": {"steps": 80, "rounds": 40, "replay": 400, "unlabeled_max": 400},
                 "scratch": {"params": {"epochs": 12}}}


@dataclass
class Hardware:
    """Latency model of one synthetic hardware: best tile ``opt`` and store-feature weights ``w``."""

    opt: float
    w: np.ndarray

    def latency(self, a: np.ndarray, store_sum: np.ndarray, task: np.ndarray) -> np.ndarray:
        return np.exp(0.4 * np.abs(np.log2(a) - self.opt) + 0.3 * store_sum @ self.w + 0.1 * task)


def synthetic_programs(tasks, per_task: int, rng) -> tuple[ProgramBatch, np.ndarray, np.ndarray, np.ndarray]:
    """(batch, tile a, pack-summed store features, task id) of ``per_task`` random programs per task."""
    traces, feats, offsets, tile, groups = [], [], [0], [], []
    for t in tasks:
        for _ in range(per_task):
            a, trace, f = tile_program(rng, t)
            traces.append(trace)
            feats.append(f)
            offsets.append(offsets[-1] + len(f))
            tile.append(a)
            groups.append(t)
    batch = ProgramBatch.from_traces(traces, np.concatenate(feats), np.array(offsets))
    return batch, np.array(tile, float), batch.packsum(), np.array(groups)


def synthetic_pair(n_train_tasks: int = 10, n_test_tasks: int = 4, per_task: int = 24, seed: int = 0) -> dict:
    """Programs of a source and a target hardware on the same tasks (tasks >= n_train_tasks are held
    out). Returns Programs: ``source`` (labelled, training tasks), ``target`` (labelled, training tasks),
    ``unlabeled`` (more target programs, no y), ``source_test`` / ``target_test`` (held-out tasks, with
    ``latency_*`` arrays for the metrics), and the two ``Hardware``."""
    rng = np.random.default_rng(seed)
    w_src = np.zeros(N_STORE_FEATS)
    w_src[1:9] = rng.normal(size=8)
    w_tgt = w_src.copy()
    w_tgt[1:5] = rng.normal(size=4)  # half of the informative features act differently on the target
    hw = {"source": Hardware(3.0, w_src), "target": Hardware(1.0, w_tgt)}
    train, test = range(n_train_tasks), range(n_train_tasks, n_train_tasks + n_test_tasks)
    out: dict = {"hardware": hw}

    def labelled(name, tasks, h):
        batch, a, s, g = synthetic_programs(tasks, per_task, rng)
        lat = hw[h].latency(a, s, g)
        out["latency_" + name] = lat
        return Programs(batch, g, normalized_throughput(lat, g))

    out["source"] = labelled("source", train, "source")
    out["target"] = labelled("target", train, "target")
    out["source_test"] = labelled("source_test", test, "source")
    out["target_test"] = labelled("target_test", test, "target")
    batch, _, _, g = synthetic_programs(train, per_task, rng)
    out["unlabeled"] = Programs(batch, g)
    return out


def train_source(kind: str, pair: dict, seed: int = 0):
    s = pair["source"]
    return create(kind, **{**SOURCE_PARAMS.get(kind, {}), "seed": seed}).fit(s.batch, s.y, s.groups)


def accuracy(model, pair: dict, which: str) -> float:
    """Pairwise accuracy of ``model`` on the held-out tasks of ``which`` ("source_test"/"target_test")."""
    p = pair[which]
    return pairwise_accuracy(pair["latency_" + which], model.predict(p.batch), p.groups)


def method_params(name: str, kind: str) -> dict:
    params = dict(METHOD_PARAMS.get(name, {}))
    if name == "scratch" and kind == "xgb":
        params["params"] = {"n_estimators": 60}
    if "num_threads" in method_class(name)().get_params():
        params["num_threads"] = 1
    return params


def check_method(name: str, kind: str, pair: dict, source) -> dict:
    """Runs the contract for method ``name`` on a fitted ``source`` model of ``kind``; returns the
    held-out pairwise accuracies {"target": ..., "source": ...} of the transferred model.

    Checks: parameters round-trip; an unsupported kind raises TransferError; the source model is not
    modified; the result is a fitted model of the source's kind and hyperparameters that saves and loads
    to the same predictions; the same seed gives the same model; a method missing an input it needs
    says so with TransferError.
    """
    cls = method_class(name)
    method = create_method(name, **method_params(name, kind))
    assert create_method(name, **method.get_params()).get_params() == method.get_params(), "params round-trip"
    inputs = TransferInputs(target=pair["target"], source=pair["source"], unlabeled=pair["unlabeled"])
    reason = method.supports(source)
    assert reason == method.supports(type(source)) or reason is not None, "supports(instance) vs (class)"
    if reason:
        try:
            method.transfer(source, inputs)
        except TransferError as err:
            assert source.name in str(err)
            return {}
        raise AssertionError(f"{name} on {kind}: supports() said no ({reason}) but transfer ran")
    probe = pair["source_test"].batch
    before = source.predict(probe)
    model = method.transfer(source, inputs)
    np.testing.assert_allclose(source.predict(probe), before, err_msg=f"{name} modified the source model")
    assert model is not source and model.is_fitted and model.name == source.name
    free = {"seed", *(method.get_params().get("params") or {})}  # scratch may override some
    assert {k: v for k, v in model.get_params().items() if k not in free} == \
        {k: v for k, v in source.get_params().items() if k not in free}, "result keeps the source hyperparameters"
    target_batch = pair["target_test"].batch
    score = model.predict(target_batch)
    assert score.shape == (len(target_batch),) and np.all(np.isfinite(score))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m")
        model.save(path)
        np.testing.assert_allclose(load(path).predict(target_batch), score, rtol=1e-5, atol=1e-6)
    again = create_method(name, **method.get_params()).transfer(source, inputs)
    np.testing.assert_allclose(again.predict(target_batch), score, rtol=1e-5, atol=1e-6,
                               err_msg=f"{name}: same seed, different model")
    if name in ("mtl", "ckd"):
        bare = TransferInputs(target=pair["target"])
        try:
            method.transfer(source, bare)
        except TransferError:
            pass
        else:
            raise AssertionError(f"{name} ran without the source/unlabeled programs it needs")
    if cls.needs_source_model:
        try:
            method.transfer(None, inputs)
        except TransferError:
            pass
        else:
            raise AssertionError(f"{name} ran without a source model")
    return {"target": accuracy(model, pair, "target_test"), "source": accuracy(model, pair, "source_test")}


__all__ = ["KINDS", "REGISTRY", "accuracy", "check_method", "synthetic_pair", "train_source"]
