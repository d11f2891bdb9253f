"""Inception-like net: GoogLeNet (Inception v1) with BatchNorm and true 5x5 branches."""

from __future__ import annotations

import torch
from torch import nn

from .calibrate import init_cnn


class ConvBN(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
        )


class Inception(nn.Module):
    """Four parallel branches (1x1 | 1x1->3x3 | 1x1->5x5 | maxpool->1x1) concatenated on channels."""

    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool_proj: int) -> None:
        super().__init__()
        self.branch1 = ConvBN(cin, c1, 1)
        self.branch2 = nn.Sequential(ConvBN(cin, c3r, 1), ConvBN(c3r, c3, 3))
        self.branch3 = nn.Sequential(ConvBN(cin, c5r, 1), ConvBN(c5r, c5, 5))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), ConvBN(cin, pool_proj, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionLike(nn.Module):
    # cin, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj; "M" = 3x3/2 max pool
    CFG: list[tuple[int, ...] | str] = [
        (192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "M",
        (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64), (512, 128, 128, 256, 24, 64, 64),
        (512, 112, 144, 288, 32, 64, 64), (528, 256, 160, 320, 32, 128, 128), "M",
        (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128),
    ]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            ConvBN(3, 64, 7, stride=2), nn.MaxPool2d(3, stride=2, padding=1),
            ConvBN(64, 64, 1), ConvBN(64, 192, 3), nn.MaxPool2d(3, stride=2, padding=1),
        ]
        for cfg in self.CFG:
            layers.append(nn.MaxPool2d(3, stride=2, padding=1) if cfg == "M" else Inception(*cfg))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(torch.flatten(self.pool(self.features(x)), 1)))


def inception_like(input_shape: tuple[int, ...]) -> nn.Module:
    return InceptionLike()
