"""What a CPU user would deploy instead of a tuned TVM model (issue 47 item 6, issue 51): frozen
``torch.compile`` (Inductor with weight freezing, channels_last for CNNs) and ONNX Runtime (CPU execution
provider, all graph optimizations, the same threads). Each peer is built once, checked against torch eager,
and handed back as a zero-argument callable that runs one inference, for the caller's alternating rounds."""

from __future__ import annotations

import copy
import os
import tempfile
import time


def frozen_compile(eager, inputs) -> tuple:
    """Inductor with ``freezing`` (weights folded as constants, what PyTorch recommends for CPU inference) and,
    for a model with 4-D inputs (the CNNs), module and inputs in channels_last. Returns (run, output, build s)."""
    import torch
    import torch._inductor.config as inductor_config

    t0 = time.time()
    cnn = any(getattr(x, "dim", lambda: 0)() == 4 for x in inputs)
    model = copy.deepcopy(eager).eval()
    args = tuple(inputs)
    if cnn:
        model = model.to(memory_format=torch.channels_last)
        args = tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in args)
    old = inductor_config.freezing
    inductor_config.freezing = True
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            out = compiled(*args)  # compiles (freezing happens at the first call)
    finally:
        inductor_config.freezing = old

    def run():
        with torch.no_grad():
            compiled(*args)

    return run, out, time.time() - t0


def onnxruntime_session(eager, inputs, threads: int) -> tuple:
    """``torch.onnx.export`` (the dynamo exporter, optimized) and an ONNX Runtime session on the CPU execution
    provider with every graph optimization and ``threads`` intra-op threads. Returns (run, output, build s)."""
    import onnxruntime as ort
    import torch

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        torch.onnx.export(eager, tuple(inputs), path, dynamo=True, optimize=True, verbose=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])  # weights read in here
    feed = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
    out = session.run(None, feed)
    return (lambda: session.run(None, feed)), out, time.time() - t0
