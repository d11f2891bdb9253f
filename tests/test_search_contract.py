"""Every registered search kind meets the contract in autotune.testing.search (real TVM, no measuring)."""

import pytest

from autotune.tuning.search import SEARCH_KINDS

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def search_runs():
    from autotune.testing.search import drive

    runs = {}
    return lambda name: runs[name] if name in runs else runs.setdefault(name, drive(name))


# autotune.testing.search.CHECKS by name (importing it starts TVM: not at collection time)
CHECKS = ["check_declares_itself", "check_rounds_within_budget", "check_no_program_twice",
          "check_candidates_are_complete_programs", "check_cost_model_capability"]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("name", list(SEARCH_KINDS))
def test_search_contract(name, check, search_runs):
    from autotune.testing import search

    getattr(search, check)(name, search_runs(name))


def test_every_check_runs():
    import inspect

    from autotune.testing import search

    names = [name for name, _ in inspect.getmembers(search, inspect.isfunction) if name.startswith("check_")]
    assert [f.__name__ for f in search.CHECKS] == CHECKS and sorted(names) == sorted(CHECKS)
