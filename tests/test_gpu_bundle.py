"""The GPU data path, tested on its build side (this machine has no GPU): real CUDA compilation for
sm_90 with nvcc, the bundle the device would time, loading every kernel with the device's runtime-only
stack (tvm_ffi + TVM runtime libraries, no compiler), and ingesting timings into a dataset."""

import json
import os

import pytest

from autotune.data.store import read_manifest, read_records
from autotune.tvmrt.cuda_build import find_nvcc
from tests.conftest import ROOT, run_cli

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc on this machine: CUDA programs cannot be built")

TINY = os.path.join(ROOT, "tests", "data", "tiny_dataset")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    res = run_cli("autotune.cuda.bundle", "build", "--tasks-from", TINY, "--only-models", "tiny_mlp",
                  "--programs-per-task", "2", "--out", str(out), "--no-wheels", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@needs_nvcc
def test_build_embeds_sm90_kernels(bundle):
    info = json.loads((bundle / "bundle.json").read_text())
    programs = [json.loads(line) for line in (bundle / "programs.jsonl").read_text().splitlines()]
    assert info["arch"] == "sm_90" and info["target"]["kind"] == "cuda"
    assert info["programs"] == len(programs) == 4 and info["tasks"] == 2
    assert len({p["trace"] for p in programs}) == 4  # distinct programs
    built = [p for p in programs if p["status"] == "ok"]
    assert built, programs
    for p in built:
        data = (bundle / p["kernel"]).read_bytes()
        # the device binary is embedded (not CUDA source only): a fatbin holds an sm_90 ELF cubin
        assert data.count(b"\x7fELF") >= 2, p["kernel"]
    assert {"libtvm_runtime.so", "libtvm_runtime_cuda.so"} <= set(os.listdir(bundle / "runtime"))


@needs_nvcc
def test_device_stack_loads_every_kernel_and_refuses_without_gpu(bundle, tmp_path, cli):
    res = cli("autotune.cuda.bundle", "pack", str(bundle), "--out", str(tmp_path / "b.tar.xz"))
    assert res.returncode == 0, res.stderr
    res = cli("autotune.cuda.measure", str(tmp_path / "b.tar.xz"), "--out", str(tmp_path / "dry"), "--dry-run")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in (tmp_path / "dry" / "results.jsonl").read_text().splitlines()]
    n_built = json.loads((bundle / "bundle.json").read_text())["built"]
    assert [r["status"] for r in lines if r["kind"] == "program"] == ["loaded"] * n_built
    res = cli("autotune.cuda.measure", str(bundle), "--out", str(tmp_path / "real"))
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1


@needs_nvcc
def test_ingest_timings_into_a_dataset(bundle, tmp_path, cli):
    programs = [json.loads(line) for line in (bundle / "programs.jsonl").read_text().splitlines()]
    built = [p for p in programs if p["status"] == "ok"]
    results = tmp_path / "results.jsonl"
    lines = [{"kind": "device", "device": {"gpu": "NVIDIA H200", "capability": [9, 0]},
              "versions": {"python": "3.12.3", "torch": "2.11.0+cu130"}}]
    lines += [{"kind": "program", "id": p["id"], "status": "ok", "run_secs": [1e-5 * (i + 1)] * 3, "error": ""}
              for i, p in enumerate(built[:-1])]
    lines += [{"kind": "program", "id": built[-1]["id"], "status": "run_error", "run_secs": [], "error": "boom"}]
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "cuda-ds"
    for _ in range(2):  # a second ingest of the same timings adds nothing
        res = cli("autotune.cuda.bundle", "ingest", str(bundle), str(results), "--out", str(out))
        assert res.returncode == 0, res.stderr
    table = read_records(str(out))
    assert table.num_rows == len(built)
    assert set(table.column("hardware_id").to_pylist()) == {"cuda-sm_90"}
    assert table.column("status").to_pylist().count("ok") == len(built) - 1
    manifest = read_manifest(str(out))
    assert manifest["hardware"]["host"]["gpu"] == "NVIDIA H200"
    built_with = json.loads((bundle / "bundle.json").read_text())["versions"]
    assert manifest["hardware"]["versions"] == built_with  # the build side's, not mixed with the device's
    assert manifest["hardware"]["device_versions"] == {"python": "3.12.3", "torch": "2.11.0+cu130"}
    res = cli("autotune.cuda.bundle", "ingest", str(bundle), str(tmp_path / "missing.jsonl"), "--out", str(out))
    assert res.returncode == 2 and "missing.jsonl" in res.stderr


