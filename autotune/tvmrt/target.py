"""Targets: host CPU detection and parsing of ``--target``.

Never generic x86-64: ``{"kind": "llvm"}`` without ``mcpu`` generates code without AVX2,
so the host CPU is detected through LLVM and written into the target explicitly.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from dataclasses import asdict, dataclass

from autotune.errors import UserError

from .startup import fast_start


@dataclass(frozen=True)
class HostInfo:
    """What the measurements were taken on (goes into every manifest and report)."""

    cpu_model: str
    mcpu: str
    triple: str
    cores: int
    flags: tuple[str, ...]
    machine: str
    caches: dict | None = None  # L1d/L2/L3 KiB and line size from sysfs (``autotune.hardware.host_caches``)

    def as_json(self) -> dict:
        return asdict(self)


_INTERESTING_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "amx_tile")


def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    model, flags = platform.processor() or "unknown", ()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("unknown", "", platform.processor()):
                    model = value.strip()
                elif key == "flags" and not flags:
                    present = set(value.split())
                    flags = tuple(flag for flag in _INTERESTING_FLAGS if flag in present)
    except OSError:
        pass
    return model, flags


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def detect_host() -> HostInfo:
    from autotune.hardware import host_caches

    fast_start("llvm")
    from tvm.target import codegen

    model, flags = _cpuinfo()
    return HostInfo(
        cpu_model=model,
        mcpu=str(codegen.llvm_get_system_cpu()),
        triple=str(codegen.llvm_get_system_triple()),
        cores=host_cores(),
        flags=flags,
        machine=platform.machine(),
        caches=host_caches(),
    )


def host_target_config(num_cores: int | None = None, mcpu: str | None = None) -> dict:
    host = detect_host()
    return {"kind": "llvm", "mcpu": mcpu or host.mcpu, "num-cores": int(num_cores or host.cores)}


_ACCEPTED = "accepted: 'llvm', 'cuda', or a JSON target dict such as '{\"kind\": \"llvm\", \"mcpu\": \"znver3\", \"num-cores\": 2}'"


def parse_target(spec: str | dict, num_cores: int | None = None):
    """``--target`` to a ``tvm.target.Target``. Raises UserError with a one-line message."""
    if isinstance(spec, dict):
        config = dict(spec)
    else:
        text = spec.strip()
        if text == "llvm":
            config = host_target_config(num_cores)
        elif text == "cuda":
            config = {"kind": "cuda", "arch": "sm_90"}
        elif text.startswith("{"):
            try:
                config = json.loads(text)
            except json.JSONDecodeError as err:
                raise UserError(f"--target: malformed JSON ({err.msg} at char {err.pos}); {_ACCEPTED}") from None
            if not isinstance(config, dict) or "kind" not in config:
                raise UserError(f"--target: JSON target needs a 'kind' key; {_ACCEPTED}")
        else:
            raise UserError(f"--target: unknown target {text!r}; {_ACCEPTED}")
    kind = config.get("kind")
    if kind not in ("llvm", "cuda"):
        raise UserError(f"--target: unsupported target kind {kind!r}; {_ACCEPTED}")
    fast_start(kind)
    import tvm
    from tvm.target import codegen

    if kind == "llvm":
        config.setdefault("mcpu", detect_host().mcpu)
        config.setdefault("num-cores", int(num_cores or host_cores()))
        if config["mcpu"] == "native" or not codegen.llvm_is_valid_cpu(
            config["mcpu"], codegen.llvm_get_system_triple()
        ):
            raise UserError(
                f"--target: unknown LLVM cpu {config['mcpu']!r}; use a name LLVM knows (e.g. "
                f"{detect_host().mcpu!r} for this host, 'x86-64-v2', 'skylake-avx512')"
            )
    else:
        _check_cuda_usable(tvm)
        config.setdefault("arch", cuda_arch(tvm))
        for key, value in cuda_limits(tvm).items():
            config.setdefault(key, value)
    try:
        return tvm.target.Target(config)
    except Exception as err:  # TVM raises ValueError/TVMError with multi-line text
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"--target: TVM rejected {json.dumps(config)}: {first}") from None


def cuda_arch(tvm) -> str:
    dev = tvm.cuda(0)
    if dev.exist:
        major, _, minor = str(dev.compute_version).partition(".")
        return f"sm_{major}{minor}"
    return "sm_90"


# MetaSchedule's CUDA rules (AutoBind, MultiLevelTiling, CrossThreadReduction) need these target
# attributes; a bare {"kind": "cuda"} has none. Values of TVM's "nvidia/nvidia-h100" tag (the H200 is
# the same SM 9.0 chip), used when no GPU is visible (building on a CPU machine for a GPU elsewhere).
_SM90_LIMITS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
                "registers_per_block": 65536, "thread_warp_size": 32, "max_num_threads": 1024,
                "l2_cache_size_bytes": 52428800}


def cuda_limits(tvm) -> dict:
    """Thread/shared-memory limits of the visible GPU, else the SM 9.0 (H100/H200) values."""
    try:
        dev = tvm.cuda(0)
        if dev.exist:
            return {"max_threads_per_block": int(dev.max_threads_per_block),
                    "max_shared_memory_per_block": int(dev.max_shared_memory_per_block),
                    "thread_warp_size": int(dev.warp_size), "max_num_threads": int(dev.max_threads_per_block),
                    "registers_per_block": 65536}
    except Exception:  # noqa: BLE001 - no driver: fall back to the SM 9.0 values
        pass
    return dict(_SM90_LIMITS)


def _check_cuda_usable(tvm) -> None:
    if os.environ.get("AUTOTUNE_CUDA_BUILD_ONLY") == "1":
        return
    try:
        ok = bool(tvm.cuda(0).exist)
    except Exception:
        ok = False
    if not ok:
        raise UserError(
            "--target cuda: no usable CUDA GPU/runtime found (tvm.cuda(0) does not exist); "
            "use --target llvm on this machine, or run on a machine with an NVIDIA GPU and driver"
        )


def target_kind(target) -> str:
    return str(target.kind.name)


def target_json(target) -> dict:
    """A JSON-able, stable description of a target (for work dirs, datasets, model cards)."""
    exported = target.export()
    keep = ("kind", "mcpu", "num-cores", "arch", "mattr", "max_threads_per_block", "thread_warp_size")
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in exported.items() if k in keep}


def hardware_id(target, rpc_key: str | None = None) -> str:
    """Names the hardware+target a measurement belongs to: datasets and pretrained models use it."""
    tj = target_json(target)
    suffix = f"-{rpc_key}" if rpc_key else ""
    if tj["kind"] == "cuda":
        return f"cuda-{tj.get('arch', 'unknown')}{suffix}"
    return f"cpu-{tj.get('mcpu')}-{tj.get('num-cores', 1)}c{suffix}"


def target_cores(target) -> int:
    """Threads a target's programs run with (its llvm ``num-cores``; 1 for other kinds): the one place
    the tuner, the search, the cost model and the runtime pool read it from."""
    tj = target_json(target)
    return int(tj.get("num-cores", 1)) if tj["kind"] == "llvm" else 1


def use_target_threads(target, threads: int | None = None, check: bool = False) -> int:
    """Size TVM's runtime thread pool for ``target`` before it starts; returns the thread count asked for.

    Unset, TVM runs half the logical CPUs (it assumes hyper-threading): 1 thread on a 2-core machine.
    ``threads`` overrides; otherwise a TVM_NUM_THREADS already in the environment is kept. Worker
    processes started later inherit it. TVM's pool also pins its threads and spins after each call,
    which starves torch's threads in the same process (measured: torch eager 5-30x slower); unpinned,
    both run at full speed, so TVM_BIND_THREADS defaults to 0. ``check``: start the pool now and warn
    when it already ran with another count (an earlier TVM call in this process; it cannot be resized).
    """
    if threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TVM_NUM_THREADS", str(target_cores(target)))
    os.environ.setdefault("TVM_BIND_THREADS", "0")
    want = int(os.environ["TVM_NUM_THREADS"])
    if check:
        import tvm

        if tvm.runtime.num_threads() != want:
            logging.getLogger(__name__).warning(
                "TVM's runtime runs %d threads, not %d: set TVM_NUM_THREADS=%d before the first TVM call",
                tvm.runtime.num_threads(), want, want)
    return want
