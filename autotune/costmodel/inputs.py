"""Model inputs derived from a dataset (TVM-free): per-store features and trace token sequences.

``ProgramBatch`` holds, for n programs:
- ``store_feats`` [n_stores, 164] and ``offsets`` [n + 1]: MetaSchedule PerStoreFeature rows
  (cached by ``python -m autotune.collection.features``);
- ``kinds`` [n, L] int64 and ``numeric`` [n, L, NUM_DIM] float32, ``lengths`` [n]: the schedule
  trace as a sequence, one step per instruction (kind id + its decision / literal arguments).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

FEATURE_VERSION = 1
MAX_LEN = 96
NUM_DIM = 12
N_STORE_FEATS = 164

# MetaSchedule instruction kinds (tvm/src/s_tir/schedule/primitive): a fixed vocabulary keeps
# token ids stable across datasets; anything else maps to 1 (unknown). 0 is padding.
INSTRUCTION_KINDS = (
    "GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks",
    "Split", "LoopPartition", "Fuse", "Merge", "Reorder", "ReorderBlockIterVar", "AddUnitLoop",
    "Parallel", "Vectorize", "Unroll", "Bind", "CacheRead", "CacheWrite", "ReindexCacheRead",
    "ReindexCacheWrite", "CacheInplace", "CacheIndex", "ReIndex", "ComputeAt", "ReverseComputeAt",
    "ComputeInline", "ReverseComputeInline", "DecomposeReduction", "DecomposePadding", "RFactor",
    "StorageAlign", "SetScope", "UnsafeSetDType", "Blockize", "Tensorize", "Annotate", "Unannotate",
    "TransformLayout", "TransformBlockLayout", "SetAxisSeparator", "PadEinsum", "RollingBuffer",
    "SampleCategorical", "SamplePerfectTile", "SamplePartitionedTile", "SampleComputeLocation",
    "EnterPostproc", "AnnotateBufferAccess", "UnsafeHideBufferAccess",
)
KIND_ID = {k: i + 2 for i, k in enumerate(INSTRUCTION_KINDS)}
VOCAB_SIZE = len(INSTRUCTION_KINDS) + 2

_ANNOTATION_KEYS = {
    "meta_schedule.parallel": 1.0, "meta_schedule.vectorize": 2.0, "meta_schedule.unroll_explicit": 3.0,
    "meta_schedule.unroll_implicit": 4.0, "meta_schedule.tiling_structure": 5.0,
    "meta_schedule.cooperative_fetch": 6.0, "meta_schedule.auto_tensorize": 7.0,
}


def _log2p(x: float) -> float:
    return math.log2(1.0 + abs(float(x))) * (1.0 if x >= 0 else -1.0)


def _numbers(obj, out: list, limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(obj, bool):
        out.append(float(obj))
    elif isinstance(obj, int | float):
        out.append(float(obj))
    elif isinstance(obj, list | tuple):
        for item in obj:
            _numbers(item, out, limit)


def encode_trace(trace_json: str | list) -> tuple[np.ndarray, np.ndarray]:
    """One trace -> (kind ids [L], numeric [L, NUM_DIM]); L <= MAX_LEN (long traces keep their tail,
    where the tiling decisions and annotations are)."""
    trace = json.loads(trace_json) if isinstance(trace_json, str) else trace_json
    insts, decisions = trace[0], trace[1] if len(trace) > 1 else []
    return encode_steps(((inst[0], inst[1], inst[2] if len(inst) > 2 else []) for inst in insts),
                        {int(i): d for i, d in decisions})


def encode_steps(insts, decided: dict) -> tuple[np.ndarray, np.ndarray]:
    """``encode_trace`` on plain instructions: (kind name, inputs, attrs) per step, where random
    variables are any non-numeric value (JSON gives their names) and literals are numbers; ``decided``
    maps step index -> decision. Search-time code feeds it straight from TVM Trace objects."""
    steps = []
    for idx, (kind, inputs, attrs) in enumerate(insts):
        vec = np.zeros(NUM_DIM, dtype=np.float32)
        dec = decided.get(idx)
        if dec is not None:
            vals: list[float] = []
            _numbers(dec, vals, 6)
            vec[0] = 1.0
            for j, v in enumerate(vals[:6]):
                vec[1 + j] = _log2p(v)
            if isinstance(dec, list) and dec:
                vec[7] = sum(_log2p(v) for v in vals)  # log of the tiled extent
        lits: list[float] = []
        _numbers(inputs, lits, 2)
        _numbers(attrs, lits, 4)
        for j, v in enumerate(lits[:3]):
            vec[8 + j] = _log2p(v)
        if kind in ("Annotate", "Unannotate") and attrs:
            vec[11] = _ANNOTATION_KEYS.get(str(attrs[0]), 8.0)
        steps.append((KIND_ID.get(kind, 1), vec))
    steps = steps[-MAX_LEN:]
    kinds = np.array([s[0] for s in steps], dtype=np.int64)
    numeric = np.stack([s[1] for s in steps]) if steps else np.zeros((0, NUM_DIM), np.float32)
    return kinds, numeric


@dataclass
class ProgramBatch:
    kinds: np.ndarray  # [n, L] int64, 0 = padding
    numeric: np.ndarray  # [n, L, NUM_DIM] float32
    lengths: np.ndarray  # [n] int64
    store_feats: np.ndarray  # [n_stores, 164] float32
    offsets: np.ndarray  # [n + 1] int64
    hw: np.ndarray | None = None  # [n, D] float32: each program's CPU (``autotune.hardware.descriptor``), if known
    _packsum: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        n = self.kinds.shape[0]
        if self.numeric.shape[:2] != self.kinds.shape or self.lengths.shape != (n,):
            raise ValueError("ProgramBatch: kinds/numeric/lengths shapes disagree")
        if self.offsets.shape != (n + 1,) or self.offsets[-1] != self.store_feats.shape[0]:
            raise ValueError("ProgramBatch: offsets do not match store_feats")
        if self.store_feats.ndim != 2 or self.store_feats.shape[1] != N_STORE_FEATS:
            raise ValueError(f"ProgramBatch: store_feats must be [n_stores, {N_STORE_FEATS}]")
        if self.hw is not None and (self.hw.ndim != 2 or self.hw.shape[0] != n):
            raise ValueError("ProgramBatch: hw must be [n, descriptor length], one row per program")

    def __len__(self) -> int:
        return int(self.kinds.shape[0])

    def packsum(self) -> np.ndarray:
        """Per-program sum of its per-store feature rows [n, 164] (TenSet/MetaSchedule pack-sum)."""
        if self._packsum is None:
            sums = np.zeros((len(self), N_STORE_FEATS), np.float32)
            nonempty = self.offsets[1:] > self.offsets[:-1]
            if nonempty.any():
                sums[nonempty] = np.add.reduceat(self.store_feats, self.offsets[:-1][nonempty], axis=0)
            self._packsum = sums
        return self._packsum

    def store_rows(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The per-store rows of programs ``idx`` in that order [rows, 164], and for each row its position in
        ``idx`` (the segment id a per-program pooling sums over)."""
        starts, sizes = self.offsets[idx], self.offsets[idx + 1] - self.offsets[idx]
        first = np.cumsum(sizes) - sizes  # where each program's rows begin in the gathered block
        rows = np.arange(int(sizes.sum())) + np.repeat(starts - first, sizes)
        return self.store_feats[rows], np.repeat(np.arange(len(idx)), sizes)

    def subset(self, idx) -> ProgramBatch:
        idx = np.asarray(idx)
        idx = np.nonzero(idx)[0] if idx.dtype == bool else idx.astype(np.int64)
        rows, _ = self.store_rows(idx)
        sizes = self.offsets[idx + 1] - self.offsets[idx]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return ProgramBatch(self.kinds[idx], self.numeric[idx], self.lengths[idx], rows, offsets,
                            None if self.hw is None else self.hw[idx])

    def with_hardware(self, desc: np.ndarray) -> ProgramBatch:
        """The same programs, each marked as measured on (or predicted for) the CPU ``desc``."""
        desc = np.asarray(desc, np.float32)
        return ProgramBatch(self.kinds, self.numeric, self.lengths, self.store_feats, self.offsets,
                            np.broadcast_to(desc, (len(self), desc.shape[-1])).copy(), self._packsum)

    @classmethod
    def from_programs(cls, per_program: list[np.ndarray]) -> ProgramBatch:
        """``from_store`` from one [stores, N_STORE_FEATS] array per program."""
        return cls.from_store(*stack_programs(per_program))

    @classmethod
    def from_store(cls, store_feats: np.ndarray, offsets: np.ndarray) -> ProgramBatch:
        """Programs without their traces (for models that read only the per-store features): every
        sequence is one padding token."""
        n = len(offsets) - 1
        return cls(np.zeros((n, 1), np.int64), np.zeros((n, 1, NUM_DIM), np.float32), np.zeros(n, np.int64),
                   np.asarray(store_feats, np.float32), np.asarray(offsets, np.int64))

    @classmethod
    def from_traces(cls, traces: list, store_feats: np.ndarray | None = None,
                    offsets: np.ndarray | None = None) -> ProgramBatch:
        return cls.from_encoded([encode_trace(t) for t in traces], store_feats, offsets)

    @classmethod
    def from_encoded(cls, encoded: list, store_feats: np.ndarray | None = None,
                     offsets: np.ndarray | None = None) -> ProgramBatch:
        """From ``encode_trace``/``encode_steps`` outputs, one (kinds, numeric) per program."""
        n = len(encoded)
        length = max([len(k) for k, _ in encoded] + [1])
        kinds = np.zeros((n, length), np.int64)
        numeric = np.zeros((n, length, NUM_DIM), np.float32)
        lengths = np.zeros(n, np.int64)
        for i, (k, v) in enumerate(encoded):
            kinds[i, : len(k)], numeric[i, : len(k)], lengths[i] = k, v, len(k)
        if store_feats is None:
            store_feats, offsets = np.zeros((0, N_STORE_FEATS), np.float32), np.zeros(n + 1, np.int64)
        return cls(kinds, numeric, lengths, np.asarray(store_feats, np.float32), np.asarray(offsets, np.int64))


