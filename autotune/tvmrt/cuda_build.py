"""Build CUDA programs on a machine without a GPU (to time them later on one that has it).

TVM's CUDA codegen only embeds a compiled kernel binary when its CUDA runtime library
(``libtvm_runtime_cuda.so``) is loaded; without it, ``target.build.cuda`` falls back to a
source-only module that cannot be launched anywhere. That library needs the driver,
``libcuda.so.1``, which a CPU machine does not have. ``prepare_build_only()`` therefore:

1. loads the real driver if there is one, else compiles a stand-in ``libcuda.so.1`` (every
   call answers "no device") and loads it before TVM, in this process and — through
   ``AUTOTUNE_CUDA_STUB`` — in every builder worker (``_worker_main`` loads it first);
2. picks the CUDA compiler TVM calls back into: ``nvcc`` (``TVM_CUDA_COMPILE_MODE=nvcc``,
   fatbin) from ``CUDA_PATH``, ``PATH`` or ``/usr/local/cuda*``. No GPU is touched: the fatbin
   for ``sm_90`` is what the device loads.

Must run before ``import tvm``. Nothing here is needed on a machine with a GPU and driver.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import sys

from autotune.errors import UserError

STUB_ENV = "AUTOTUNE_CUDA_STUB"

_STUB_C = r"""
/* Stand-in for the CUDA driver (libcuda.so.1) on a machine without a GPU (autotune): lets TVM's
   CUDA runtime library load so CUDA modules get compiled and exported; every call says "no device". */
static const char *msg = "no CUDA driver on this machine (autotune build-only stand-in)";
int cuGetErrorName(int e, const char **s) { (void)e; *s = msg; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = msg; return 0; }
int cuInit(unsigned f) { (void)f; return 100; }
int cuDriverGetVersion(int *v) { *v = 0; return 100; }
int cuDeviceGetCount(int *n) { *n = 0; return 100; }
int cuDeviceGetName(char *n, int l, int d) { (void)n; (void)l; (void)d; return 100; }
int cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return 100; }
int cuLaunchKernelEx(const void *c, void *f, void **p, void **x) { (void)c; (void)f; (void)p; (void)x; return 100; }
int cuModuleGetFunction(void **f, void *m, const char *n) { (void)f; (void)m; (void)n; return 100; }
int cuModuleLoadData(void **m, const void *i) { (void)m; (void)i; return 100; }
int cuModuleUnload(void *m) { (void)m; return 100; }
int cuTensorMapEncodeTiled(void) { return 100; }
int cuGetProcAddress(const char *s, void **p, int v, unsigned long long f, void *st) {
  (void)s; (void)p; (void)v; (void)f; (void)st; return 100; }
int cuGetProcAddress_v2(const char *s, void **p, int v, unsigned long long f, void *st) {
  (void)s; (void)p; (void)v; (void)f; (void)st; return 100; }
"""


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autotune", "cuda-stub")


def _real_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
        return True
    except OSError:
        return False


def driver_stub() -> str:
    """Path of the stand-in libcuda.so.1, compiled once per machine (cc is needed anyway to link)."""
    out_dir = _cache_dir()
    path = os.path.join(out_dir, "libcuda.so.1")
    if os.path.exists(path):
        return path
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise UserError("building CUDA programs without a GPU needs a C compiler (cc/gcc) on PATH")
    os.makedirs(out_dir, exist_ok=True)
    src = os.path.join(out_dir, "libcuda_stub.c")
    with open(src, "w") as f:
        f.write(_STUB_C)
    tmp = path + f".tmp{os.getpid()}"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", tmp, src], check=True,
                   capture_output=True)
    os.replace(tmp, path)
    return path


def load_stub_if_requested() -> None:
    """In builder workers: load the stand-in driver named by the parent (before ``import tvm``)."""
    path = os.environ.get(STUB_ENV)
    if path:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def find_nvcc() -> str | None:
    candidates = []
    if os.environ.get("CUDA_PATH"):
        candidates.append(os.path.join(os.environ["CUDA_PATH"], "bin", "nvcc"))
    if shutil.which("nvcc"):
        candidates.append(shutil.which("nvcc"))
    candidates += sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True)
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def prepare_build_only() -> dict:
    """Set this process (and its future workers) up to build CUDA programs without a GPU.

    Returns what was chosen ({"driver": "real"|"stub", "nvcc": path}). Raises UserError when no
    CUDA compiler is found, or when tvm was imported too early for the driver stand-in to matter.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise UserError(
            "building CUDA programs needs nvcc: set CUDA_PATH to a CUDA toolkit (12.x or 13.x) or put nvcc "
            "on PATH (pip install nvidia-cuda-nvcc-cu12 provides one)"
        )
    os.environ["CUDA_PATH"] = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    os.environ["AUTOTUNE_CUDA_BUILD_ONLY"] = "1"
    if _real_driver():
        return {"driver": "real", "nvcc": nvcc}
    if "tvm" in sys.modules:
        raise UserError("internal: prepare_build_only() must run before tvm is imported")
    stub = driver_stub()
    ctypes.CDLL(stub, mode=ctypes.RTLD_GLOBAL)
    os.environ[STUB_ENV] = stub
    return {"driver": "stub", "nvcc": nvcc}


def cuda_runtime_loaded() -> bool:
    """True when TVM can create real CUDA modules (kernels compiled and embedded)."""
    import tvm

    return tvm.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True) is not None
