"""Crash windows of the dataset store, hit deterministically: a run killed after a shard and the
manifest were written but before the journal was emptied must not count those rows twice."""

from __future__ import annotations

import pytest

from autotune.data import store
from autotune.data.schema import RECORD_FIELDS


def _rows(n, start=0):
    return [{f: None for f in RECORD_FIELDS} | {
        "task_key": f"t{i % 2}", "workload_hash": f"t{i % 2}", "trace": f"[[{i}], []]", "run_secs": [1e-3 * (i + 1)],
        "status": "ok", "error": "", "sampler": "random", "hardware_id": "hw", "timestamp": 1000.0 + i}
        for i in range(start, start + n)]


class Killed(BaseException):
    pass


def test_kill_between_shard_and_journal_truncation(tmp_path, monkeypatch):
    root = str(tmp_path / "ds")
    writer = store.DatasetWriter(root, {"hardware_id": "hw"}, shard_rows=1000)
    writer.append(_rows(5))
    real = store._atomic_write

    def dies_on_journal(path, data):
        if path.endswith(store.JOURNAL):
            raise Killed  # the process dies here: shard + manifest written, journal still full
        real(path, data)

    monkeypatch.setattr(store, "_atomic_write", dies_on_journal)
    with pytest.raises(Killed):
        writer.compact()
    monkeypatch.setattr(store, "_atomic_write", real)
    assert len(store.read_jsonl(f"{root}/{store.JOURNAL}")) == 5  # the window is real
    assert store.read_records(root).num_rows == 5  # readers do not count the rows twice
    resumed = store.DatasetWriter(root, {"hardware_id": "hw"}, shard_rows=1000)  # the next run
    assert store.read_jsonl(f"{root}/{store.JOURNAL}") == []
    resumed.append(_rows(3, start=5))
    resumed.close()
    table = store.read_records(root)
    assert table.num_rows == 8 and len(set(table.column("trace").to_pylist())) == 8


def test_journal_equal_in_size_but_different_is_kept(tmp_path):
    root = str(tmp_path / "ds")
    writer = store.DatasetWriter(root, {"hardware_id": "hw"}, shard_rows=1000)
    writer.append(_rows(4))
    writer.compact()
    writer.append(_rows(4, start=4))  # same row count as the shard, other rows: not stale
    assert store.DatasetWriter(root, {"hardware_id": "hw"}, shard_rows=1000)
    assert store.read_records(root).num_rows == 8


@pytest.mark.tvm
@pytest.mark.slow
def test_collect_killed_while_extracting_the_pool_extracts_again(tmp_path, cli):
    """A kill between two tasks of the pool extraction left a dataset with part of its pool; the
    resume used to take it as complete (and never measure the missing tasks)."""
    import json
    import os

    from autotune.tvmrt.target import hardware_id, parse_target

    from .cases import TINY

    root = str(tmp_path / "ds")
    writer = store.DatasetWriter(root, {"hardware_id": hardware_id(parse_target("llvm"))})
    first = next(t for t in store.read_jsonl(os.path.join(TINY, "tasks.jsonl")) if "tiny_mlp" in t["models"])
    with open(os.path.join(root, store.TASKS), "w") as f:
        f.write(json.dumps(first) + "\n")
    writer.manifest["task_pool_complete"] = False  # what ensure_pool writes before extracting
    writer._write_manifest()
    res = cli("autotune.collect", "--out", root, "--models", "tiny_mlp", "--synthetic", "0", "--programs-per-task", "1",
              "--pass-size", "1", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "task pool:" in res.stderr and "resuming:" not in res.stderr
    assert store.read_manifest(root)["task_pool_complete"] is True
    tasks = store.read_tasks(root)
    assert sum("tiny_mlp" in t["models"] for t in tasks.values()) >= 2
    measured = set(store.read_records(root).column("task_key").to_pylist())
    assert len(measured) >= 2
