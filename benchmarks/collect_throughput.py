"""Collection throughput, local runner vs TVM RPC runner, side by side on the same tasks.

    python benchmarks/collect_throughput.py                  # 4 tasks x 32 programs per arm
    python benchmarks/collect_throughput.py --tasks 2 --programs 16 --servers 1,2,3

Each arm runs ``python -m autotune.collect`` into a fresh folder on the same first tasks of the
pool (mobilenet_v2's, the heaviest first); an RPC arm starts a tracker and N servers on this
machine (a local measurement farm; a real farm adds network time, and its servers do not share
this machine's 2 cores with the builders). The runner opens one session per connected server, so
the run phase (remote link + timing) of N candidates overlaps. Programs per hour and the build/run
split come from each dataset's manifest (``collection_runs``). Writes
benchmarks/results/collect_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from autotune.cli import loadavg, versions, write_results  # noqa: E402
from autotune.tvmrt.farm import local_farm_servers  # noqa: E402


def _arm(name: str, out: str, args, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "autotune.collect", "--out", out, "--models", args.model, "--synthetic", "0",
           "--max-tasks", str(args.tasks), "--programs-per-task", str(args.programs), "--pass-size",
           str(args.programs), *extra]
    t0 = time.time()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{name}: {res.stderr[-2000:]}")
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    run = manifest["collection_runs"][-1]
    return {"arm": name, "programs": run["programs"], "valid": manifest["counts"]["valid"],
            "wall_s": run["wall_s"], "process_s": time.time() - t0, "build_s": run["build_s"], "run_s": run["run_s"],
            "programs_per_hour": run["programs_per_hour"], "measured_via": manifest["hardware"]["measured_via"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--programs", type=int, default=32)
    ap.add_argument("--servers", default="1,2,3", help="RPC arms: farm sizes (servers on this machine)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="collect-throughput-")
    load_start = loadavg()
    rows = [_arm("local", os.path.join(tmp, "local"), args, [])]
    try:
        for n in [int(x) for x in args.servers.split(",") if x]:
            with local_farm_servers("bench", n) as (addr, _servers):
                rows.append(_arm(f"rpc (tracker + {n} server{'s' if n > 1 else ''}, localhost)",
                                 os.path.join(tmp, f"rpc{n}"), args, ["--rpc-tracker", addr, "--rpc-key", "bench"]))
                rows[-1]["servers"] = n
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {"model": args.model, "tasks": args.tasks, "programs_per_task": args.programs, "rows": rows,
           "loadavg_start": load_start, "loadavg_end": loadavg(), "versions": versions(),
           "command": "python benchmarks/collect_throughput.py " + " ".join(argv or sys.argv[1:])}
    lines = [f"Collection throughput on {args.model}'s first {args.tasks} tasks x {args.programs} programs, one arm "
             f"after the other; load {load_start} -> {res['loadavg_end']}. `{res['command']}`", "",
             "| arm | programs (valid) | wall (s) | build (s) | run (s) | programs/hour | run phase: programs/hour "
             "| vs 1 server (run phase / overall) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    one = next((r for r in rows if r.get("servers") == 1), None)
    for r in rows:
        r["run_phase_per_hour"] = r["programs"] / r["run_s"] * 3600 if r["run_s"] else None
        vs = (f"{r['run_phase_per_hour'] / one['run_phase_per_hour']:.2f}x / "
              f"{r['programs_per_hour'] / one['programs_per_hour']:.2f}x" if one and "servers" in r else "")
        lines.append(f"| {r['arm']} | {r['programs']} ({r['valid']}) | {r['wall_s']:.0f} | {r['build_s']:.0f} | "
                     f"{r['run_s']:.0f} | {r['programs_per_hour']:.0f} | {r['run_phase_per_hour']:.0f} | {vs} |")
    write_results(os.path.join(args.out, "collect_throughput.json"), res, os.path.join(args.out, "collect_throughput.md"),
                  "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
