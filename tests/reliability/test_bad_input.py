"""Bad input for every CLI (the table in ``cases.py``): exit code 2, one ``error:`` line naming what
is wrong, no traceback, and a protected file keeps its bytes. Disk-full cases write into a 1 MiB tmpfs
that is filled first (root only; skipped, and said so, where mounting is not allowed)."""

from __future__ import annotations

import pytest

from .cases import cases, fill_disk, make_fixtures, run_case, unmount

CASES = cases()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    f = str(tmp_path_factory.mktemp("bad_input"))
    make_fixtures(f)
    full = fill_disk(f + "/full")
    yield f, full
    unmount(f + "/full")


def test_enough_cases():
    assert len(CASES) >= 40 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.tvm, pytest.mark.slow] if c.tvm else [])
                                  for c in CASES])
def test_bad_input(case, fixtures):
    f, full = fixtures
    if "{f}/full" in " ".join(case.args) and not full:
        pytest.skip("cannot mount a tmpfs here (not root): the disk-full case needs one")
    res = run_case(case, f)
    assert "Traceback" not in res["stderr"], res["stderr"][-3000:]
    assert res["rc"] == 2, res["stderr"][-3000:]
    assert len(res["error_lines"]) == 1, res["stderr"][-3000:]
    assert case.expect.lower() in res["error_lines"][0].lower(), res["error_lines"][0]
    assert res["unchanged"] in (None, True), "a file that was there before the run changed"
    assert not res["payload_ran"], "a payload in the input ran"
