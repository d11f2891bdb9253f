"""The survey's workloads, from fusion-friendly to GEMM/conv-bound.

Each workload builds a model in eval mode plus example inputs for a batch size.
Weights are seeded; ResNet BatchNorm is calibrated on random data so nothing
decays into denormals (EXPERIMENTS.md, "Traps seen").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class ElementwiseChain(nn.Module):
    """14 pointwise ops: eager runs 14 kernels and writes 13 temporaries; fused, one pass."""

    def forward(self, x):
        y = x * 1.5 + 0.25
        y = torch.sigmoid(y) * x
        y = torch.tanh(y) + 0.5 * x
        y = torch.relu(y - 0.1) * 2.0
        return torch.exp(-y * y) + y


class BiasGeluResidualLN(nn.Module):
    """The epilogue of a transformer FFN: bias + GELU + residual + LayerNorm."""

    def __init__(self, hidden: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(hidden) * 0.1)
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x, residual):
        return self.ln(F.gelu(x + self.bias) + residual)


class ScaleMaskSoftmax(nn.Module):
    """Attention-score post-processing: scale, additive causal mask, softmax."""

    def __init__(self, seq: int, head_dim: int = 64):
        super().__init__()
        self.scale = head_dim**-0.5
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, scores):
        return torch.softmax(scores * self.scale + self.mask, dim=-1)


class TinyGraph(nn.Module):
    """A launch-bound graph: ~15 ops on a 4x16 tensor (per-op overhead dominates)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16) * 0.5)

    def forward(self, x):
        y = x * self.w + 1.0
        y = torch.relu(y) - y.mean(dim=-1, keepdim=True)
        y = y / (y.pow(2).mean(dim=-1, keepdim=True) + 1e-5).sqrt()
        y = torch.sigmoid(y) * torch.tanh(x)
        return (y + x).clamp(-3.0, 3.0) * 0.5


class MatMul(nn.Module):
    def forward(self, a, b):
        return a @ b


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class FFNBlock(nn.Module):
    """Pre-LN feed-forward block with residual (the E3 dynamic-shape model)."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x):
        return x + self.mlp(self.ln(x))


class ResNetBlock(nn.Module):
    """torchvision-style BasicBlock: conv3x3-BN-ReLU-conv3x3-BN + identity, ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class TransformerBlock(nn.Module):
    """Pre-LN encoder block written with explicit ops (exports cleanly to Relax)."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ffn = FFNBlock(hidden, ffn)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) * (h // self.heads) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        return self.ffn(x + self.proj(y))


def _calibrate_bn(model: nn.Module, x: torch.Tensor) -> None:
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn_like(x))
    model.eval()


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "fusion" (memory/launch bound) or "compute" (GEMM/conv bound)
    description: str
    default_batch: int
    build: Callable[[int, torch.Generator], tuple[nn.Module, tuple[torch.Tensor, ...]]]
    rtol: float
    atol: float


def _ew(n: int):
    def build(batch, g):
        return ElementwiseChain(), (torch.randn(batch, n, generator=g),)

    return build


def _bglu(batch, g, seq=128, hidden=768):
    x = torch.randn(batch, seq, hidden, generator=g)
    return BiasGeluResidualLN(hidden), (x, torch.randn(batch, seq, hidden, generator=g))


def _softmax(batch, g, heads=8, seq=128):
    return ScaleMaskSoftmax(seq), (torch.randn(batch, heads, seq, seq, generator=g) * 3,)


def _tiny(batch, g):
    return TinyGraph(), (torch.randn(batch, 16, generator=g),)


def _matmul(batch, g, n=512):
    return MatMul(), (torch.randn(batch * n, n, generator=g), torch.randn(n, n, generator=g))


def _mlp(batch, g, seq=64, hidden=256, ffn=1024):
    return MLP(hidden, ffn), (torch.randn(batch, seq, hidden, generator=g),)


def _resnet(batch, g, channels=64, hw=28):
    m = ResNetBlock(channels)
    x = torch.randn(batch, channels, hw, hw, generator=g)
    _calibrate_bn(m, x)
    return m, (x,)


def _transformer(batch, g, seq=64, hidden=256, heads=4, ffn=1024):
    return TransformerBlock(hidden, heads, ffn), (torch.randn(batch, seq, hidden, generator=g),)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("ew_chain_4M", "fusion", "14 pointwise ops on Bx1M fp32 (B=4: 4M)", 4, _ew(1 << 20), 1e-5, 1e-5),
        Workload("ew_chain_1k", "fusion", "same chain on Bx1k elements (launch-bound)", 1, _ew(1024), 1e-5, 1e-5),
        Workload("tiny_graph", "fusion", "~15 ops on a Bx16 tensor", 4, _tiny, 1e-4, 1e-5),
        Workload("bias_gelu_res_ln", "fusion", "bias+GELU+residual+LayerNorm, Bx128x768", 1, _bglu, 1e-4, 1e-4),
        Workload("scale_mask_softmax", "fusion", "scale+causal mask+softmax, Bx8x128x128", 1, _softmax, 1e-4, 1e-5),
        Workload("matmul", "compute", "(B*512)x512 @ 512x512", 1, _matmul, 1e-4, 1e-3),
        Workload("mlp", "compute", "Linear 256-1024 GELU Linear 1024-256, Bx64 tokens", 1, _mlp, 1e-4, 1e-4),
        Workload("resnet_block", "compute", "BasicBlock 64ch 28x28, BN calibrated", 1, _resnet, 1e-4, 1e-4),
        Workload("transformer_block", "compute", "pre-LN block h256 4 heads ffn1024, Bx64", 1, _transformer, 1e-4, 1e-4),
    ]
}


def build(name: str, batch: int | None = None, seed: int = 0, device: str = "cpu"):
    """Model (eval, on device) and inputs for workload `name`; unknown names list the valid ones."""
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    w = WORKLOADS[name]
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model, inputs = w.build(batch or w.default_batch, g)
    model = model.eval().to(device)
    return model, tuple(t.to(device) for t in inputs)
