"""DenseNet-121 (torchvision layout, re-written; concat-heavy)."""

from __future__ import annotations

import torch
from torch import nn

from .calibrate import init_cnn


class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (bottleneck) then BN-ReLU-conv3x3 producing ``growth`` channels."""

    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)
        self.relu = nn.ReLU()

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(self.relu(self.norm1(x)))
        return self.conv2(self.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    def __init__(self, num_layers: int, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth, bn_size) for i in range(num_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, 1, bias=False), nn.AvgPool2d(2, 2)
        )


class DenseNet(nn.Module):
    def __init__(self, growth: int = 32, blocks: tuple[int, ...] = (6, 12, 24, 16), init_features: int = 64,
                 bn_size: int = 4, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, init_features, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(init_features), nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1),
        ]
        c = init_features
        for i, n in enumerate(blocks):
            layers.append(DenseBlock(n, c, growth, bn_size))
            c += n * growth
            if i != len(blocks) - 1:
                layers.append(Transition(c, c // 2))
                c //= 2
        layers += [nn.BatchNorm2d(c), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def densenet121(input_shape: tuple[int, ...]) -> nn.Module:
    return DenseNet()
