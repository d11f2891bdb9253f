"""Our cost models inside MetaSchedule's evolutionary search (its ``PyCostModel`` interface).

``LearnedCostModel`` scores candidates with a pretrained model (TVM-free, from models/) and
learns online from the programs measured during the run: a per-task ranking XGBoost on the
same inputs is fitted to this run's measurements and, once a task has enough of them, its
within-batch rank is blended with the pretrained model's (``online_weight``).
"""

from __future__ import annotations

import logging

import numpy as np

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.cost_model import PyCostModel  # noqa: E402

from autotune.costmodel import CostModel, ProgramBatch, create  # noqa: E402
from autotune.costmodel.inputs import normalized_throughput  # noqa: E402
from autotune.tvmrt.database import to_py  # noqa: E402

logger = logging.getLogger(__name__)


def candidates_to_batch(context, candidates, extractor) -> ProgramBatch:
    feats = [f.numpy().astype(np.float32) for f in extractor.extract_from(context, candidates)]
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f in feats])]).astype(np.int64)
    traces = [to_py(c.sch.trace.as_json(remove_postproc=False)) for c in candidates]
    store = np.concatenate(feats) if feats else np.zeros((0, 164), np.float32)
    return ProgramBatch.from_traces(traces, store, offsets)


def _rank01(x: np.ndarray) -> np.ndarray:
    if len(x) <= 1:
        return np.ones_like(x, dtype=np.float64)
    return np.argsort(np.argsort(x, kind="stable"), kind="stable") / (len(x) - 1)


@derived_object
class LearnedCostModel(PyCostModel):
    def __init__(self, pretrained: CostModel | None = None, online_kind: str = "xgb", min_online: int = 32,
                 online_weight: float = 0.5):
        super().__init__()
        self.pretrained = pretrained
        self.online_kind = online_kind
        self.min_online = min_online
        self.online_weight = online_weight
        self.extractor = ms.feature_extractor.PerStoreFeature()
        self._data: dict[str, list] = {}  # task name -> [batches, latencies]
        self._online: dict[str, CostModel] = {}
        self.calls = {"predict": 0, "update": 0, "predicted": 0, "learned": 0}

    def load(self, path: str) -> None:  # models are loaded by autotune, not MetaSchedule
        raise NotImplementedError("load pretrained models with autotune.costmodel.load")

    def save(self, path: str) -> None:
        pass  # online state is rebuilt from the database on resume

    def update(self, context, candidates, results) -> None:
        self.calls["update"] += 1
        lat, keep = [], []
        for i, r in enumerate(results):
            secs = [float(getattr(s, "value", s)) for s in (r.run_secs or [])]
            if r.error_msg is None and secs and max(secs) < 1e9:
                lat.append(sum(secs) / len(secs))
                keep.append(i)
        if not keep:
            return
        batch = candidates_to_batch(context, [candidates[i] for i in keep], self.extractor)
        key = str(context.task_name)
        store = self._data.setdefault(key, [[], []])
        store[0].append(batch)
        store[1].append(np.asarray(lat))
        self.calls["learned"] += len(keep)
        n = sum(len(x) for x in store[1])
        if n >= self.min_online:
            merged = _concat(store[0])
            latency = np.concatenate(store[1])
            groups = np.zeros(len(latency), dtype=np.int64)
            model = create(self.online_kind, n_estimators=60) if self.online_kind.startswith("xgb") else create(
                self.online_kind)
            self._online[key] = model.fit(merged, normalized_throughput(latency, groups), groups)

    def predict(self, context, candidates) -> np.ndarray:
        self.calls["predict"] += 1
        self.calls["predicted"] += len(candidates)
        if not candidates:
            return np.zeros(0)
        batch = candidates_to_batch(context, candidates, self.extractor)
        online = self._online.get(str(context.task_name))
        if self.pretrained is None and online is None:
            return np.random.default_rng(self.calls["predict"]).random(len(candidates))
        if self.pretrained is None:
            return online.predict(batch)
        score = _rank01(self.pretrained.predict(batch))
        if online is not None:
            score = (1 - self.online_weight) * score + self.online_weight * _rank01(online.predict(batch))
        return score


def _concat(batches: list[ProgramBatch]) -> ProgramBatch:
    if len(batches) == 1:
        return batches[0]
    length = max(b.kinds.shape[1] for b in batches)

    def pad(a, value=0):
        width = [(0, 0), (0, length - a.shape[1])] + [(0, 0)] * (a.ndim - 2)
        return np.pad(a, width, constant_values=value)

    offsets, base = [np.zeros(1, np.int64)], 0
    for b in batches:
        offsets.append(b.offsets[1:] + base)
        base += b.offsets[-1]
    return ProgramBatch(
        np.concatenate([pad(b.kinds) for b in batches]), np.concatenate([pad(b.numeric) for b in batches]),
        np.concatenate([b.lengths for b in batches]), np.concatenate([b.store_feats for b in batches]),
        np.concatenate(offsets),
    )