def normalized_throughput(latency: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """min latency of the program's task / latency: 1 for the best program of each task."""
    y = np.zeros_like(latency, dtype=np.float64)
    for g in np.unique(groups):
        m = groups == g
        y[m] = np.min(latency[m]) / latency[m]
    return y


def rank_anchored(values: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """Labels for one group's programs by their rank mapped onto another group's sorted labels of the same task.

    ``values``: the group's own labels (higher is better, e.g. ``normalized_throughput``); ``anchor``: the
    reference group's labels. A program at mid-rank r of n (ties averaged, best first) gets the anchor's label at
    the plotting position (r + 0.5) m / n - 0.5 of its m labels sorted best first, interpolated linearly and
    clipped to the anchor's best and worst. The label then says where the program stands among the task's
    programs as the anchor group measured them, whatever the group's size: the best of 14 programs is not
    labelled as good as the best of 36. A group equal to its anchor keeps its labels exactly."""
    from scipy.stats import rankdata

    values, anchor = np.asarray(values, np.float64), np.asarray(anchor, np.float64)
    if len(values) == 0 or len(anchor) == 0:
        return values.copy()
    n, m = len(values), len(anchor)
    pos = np.clip((rankdata(-values, method="average") - 0.5) * m / n - 0.5, 0, m - 1)
    return np.interp(pos, np.arange(m), np.sort(anchor)[::-1])


def stack_programs(per_program: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One [stores, N_STORE_FEATS] array per program -> (all store rows float32, offsets [n + 1])."""
    offsets = np.concatenate([[0], np.cumsum([f.shape[0] for f in per_program])]).astype(np.int64)
    store = (np.concatenate(per_program).astype(np.float32) if per_program
             else np.zeros((0, N_STORE_FEATS), np.float32))
    return store, offsets
