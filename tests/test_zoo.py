"""Tests for autotune.zoo (plain torch, no TVM import; big models only at reduced size)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from autotune.zoo import (
    MODELS,
    ModelSpec,
    UnknownModelError,
    calibrate_batchnorm,
    get_model,
    list_models,
    load_exported,
)

REQUIRED = {"tiny", "tiny_mlp", "resnet18", "resnet50", "mobilenet_v2", "bert_base",
            "vgg16", "densenet121", "vit_b16", "gpt2"}

# name -> reduced input shape for a cheap forward pass (None = default shape)
SMALL_FORWARD = {
    "tiny": None,
    "tiny_mlp": None,
    "resnet18": (3, 64, 64),
    "convnext_nano_like": (3, 64, 64),
    "bert_base": (16,),
    "gpt2": (16,),
    "mobilenet_v2": (3, 32, 32),
    "densenet121": (3, 32, 32),
    "vit_b16": (3, 32, 32),
}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small models gain nothing from threads; on a shared, busy CPU extra threads only spin."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _param_count(name: str) -> int:
    """Build the bare architecture (no calibration, no forward) and count parameters."""
    with torch.random.fork_rng(devices=[]):
        model = MODELS[name]._builder(MODELS[name].default_input_shape)
    return sum(p.numel() for p in model.parameters())


def _check_activations(y: torch.Tensor) -> None:
    assert torch.isfinite(y).all()
    nonzero = y[y != 0]
    assert nonzero.numel() > 0.9 * y.numel()
    assert (nonzero.abs() < 1e-30).sum().item() == 0, "denormal-range outputs"
    assert 0.05 < y.float().std().item() < 20.0


def test_registry_contents() -> None:
    names = list_models()
    assert names == list(MODELS)
    assert REQUIRED <= set(names)
    assert any(n in names for n in ("mobilenet_v3_small", "efficientnet_b0"))
    assert any(n in names for n in ("inception_like", "squeezenet"))
    for name, spec in MODELS.items():
        assert isinstance(spec, ModelSpec) and spec.name == name
        assert spec.input_kind in {"image", "tokens", "tensor"}
        assert spec.tags and all(isinstance(t, str) for t in spec.tags)
        assert spec.description
    assert MODELS["tiny"].default_input_shape == (3, 32, 32)
    assert MODELS["tiny_mlp"].default_input_shape == (64,)
    assert MODELS["bert_base"].default_input_shape == (128,)
    assert MODELS["bert_base"].input_kind == "tokens"
    assert MODELS["resnet50"].default_input_shape == (3, 224, 224)
    with pytest.raises(AttributeError):
        MODELS["tiny"].name = "x"  # frozen


@pytest.mark.parametrize("name", sorted(SMALL_FORWARD))
def test_forward_small(name: str) -> None:
    shape = SMALL_FORWARD[name] or MODELS[name].default_input_shape
    model, inputs = get_model(name, batch_size=1, input_shape=SMALL_FORWARD[name])
    assert not any(m.training for m in model.modules())
    assert len(inputs) == 1 and inputs[0].shape == (1, *shape)
    with torch.no_grad():
        y = model(*inputs)
    if MODELS[name].input_kind == "tokens":
        assert inputs[0].dtype == torch.int64
        assert y.shape == (1, shape[0], 768)
    else:
        assert y.shape == (1, 10 if name.startswith("tiny") else 1000)
    _check_activations(y)


def test_token_inputs_in_vocab() -> None:
    _, (ids,) = get_model("bert_base", batch_size=2, input_shape=(16,))
    assert ids.shape == (2, 16) and ids.dtype == torch.int64
    assert 0 <= ids.min().item() and ids.max().item() < 30522


def test_batch_size() -> None:
    model, (x,) = get_model("tiny", batch_size=4)
    assert x.shape == (4, 3, 32, 32)
    with torch.no_grad():
        assert model(x).shape == (4, 10)


@pytest.mark.parametrize(
    ("name", "expected", "rel"),
    [
        ("resnet18", 11_689_512, 0.0),  # torchvision counts
        ("resnet50", 25_557_032, 0.0),
        ("mobilenet_v2", 3_504_872, 0.0),
        ("mobilenet_v3_small", 2_542_856, 0.0),
        ("densenet121", 7_978_856, 0.0),
        ("bert_base", 110_000_000, 0.05),
    ],
)
def test_param_counts(name: str, expected: int, rel: float) -> None:
    assert _param_count(name) == pytest.approx(expected, rel=rel)


def test_unknown_model_lists_valid_names() -> None:
    with pytest.raises(UnknownModelError) as info:
        get_model("resnet9000")
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert msg == (
        f"unknown model 'resnet9000'; valid models: {', '.join(list_models())} "
        "(or a path to a .pt2 torch.export program)"
    )


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, "2", True])
def test_bad_batch_size(batch_size: object) -> None:
    with pytest.raises(ValueError, match="batch_size") as info:
        get_model("tiny", batch_size=batch_size)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("tiny", (3, 32)),  # wrong rank
        ("tiny", (1, 32, 32)),  # wrong channels
        ("resnet18", (3, 8, 8)),  # too small
        ("vit_b16", (3, 40, 40)),  # not a multiple of the patch size
        ("tiny_mlp", (32,)),  # wrong width
        ("bert_base", (0,)),
        ("bert_base", (513,)),  # longer than the position table
        ("gpt2", (16, 2)),
    ],
)
def test_bad_input_shape(name: str, shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="input_shape") as info:
        get_model(name, input_shape=shape)
    assert str(shape) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "shape"), [("tiny", None), ("tiny_mlp", None), ("mobilenet_v2", (3, 32, 32))])
def test_deterministic(name: str, shape: tuple[int, ...] | None) -> None:
    m1, x1 = get_model(name, input_shape=shape, seed=3)
    m2, x2 = get_model(name, input_shape=shape, seed=3)
    m3, x3 = get_model(name, input_shape=shape, seed=4)
    assert torch.equal(x1[0], x2[0]) and not torch.equal(x1[0], x3[0])
    with torch.no_grad():
        y1, y2, y3 = m1(*x1), m2(*x2), m3(*x1)
    assert torch.equal(y1, y2)
    assert not torch.allclose(y1, y3)


def test_get_model_leaves_global_rng_alone() -> None:
    state = torch.get_rng_state()
    get_model("tiny", seed=123)
    assert torch.equal(state, torch.get_rng_state())


def test_calibrate_batchnorm() -> None:
    torch.manual_seed(0)
    model = MODELS["tiny"]._builder((3, 32, 32))
    bn = model.features[1]
    assert isinstance(bn, nn.BatchNorm2d)
    assert torch.equal(bn.running_mean, torch.zeros(16))
    x = torch.randn(1, 3, 32, 32)
    calibrate_batchnorm(model, (x,), steps=3)
    assert not model.training and not bn.training
    assert bn.momentum == 0.1  # restored after using the cumulative average
    assert bn.num_batches_tracked.item() == 3
    assert bn.running_mean.abs().max() > 1e-3
    # after calibration the normalised pre-activations are ~N(0, 1) on fresh random inputs
    with torch.no_grad():
        z = model.features[:2](torch.randn(8, 3, 32, 32))
    assert z.mean().abs() < 0.1
    assert 0.8 < z.std() < 1.2


def test_load_exported_errors(tmp_path) -> None:
    garbage = tmp_path / "garbage.pt2"
    garbage.write_bytes(b"this is not a torch.export program")
    with pytest.raises(ValueError, match="cannot load torch.export program") as info:
        load_exported(str(garbage))
    assert str(garbage) in str(info.value)
    missing = tmp_path / "missing.pt2"
    with pytest.raises(ValueError, match="missing.pt2"):
        load_exported(str(missing))


def test_export_round_trip(tmp_path) -> None:
    model, inputs = get_model("tiny", batch_size=2)
    path = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(model, inputs), str(path))
    program = load_exported(str(path))
    assert isinstance(program, torch.export.ExportedProgram)
    with torch.no_grad():
        expected = model(*inputs)
        got = program.module()(*inputs)
    torch.testing.assert_close(got, expected)


def test_zoo_does_not_import_tvm() -> None:
    code = "import sys, autotune.zoo; assert 'tvm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
