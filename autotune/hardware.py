"""Hardware descriptors and program-meets-CPU features for cost models that span CPUs (TVM-free).

A cost model trained on several CPUs must be told which CPU a label came from, in terms that carry over to a
CPU it has never seen. A one-hot hardware id does not carry over (TenSet gives an unseen target a random known
id), so a CPU is described by what changes the ranking of schedules on it:

- ``descriptor(hardware)``: a fixed-length vector from a dataset manifest's ``hardware`` record (target + host
  fingerprint): the ISA features the *target* lets LLVM use (an ``x86-64-v2`` target on an AVX2 host emits
  SSE code), SIMD width, cores the target uses, cache sizes. Caches come from the record when it has them
  (``host_caches()`` since this module exists), else from the host CPU family (older manifests); which one is
  said in ``describe()["caches_source"]``.
- ``interaction_features(store_feats, desc)``: per MetaSchedule store row, how the program meets that CPU: a
  roofline lower bound (FLOPs against the peak of the vector lanes it uses on min(cores, parallel extent)
  cores; bytes against memory bandwidth), its vector extent against the SIMD lanes, its parallel extent
  against the cores, its working set and reuse distances against each cache level.

Peak FLOP/s and bandwidth are nominal (no fingerprint records a clock or a bandwidth): they set the scale of
the roofline terms, and ratios between CPUs come from lanes, FMA and cores, which are recorded.
"""

from __future__ import annotations

import os

import numpy as np

# What LLVM generates for a target -mcpu: the target's ISA, not the host's.
_V2 = ("sse4_2",)
_V3 = _V2 + ("avx", "avx2", "fma")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512vl")
_VNNI = _V4 + ("avx512vnni",)
MCPU_ISA = {
    "x86-64": (), "x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4,
    "haswell": _V3, "broadwell": _V3, "skylake": _V3, "alderlake": _V3,
    "znver1": _V3, "znver2": _V3, "znver3": _V3,
    "skylake-avx512": _V4, "cascadelake": _VNNI, "icelake-client": _VNNI, "icelake-server": _VNNI,
    "tigerlake": _VNNI, "rocketlake": _VNNI, "cooperlake": _VNNI + ("avx512bf16",),
    "sapphirerapids": _VNNI + ("avx512bf16", "amx"), "emeraldrapids": _VNNI + ("avx512bf16", "amx"),
    "graniterapids": _VNNI + ("avx512bf16", "amx"), "znver4": _VNNI + ("avx512bf16",),
    "znver5": _VNNI + ("avx512bf16",),
}
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "amx")
_HOST_FLAG = {"amx_tile": "amx"}  # /proc/cpuinfo spelling -> ours

# L1d, L2 per core and L3 visible, KiB, of host CPU families, for manifests written before hosts recorded their
# caches. An Intel host with AMX is a Sapphire Rapids-class Xeon whatever LLVM calls it (48 KiB L1d, 2 MiB L2).
_FAMILY_CACHES = {
    "znver3": (32, 512, 32768), "znver4": (32, 1024, 32768), "znver2": (32, 512, 16384),
    "intel-amx": (48, 2048, 107520), "rocketlake": (48, 512, 16384), "icelake-server": (48, 1280, 49152),
    "skylake-avx512": (32, 1024, 33792), "cascadelake": (32, 1024, 33792),
}
_DEFAULT_CACHES = (32, 512, 16384)

NOMINAL_GHZ = 3.0  # no fingerprint records a clock
NOMINAL_GBPS = 12.0  # per core used, DRAM; likewise
FMA_PORTS = 2

DESCRIPTOR_FIELDS = ISA_FLAGS + ("vector_bits", "f32_lanes", "cores", "log2_l1d_kib", "log2_l2_kib",
                                 "log2_l3_kib", "log2_peak_gflops", "log2_mem_gbps")


