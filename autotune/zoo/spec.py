"""Model specs, input-shape rules and the unknown-model error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

Shape = tuple[int, ...]


class UnknownModelError(ValueError):
    """Raised for a model name that is not in the zoo."""

    def __init__(self, name: str, valid: list[str]) -> None:
        super().__init__(
            f"unknown model {name!r}; valid models: {', '.join(valid)} "
            "(or a path to a .pt2 torch.export program)"
        )
        self.name = name
        self.valid = list(valid)


@dataclass(frozen=True)
class ImageShape:
    """(channels, H, W) images; H and W at least ``min_hw`` and a multiple of ``multiple_of``."""

    channels: int = 3
    min_hw: int = 32
    multiple_of: int = 1

    def describe(self) -> str:
        extra = f" and multiples of {self.multiple_of}" if self.multiple_of > 1 else ""
        return f"({self.channels}, H, W) with H, W >= {self.min_hw}{extra}"

    def ok(self, shape: Shape) -> bool:
        return (
            len(shape) == 3
            and shape[0] == self.channels
            and all(s >= self.min_hw and s % self.multiple_of == 0 for s in shape[1:])
        )

    def example(self, batch: int, shape: Shape) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, *shape),)


@dataclass(frozen=True)
class TokenShape:
    """(seq,) int64 token ids in [0, vocab), 1 <= seq <= max_len."""

    vocab: int
    max_len: int

    def describe(self) -> str:
        return f"(seq,) with 1 <= seq <= {self.max_len}"

    def ok(self, shape: Shape) -> bool:
        return len(shape) == 1 and 1 <= shape[0] <= self.max_len

    def example(self, batch: int, shape: Shape) -> tuple[torch.Tensor, ...]:
        return (torch.randint(0, self.vocab, (batch, *shape), dtype=torch.int64),)


@dataclass(frozen=True)
class VectorShape:
    """(features,) float vectors of a fixed width."""

    features: int

    def describe(self) -> str:
        return f"({self.features},)"

    def ok(self, shape: Shape) -> bool:
        return tuple(shape) == (self.features,)

    def example(self, batch: int, shape: Shape) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, *shape),)


ShapeRule = ImageShape | TokenShape | VectorShape


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry: public metadata plus a private builder and input-shape rule."""

    name: str
    description: str
    tags: tuple[str, ...]
    input_kind: str  # "image" | "tokens" | "tensor"
    default_input_shape: Shape
    _builder: Callable[[Shape], nn.Module] = field(repr=False, compare=False)
    _shape_rule: ShapeRule = field(repr=False, compare=False)

    def check_input_shape(self, shape: Shape) -> Shape:
        """Return ``shape`` as a tuple or raise a one-line ValueError."""
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise ValueError(
                f"input_shape for {self.name!r} must be {self._shape_rule.describe()} "
                f"(without batch); got {shape!r}"
            ) from None
        if not self._shape_rule.ok(shape):
            raise ValueError(
                f"input_shape for {self.name!r} must be {self._shape_rule.describe()} "
                f"(without batch); got {shape!r}"
            )
        return shape
