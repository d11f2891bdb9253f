"""Bad input for every CLI: the case table shared by ``test_bad_input.py`` and ``battery.py``.

Each case runs ``python -m MODULE ARGS`` as a user would and expects exit code 2, exactly one line
on stderr containing ``expect`` (what is wrong) and no traceback. ``{f}`` in an argument is the
fixtures folder that ``make_fixtures`` fills: damaged copies of ``tests/data/tiny_dataset``, files
of the wrong kind, a tiny tmpfs for disk-full cases. ``tvm`` cases start TVM (~10 s each here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "tests", "data", "tiny_dataset")


@dataclass(frozen=True)
class Case:
    name: str
    module: str
    args: tuple[str, ...]
    expect: str  # a piece of the one stderr line (case-insensitive)
    tvm: bool = False
    unchanged: str | None = None  # a fixture path whose bytes must be the same after the run
    absent: str | None = None  # a canary path that a payload in the input would create if it ran


def _dataset(f: str, name: str) -> str:
    path = os.path.join(f, name)
    shutil.copytree(TINY, path, ignore=shutil.ignore_patterns("logs"))
    return path


def _edit_json(path: str, edit) -> None:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    edit(data)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def _damage_line(path: str, lineno: int) -> None:
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    lines[lineno - 1] = lines[lineno - 1][:40]
    with open(path, "wb") as fh:
        fh.write(b"\n".join(lines))


def make_fixtures(f: str) -> None:
    """Damaged datasets and wrong files under ``f`` (each case reads, or writes into a copy of, these)."""
    os.makedirs(f, exist_ok=True)
    with open(os.path.join(f, "afile.txt"), "w") as fh:
        fh.write("not a dataset\n")
    os.makedirs(os.path.join(f, "empty"), exist_ok=True)
    _dataset(f, "good")
    # a machine that is none of ours: the tiny set was measured on one of the machines these tests run on
    _edit_json(os.path.join(_dataset(f, "good_collect"), "manifest.json"),
               lambda m: m["hardware"].update(hardware_id="cpu-othermachine-2c"))
    _edit_json(os.path.join(_dataset(f, "schema99"), "manifest.json"), lambda m: m.update(schema_version=99))
    with open(os.path.join(_dataset(f, "manifest_garbage"), "manifest.json"), "w") as fh:
        fh.write("{not json")
    with open(os.path.join(_dataset(f, "manifest_list"), "manifest.json"), "w") as fh:
        fh.write("[1, 2, 3]\n")
    _edit_json(os.path.join(_dataset(f, "manifest_nohw"), "manifest.json"), lambda m: m.pop("hardware"))
    shard = os.path.join(_dataset(f, "shard_flipped"), "shards", "part-00000.parquet")
    with open(shard, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff\xff\xff\xff")
    os.remove(os.path.join(_dataset(f, "shard_missing"), "shards", "part-00000.parquet"))
    _damage_line(os.path.join(_dataset(f, "tasks_corrupt"), "tasks.jsonl"), 3)
    journal = os.path.join(_dataset(f, "journal_corrupt"), "journal.jsonl")
    with open(journal, "w") as fh:
        fh.write('{"task_key": "x"}\n{broken\n{"task_key": "y"}\n')
    os.makedirs(os.path.join(f, "pt2"), exist_ok=True)
    with open(os.path.join(f, "pt2", "garbage.pt2"), "wb") as fh:
        fh.write(b"PK\x03\x04 this is not a zip archive")
    with open(os.path.join(f, "results_garbage.jsonl"), "w") as fh:
        fh.write('{"kind": "device"}\n{oops\n{"kind": "program"}\n')
    with open(os.path.join(f, "bundle_garbage.tar.xz"), "wb") as fh:
        fh.write(b"\xfd7zXZ\x00 not really xz")
    wd = os.path.join(f, "wd_damaged")  # a work dir whose record file has a corrupt line before the last
    os.makedirs(wd, exist_ok=True)
    trace = [[["GetSBlock", [], ["C", "main"], ["b0"]]], []]
    rec = json.dumps([0, [trace, [0.001], {"kind": "llvm"}, []]])
    with open(os.path.join(wd, "database_workload.json"), "w") as fh:
        fh.write('["1", "bW9k"]\n')
    with open(os.path.join(wd, "database_tuning_record.json"), "w") as fh:
        fh.write(f"{rec}\n{rec[:30]}\n{rec}\n")
    _untrusted_fixtures(f)
    _onnx_fixtures(os.path.join(f, "onnx"))
    cm = os.path.join(f, "costmodel_badjson")
    os.makedirs(cm, exist_ok=True)
    with open(os.path.join(cm, "model.json"), "w") as fh:
        fh.write("{")


def _onnx_fixtures(d: str) -> None:
    """ONNX files a user could bring that cannot be tuned: bytes that are no ONNX model, an input without a static
    shape, an operator TVM's ONNX front end does not convert (a custom domain's)."""
    import onnx
    from onnx import TensorProto, helper

    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "garbage.onnx"), "wb") as fh:
        fh.write(b"\x08\x07 this is not an ONNX protobuf")

    def save(name: str, node, shape) -> None:
        graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
        onnx.save(helper.make_model(graph, opset_imports=opsets), os.path.join(d, name))

    save("dynamic.onnx", helper.make_node("Relu", ["x"], ["y"]), ["N", 4])
    save("custom_op.onnx", helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example"), [2, 4])


class _Payload:
    """Unpickling this writes ``{f}/canary`` (what an attacker's pickle would do, harmlessly)."""

    def __init__(self, canary: str):
        self.canary = canary

    def __reduce__(self):
        return (exec, (f"open({self.canary!r}, 'w').write('ran')",))


def _untrusted_fixtures(f: str) -> None:
    import io
    import zipfile

    import torch

    canary = os.path.join(f, "canary")
    buf = io.BytesIO()
    torch.save(_Payload(canary), buf)
    evil = buf.getvalue()
    cm = os.path.join(f, "costmodel_pickle")
    os.makedirs(cm, exist_ok=True)
    with open(os.path.join(cm, "weights.pkl"), "wb") as fh:
        fh.write(evil)
    with open(os.path.join(cm, "model.json"), "w") as fh:
        json.dump({"kind": "seq", "params": {}, "feature_version": 1, "state": {"weights": "weights.pkl"}}, fh)
    good = os.path.join(f, "pt2", "linear.pt2")
    lin = torch.nn.Linear(4, 3)
    torch.export.save(torch.export.export(lin, (torch.randn(2, 4),)), good)
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(os.path.join(f, "pt2", "evil.pt2"), "w") as zout:
        for item in zin.infolist():
            zout.writestr(item, evil if "sample_inputs" in item.filename else zin.read(item.filename))


def cases() -> list[Case]:
    stats = "autotune.data.stats"
    out = [
        Case("stats: missing folder", stats, ("{f}/missing",), "not found"),
        Case("stats: a file, not a folder", stats, ("{f}/afile.txt",), "not found"),
        Case("stats: empty folder", stats, ("{f}/empty",), "not found"),
        Case("stats: manifest of another schema", stats, ("{f}/schema99",), "schema version 99"),
        Case("stats: manifest not JSON", stats, ("{f}/manifest_garbage",), "corrupt manifest"),
        Case("stats: manifest a JSON list", stats, ("{f}/manifest_list",), "manifest"),
        Case("stats: manifest without hardware", stats, ("{f}/manifest_nohw",), "hardware"),
        Case("stats: shard bytes flipped", stats, ("{f}/shard_flipped",), "sha256 mismatch"),
        Case("stats: shard missing", stats, ("{f}/shard_missing",), "missing"),
        Case("stats: tasks.jsonl corrupt mid-file", stats, ("{f}/tasks_corrupt",), "line 3"),
        Case("stats: journal corrupt mid-file", stats, ("{f}/journal_corrupt",), "line 2"),
        Case("db check: missing folder", "autotune.db", ("check", "{f}/missing"), "no such folder"),
        Case("db repair: not a work dir", "autotune.db", ("repair", "{f}/empty"), "no MetaSchedule database"),
        Case("train: missing dataset", "autotune.costmodel.train", ("--dataset", "{f}/missing", "--quick"),
             "not found"),
        Case("train: dataset of another schema", "autotune.costmodel.train",
             ("--dataset", "{f}/schema99", "--quick"), "schema version"),
        Case("train: corrupt shard", "autotune.costmodel.train", ("--dataset", "{f}/shard_flipped", "--quick"),
             "sha256"),
        Case("train: unknown model kind", "autotune.costmodel.train", ("--dataset", "{f}/good", "--models", "nope"),
             "valid:"),
        Case("train: results folder on a full disk", "autotune.costmodel.train",
             ("--dataset", "{f}/good", "--models", "random", "--held-out", "tiny", "--quick", "--models-dir", "{f}/full/models",
              "--results", "{f}/full/results"), "no space left"),
        Case("bundle ingest: missing bundle", "autotune.cuda.bundle",
             ("ingest", "{f}/missing", "{f}/results_garbage.jsonl", "--out", "{f}/ingested"), "not a bundle"),
        Case("bundle pack: not a bundle", "autotune.cuda.bundle", ("pack", "{f}/empty"), "not a finished bundle"),
        Case("gpu measure: missing bundle", "autotune.cuda.measure", ("{f}/missing.tar.xz", "--out", "{f}/m"),
             "no such file"),
        Case("gpu measure: folder is not a bundle", "autotune.cuda.measure", ("{f}/empty", "--out", "{f}/m"),
             "not a bundle"),
        Case("gpu measure: archive not xz", "autotune.cuda.measure", ("{f}/bundle_garbage.tar.xz", "--out", "{f}/m"),
             "not a readable"),
        Case("experiment online_update: missing dataset", "experiments.online_update.run",
             ("--dataset", "{f}/missing", "--out", "{f}/exp-ou"), "not found"),
        Case("experiment active_learning: dataset of another schema", "experiments.active_learning.run",
             ("--dataset", "{f}/schema99", "--out", "{f}/exp-al"), "schema version"),
        Case("experiment tuning_efficiency: unknown model", "experiments.tuning_efficiency.run",
             ("--models", "nope", "--summarize-only", "--out", "{f}/exp-te"), "valid:"),
        Case("experiment tuning_efficiency: seeds not integers", "experiments.tuning_efficiency.run",
             ("--seeds", "a", "--summarize-only", "--out", "{f}/exp-te"), "--seeds"),
        Case("experiment real_budget: unknown model", "experiments.tuning_efficiency.real_budget",
             ("--models", "nope", "--summarize-only", "--out", "{f}/exp-rb"), "valid:"),
        Case("experiment real_budget: unreadable arm", "experiments.tuning_efficiency.real_budget",
             ("--arms", "ms-mlp+nope", "--summarize-only", "--out", "{f}/exp-rb"), "cannot read"),
        Case("experiment real_budget: tuning another machine's hardware", "experiments.tuning_efficiency.real_budget",
             ("--hardware", "cpu-nope-1c", "--models", "tiny_mlp", "--seeds", "0", "--arms", "ms-xgb",
              "--out", "{f}/exp-rb"), "--summarize-only", tvm=True),
        Case("experiment transfer: missing source dataset", "experiments.transfer.run",
             ("--pairs", "{f}/missing:{f}/good", "--out", "{f}/exp-tr"), "not found"),
        Case("transfer: source model folder missing", "autotune.costmodel.transfer",
             ("--source", "{f}/missing", "--target-dataset", "{f}/good"), "not a folder"),
        Case("transfer: unknown method", "autotune.costmodel.transfer",
             ("--source", "{f}/costmodel_badjson", "--target-dataset", "{f}/good", "--method", "nope"), "valid:"),
        Case("stats: --markdown on a full disk", stats, ("{f}/good", "--markdown", "{f}/full/stats.md"),
             "cannot write"),
        # TVM side (each starts TVM)
        Case("tune: .pt2 missing", "autotune.tune", ("--model", "{f}/pt2/nope.pt2"), "no such file", tvm=True),
        Case("tune: .pt2 garbage", "autotune.tune", ("--model", "{f}/pt2/garbage.pt2", "--work-dir", "{f}/wd-pt2"),
             "cannot load", tvm=True),
        Case("tune: unknown zoo model", "autotune.tune", ("--model", "resnet999"), "resnet999", tvm=True),
        Case("tune: .onnx missing", "autotune.tune", ("--model", "{f}/onnx/nope.onnx"), "no such file", tvm=True),
        Case("tune: .onnx garbage", "autotune.tune", ("--model", "{f}/onnx/garbage.onnx", "--work-dir", "{f}/wd-onnx"),
             "not a valid ONNX model", tvm=True),
        Case("tune: .onnx with a dynamic input", "autotune.tune",
             ("--model", "{f}/onnx/dynamic.onnx", "--work-dir", "{f}/wd-onnx"), "static shape", tvm=True),
        Case("tune: .onnx with an operator TVM does not convert", "autotune.tune",
             ("--model", "{f}/onnx/custom_op.onnx", "--work-dir", "{f}/wd-onnx"), "cannot convert", tvm=True),
        Case("tune: malformed target", "autotune.tune", ("--model", "tiny", "--target", "{kind: llvm"), "target",
             tvm=True),
        Case("tune: work dir is a file", "autotune.tune", ("--model", "tiny", "--work-dir", "{f}/afile.txt"),
             "afile.txt", tvm=True),
        Case("tune: cost-model folder missing", "autotune.tune",
             ("--model", "tiny", "--cost-model", "xgb", "--cost-model-path", "{f}/missing"), "missing", tvm=True),
        Case("tune: cost-model folder corrupt", "autotune.tune",
             ("--model", "tiny", "--cost-model", "xgb", "--cost-model-path", "{f}/costmodel_badjson"), "model.json",
             tvm=True),
        Case("tune: resume on a database corrupt mid-file", "autotune.tune",
             ("--model", "tiny", "--work-dir", "{f}/wd_damaged", "--trials", "4"), "autotune.db repair", tvm=True,
             unchanged="{f}/wd_damaged/database_tuning_record.json"),
        Case("tune: cost-model folder carrying a pickle", "autotune.tune",
             ("--model", "tiny", "--cost-model", "seq", "--cost-model-path", "{f}/costmodel_pickle"), "weights.pkl",
             tvm=True, absent="{f}/canary"),
        Case("tune: .pt2 that runs code on load", "autotune.tune", ("--model", "{f}/pt2/evil.pt2"), "refused",
             tvm=True, absent="{f}/canary"),
        Case("tune: work dir on a full disk", "autotune.tune",
             ("--model", "tiny", "--trials", "4", "--work-dir", "{f}/full/wd"), "no space left", tvm=True),
        Case("collect: --out on a full disk", "autotune.collect", ("--out", "{f}/full/ds"), "no space left", tvm=True),
        Case("collect: --out is a file", "autotune.collect", ("--out", "{f}/afile.txt"), "is a file", tvm=True),
        Case("collect: --out of other hardware", "autotune.collect", ("--out", "{f}/good_collect"), "measured on",
             tvm=True, unchanged="{f}/good_collect/manifest.json"),
        Case("collect: --out manifest corrupt", "autotune.collect", ("--out", "{f}/manifest_garbage"),
             "corrupt manifest", tvm=True, unchanged="{f}/manifest_garbage/manifest.json"),
        Case("collect: --same-tasks-as missing", "autotune.collect",
             ("--out", "{f}/newds", "--same-tasks-as", "{f}/missing"), "not a readable dataset", tvm=True),
        Case("features: missing dataset", "autotune.collection.features", ("{f}/missing",), "not found", tvm=True),
        Case("features: shard flipped", "autotune.collection.features", ("{f}/shard_flipped",), "sha256", tvm=True),
        Case("export: missing dataset", "autotune.collection.export", ("{f}/missing", "{f}/exp1"), "not found",
             tvm=True),
        Case("export: tasks.jsonl corrupt", "autotune.collection.export", ("{f}/tasks_corrupt", "{f}/exp2"),
             "line 3", tvm=True),
        Case("export: out on a full disk", "autotune.collection.export", ("{f}/good", "{f}/full/export"),
             "disk full", tvm=True),
    ]
    return out


def fill_disk(path: str) -> bool:
    """Mount a 1 MiB tmpfs at ``path`` and fill it (root only); False when mounting is not allowed."""
    os.makedirs(path, exist_ok=True)
    if os.path.ismount(path):
        return True
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", path], capture_output=True, check=False)
    if res.returncode != 0:
        return False
    with open(os.path.join(path, "filler"), "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    return True


def unmount(path: str) -> None:
    if os.path.ismount(path):
        subprocess.run(["umount", path], capture_output=True, check=False)


def run_case(case: Case, f: str, timeout: float = 300) -> dict:
    """Run one case; returns rc, the stderr lines and whether a protected file kept its bytes."""
    args = [a.replace("{f}", f) for a in case.args]
    guard = case.unchanged.replace("{f}", f) if case.unchanged else None
    before = open(guard, "rb").read() if guard else None
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    res = subprocess.run([sys.executable, "-m", case.module, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=env)
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    return {
        "rc": res.returncode,
        "stderr": res.stderr,
        "error_lines": lines,
        "traceback": "Traceback" in res.stderr,
        "unchanged": (open(guard, "rb").read() == before) if guard else None,
        "payload_ran": os.path.exists(case.absent.replace("{f}", f)) if case.absent else False,
    }
