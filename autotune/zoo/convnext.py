"""A ConvNeXt-style CNN (Liu et al. 2022) at nano width: the tuning protocol's network that is in no dataset.

Its blocks (7x7 depthwise convolution, LayerNorm over channels, a 4x pointwise MLP with GELU, layer scale) are
not in the zoo networks the datasets were measured on, so no cost model was trained or selected on its tasks
(``autotune.data.splits.UNSEEN_MODELS``; protocol v2 of ``experiments/tuning_efficiency/``)."""

from __future__ import annotations

import torch
from torch import nn


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor (ConvNeXt's ``channels_first`` norm)."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))  # layer scale (1e-6 at init in training; 0.5 here)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(self.act(self.pw1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, dims=(48, 96, 192, 384), depths=(1, 1, 3, 1), num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, stride=4), ChannelLayerNorm(dims[0])]
        for i, (dim, depth) in enumerate(zip(dims, depths)):
            if i:
                layers += [ChannelLayerNorm(dims[i - 1]), nn.Conv2d(dims[i - 1], dim, 2, stride=2)]
            layers += [Block(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.features(x).mean((2, 3))))


def convnext_nano_like(input_shape: tuple[int, ...]) -> nn.Module:
    return ConvNeXt()
