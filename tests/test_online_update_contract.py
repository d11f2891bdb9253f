"""Every registered online-update strategy meets the contract in autotune.testing.online_update. No TVM."""

import pytest

from autotune.costmodel.online import ONLINE_UPDATES, OnlineLearner
from autotune.testing.online_update import CHECKS, make_case


@pytest.fixture(scope="module")
def online_case():
    return make_case()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", list(ONLINE_UPDATES))
def test_online_update_contract(name, check, online_case):
    check(name, online_case)


def test_unknown_mode_lists_the_registered_ones(online_case):
    with pytest.raises(ValueError, match="valid: none, online, blend, finetune, residual"):
        OnlineLearner(online_case.good, mode="magic")
