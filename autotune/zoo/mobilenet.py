"""MobileNetV2 and MobileNetV3-Small (torchvision layouts, re-written)."""

from __future__ import annotations

import torch
from torch import nn

from .calibrate import init_cnn


def _divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor`` without dropping below 90%."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNAct(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1,
                 act: type[nn.Module] | None = nn.ReLU6) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act is not None:
            layers.append(act(inplace=True))
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear project."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNAct(cin, hidden, 1))
        layers += [ConvBNAct(hidden, hidden, 3, stride, groups=hidden), ConvBNAct(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    # expand ratio t, channels c, repeats n, stride s
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        cin, last = 32, 1280
        layers: list[nn.Module] = [ConvBNAct(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(ConvBNAct(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation with a hard-sigmoid gate."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class MBConvV3(nn.Module):
    """MobileNetV3 block: optional expand, depthwise kxk, optional SE, linear project."""

    def __init__(self, cin: int, kernel: int, hidden: int, cout: int, se: bool, act: type[nn.Module],
                 stride: int) -> None:
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(ConvBNAct(cin, hidden, 1, act=act))
        layers.append(ConvBNAct(hidden, hidden, kernel, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden, _divisible(hidden // 4)))
        layers.append(ConvBNAct(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetV3Small(nn.Module):
    RE, HS = nn.ReLU, nn.Hardswish
    # cin, kernel, expanded, cout, use_se, activation, stride
    SETTINGS = [(16, 3, 16, 16, True, RE, 2), (16, 3, 72, 24, False, RE, 2), (24, 3, 88, 24, False, RE, 1),
                (24, 5, 96, 40, True, HS, 2), (40, 5, 240, 40, True, HS, 1), (40, 5, 240, 40, True, HS, 1),
                (40, 5, 120, 48, True, HS, 1), (48, 5, 144, 48, True, HS, 1), (48, 5, 288, 96, True, HS, 2),
                (96, 5, 576, 96, True, HS, 1), (96, 5, 576, 96, True, HS, 1)]

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, act=nn.Hardswish)]
        layers += [MBConvV3(*cfg) for cfg in self.SETTINGS]
        layers.append(ConvBNAct(96, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(576, 1024), nn.Hardswish(inplace=True), nn.Dropout(0.2), nn.Linear(1024, num_classes)
        )
        init_cnn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v2(input_shape: tuple[int, ...]) -> nn.Module:
    return MobileNetV2()


def mobilenet_v3_small(input_shape: tuple[int, ...]) -> nn.Module:
    return MobileNetV3Small()
