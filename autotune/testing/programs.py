"""Synthetic labelled programs for TVM-free cost-model tests (no dataset, no TVM)."""

from __future__ import annotations

import json

import numpy as np

from autotune.costmodel.inputs import N_STORE_FEATS, ProgramBatch


def synthetic(n_tasks: int = 12, per_task: int = 40, seed: int = 0) -> tuple[ProgramBatch, np.ndarray, np.ndarray]:
    """Programs whose latency is a hidden function of their tile decisions and store features.

    Returns (batch, latency in seconds, task id per program).
    """
    rng = np.random.default_rng(seed)
    traces, feats, offsets, lat, groups = [], [], [0], [], []
    w = np.zeros(N_STORE_FEATS)
    w[1:9] = rng.normal(size=8)  # a few informative features, the rest is noise
    for t in range(n_tasks):
        for _ in range(per_task):
            a, trace, f = tile_program(rng, t)
            traces.append(trace)
            feats.append(f)
            offsets.append(offsets[-1] + len(f))
            # every store contributes (as in real programs: more stores, more work)
            lat.append(np.exp(0.3 * abs(np.log2(a) - 3) + 0.3 * float(f.sum(0) @ w) + 0.1 * t))
            groups.append(t)
    batch = ProgramBatch.from_traces(traces, np.concatenate(feats), np.array(offsets))
    return batch, np.array(lat), np.array(groups)


def tile_program(rng, task: int) -> tuple[int, str, np.ndarray]:
    """One random program of ``task``: its tile size a, its trace JSON (a tile decision [a, b]) and its
    per-store features (1-3 stores, fixed by the task as by a workload's blocks; column 0 = log2(a + 1),
    columns 1-11 random: 8 informative + 3 noise in ``synthetic``; the rest unused)."""
    a, b = int(2 ** rng.integers(0, 7)), int(2 ** rng.integers(0, 7))
    trace = json.dumps([[["SamplePerfectTile", ["l1"], [2, 64], ["v2", "v3"]],
                         ["Split", ["l1", ["v2", "v3"]], [], ["l4", "l5"]],
                         ["Annotate", ["b0", "v6"], ["meta_schedule.parallel"], []]],
                        [[0, [a, b]]]])
    n_store = 1 + task % 3
    f = np.zeros((n_store, N_STORE_FEATS), np.float32)
    f[:, 1:12] = rng.random((n_store, 11))
    f[:, 0] = np.log2(a + 1)
    return a, trace, f
