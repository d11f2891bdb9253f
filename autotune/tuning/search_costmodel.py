"""Our cost models inside MetaSchedule's evolutionary search (its ``PyCostModel`` interface).

``LearnedCostModel`` scores candidates with a pretrained model (TVM-free, from models/) and
learns online from the programs measured during the run, per task, in one of the modes of
``autotune.costmodel.online`` (blend with an online XGBoost, fine-tune a copy, residual model).
"""

from __future__ import annotations

import logging

import numpy as np

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

import tvm_ffi  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.cost_model import PyCostModel  # noqa: E402
from tvm.tirx import FloatImm, IntImm  # noqa: E402

from autotune.costmodel import CostModel, ProgramBatch  # noqa: E402
from autotune.costmodel.inputs import encode_steps, stack_programs  # noqa: E402
from autotune.costmodel.online import OnlineLearner  # noqa: E402

logger = logging.getLogger(__name__)


def candidates_to_batch(context, candidates, extractor, traces: bool = True, feats: list | None = None) -> ProgramBatch:
    """Per-store features (+ trace tokens when ``traces``; models that do not read traces skip them).
    ``feats``: the candidates' per-store features when the caller extracted them already."""
    if feats is None:
        feats = [f.numpy().astype(np.float32) for f in extractor.extract_from(context, candidates)]
    store, offsets = stack_programs(feats)
    if not traces:
        return ProgramBatch.from_store(store, offsets)
    return ProgramBatch.from_encoded([encode_trace_object(c.sch.trace) for c in candidates], store, offsets)


def _plain(x):
    """A trace operand as ``Trace.as_json`` would give it to ``encode_steps``: numbers stay numbers
    (IntImm/FloatImm unwrapped), sequences become lists, random variables and strings become ""."""
    if isinstance(x, bool | int | float):
        return x
    if isinstance(x, str):
        return ""
    if isinstance(x, IntImm | FloatImm):
        return x.value
    if isinstance(x, list | tuple) or isinstance(x, tvm_ffi.Array):
        return [_plain(y) for y in x]
    return ""


def encode_trace_object(trace) -> tuple[np.ndarray, np.ndarray]:
    """``encode_trace(trace.as_json(remove_postproc=False))`` read straight from the Trace object:
    ~0.4 ms instead of ~3 ms per candidate (``as_json`` names every random variable), the same tokens
    (tests/test_search_costmodel.py compares both on real candidates)."""
    insts = list(trace.insts)
    index = {inst: i for i, inst in enumerate(insts)}
    decided = {index[inst]: _plain(value) for inst, value in trace.decisions.items() if inst in index}
    steps = []
    for inst in insts:
        attrs = list(inst.attrs)
        kind = inst.kind.name
        # the annotation key is the one string encode_steps reads (attrs[0] of Annotate/Unannotate)
        plain_attrs = [str(attrs[0])] + [_plain(a) for a in attrs[1:]] if kind in ("Annotate", "Unannotate") \
            and attrs else [_plain(a) for a in attrs]
        steps.append((kind, [_plain(x) for x in inst.inputs], plain_attrs))
    return encode_steps(steps, decided)


@derived_object
class LearnedCostModel(PyCostModel):
    """``online``: how measured programs update the scorer (an ``autotune.costmodel.online.ONLINE_UPDATES`` name)."""

    def __init__(self, pretrained: CostModel | None = None, online: str = "finetune", min_online: int = 16,
                 online_weight: float = 0.5):
        super().__init__()
        self.pretrained = pretrained
        self.learner = OnlineLearner(pretrained, mode=online, min_online=min_online, online_weight=online_weight)
        self.extractor = ms.feature_extractor.PerStoreFeature()
        self.calls = {"predict": 0, "update": 0, "predicted": 0, "learned": 0}

    @property
    def online_mode(self) -> str:
        return self.learner.mode

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
        batch = candidates_to_batch(context, [candidates[i] for i in keep], self.extractor,
                                    traces=self.learner.uses_traces)
        self.learner.add(str(context.task_name), batch, np.asarray(lat))
        self.calls["learned"] += len(keep)

    def predict(self, context, candidates, feats: list | None = None) -> np.ndarray:
        """Scores of ``candidates`` (``feats``: their per-store features, when the caller has them)."""
        self.calls["predict"] += 1
        self.calls["predicted"] += len(candidates)
        if not candidates:
            return np.zeros(0)
        batch = candidates_to_batch(context, candidates, self.extractor, traces=self.learner.uses_traces, feats=feats)
        return self.learner.predict(str(context.task_name), batch)
