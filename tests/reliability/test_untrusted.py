"""Untrusted inputs are refused without running anything: each payload below would create a canary
file when unpickled; the test first shows that the stock loader does run it (so the payload is
real), then that autotune refuses the file and the canary never appears."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest
import torch

from .cases import ROOT, TINY


class Payload:
    """Unpickling this object writes ``canary`` (what an attacker's file would do, harmlessly)."""

    def __init__(self, canary: str):
        self.canary = canary

    def __reduce__(self):
        return (exec, (f"open({self.canary!r}, 'w').write('ran')",))


def _tiny_pt2(path: str) -> None:
    lin = torch.nn.Linear(4, 3)
    torch.export.save(torch.export.export(lin, (torch.randn(2, 4),)), path)


def _rewrite_zip(src: str, dst: str, edit) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            zout.writestr(item, edit(item.filename, zin.read(item.filename)))


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _stock_load_runs_it(path: str, canary: str) -> bool:
    code = "import sys, torch\ntry:\n    torch.export.load(sys.argv[1])\nexcept Exception:\n    pass\n"
    subprocess.run([sys.executable, "-c", code, path], capture_output=True, timeout=120, check=False)
    ran = os.path.exists(canary)
    if ran:
        os.remove(canary)
    return ran


@pytest.fixture
def canary(tmp_path):
    path = str(tmp_path / "canary")
    yield path
    assert not os.path.exists(path) or pytest.fail("the payload ran")


def _evil_sample_inputs(tmp_path, canary):
    good, bad = str(tmp_path / "good.pt2"), str(tmp_path / "evil_inputs.pt2")
    _tiny_pt2(good)
    _rewrite_zip(good, bad, lambda n, b: _torch_bytes(Payload(canary)) if "sample_inputs" in n else b)
    return bad


def _evil_pickled_weight(tmp_path, canary):
    good, bad = str(tmp_path / "good.pt2"), str(tmp_path / "evil_weight.pt2")
    _tiny_pt2(good)

    def edit(name, data):
        if name.endswith("model_weights_config.json"):
            config = json.loads(data)
            entry = next(iter(config["config"].values()))
            entry["use_pickle"] = True
            evil_file = entry["path_name"]
            edit.target = evil_file
            return json.dumps(config).encode()
        return data

    _rewrite_zip(good, str(tmp_path / "step.pt2"), edit)
    _rewrite_zip(str(tmp_path / "step.pt2"), bad,
                 lambda n, b: _torch_bytes(Payload(canary)) if n.endswith("/weights/" + edit.target) else b)
    return bad


@pytest.mark.parametrize("make", [_evil_sample_inputs, _evil_pickled_weight], ids=["sample_inputs", "use_pickle"])
def test_pt2_that_runs_code_on_load_is_refused(tmp_path, canary, make):
    from autotune.untrusted import UnsafeFile
    from autotune.zoo import load_exported

    path = make(tmp_path, canary)
    assert _stock_load_runs_it(path, canary), "the crafted .pt2 should run its payload under torch.export.load"
    with pytest.raises(UnsafeFile, match="refused") as err:
        load_exported(path)
    assert "\n" not in str(err.value)
    assert not os.path.exists(canary)


def test_clean_pt2_still_loads(tmp_path):
    from autotune.zoo import load_exported

    path = str(tmp_path / "ok.pt2")
    _tiny_pt2(path)
    assert isinstance(load_exported(path), torch.export.ExportedProgram)


@pytest.mark.parametrize("kind, weights", [("seq", "raw"), ("seq", "torch"), ("ms-mlp", "torch"), ("xgb", "raw")])
def test_cost_model_folder_with_a_pickle_is_refused(tmp_path, canary, kind, weights):
    from autotune.costmodel import ModelFileError, load

    folder = tmp_path / "model"
    folder.mkdir()
    blob = pickle.dumps(Payload(canary)) if weights == "raw" else _torch_bytes(Payload(canary))
    (folder / "weights.pkl").write_bytes(blob)
    (folder / "model.json").write_text(json.dumps({"kind": kind, "params": {}, "feature_version": 1,
                                                   "state": {"weights": "weights.pkl"}}))
    with pytest.raises(ModelFileError) as err:
        load(str(folder))
    assert str(folder) in str(err.value)
    assert not os.path.exists(canary)


def test_feature_cache_with_a_pickle_is_refused(tmp_path, canary, cli):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(TINY, ds)
    cache = ds / "features" / "per_store.npz"
    np.savez(cache, feats=np.array([Payload(canary)], dtype=object), offsets=np.zeros(2), fingerprint=np.asarray("x"))
    res = cli("autotune.costmodel.train", "--dataset", str(ds), "--models", "random", "--held-out", "tiny",
              "--quick", "--models-dir", str(tmp_path / "m"), "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "unreadable feature cache" in res.stderr
    assert not os.path.exists(canary)


def _evil_tar(path: str, member: str, *, symlink_to: str | None = None) -> None:
    with tarfile.open(path, "w:xz") as tar:
        info = tarfile.TarInfo("bundle/bundle.json")
        data = b'{"entry": "main"}'
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(member)
        if symlink_to:
            info.type, info.linkname = tarfile.SYMTYPE, symlink_to
            tar.addfile(info)
        else:
            payload = b"written outside the bundle"
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


@pytest.mark.parametrize("member, link", [
    ("bundle/../../../escaped.txt", None),
    ("/tmp/absolute-escaped.txt", None),
    ("bundle/link", "/etc"),
])
def test_bundle_tar_escaping_its_folder_is_refused(tmp_path, member, link, cli):
    packed = str(tmp_path / f"evil-{abs(hash(member))}.tar.xz")
    _evil_tar(packed, member, symlink_to=link)
    res = cli("autotune.cuda.measure", packed, "--out", str(tmp_path / "out"), "--dry-run")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "refused" in res.stderr and res.stderr.count("\n") == 1
    assert not os.path.exists("/tmp/absolute-escaped.txt")
    found = subprocess.run(["find", "/tmp", "-maxdepth", "3", "-name", "escaped.txt", "-newer", packed],
                           capture_output=True, text=True, check=False).stdout
    assert found == "", found
    assert ROOT  # the CLI ran from the repository root


def test_a_bundle_that_pack_wrote_still_unpacks(tmp_path, cli):
    from autotune.cuda.measure import unpack

    bundle = tmp_path / "b"
    (bundle / "kernels").mkdir(parents=True)
    (bundle / "bundle.json").write_text('{"entry": "main"}')
    (bundle / "kernels" / "k0.so").write_bytes(b"\0" * 64)
    res = cli("autotune.cuda.bundle", "pack", str(bundle))
    assert res.returncode == 0, res.stderr
    folder = unpack(str(bundle) + ".tar.xz")
    assert sorted(os.listdir(folder)) == ["bundle.json", "kernels"]
