"""Model zoo: plain ``torch.nn`` models with deterministic random weights for tuning.

>>> model, inputs = get_model("resnet18", batch_size=1)
"""

from __future__ import annotations

import torch
from torch import nn

from . import convnext, densenet, inception, mobilenet, resnet, small, transformer, vgg
from .calibrate import calibrate_batchnorm
from .export import load_exported
from .spec import ImageShape, ModelSpec, TokenShape, UnknownModelError, VectorShape

__all__ = [
    "MODELS",
    "ModelSpec",
    "UnknownModelError",
    "calibrate_batchnorm",
    "get_model",
    "list_models",
    "load_exported",
]

_IMAGENET = (3, 224, 224)

_SPECS = [
    ModelSpec("tiny", "2-conv BN/ReLU CNN, 10 classes (for tests)", ("cnn", "tiny"), "image",
              (3, 32, 32), small.tiny, ImageShape(min_hw=2)),
    ModelSpec("tiny_mlp", "64-128-10 MLP (for very fast tests)", ("mlp", "tiny"), "tensor",
              (64,), small.tiny_mlp, VectorShape(64)),
    ModelSpec("resnet18", "ResNet-18 (BasicBlock), 1000 classes", ("cnn", "imagenet", "residual"), "image",
              _IMAGENET, resnet.resnet18, ImageShape(min_hw=32)),
    ModelSpec("resnet50", "ResNet-50 v1.5 (Bottleneck), 1000 classes", ("cnn", "imagenet", "residual"), "image",
              _IMAGENET, resnet.resnet50, ImageShape(min_hw=32)),
    ModelSpec("mobilenet_v2", "MobileNetV2 (inverted residuals, ReLU6)", ("cnn", "imagenet", "depthwise"),
              "image", _IMAGENET, mobilenet.mobilenet_v2, ImageShape(min_hw=32)),
    ModelSpec("mobilenet_v3_small", "MobileNetV3-Small (depthwise, SE, hardswish)",
              ("cnn", "imagenet", "depthwise", "se"), "image", _IMAGENET, mobilenet.mobilenet_v3_small,
              ImageShape(min_hw=32)),
    ModelSpec("vgg16", "VGG-16 (no BN), 1000 classes", ("cnn", "imagenet"), "image",
              _IMAGENET, vgg.vgg16, ImageShape(min_hw=32)),
    ModelSpec("densenet121", "DenseNet-121 (concat-heavy)", ("cnn", "imagenet", "concat"), "image",
              _IMAGENET, densenet.densenet121, ImageShape(min_hw=32)),
    ModelSpec("inception_like", "GoogLeNet-style Inception v1 with BN (1x1/3x3/5x5/pool concat)",
              ("cnn", "imagenet", "concat"), "image", _IMAGENET, inception.inception_like, ImageShape(min_hw=32)),
    ModelSpec("vit_b16", "ViT-Base/16 classifier, explicit attention", ("transformer", "vision", "imagenet"),
              "image", _IMAGENET, transformer.vit_b16, ImageShape(min_hw=16, multiple_of=16)),
    ModelSpec("bert_base", "BERT-base encoder, last hidden states (seq, 768)", ("transformer", "nlp"),
              "tokens", (128,), transformer.bert_base, TokenShape(vocab=30522, max_len=512)),
    ModelSpec("convnext_nano_like", "ConvNeXt-style CNN (7x7 depthwise, LayerNorm, GELU MLP), in no dataset",
              ("cnn", "imagenet", "depthwise", "unseen"), "image", _IMAGENET, convnext.convnext_nano_like,
              ImageShape(min_hw=32, multiple_of=32)),
    ModelSpec("gpt2", "GPT-2 small (causal), last hidden states (seq, 768)", ("transformer", "nlp", "causal"),
              "tokens", (128,), transformer.gpt2, TokenShape(vocab=50257, max_len=1024)),
]

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _SPECS}


def list_models() -> list[str]:
    """Names of all zoo models, in registry order."""
    return list(MODELS)


def get_model(
    name: str, batch_size: int = 1, input_shape: tuple[int, ...] | None = None, seed: int = 0
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Build ``name`` in eval mode with seeded random weights, calibrated BN, and example inputs.

    Inputs have shape ``(batch_size, *input_shape)``; ``input_shape`` defaults to the spec's.
    """
    spec = MODELS.get(name)
    if spec is None:
        raise UnknownModelError(name, list_models())
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    shape = spec.check_input_shape(spec.default_input_shape if input_shape is None else input_shape)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = spec._builder(shape)
        inputs = spec._shape_rule.example(batch_size, shape)
        calibrate_batchnorm(model, inputs)
    model.eval()
    return model, inputs
