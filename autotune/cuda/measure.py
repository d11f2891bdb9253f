"""``python3 -m autotune.cuda.measure BUNDLE --out DIR``: time a bundle's CUDA kernels on this GPU.

Runs on the GPU machine, which has no TVM and no network: it needs only ``tvm_ffi`` (the bundle's
wheel), TVM's runtime libraries (the bundle's ``runtime/``), torch (to allocate and time on the
GPU), numpy and pyarrow (for the dataset store's JSON-lines reader). Imports nothing from autotune
that needs TVM.

Each program: load its shared object, allocate its arguments on the GPU with torch (floats
uniform in [0, 1), integers zero — index inputs must stay in bounds), one checked call, then TVM's
time evaluator (MetaSchedule's protocol: ``--repeat`` repeats of ``number`` calls, ``number`` grown
until a repeat lasts ``--min-repeat-ms``); every repeat's mean per call is written. One JSON line per program is appended to ``DIR/results.jsonl`` (flushed), first a
``device`` line; a rerun skips programs already there, and ``--time-limit`` stops cleanly, so a
lease that ends mid-way loses nothing already timed. ``--dry-run`` loads every kernel without a
GPU (checks a bundle on the machine that built it).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import lzma
import os
import platform
import struct
import sys
import tarfile
import time

from autotune.data.store import DatasetError, read_jsonl


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def load_runtime(bundle: str, dry_run: bool):
    """tvm_ffi + libtvm_runtime + libtvm_runtime_cuda from the bundle (no TVM compiler)."""
    try:
        import tvm_ffi
    except ImportError:
        tvm_ffi = _install_ffi_wheel(bundle)

    rt = os.path.join(bundle, "runtime")
    ctypes.CDLL(os.path.join(rt, "libtvm_runtime.so"), mode=ctypes.RTLD_GLOBAL)
    if os.path.exists(os.path.join(rt, "libcudart.so.13")):
        try:
            ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)  # the machine's own, when it has one
        except OSError:
            ctypes.CDLL(os.path.join(rt, "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        if not dry_run:
            raise RuntimeError("no CUDA driver (libcuda.so.1) on this machine") from None
        from autotune.tvmrt.cuda_build import driver_stub

        ctypes.CDLL(driver_stub(), mode=ctypes.RTLD_GLOBAL)
    try:
        ctypes.CDLL(os.path.join(rt, "libtvm_runtime_cuda.so"), mode=ctypes.RTLD_GLOBAL)
    except OSError as err:
        raise RuntimeError(f"TVM's CUDA runtime library did not load ({err}); it needs libcudart.so.13") from None
    return tvm_ffi


def _install_ffi_wheel(bundle: str):
    """No tvm_ffi here (the GPU machine): install the bundle's wheel into a temp dir, offline."""
    import glob
    import subprocess
    import tempfile

    wheels = glob.glob(os.path.join(bundle, "wheels", "*.whl"))
    if not wheels:
        raise ImportError("tvm_ffi is not installed and the bundle carries no apache-tvm-ffi wheel")
    site = os.path.join(tempfile.gettempdir(), "autotune_gpu_site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--upgrade", "--target", site, *wheels], check=True)
    sys.path.insert(0, site)
    import tvm_ffi

    return tvm_ffi


def _alloc(torch, args_info, device):
    out = []
    for kind, dtype, shape in args_info:
        if kind != "TENSOR":
            raise ValueError(f"unsupported argument kind {kind}")
        tdt = getattr(torch, dtype)
        if tdt.is_floating_point:
            out.append(torch.rand(shape, dtype=tdt, device=device))
        else:
            out.append(torch.zeros(shape, dtype=tdt, device=device))
    return out


def time_module(tvm_ffi, mod, entry: str, args, device_type: int, repeat: int, min_repeat_ms: float) -> list[float]:
    """Seconds per call of ``mod[entry](*args)``, one value per repeat: TVM's own time evaluator (the
    C++ loop MetaSchedule's runners use: ``number`` grows until a repeat lasts ``min_repeat_ms``,
    the device is synchronized around each repeat). ``device_type``: 2 = CUDA, 1 = CPU (DLPack)."""
    feval = tvm_ffi.get_global_func("runtime.RPCTimeEvaluator")(
        mod, entry, device_type, 0, 1, repeat, int(min_repeat_ms), 100, 0, 1, 0, "")
    blob = feval(*args)
    return list(struct.unpack("@" + "d" * repeat, bytes(blob)))


def device_info(torch) -> dict:
    props = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
            "sm_count": props.multi_processor_count, "memory_gb": round(props.total_memory / 2**30, 1),
            "cuda_runtime_torch": torch.version.cuda, "driver": _driver_version(), "machine": platform.machine()}


def _driver_version() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001 - informational only
        return None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m autotune.cuda.measure", description=__doc__.split("\n\n")[0])
    p.add_argument("bundle")
    p.add_argument("--out", required=True, help="folder for results.jsonl")
    p.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-repeat-ms", type=float, default=10.0)
    p.add_argument("--dry-run", action="store_true", help="load every kernel, time nothing (no GPU needed)")
    return p