def host_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict | None:
    """{"l1d_kib", "l2_kib", "l3_kib", "line_bytes"} of this host from sysfs, or None where it has none."""
    out: dict = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    for name in entries:
        if not name.startswith("index"):
            continue
        base = os.path.join(root, name)
        try:
            level = int(_read(base, "level"))
            kind = _read(base, "type")
            size = _read(base, "size")
            line = int(_read(base, "coherency_line_size"))
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        kib = int(size[:-1]) * (1024 if size.endswith("M") else 1) if size[-1] in "KM" else int(size) // 1024
        key = {1: "l1d_kib", 2: "l2_kib", 3: "l3_kib"}.get(level)
        if key:
            out[key] = kib
            out["line_bytes"] = line
    return out if "l1d_kib" in out else None


def _read(base: str, name: str) -> str:
    with open(os.path.join(base, name), encoding="utf-8") as f:
        return f.read().strip()


def describe(hardware: dict) -> dict:
    """The descriptor of a manifest's ``hardware`` record (or a fingerprint: target + host) as named fields,
    plus ``caches_source`` ("recorded" or "family table") and ``isa_source`` ("target mcpu" or "host flags")."""
    target = hardware.get("target", {}) or {}
    host = hardware.get("host", {}) or {}
    mcpu = str(target.get("mcpu") or host.get("mcpu") or "")
    if mcpu in MCPU_ISA:
        isa, isa_source = set(MCPU_ISA[mcpu]), "target mcpu"
    else:
        isa, isa_source = {_HOST_FLAG.get(f, f) for f in host.get("flags", ())}, "host flags"
    bits = 512 if "avx512f" in isa else 256 if "avx" in isa else 128
    lanes = bits // 32
    cores = int(target.get("num-cores") or host.get("cores") or 1)
    caches = host.get("caches")
    if caches and "l1d_kib" in caches:
        l1, l2, l3 = caches["l1d_kib"], caches.get("l2_kib", _DEFAULT_CACHES[1]), caches.get("l3_kib", _DEFAULT_CACHES[2])
        source = "recorded"
    else:
        family = "intel-amx" if "amx_tile" in host.get("flags", ()) else str(host.get("mcpu") or "")
        l1, l2, l3 = _FAMILY_CACHES.get(family, _DEFAULT_CACHES)
        source = "family table"
    peak = lanes * (2 if "fma" in isa else 1) * FMA_PORTS * NOMINAL_GHZ  # GFLOP/s per core
    out = {f: float(f in isa) for f in ISA_FLAGS}
    out.update(vector_bits=float(bits), f32_lanes=float(lanes), cores=float(cores),
               log2_l1d_kib=float(np.log2(l1)), log2_l2_kib=float(np.log2(l2)), log2_l3_kib=float(np.log2(l3)),
               log2_peak_gflops=float(np.log2(peak)), log2_mem_gbps=float(np.log2(NOMINAL_GBPS)))
    return {**out, "caches_source": source, "isa_source": isa_source}


def descriptor(hardware: dict) -> np.ndarray:
    """``describe`` as a float32 vector in ``DESCRIPTOR_FIELDS`` order."""
    desc = describe(hardware)
    return np.array([desc[f] for f in DESCRIPTOR_FIELDS], np.float32)


# Column offsets in MetaSchedule's PerStoreFeature rows (164 = group1 57 + group2 5 x 18 + 10 + 4 + 3); every
# count is stored as log2(1 + x).
_FLOAT_OPS = slice(0, 7)  # float mad, add/sub, mul, div/mod, cmp, math func, other func
_VEC_LEN, _VEC_PROD = 18, 17  # the innermost vectorized loop's length; product of vectorized extents
_PAR_PROD = 39
_BUF0, _BUF_STRIDE, _N_BUF = 57, 18, 5
_B_BYTES, _B_UNIQUE, _B_REUSE_BYTES = 3, 4, 11

INTERACTION_FIELDS = ("log2_compute_s", "log2_memory_s", "log2_roofline_s", "compute_bound", "vec_over_lanes",
                      "vec_lane_remainder", "vec_under_lanes", "par_over_cores", "par_balance", "ws_over_l1",
                      "ws_over_l2", "ws_over_l3", "reuse_in_l1", "reuse_in_l2")


def _unlog(x: np.ndarray) -> np.ndarray:
    return np.exp2(np.asarray(x, np.float64)) - 1.0


