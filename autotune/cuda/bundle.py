"""``python -m autotune.cuda.bundle``: CUDA data for a GPU that is lent for minutes, built here.

A lent GPU machine (an H200 for 15 minutes, no network, no TVM there) should spend its time
timing kernels, not compiling them. So the work is split in three:

    # 1. here, on the CPU machine (no GPU needed): sample + compile CUDA programs for sm_90, pack
    python -m autotune.cuda.bundle build --tasks-from datasets/cpu-znver3-2c \
        --only-models resnet50,mobilenet_v2,bert_base --programs-per-task 16 --out gpu_bundle
    python -m autotune.cuda.bundle pack gpu_bundle            # -> gpu_bundle.tar.xz
    # 2. on the GPU machine: time every kernel (TVM-free: tvm_ffi + TVM's runtime libraries + torch)
    python3 -m autotune.cuda.measure gpu_bundle.tar.xz --out results/ --time-limit 480
    # 3. here: turn the bundle + timings into a dataset (same Parquet format as the CPU sets)
    python -m autotune.cuda.bundle ingest gpu_bundle results/results.jsonl --out datasets/cuda-sm_90

The bundle holds ``programs.jsonl`` (task key, trace, argument shapes, kernel file), ``kernels/``
(one exported shared object per program, its sm_90 fatbin inside), ``runtime/`` (TVM's runtime
libraries, which the device loads without the compiler) and ``wheels/`` (apache-tvm-ffi for the
device's Python, when pip can fetch it), and ``bundle.json`` (versions, target, counts). Tasks are
taken from an existing dataset (``--tasks-from``), so CUDA rows line up with the CPU rows of the
same workloads (cross-hardware transfer). Programs are uniform samples of the CUDA design space
(``sampler="random"``): with no GPU here there is nothing to guide a search with.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time

from autotune.cli import run_main, setup_logging, versions
from autotune.data.splits import HELD_OUT_MODELS
from autotune.data.store import DatasetError, read_jsonl
from autotune.errors import UserError

logger = logging.getLogger("autotune.cuda.bundle")

BUNDLE_VERSION = 1
PROGRAMS = "programs.jsonl"
DEFAULT_MODELS = ",".join(HELD_OUT_MODELS)  # CUDA data for the held-out models first
MAX_BUNDLE_MB = 56  # the device carries at most 64 MiB with the repository itself


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autotune.cuda.bundle", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="sample and compile CUDA programs here (no GPU needed)")
    b.add_argument("--tasks-from", required=True, help="dataset folder whose tasks to use")
    b.add_argument("--only-models", default=DEFAULT_MODELS, help="keep tasks tagged with these models ('' = all)")
    b.add_argument("--max-tasks", type=int, default=None)
    b.add_argument("--programs-per-task", type=int, default=16)
    b.add_argument("--arch", default="sm_90", help="CUDA architecture of the GPU that will time them")
    b.add_argument("--out", required=True, help="bundle folder (created or resumed)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--time-limit", type=float, default=None,
                   help="start no new task after this many seconds; the bundle is finished with what was built")
    b.add_argument("--no-wheels", action="store_true", help="do not fetch the apache-tvm-ffi wheel for the device")
    b.add_argument("-v", "--verbose", action="store_true")
    k = sub.add_parser("pack", help="compress a bundle into one .tar.xz to carry to the GPU machine")
    k.add_argument("bundle")
    k.add_argument("--out", default=None, help="archive path (default: BUNDLE.tar.xz)")
    i = sub.add_parser("ingest", help="merge a bundle and the device's timings into a dataset")
    i.add_argument("bundle")
    i.add_argument("results", help="results.jsonl written by autotune.cuda.measure")
    i.add_argument("--out", required=True, help="dataset folder (created or appended to)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: _dispatch(args))


def _dispatch(args) -> int:
    try:
        return {"build": build, "pack": pack, "ingest": ingest}[args.cmd](args)
    except DatasetError as err:  # a corrupt dataset, bundle or results file (mid-file): one line, exit 2
        raise UserError(str(err)) from None


# ----------------------------------------------------------------------------------------- build
def _pick_tasks(root: str, only_models: list[str], max_tasks: int | None) -> list[dict]:
    from autotune.data.store import read_records, read_tasks

    try:
        tasks = read_tasks(root)
        measured = set(read_records(root, valid_only=True).column("task_key").to_pylist())
    except (DatasetError, OSError) as err:
        raise UserError(f"--tasks-from: {root} is not a readable dataset ({err})") from None
    picked = [t for k, t in tasks.items() if k in measured and (not only_models or set(only_models) & set(t["models"]))]
    if not picked:
        raise UserError(f"--tasks-from: no measured task of {root} is tagged with {only_models}")
    picked.sort(key=lambda t: (-float(t["flops"]) * int(t.get("weight", 1)), t["key"]))
    return picked[:max_tasks] if max_tasks else picked


def _sample(task: dict, target, n: int, seed: int, taken: set[str]) -> list:
    """Up to n distinct random programs (post-processed schedules) of the task's CUDA design space."""
    from tvm.s_tir import meta_schedule as ms

    from autotune.collection.taskpool import task_module

    mod = task_module(task)
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", task_name=task["name"], num_threads=1, rand_state=seed)
    spaces = ctx.space_generator.generate_design_space(mod)
    ctx.pre_tuning(max_trials=8 * n, num_trials_per_iter=n, design_spaces=spaces, database=None,
                   cost_model=None)
    out = []
    for _ in range(8):
        cands = ctx.search_strategy.generate_measure_candidates()
        if not cands:
            break
        for cand in cands:
            trace = json.dumps(_trace_json(cand.sch))
            if trace not in taken:
                taken.add(trace)
                out.append((cand, trace))
        if len(out) >= n:
            break
        ctx.search_strategy.notify_runner_results(cands, [ms.runner.RunnerResult([1.0], None)] * len(cands))
    ctx.post_tuning()
    return out[:n]


