"""Weight init and BatchNorm calibration so random-weight nets keep O(1) activations.

Random weights with default init let activations shrink layer by layer into
denormals, which makes CPU kernels 5-10x slower and timings meaningless.
"""

from __future__ import annotations

import torch
from torch import nn

_BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def init_cnn(model: nn.Module) -> None:
    """Kaiming-normal (ReLU gain, fan_in) for conv/linear, zero bias, BN gamma=1 beta=0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d | nn.Linear):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, _BN):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def init_transformer(model: nn.Module, std: float = 0.02) -> None:
    """BERT/GPT-style init: N(0, std) for linear, embeddings and patch conv; LayerNorm 1/0."""
    for m in model.modules():
        if isinstance(m, nn.Linear | nn.Embedding | nn.Conv2d):
            nn.init.normal_(m.weight, std=std)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for name, p in model.named_parameters(recurse=True):
        if name.endswith(("pos_embed", "cls_token")):
            nn.init.normal_(p, std=std)


def calibrate_batchnorm(model: nn.Module, example_inputs: tuple[torch.Tensor, ...], steps: int = 3) -> None:
    """Set BatchNorm running stats from ``steps`` forward passes on random inputs, then ``eval()``.

    Float inputs are replaced by ``randn`` of the same shape (batch at least 2, so that
    BN over a 1x1 map still sees more than one value per channel); integer inputs are
    reused. Uses ``momentum=None`` (cumulative average), restored afterwards.
    """
    bns = [m for m in model.modules() if isinstance(m, _BN)]
    model.eval()
    if not bns or steps < 1:
        return
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    try:
        with torch.no_grad():
            for _ in range(steps):
                model(*[_random_like(x) for x in example_inputs])
    finally:
        for m, mom in zip(bns, saved, strict=True):
            m.momentum = mom
        model.eval()


def _random_like(x: torch.Tensor) -> torch.Tensor:
    if not x.is_floating_point():
        return x
    shape = (max(x.shape[0], 2), *x.shape[1:]) if x.dim() > 0 else x.shape
    return torch.randn(shape, dtype=x.dtype)