def interaction_features(store_feats: np.ndarray, desc: np.ndarray) -> np.ndarray:
    """[rows, len(INTERACTION_FIELDS)] float32: per store row of ``store_feats`` (MetaSchedule PerStoreFeature,
    log2(1 + x) columns), how the row's loop nest meets the CPU ``desc`` (a ``descriptor`` vector, or one per
    row [rows, D]). Times in seconds at the nominal clock and bandwidth; ratios as log2 where they span decades."""
    f = np.asarray(store_feats, np.float64)
    d = np.asarray(desc, np.float64)
    d = np.broadcast_to(d, (len(f), len(DESCRIPTOR_FIELDS))) if d.ndim == 1 else d
    col = {name: d[:, i] for i, name in enumerate(DESCRIPTOR_FIELDS)}
    lanes, cores = col["f32_lanes"], np.maximum(col["cores"], 1.0)
    flops = _unlog(f[:, _FLOAT_OPS]).sum(axis=1)
    vec = np.round(_unlog(f[:, _VEC_LEN]))  # loop extents are integers; float32 log2 round-trips to 7.9999
    par = np.maximum(np.round(_unlog(f[:, _PAR_PROD])), 1.0)
    threads = np.minimum(cores, par)
    used_lanes = np.where(vec >= 1, np.minimum(vec, lanes), 1.0)
    peak_core = np.exp2(col["log2_peak_gflops"]) * 1e9 / lanes  # per core per lane
    compute_s = flops / (peak_core * used_lanes * threads)
    bufs = [f[:, _BUF0 + k * _BUF_STRIDE: _BUF0 + (k + 1) * _BUF_STRIDE] for k in range(_N_BUF)]
    unique = sum(_unlog(b[:, _B_UNIQUE]) for b in bufs)
    reuse = np.max([_unlog(b[:, _B_REUSE_BYTES]) for b in bufs], axis=0)
    memory_s = unique / (np.exp2(col["log2_mem_gbps"]) * 1e9 * threads)
    l1, l2, l3 = (np.exp2(col[k]) * 1024.0 for k in ("log2_l1d_kib", "log2_l2_kib", "log2_l3_kib"))
    eps = 1e-12
    out = np.stack([
        np.log2(compute_s + eps), np.log2(memory_s + eps), np.log2(np.maximum(compute_s, memory_s) + eps),
        (compute_s >= memory_s).astype(np.float64),
        np.log2((vec + 1.0) / lanes), np.where(vec >= 1, np.mod(vec, lanes) / lanes, 0.0),
        ((vec >= 1) & (vec < lanes)).astype(np.float64),
        np.log2(par / cores), threads / cores * (par / (np.ceil(par / threads) * threads)),
        np.log2((unique + 1.0) / l1), np.log2((unique + 1.0) / l2), np.log2((unique + 1.0) / l3),
        ((reuse > 0) & (reuse <= l1)).astype(np.float64), ((reuse > 0) & (reuse <= l2)).astype(np.float64),
    ], axis=1)
    return out.astype(np.float32)


def program_features(store_feats: np.ndarray, offsets: np.ndarray, desc: np.ndarray) -> np.ndarray:
    """[programs, len(INTERACTION_FIELDS) + 1 + len(DESCRIPTOR_FIELDS)]: each program's interaction rows
    summed (the pack-sum the tree models read), its roofline bound summed over stores in seconds (log2), and
    its CPU's descriptor. ``desc``: one vector, or one per program [programs, D]."""
    n = len(offsets) - 1
    d = np.asarray(desc, np.float32)
    per_prog = np.broadcast_to(d, (n, len(DESCRIPTOR_FIELDS))) if d.ndim == 1 else d
    sizes = np.diff(offsets)
    rows = interaction_features(store_feats, np.repeat(per_prog, sizes, axis=0))
    summed = np.zeros((n, rows.shape[1]), np.float32)
    bound = np.zeros(n, np.float64)
    nonempty = sizes > 0
    if nonempty.any():
        starts = offsets[:-1][nonempty]
        summed[nonempty] = np.add.reduceat(rows, starts, axis=0)
        secs = np.exp2(rows[:, INTERACTION_FIELDS.index("log2_roofline_s")].astype(np.float64))
        bound[nonempty] = np.add.reduceat(secs, starts)
    return np.concatenate([summed, np.log2(bound + 1e-12)[:, None].astype(np.float32), per_prog], axis=1)
