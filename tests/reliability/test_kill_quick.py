"""The kill battery in its quick form (2 SIGKILLs per command, then a clean resume): nothing committed
is lost, no duplicates, resumes never refuse their own work dir, stock TVM loads the database and the
dataset's shards verify. The full battery (>= 20 kills each) writes benchmarks/results/reliability.md."""

from __future__ import annotations

import pytest

from .kill_battery import battery

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


@pytest.mark.parametrize("kind", ["tune", "collect"])
def test_quick_kill_battery(kind, tmp_path):
    res = battery(kind, kills=2, seed=1, work=str(tmp_path), delays=(10.0, 20.0))
    s = res["summary"]
    assert s["kills"] >= 1, res["cycles"]
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["unkilled_failures"] == 0, res["cycles"]
    assert s["final_rows"] > 0
    assert s["orphaned_workers"] == 0, res["cycles"]  # workers die with their killed parent (pdeath.py)
    if kind == "tune":
        assert s["stock_tvm_loads"] == s["final_rows"] and s["report_written"], s
        assert not [i for i in s["db_issues"] if "duplicate" in i or "corrupt" in i], s["db_issues"]
    else:
        assert s["rows_read"] == s["manifest_records"] == s["final_rows"] and s["journal_rows"] == 0, s