def _trace_json(sch):
    from autotune.tvmrt.database import to_py

    return to_py(sch.trace.as_json())


def build(args) -> int:
    if args.programs_per_task < 1:
        raise UserError(f"--programs-per-task must be >= 1, got {args.programs_per_task}")
    if args.time_limit is not None and args.time_limit < 0:
        raise UserError(f"--time-limit must be >= 0 seconds, got {args.time_limit}")
    from autotune.tvmrt.cuda_build import cuda_runtime_loaded, prepare_build_only

    chosen = prepare_build_only()
    os.makedirs(os.path.join(args.out, "kernels"), exist_ok=True)
    setup_logging(os.path.join(args.out, "logs"), verbose=args.verbose)
    only = [m for m in args.only_models.split(",") if m]
    tasks = _pick_tasks(args.tasks_from, only, args.max_tasks)

    from autotune.tvmrt.target import parse_target, target_json

    target = parse_target({"kind": "cuda", "arch": args.arch})
    if not cuda_runtime_loaded():
        raise UserError("TVM's CUDA runtime library did not load, so kernels cannot be embedded; "
                        "is libtvm_runtime_cuda.so's libcudart (CUDA 13) installed?")
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from autotune.tvmrt.measure import PooledBuilder

    path = os.path.join(args.out, PROGRAMS)
    done = read_jsonl(path)
    with open(path, "w", encoding="utf-8") as f:  # rewrite without a possibly cut last line
        f.writelines(json.dumps(r) + "\n" for r in done)
    per_task: dict[str, int] = {}
    taken: set[str] = set()
    for r in done:
        per_task[r["task_key"]] = per_task.get(r["task_key"], 0) + 1
        taken.add(r["trace"])
    builder = PooledBuilder(target_kind="cuda", timeout_sec=120.0)
    builder.warm_up()
    t0, n_new = time.time(), 0
    with open(path, "a", encoding="utf-8") as f:
        for n_task, task in enumerate(tasks):
            need = args.programs_per_task - per_task.get(task["key"], 0)
            if need <= 0:
                continue
            if args.time_limit is not None and time.time() - t0 >= args.time_limit:
                logger.info("--time-limit %.0f s reached: %d of %d tasks left unbuilt; rerun to continue",
                            args.time_limit, sum(1 for t in tasks[n_task:]
                                                 if per_task.get(t["key"], 0) < args.programs_per_task),
                            len(tasks))
                break
            ts = time.time()
            picked = _sample(task, target, need, args.seed + n_task, taken)
            sample_s = time.time() - ts
            tb = time.time()
            results = builder.build([BuilderInput(c.sch.mod, target) for c, _ in picked])
            build_s = (time.time() - tb) / max(1, len(picked))
            for (_cand, trace), res in zip(picked, results):
                pid = f"p{len(done):06d}"
                row = {"id": pid, "task_key": task["key"], "trace": trace, "args_info": task["args_info"],
                       "build_s": round(build_s, 3), "sample_s": round(sample_s / max(1, len(picked)), 4)}
                if res.error_msg is None:
                    kernel = os.path.join("kernels", pid + ".so")
                    shutil.move(res.artifact_path, os.path.join(args.out, kernel))
                    shutil.rmtree(os.path.dirname(res.artifact_path), ignore_errors=True)
                    row.update(kernel=kernel, status="ok", error="")
                else:
                    row.update(kernel=None, status="build_timeout" if "Timeout" in res.error_msg else "build_error",
                               error=res.error_msg[:500])
                f.write(json.dumps(row) + "\n")
                f.flush()
                done.append(row)
                n_new += 1
            logger.info("task %d/%d %s: %d programs (%.1f s build each); %d in bundle, %.0f s", n_task + 1,
                        len(tasks), task["name"], len(picked), build_s, len(done), time.time() - t0)
    builder.shutdown()
    _write_bundle_files(args, chosen, target_json(target), tasks, done)
    return 0