def test_time_module_times_a_real_kernel_with_tvm_time_evaluator(tmp_path):
    """The device's timing code on this CPU: a real compiled kernel, loaded by path through tvm_ffi,
    timed by TVM's time evaluator; a 64x larger workload must time slower."""
    import numpy as np
    import tvm
    import tvm_ffi
    from tvm import te

    from autotune.cuda.measure import time_module

    def axpb(n):
        a = te.placeholder((n,), name="a")
        return [a, te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="b")]

    secs = {}
    for n in (1 << 12, 1 << 18):
        path = str(tmp_path / f"k{n}.so")
        tvm.compile(tvm.IRModule({"main": te.create_prim_func(axpb(n))}), target="llvm").export_library(path)
        mod = tvm_ffi.load_module(path)
        x = np.random.rand(n).astype("float32")
        args = [tvm_ffi.from_dlpack(x), tvm_ffi.from_dlpack(np.zeros(n, "float32"))]
        secs[n] = time_module(tvm_ffi, mod, "main", args, 1, 3, 5)
        assert len(secs[n]) == 3 and all(s > 0 for s in secs[n])
        np.testing.assert_allclose(np.from_dlpack(args[1]), x * 2 + 1, rtol=1e-6)
    assert min(secs[1 << 18]) > 4 * min(secs[1 << 12])


@needs_nvcc
def test_results_file_torn_tail_resumes_and_mid_file_corruption_is_one_line(bundle, tmp_path, cli):
    """measure and ingest read results.jsonl with the dataset store's reader: a line cut by a killed
    run is redone; a corrupt line before the end is refused with the file and line named, exit 2."""
    out = tmp_path / "dry"
    res = cli("autotune.cuda.measure", str(bundle), "--out", str(out), "--dry-run")
    assert res.returncode == 0, res.stderr
    results = out / "results.jsonl"
    good = results.read_text().splitlines()
    results.write_text("\n".join(good[:-1]) + "\n" + good[-1][: len(good[-1]) // 2])  # killed mid-write
    res = cli("autotune.cuda.measure", str(bundle), "--out", str(out), "--dry-run")
    assert res.returncode == 0, res.stderr
    again = [json.loads(line) for line in results.read_text().splitlines()]  # every line parses
    assert [r.get("id") for r in again if r["kind"] == "program"].count(json.loads(good[-1])["id"]) == 1
    assert len(again) == len(good) + 1  # the cut program loaded again (and a dry run's device line)
    results.write_text(good[0] + "\n{not json\n" + "\n".join(good[1:]) + "\n")
    for args in (("autotune.cuda.measure", str(bundle), "--out", str(out), "--dry-run"),
                 ("autotune.cuda.bundle", "ingest", str(bundle), str(results), "--out", str(tmp_path / "ds"))):
        res = cli(*args)
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip() == f"error: {results}: corrupt JSON on line 2", res.stderr


@needs_nvcc
@pytest.mark.slow  # a builder start (~9 s): make test stays under its 10 minutes
def test_time_limit_finishes_the_bundle_without_new_tasks(bundle, tmp_path, cli):
    """--time-limit 0 on a resumed bundle asking for more programs per task builds nothing and still
    writes bundle.json (so it can be packed); a negative limit is refused in one line."""
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    (copy / "bundle.json").unlink()
    before = (copy / "programs.jsonl").read_text()
    res = cli("autotune.cuda.bundle", "build", "--tasks-from", TINY, "--only-models", "tiny_mlp",
              "--programs-per-task", "5", "--out", str(copy), "--no-wheels", "--time-limit", "0", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (copy / "programs.jsonl").read_text() == before
    assert json.loads((copy / "bundle.json").read_text())["programs"] == len(before.splitlines())
    res = cli("autotune.cuda.bundle", "build", "--tasks-from", TINY, "--out", str(copy), "--time-limit", "-1")
    assert res.returncode == 2 and res.stderr.strip() == "error: --time-limit must be >= 0 seconds, got -1.0"
