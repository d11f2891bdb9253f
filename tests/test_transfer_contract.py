"""Every transfer method x every cost-model kind it supports runs the contract (autotune.testing.transfer)
on tiny synthetic source/target hardware. No TVM."""

import numpy as np
import pytest
import torch

from autotune.costmodel.transfer import REGISTRY, TransferError, TransferInputs, create, sample_fraction
from autotune.costmodel.transfer._torch import TwoHeadNet, listwise_distill_loss
from autotune.testing.transfer import (
    KINDS,
    accuracy,
    check_method,
    method_params,
    synthetic_pair,
    train_source,
)


@pytest.fixture(scope="module")
def pair():
    return synthetic_pair()


@pytest.fixture(scope="module")
def sources(pair):
    return {kind: train_source(kind, pair) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(REGISTRY))
def test_method_contract(name, kind, pair, sources):
    source = sources[kind]
    result = check_method(name, kind, pair, source)
    if not result:  # unsupported: check_method saw the TransferError
        assert create(name).supports(source)
        return
    zero_shot = accuracy(source, pair, "target_test")
    if name == "zero-shot":
        assert result["target"] == pytest.approx(zero_shot)
    else:  # the target hardware ranks differently: learning from target data must show
        assert result["target"] > zero_shot + 0.05, f"{name}/{kind} did not learn the target ({result})"


@pytest.mark.parametrize("kind", KINDS)
def test_ckd_forgets_less_than_finetune(kind, pair, sources):
    inputs = TransferInputs(target=pair["target"], source=pair["source"], unlabeled=pair["unlabeled"])
    finetuned = create("finetune", **method_params("finetune", kind)).transfer(sources[kind], inputs)
    distilled = create("ckd", **method_params("ckd", kind)).transfer(sources[kind], inputs)
    before = accuracy(sources[kind], pair, "source_test")
    forget_ft = before - accuracy(finetuned, pair, "source_test")
    forget_ckd = before - accuracy(distilled, pair, "source_test")
    assert forget_ckd < forget_ft - 0.05, (kind, forget_ckd, forget_ft)


def test_unsupported_pairs_say_why(sources):
    assert create("mtl").supports(sources["xgb"])  # trees have no head to duplicate
    with pytest.raises(TransferError, match="mtl cannot transfer a 'xgb' model"):
        create("mtl").transfer(sources["xgb"], TransferInputs(target=synthetic_pair(2, 1, 4)["target"]))
    assert create("ckd").supports(sources["seq"]) is None and create("ckd").supports(sources["xgb"]) is None


def test_sample_fraction_spends_the_budget_in_rankable_batches():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(50), rng.integers(3, 30, size=50))
    for fraction in (0.01, 0.05, 0.1, 0.25):
        idx = sample_fraction(groups, fraction, np.random.default_rng(1))
        budget = round(fraction * len(groups))
        assert abs(len(idx) - budget) <= 1 and len(set(idx.tolist())) == len(idx)
        _, counts = np.unique(groups[idx], return_counts=True)
        assert counts.min() >= 2
    assert len(sample_fraction(groups, 1.0, rng)) == len(groups)
    first = sample_fraction(groups, 0.1, np.random.default_rng(5))
    assert np.array_equal(first, sample_fraction(groups, 0.1, np.random.default_rng(5)))
    with pytest.raises(ValueError, match="fraction"):
        sample_fraction(groups, 0.0, rng)


def test_distill_loss_is_zero_for_the_teacher_and_scale_free():
    torch.manual_seed(0)
    teacher = torch.randn(3, 6)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[2, 4:] = False
    assert float(listwise_distill_loss(teacher, teacher, mask)) == pytest.approx(0.0, abs=1e-6)
    assert float(listwise_distill_loss(3 * teacher + 1, teacher, mask)) == pytest.approx(0.0, abs=1e-5)
    student = teacher.flip(1).clone().requires_grad_(True)
    loss = listwise_distill_loss(student, teacher, mask)
    assert float(loss.detach()) > 0.1
    moved = student.detach().clone()
    moved[2, 4:] += 100.0  # padding does not count
    assert float(listwise_distill_loss(moved, teacher, mask)) == pytest.approx(float(loss.detach()), rel=1e-5)
    tied = torch.zeros(3, 6, requires_grad=True)  # a student that cannot tell programs apart
    listwise_distill_loss(tied, teacher, mask).backward()
    assert torch.isfinite(tied.grad).all()


def test_two_head_net_gives_a_plain_network(sources):
    net = sources["seq"].net_
    two = TwoHeadNet(net, "heads")
    target = two.target_net()
    assert set(target.state_dict()) == set(net.state_dict())
    assert target is not net and not target._forward_pre_hooks and all(not m._forward_pre_hooks for m in net.modules())
