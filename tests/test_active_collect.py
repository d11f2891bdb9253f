"""Active-learning collection (``autotune.collect --sampler``): the stored pool, and one real run on a tiny task."""

import numpy as np
import pytest

from autotune.collection.active import read_pool, read_task_pool, save_task_pool
from autotune.data.store import read_records


def test_pool_roundtrip_without_tvm(tmp_path):
    traces = ['[["a"]]', '[["b", 1]]']
    feats = [np.ones((2, 164), np.float32), np.full((1, 164), 3.0, np.float32)]
    save_task_pool(str(tmp_path), "k1", traces, feats)
    got_traces, got_feats, offsets = read_task_pool(str(tmp_path), "k1")
    assert got_traces == traces and offsets.tolist() == [0, 2, 3]
    np.testing.assert_array_equal(got_feats[2], feats[1][0])
    assert list(read_pool(str(tmp_path))) == ["k1"] and read_task_pool(str(tmp_path), "nope") is None


def test_bad_sampler_flags_exit_2(cli, tmp_path):
    res = cli("autotune.collect", "--out", str(tmp_path / "ds"), "--sampler", "nope")
    assert res.returncode == 2 and "valid: random" in res.stderr
    res = cli(
        "autotune.collect", "--out", str(tmp_path / "ds"), "--sampler", "rdu", "--measure-fraction", "0"
    )
    assert res.returncode == 2 and "--measure-fraction" in res.stderr


@pytest.mark.tvm
@pytest.mark.slow
def test_collect_with_rdu_measures_only_picked_pool_programs(cli, tmp_path):
    out = str(tmp_path / "ds")
    args = [
        "autotune.collect",
        "--out",
        out,
        "--models",
        "tiny_mlp",
        "--synthetic",
        "0",
        "--max-tasks",
        "1",
        "--sampler",
        "rdu",
        "--pool-per-task",
        "12",
        "--active-rounds",
        "2",
    ]
    res = cli(*args, "--measure-fraction", "0.5", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    ((key, (traces, feats, offsets)),) = read_pool(out).items()
    assert len(traces) == 12 == len(set(traces)) and offsets[-1] == feats.shape[0] and feats.shape[1] == 164
    table = read_records(out)
    assert table.num_rows == 6
    assert set(table.column("sampler").to_pylist()) == {"active:rdu"}
    assert set(table.column("trace").to_pylist()) <= set(traces)  # only pool programs are measured
    res = cli(*args, "--measure-fraction", "0.75", timeout=900)  # resume: 3 more, none twice
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_records(out).column("trace").to_pylist()
    assert len(rows) == 9 == len(set(rows))
    assert read_task_pool(out, key)[0] == traces  # the pool is reused, not redrawn
