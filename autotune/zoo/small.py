"""Tiny models for fast tests."""

from __future__ import annotations

import torch
from torch import nn

from .calibrate import init_cnn


class TinyCNN(nn.Module):
    """conv3x3(3->16)+BN+ReLU, conv3x3/2(16->32)+BN+ReLU, global avgpool, linear(32->10)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class TinyMLP(nn.Module):
    """linear(64->128), ReLU, linear(128->10)."""

    def __init__(self, in_features: int = 64, hidden: int = 128, num_classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(hidden, num_classes)
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def tiny(input_shape: tuple[int, ...]) -> nn.Module:
    return TinyCNN()


def tiny_mlp(input_shape: tuple[int, ...]) -> nn.Module:
    return TinyMLP(in_features=input_shape[0])
