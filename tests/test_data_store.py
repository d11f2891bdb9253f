"""Dataset storage: schema round trip, crash safety, clear errors, splits. No TVM needed."""

import json

import numpy as np
import pytest

from autotune.data.schema import RECORD_FIELDS
from autotune.data.splits import split_by_hardware, split_by_model, split_by_task
from autotune.data.store import JOURNAL, DatasetError, DatasetWriter, mean_latency, read_records

FP = {"hardware_id": "cpu-test-2c", "target": {"kind": "llvm", "mcpu": "test", "num-cores": 2}}


def _row(i: int, key: str = "k0", ok: bool = True) -> dict:
    return {
        "task_key": key, "workload_hash": key, "trace": json.dumps([[["GetSBlock", [], [], []]], [[0, i]]]),
        "run_secs": [1e-3 * (i + 1), 1.1e-3 * (i + 1)] if ok else [], "status": "ok" if ok else "run_error",
        "error": "" if ok else "boom", "sampler": "random", "hardware_id": "cpu-test-2c", "timestamp": 1.0 + i,
    }


def test_round_trip_and_compaction(tmp_path):
    w = DatasetWriter(str(tmp_path), FP, shard_rows=4)
    rows = [_row(i) for i in range(5)] + [_row(5, ok=False)]
    w.append(rows[:3])
    w.append(rows[3:])  # crosses shard_rows: compacted into a shard
    w.append([_row(6, key="k1")])
    w.close()
    table = read_records(str(tmp_path))
    assert table.num_rows == 7
    got = table.to_pylist()
    for want, have in zip(rows + [_row(6, key="k1")], got):
        assert {f: have[f] for f in RECORD_FIELDS} == want
    assert read_records(str(tmp_path), valid_only=True).num_rows == 6
    lat = mean_latency(table)
    assert lat[0] == pytest.approx(1.05e-3) and np.isnan(lat[5])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["counts"] == {"records": 7, "valid": 6, "tasks": 2}
    assert all(len(info["sha256"]) == 64 for info in manifest["shards"].values())


def test_torn_journal_line_is_dropped_on_resume(tmp_path):
    w = DatasetWriter(str(tmp_path), FP, shard_rows=100)
    w.append([_row(0), _row(1)])
    with open(tmp_path / JOURNAL, "a") as f:
        f.write('{"task_key": "k0", "trace": "[[')  # writer killed mid-line
    assert read_records(str(tmp_path)).num_rows == 2
    w2 = DatasetWriter(str(tmp_path), FP, shard_rows=100)  # resume
    w2.append([_row(2)])
    assert read_records(str(tmp_path)).num_rows == 3


def test_corrupt_and_truncated_shards_name_the_file(tmp_path):
    w = DatasetWriter(str(tmp_path), FP, shard_rows=2)
    w.append([_row(0), _row(1)])
    shard = next((tmp_path / "shards").iterdir())
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="part-00000.parquet"):
        read_records(str(tmp_path))
    shard.write_bytes(b"garbage" * 10)
    with pytest.raises(DatasetError, match="part-00000.parquet.*unreadable"):
        read_records(str(tmp_path), verify=False)


def test_mid_file_journal_corruption_is_refused(tmp_path):
    w = DatasetWriter(str(tmp_path), FP, shard_rows=100)
    w.append([_row(0)])
    with open(tmp_path / JOURNAL, "a") as f:
        f.write("not json\n")
    w.append([_row(1)])
    with pytest.raises(DatasetError, match="journal.jsonl: corrupt JSON on line 2"):
        read_records(str(tmp_path))


def test_other_hardware_is_refused(tmp_path):
    DatasetWriter(str(tmp_path), FP)
    with pytest.raises(DatasetError, match="cpu-test-2c"):
        DatasetWriter(str(tmp_path), dict(FP, hardware_id="cpu-other-1c"))


def test_missing_manifest(tmp_path):
    with pytest.raises(DatasetError, match="manifest.json: not found"):
        read_records(str(tmp_path))


def test_splits():
    tasks = {
        "a": {"models": ["resnet18", "resnet50"]},
        "b": {"models": ["resnet18"]},
        "c": {"models": ["bert_base"]},
        "d": {"models": ["synthetic:x"]},
    }
    train, test = split_by_model(tasks, held_out=("resnet50", "bert_base"))
    assert train == ["b", "d"] and test == {"resnet50": ["a"], "bert_base": ["c"]}
    with pytest.raises(ValueError, match="mobilenet_v2"):
        split_by_model(tasks, held_out=("mobilenet_v2",))
    tr, te = split_by_task(list("abcdefghij"), 0.3, seed=1)
    assert len(te) == 3 and not set(tr) & set(te) and sorted(tr + te) == list("abcdefghij")
    assert split_by_task(list("abcdefghij"), 0.3, seed=1) == (tr, te)
    m_train, m_test = split_by_hardware(np.array(["x", "y", "x"]), ["x"], ["y"])
    assert m_train.tolist() == [True, False, True] and m_test.tolist() == [False, True, False]
