"""The pool of tuning tasks a dataset is collected over: zoo models + synthetic operators.

Every task goes through the same path as ``autotune.tune`` (torch.export -> Relax -> bind,
fold, legalize, fuse -> MetaSchedule tasks), so dataset workloads are exactly the workloads
the tuner meets. Identical workloads from several models are merged (their model tags joined).
"""

from __future__ import annotations

import base64
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from autotune.tvmrt.startup import fast_start

fast_start("llvm")

from autotune.data.splits import ZOO_DATASET_MODELS, ZOO_SHAPES  # noqa: E402
from autotune.data.store import TaskInfo  # noqa: E402
from autotune.frontend import relax as fe  # noqa: E402

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class SyntheticOp:
    name: str
    module: Callable[[], nn.Module]
    inputs: tuple[tuple[int, ...], ...]


class _Act(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        if self.kind == "gelu_chain":
            return torch.nn.functional.gelu(x * 1.5 + 0.5) * torch.sigmoid(x)
        if self.kind == "softmax":
            return torch.softmax(x * 0.125, dim=-1)
        if self.kind == "relu_chain":
            return torch.relu(x + 1.0) * 0.5 - x
        raise ValueError(self.kind)


class _BMM(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def synthetic_ops(n: int, seed: int = 0) -> list[SyntheticOp]:
    """``n`` operators over varied shapes, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    makers = [_gemm, _bmm, _conv, _depthwise, _pool, _norm, _elementwise]
    ops, seen = [], set()
    for attempt in range(50 * n):  # some families have few distinct shapes: rotate by attempt
        if len(ops) >= n:
            break
        op = makers[attempt % len(makers)](rng)
        if op.name not in seen:
            seen.add(op.name)
            ops.append(op)
    return ops


def _pick(rng, values):
    return values[int(rng.integers(len(values)))]


def _gemm(rng) -> SyntheticOp:
    m = _pick(rng, [1, 4, 16, 64, 128, 256])
    k = _pick(rng, [64, 128, 256, 384, 512, 768, 1024])
    n = _pick(rng, [64, 128, 256, 512, 1000, 1024])
    return SyntheticOp(f"dense_m{m}_k{k}_n{n}", lambda: nn.Linear(k, n), ((m, k),))


def _bmm(rng) -> SyntheticOp:
    b = _pick(rng, [1, 4, 8, 12])
    m = _pick(rng, [16, 32, 64, 128])
    k = _pick(rng, [32, 64, 128])
    n = _pick(rng, [16, 32, 64, 128])
    return SyntheticOp(f"bmm_b{b}_m{m}_k{k}_n{n}", _BMM, ((b, m, k), (b, k, n)))


def _conv(rng) -> SyntheticOp:
    cin = _pick(rng, [3, 16, 32, 64, 128, 256])
    cout = _pick(rng, [16, 32, 64, 128, 256])
    hw = _pick(rng, [7, 14, 28, 56])
    k = _pick(rng, [1, 3, 3, 5, 7])
    s = _pick(rng, [1, 1, 2])
    if cin * cout * k * k * hw * hw / (s * s) > 2.5e8:  # keep each program cheap to measure
        cout = max(16, cout // 4)
    mod = lambda: nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2), nn.ReLU())  # noqa: E731
    return SyntheticOp(f"conv_c{cin}_o{cout}_hw{hw}_k{k}_s{s}", mod, ((1, cin, hw, hw),))


def _depthwise(rng) -> SyntheticOp:
    c = _pick(rng, [32, 64, 96, 144, 192, 384, 576])
    hw = _pick(rng, [7, 14, 28, 56, 112])
    k = _pick(rng, [3, 5])
    s = _pick(rng, [1, 2])
    mod = lambda: nn.Sequential(nn.Conv2d(c, c, k, s, k // 2, groups=c), nn.ReLU6())  # noqa: E731
    return SyntheticOp(f"dwconv_c{c}_hw{hw}_k{k}_s{s}", mod, ((1, c, hw, hw),))


def _pool(rng) -> SyntheticOp:
    c = _pick(rng, [32, 64, 128, 256, 512])
    hw = _pick(rng, [7, 14, 28, 56, 112])
    kind = _pick(rng, ["max", "avg", "global"])
    if kind == "max":
        mod = lambda: nn.MaxPool2d(3, 2, 1)  # noqa: E731
    elif kind == "avg":
        mod = lambda: nn.AvgPool2d(2, 2)  # noqa: E731
    else:
        mod = lambda: nn.AdaptiveAvgPool2d(1)  # noqa: E731
    return SyntheticOp(f"{kind}pool_c{c}_hw{hw}", mod, ((1, c, hw, hw),))


def _norm(rng) -> SyntheticOp:
    rows = _pick(rng, [1, 16, 64, 128, 256])
    d = _pick(rng, [128, 256, 512, 768, 1024])
    kind = _pick(rng, ["layernorm", "softmax"])
    mod = (lambda: nn.LayerNorm(d)) if kind == "layernorm" else (lambda: _Act("softmax"))
    return SyntheticOp(f"{kind}_r{rows}_d{d}", mod, ((rows, d),))


def _elementwise(rng) -> SyntheticOp:
    shape = _pick(rng, [(1, 64, 56, 56), (1, 128, 28, 28), (128, 768), (1, 256, 14, 14), (512, 1024)])
    kind = _pick(rng, ["gelu_chain", "relu_chain"])
    return SyntheticOp(f"{kind}_{'x'.join(map(str, shape))}", lambda: _Act(kind), (shape,))


def tasks_of_module(module: nn.Module, inputs: tuple, target) -> list[fe.Task]:
    mod, params = fe.import_exported(fe.export_torch(module.eval(), inputs))
    return fe.extract_tasks(fe.bind_and_simplify(mod, params), target)


def iter_pool(target, models=ZOO_DATASET_MODELS, n_synthetic: int = 200, seed: int = 0) -> Iterator[TaskInfo]:
    """Yield TaskInfo for every distinct workload of the zoo models and synthetic operators."""
    from autotune import zoo

    merged: dict[str, TaskInfo] = {}
    for name in models:
        module, inputs = zoo.get_model(name, input_shape=ZOO_SHAPES.get(name), seed=seed)
        logger.info("task pool: extracting %s", name)
        for task in tasks_of_module(module, inputs, target):
            _merge(merged, task, name, "zoo")
        del module
    for op in synthetic_ops(n_synthetic, seed):
        torch.manual_seed(seed)
        inputs = tuple(torch.randn(s) for s in op.inputs)
        for task in tasks_of_module(op.module(), inputs, target):
            _merge(merged, task, f"synthetic:{op.name}", "synthetic")
    yield from merged.values()


def _merge(merged: dict, task: fe.Task, model: str, source: str) -> None:
    from tvm.s_tir import meta_schedule as ms

    from autotune.tvmrt.database import to_py as _json_de_tvm

    key = task.workload_hash
    if key not in merged:
        args_info = [_json_de_tvm(a.as_json()) for a in ms.arg_info.ArgInfo.from_prim_func(task.mod["main"])]
        merged[key] = TaskInfo(
            key=key, name=task.name, workload_hash=key,
            workload=pack_workload(_json_de_tvm(ms.database.Workload(task.mod).as_json())),
            tvmscript=task.mod.script(), flops=task.flops, weight=task.weight, models=[],
            args_info=args_info, source=source,
        )
    tag_model(merged[key], model, task.weight)


def tag_model(info: TaskInfo, model: str, occurrences: int) -> None:
    """Record that ``info``'s workload occurs ``occurrences`` times in ``model`` (a workload that a model's
    extraction lists twice adds up). Each model keeps its own count."""
    if model not in info.models:
        info.models.append(model)
    info.model_weights[model] = info.model_weights.get(model, 0) + int(occurrences)


def pack_workload(workload_json: list) -> list:
    """[shash, base64 JSON] -> [shash, "zlib:" + base64(zlib(JSON))]: 15-20x smaller on disk."""
    shash, b64 = workload_json
    return [shash, "zlib:" + base64.b64encode(zlib.compress(base64.b64decode(b64), 9)).decode()]


def unpack_workload(packed: list) -> list:
    shash, data = packed
    if data.startswith("zlib:"):
        data = base64.b64encode(zlib.decompress(base64.b64decode(data[5:]))).decode()
    return [shash, data]


def task_module(info: dict):
    """The IRModule of a stored task (needs TVM)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.database.Workload.from_json(unpack_workload(info["workload"])).mod
