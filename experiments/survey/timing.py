"""Timing helpers shared by E1, E2 and E3 (the only place that times anything).

Method (EXPERIMENTS.md, "Traps seen"): one thread pinned for torch, Inductor's
generated code and the TVM runtime; arms timed in alternating blocks inside one
process, block order rotated every round; the headline is the median of
per-round ratios; /proc/loadavg is stored with every result.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "results"


def configure(threads: int = 1, device: str = "cpu") -> dict:
    """Pin threads and numerics for the whole process; call before importing tvm."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
        os.environ[var] = str(threads)
    if device == "cpu":
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    os.environ.pop("TRITON_CACHE_DIR", None)  # Triton's cache then lives inside each arm's fresh Inductor dir
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    torch.set_flush_denormal(True)  # random weights must not decay into denormals
    import torch._dynamo.config as dcfg
    import torch._inductor.config as icfg

    if device == "cpu":
        icfg.compile_threads = 1  # compile in-process: modest CPU use on the shared 2-core machine
    for name in ("recompile_limit", "cache_size_limit"):  # default 8: static mode would fall back to eager
        if hasattr(dcfg, name):
            setattr(dcfg, name, 1000)
    dcfg.accumulated_recompile_limit = 10000
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # TF32 pinned off: fp32 vs fp32
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    return {"threads": threads, "inductor_compile_threads": icfg.compile_threads, "flush_denormal": True,
            "tf32": False if device == "cuda" else None}


def child_result(module: str, args: list[str], mark: str, timeout: float, env: dict | None = None) -> dict:
    """Runs ``python -m module *args`` in its own interpreter (cold caches, clean state) and returns the
    JSON record of its last line starting with ``mark``, with the load average after it."""
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(mark)]
    if proc.returncode or not lines:
        raise RuntimeError(f"child {module} {' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rec = json.loads(lines[-1][len(mark):])
    rec["loadavg"] = loadavg()
    return rec


def loadavg() -> list[float]:
    try:
        return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:  # pragma: no cover - not Linux
        return []


def env_info(device: str = "cpu") -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"),
        "loadavg": loadavg(),
    }
    if device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor()


def synchronizer(device: str) -> Callable[[], None]:
    if device == "cuda":
        return torch.cuda.synchronize
    return lambda: None


def fresh_cache_dir(tag: str) -> str:
    """A new, empty TORCHINDUCTOR_CACHE_DIR for one arm (set in the environment)."""
    base = REPO / "runs" / "survey-cache"
    base.mkdir(parents=True, exist_ok=True)
    path = tempfile.mkdtemp(prefix=f"{tag}-", dir=base)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path


def timed(fn: Callable[[], object], sync: Callable[[], None]) -> tuple[float, object]:
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def _quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"median": statistics.median(xs), "p25": q[0], "p75": q[2], "n": len(xs)}


def alternate(
    arms: dict[str, Callable[[], object]],
    *,
    baseline: str,
    rounds: int = 10,
    block_s: float = 0.1,
    warmup: int = 3,
    max_s: float | None = None,
    sync: Callable[[], None] = lambda: None,
) -> dict:
    """Time arms in alternating blocks; ratios are baseline_time / arm_time per round (>1: arm faster).

    Each arm is warmed up, then calibrated to `reps` calls per block (~block_s). Round r runs the
    arms in an order rotated by r. Stops after `rounds`, or earlier (>= 3 rounds) past `max_s`.
    """
    names = list(arms)
    reps = {}
    for name, fn in arms.items():
        for _ in range(warmup):
            fn()
        once, _ = timed(fn, sync)
        reps[name] = max(1, min(10_000, int(block_s / max(once, 1e-7))))
    samples: dict[str, list[float]] = {n: [] for n in names}
    start = time.perf_counter()
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            fn, k = arms[name], reps[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) / k)
        if max_s is not None and r >= 2 and time.perf_counter() - start > max_s:
            break
    base = samples[baseline]
    return {
        "per_call_s": {n: _quantiles(s) for n, s in samples.items()},
        "ratio": {n: _quantiles([b / a for b, a in zip(base, s, strict=True)]) for n, s in samples.items()},
        "ratio_definition": f"{baseline}_time / arm_time per round (>1: arm faster than {baseline})",
        "reps_per_block": reps,
        "rounds": len(base),
        "loadavg": loadavg(),
    }


def break_even(compile_s: float, t_base: float, t_fast: float) -> float:
    """N* = compile_s / (t_base - t_fast); inf where the compiled arm is not faster."""
    gain = t_base - t_fast
    return compile_s / gain if gain > 0 else float("inf")


def _flat(out) -> list[torch.Tensor]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def compare(out, ref, rtol: float, atol: float) -> dict:
    """Numerical check of an arm's output against eager: allclose(rtol, atol) plus error sizes."""
    outs, refs = _flat(out), _flat(ref)
    if len(outs) != len(refs):
        return {"ok": False, "reason": f"{len(outs)} outputs vs {len(refs)}"}
    max_abs, rel_l2, ok = 0.0, 0.0, True
    for o, r in zip(outs, refs, strict=True):
        o = torch.as_tensor(o).detach().float().cpu()
        r = r.detach().float().cpu()
        if o.shape != r.shape:
            return {"ok": False, "reason": f"shape {tuple(o.shape)} vs {tuple(r.shape)}"}
        max_abs = max(max_abs, (o - r).abs().max().item())
        rel_l2 = max(rel_l2, ((o - r).norm() / r.norm().clamp_min(1e-30)).item())
        ok = ok and bool(torch.allclose(o, r, rtol=rtol, atol=atol)) and bool(torch.isfinite(o).all())
    return {"ok": ok, "max_abs_err": max_abs, "rel_l2_err": rel_l2, "rtol": rtol, "atol": atol}


def json_safe(obj):
    """JSON-safe copy: inf/nan become the strings "inf"/"nan" (N* is inf where not faster)."""
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: Path, payload: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(payload), indent=1, allow_nan=False) + "\n")
    return path


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")