def unpack(packed: str) -> str:
    """A packed bundle (.tar.xz) unpacked once into the temp dir (outside --out); returns its folder."""
    import tarfile
    import tempfile

    stamp = f"{os.path.basename(packed)}-{os.path.getsize(packed)}-{int(os.path.getmtime(packed))}"
    dest = os.path.join(tempfile.gettempdir(), "autotune_gpu_bundle", stamp)
    if not os.path.exists(os.path.join(dest, "bundle", "bundle.json")):
        with tarfile.open(packed, "r:xz") as tar:
            members = tar.getmembers()
            for member in members:  # all checked before anything is written
                if not (member.name == "bundle" or member.name.startswith("bundle/")) or ".." in member.name.split("/") \
                        or not (member.isfile() or member.isdir()):
                    raise UnsafeArchive(f"{packed}: refused: member {member.name!r} is not a plain file or folder "
                                        "under bundle/ (a bundle made by autotune.cuda.bundle pack holds only those)")
                tarfile.data_filter(member, dest)  # absolute paths, links out of dest: FilterError
            tar.extractall(dest, members=members, filter="data")
    return os.path.join(dest, "bundle")


class UnsafeArchive(ValueError):
    """A packed bundle whose members would land outside its folder (or are links/devices)."""


def measure_program(tvm_ffi, torch, args, entry: str, prog: dict) -> dict:
    """One program's results line: ``loaded`` (dry run), ``ok`` with run_secs, or ``run_error``."""
    row = {"kind": "program", "id": prog["id"], "timestamp": time.time()}
    try:
        mod = tvm_ffi.load_module(os.path.join(args.bundle, prog["kernel"]))
        func = mod[entry]
        if args.dry_run:
            row.update(status="loaded", run_secs=[], error="")
        else:
            tensors = [tvm_ffi.from_dlpack(t) for t in _alloc(torch, prog["args_info"], "cuda")]
            func(*tensors)  # one checked call first: a kernel that faults fails here, not in the loop
            torch.cuda.synchronize()
            secs = time_module(tvm_ffi, mod, entry, tensors, 2, args.repeat, args.min_repeat_ms)
            row.update(status="ok", run_secs=secs, error="")
    except Exception as err:  # noqa: BLE001 - a failing kernel is a data point, not a crash
        row.update(status="run_error", run_secs=[], error=f"{type(err).__name__}: {err}"[:500])
    return row


def _context_alive(torch) -> bool:
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 - a sticky CUDA error ends the run
        return False


def main(argv=None) -> int:
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")  # no JIT build of torch glue on the device
    args = build_parser().parse_args(argv)
    deadline = time.time() + args.time_limit if args.time_limit else None
    if args.bundle.endswith((".tar.xz", ".txz")):
        if not os.path.exists(args.bundle):
            return _fail(f"{args.bundle}: no such file")
        try:
            args.bundle = unpack(args.bundle)
        except UnsafeArchive as err:
            return _fail(str(err))
        except (tarfile.TarError, EOFError, lzma.LZMAError, OSError) as err:
            return _fail(f"{args.bundle}: not a readable packed bundle ({type(err).__name__}: {err}); "
                         "expected the .tar.xz that autotune.cuda.bundle pack writes")
    info_path = os.path.join(args.bundle, "bundle.json")
    if not os.path.exists(info_path):
        return _fail(f"{args.bundle}: not a bundle (no bundle.json); make one with python -m autotune.cuda.bundle build")
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    try:
        tvm_ffi = load_runtime(args.bundle, args.dry_run)
    except (RuntimeError, OSError, ImportError) as err:
        return _fail(str(err))
    torch = None
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            return _fail("no CUDA GPU visible to torch on this machine; use --dry-run to only check the bundle")
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, "results.jsonl")
    try:
        prior = read_jsonl(out_path)
        programs = [r for r in read_jsonl(os.path.join(args.bundle, "programs.jsonl")) if r["status"] == "ok"]
    except DatasetError as err:
        return _fail(str(err))
    if prior:  # rewritten without a line a killed run cut short (appending after it would corrupt the file)
        with open(out_path + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in prior)
        os.replace(out_path + ".tmp", out_path)
    done = {r["id"] for r in prior if r.get("kind") == "program"}
    entry = info.get("entry", "main")
    t0, n_ok, n_err = time.time(), 0, 0
    with open(out_path, "w" if not prior else "a", encoding="utf-8") as f:
        if not prior or args.dry_run:
            dev = device_info(torch) if torch is not None else {"gpu": None, "dry_run": True}
            f.write(json.dumps({"kind": "device", "device": dev, "bundle": info.get("created"),
                                "versions": {"python": platform.python_version(), "tvm_ffi": tvm_ffi.__version__,
                                             "torch": torch.__version__ if torch else None},
                                "timestamp": time.time()}) + "\n")
        for prog in (p for p in programs if p["id"] not in done):
            if deadline and time.time() > deadline:
                print(f"time limit: stopping with {len(programs) - len(done)} programs left", file=sys.stderr)
                break
            row = measure_program(tvm_ffi, torch, args, entry, prog)
            f.write(json.dumps(row) + "\n")
            f.flush()
            if row["status"] == "run_error" and torch is not None and not _context_alive(torch):
                return _fail(f"CUDA context lost after {prog['id']}: {row['error']}; rerun to resume after it")
            n_ok, n_err = (n_ok, n_err + 1) if row["status"] == "run_error" else (n_ok + 1, n_err)
            done.add(prog["id"])
    print(json.dumps({"ok": n_ok, "errors": n_err, "seconds": round(time.time() - t0, 1),
                      "remaining": len([p for p in programs if p["id"] not in done])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