def _write_bundle_files(args, chosen: dict, tj: dict, tasks: list[dict], rows: list[dict]) -> None:
    import tvm
    import tvm_ffi

    rt_dir = os.path.join(args.out, "runtime")
    os.makedirs(rt_dir, exist_ok=True)
    lib_dir = os.path.join(os.path.dirname(tvm.__file__), "lib")
    for name in ("libtvm_runtime.so", "libtvm_runtime_cuda.so"):
        shutil.copy2(os.path.join(lib_dir, name), os.path.join(rt_dir, name))
    cudart = _find_cudart()  # the CUDA 13 runtime libtvm_runtime_cuda links (the device may not have it on its path)
    if cudart:
        shutil.copy2(cudart, os.path.join(rt_dir, "libcudart.so.13"))
    from autotune.data.store import read_tasks

    every = {**read_tasks(args.tasks_from), **{t["key"]: t for t in tasks}}  # rows of earlier runs too
    used = {r["task_key"] for r in rows}
    with open(os.path.join(args.out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(every[k]) + "\n" for k in sorted(used) if k in every)
    wheels = None
    if not args.no_wheels:
        wheels = _fetch_ffi_wheel(os.path.join(args.out, "wheels"), tvm_ffi.__version__)
    size_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.out) for f in fs
                  if "logs" not in d) / 2**20
    info = {
        "bundle_version": BUNDLE_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target": tj, "arch": args.arch, "tasks_from": os.path.abspath(args.tasks_from),
        "programs": len(rows), "built": sum(1 for r in rows if r["status"] == "ok"), "tasks": len(used),
        "compiler": chosen, "versions": versions(), "ffi_wheel": wheels, "size_mb": round(size_mb, 1),
        "entry": "main",
    }
    with open(os.path.join(args.out, "bundle.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    # kernels pack ~8x smaller (measured: 189 sm_90 kernels, 12.2 MB -> 1.45 MB of .tar.xz): the packed size is
    # what a device call carries, and `pack` refuses an archive over MAX_BUNDLE_MB
    logger.info("bundle %s: %d programs (%d built) over %d tasks, %.1f MB unpacked (`pack` checks the %d MB "
                "a device call carries)", args.out, info["programs"], info["built"], info["tasks"], size_mb,
                MAX_BUNDLE_MB)


def _find_cudart() -> str | None:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        if line.strip().startswith("libcudart.so.13 ") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    from autotune.tvmrt.cuda_build import find_nvcc

    nvcc = find_nvcc()
    if nvcc:
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        for sub in ("lib", "lib64"):
            cand = os.path.join(root, sub, "libcudart.so.13")
            if os.path.exists(cand):
                return cand
    return None


def pack(args) -> int:
    """The bundle as one .tar.xz (kernels compress ~5x) to carry to the device."""
    import tarfile

    if not os.path.exists(os.path.join(args.bundle, "bundle.json")):
        raise UserError(f"{args.bundle}: not a finished bundle (no bundle.json); run gpu_bundle build first")
    out = args.out or args.bundle.rstrip("/") + ".tar.xz"
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        for name in sorted(os.listdir(args.bundle)):
            if name != "logs":
                tar.add(os.path.join(args.bundle, name), arcname=os.path.join("bundle", name))
    os.replace(tmp, out)
    size_mb = os.path.getsize(out) / 2**20
    print(f"{out}: {size_mb:.1f} MB")
    if size_mb > MAX_BUNDLE_MB:
        raise UserError(f"{out} is {size_mb:.0f} MB, over the {MAX_BUNDLE_MB} MB a device call carries; "
                        "build with fewer programs or tasks")
    return 0


def _fetch_ffi_wheel(out_dir: str, version: str) -> str | None:
    """apache-tvm-ffi for the device's Python 3.12 (the device has no network)."""
    os.makedirs(out_dir, exist_ok=True)
    have = [f for f in os.listdir(out_dir) if f.endswith(".whl")]
    if have:
        return have[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", out_dir, f"apache-tvm-ffi=={version}"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    have = [f for f in os.listdir(out_dir) if f.endswith(".whl")]
    if res.returncode != 0 or not have:
        logger.warning("could not fetch apache-tvm-ffi %s for the device (%s); carry it yourself", version,
                       (res.stderr.strip().splitlines() or ["pip failed"])[-1])
        return None
    return have[0]


# ----------------------------------------------------------------------------------------- ingest
def ingest(args) -> int:
    from autotune.data.store import DatasetWriter, TaskInfo

    info_path = os.path.join(args.bundle, "bundle.json")
    if not os.path.exists(info_path):
        raise UserError(f"{args.bundle}: not a bundle (no bundle.json); make one with gpu_bundle build")
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    if not os.path.exists(args.results):
        raise UserError(f"{args.results}: no such results file (autotune.cuda.measure writes results.jsonl)")
    programs = {r["id"]: r for r in read_jsonl(os.path.join(args.bundle, PROGRAMS))}
    results = read_jsonl(args.results)
    header = next((r for r in results if r.get("kind") == "device"), None)
    if header is None:
        raise UserError(f"{args.results}: no device line; was it written by autotune.cuda.measure?")
    timed = [r for r in results if r.get("kind") == "program"]
    unknown = [r["id"] for r in timed if r["id"] not in programs]
    if unknown:
        raise UserError(f"{args.results}: {len(unknown)} programs (e.g. {unknown[0]}) are not in {args.bundle}")
    hw_id = f"cuda-{info['arch']}"
    fingerprint = {"hardware_id": hw_id, "target": info["target"], "host": header["device"],
                   "measured_via": "gpu_bundle", "versions": info["versions"],  # where it was compiled
                   "device_versions": header.get("versions", {}),  # where it was timed
                   "bundle": {"created": info["created"], "compiler": info["compiler"]}}
    writer = DatasetWriter(args.out, fingerprint)
    have = set()
    if os.path.exists(os.path.join(args.out, "manifest.json")):
        from autotune.data.store import read_records

        table = read_records(args.out, verify=False)
        have = set(zip(table.column("task_key").to_pylist(), table.column("trace").to_pylist()))
    tasks = {t["key"]: t for t in read_jsonl(os.path.join(args.bundle, "tasks.jsonl"))}
    for key in {programs[r["id"]]["task_key"] for r in timed}:
        writer.add_task(TaskInfo(**{k: tasks[key][k] for k in TaskInfo.__dataclass_fields__}))
    rows, seen = [], set()
    for r in timed:
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        p = programs[r["id"]]
        if (p["task_key"], p["trace"]) in have or r["status"] not in ("ok", "run_error"):
            continue  # already ingested, or a dry-run line
        rows.append({"task_key": p["task_key"], "workload_hash": tasks[p["task_key"]]["workload_hash"],
                     "trace": p["trace"], "run_secs": r.get("run_secs") or [], "status": r["status"],
                     "error": r.get("error", "")[:500], "sampler": "random", "hardware_id": hw_id,
                     "timestamp": float(r.get("timestamp", time.time()))})
    writer.append(rows)
    writer.close()
    logger.info("ingested %d programs into %s", len(rows), args.out)
    print(json.dumps(writer.manifest.get("counts")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
