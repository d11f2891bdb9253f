"""Measure the held-out programs at the top of each task again: how far does a second measurement move the
labels that top-1 reads, and what top-1 does a perfect model of the first measurement get against the second?

    python experiments/costmodel/remeasure.py --dataset datasets/cpu-rocketlake-2c --top 5 --random 2

Held-out top-1 asks whether a model's pick is the task's best program, and the best is decided by one
measurement. If a second measurement of the same programs on the same machine reorders the top of a task,
no model can score 1, and a target such as issue 12's 0.75 may sit above what the labels allow. For each
held-out task with >= 2 programs (copies merged, as for training), its ``--top`` fastest programs by the
stored measurement and ``--random`` others (uniform, seeded) are built and timed again, one batch per task,
exactly as the collector times them. Runs only on the machine that measured the dataset (its hardware id;
``--any-hardware`` for a smoke test). Resumable: one JSON line per program in ``<out>/remeasure.jsonl``.

Reports (``<out>/remeasure.{json,md}``; ``results/<hardware id>/`` by default):
- the ratio second / first latency of each re-measured program (median, p10, p90), top and random apart;
- how often a task's stored best program is still the fastest of its re-measured programs;
- the **noise ceiling**: TenSet's weighted top-1 (the held-out models' own task weights) of a model that ranks
  by the first measurement exactly, scored with the second (a task's best = the fastest re-measured program);
  and the same for top-5 picks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

import numpy as np  # noqa: E402

from autotune.cli import comma_list, git_commit, host_cpu, loadavg, run_main, write_results  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402
from autotune.errors import UserError  # noqa: E402


def _sha(trace: str) -> str:
    return hashlib.sha256(trace.encode()).hexdigest()[:16]


def held_out_programs(root: str, held: list[str]) -> tuple[dict, dict, dict]:
    """(tasks, held-out model -> task keys, task key -> [(trace, first latency)] of its distinct valid programs,
    copies merged by ``autotune.costmodel.data.merge_duplicates`` as for training)."""
    from autotune.costmodel.data import merge_duplicates
    from autotune.data.splits import split_by_model
    from autotune.data.store import mean_latency, read_records, read_tasks

    tasks = read_tasks(root)
    table = read_records(root)
    keys, traces = table.column("task_key").to_pylist(), table.column("trace").to_pylist()
    lat = mean_latency(table)
    ok, lat, _, _ = merge_duplicates(keys, traces, lat, np.isfinite(lat) & (lat > 0),
                                     np.asarray(table.column("sampler").to_pylist(), dtype=object))
    by_task: dict[str, list[tuple[str, float]]] = {}
    for i in np.nonzero(ok)[0]:
        by_task.setdefault(keys[i], []).append((traces[i], float(lat[i])))
    programs = {k: v for k, v in by_task.items() if len(v) >= 2}
    _, test_keys = split_by_model({k: tasks[k] for k in programs}, held)
    return tasks, test_keys, programs


def pick(programs: list, top: int, n_random: int, seed: int) -> list[tuple[str, float, str]]:
    """The ``top`` fastest programs and ``n_random`` of the rest, drawn with ``seed``: (trace, latency, kind)."""
    order = sorted(programs, key=lambda p: p[1])
    rest = order[top:]
    rng = np.random.default_rng(seed)
    drawn = [rest[i] for i in sorted(rng.choice(len(rest), size=min(n_random, len(rest)), replace=False))]
    return [(t, lat, "top") for t, lat in order[:top]] + [(t, lat, "random") for t, lat in drawn]


def measure_task(measurer, target_json: dict, info: dict, chosen: list) -> list[dict]:
    from tvm.s_tir import meta_schedule as ms

    from autotune.collection.taskpool import task_module
    from autotune.tvmrt.database import record_from_row

    workload = ms.database.Workload(task_module(info))
    cands = [record_from_row(trace, [lat], target_json, info["args_info"], workload).as_measure_candidate()
             for trace, lat, _ in chosen]
    outcomes, _, _ = measurer.measure(cands)
    now = time.time()
    return [{"task_key": info["key"], "program": _sha(trace), "kind": kind, "first_s": lat,
             "second_s": (sum(o.run_secs) / len(o.run_secs)) if o.ok else None, "status": o.error_kind,
             "timestamp": now} for (trace, lat, kind), o in zip(chosen, outcomes)]


def summarize(lines: list[dict], tasks: dict, test_keys: dict) -> dict:
    from autotune.costmodel.metrics import top_k_score
    from autotune.data.store import task_weight

    ok = [r for r in lines if r["second_s"]]
    out: dict = {"programs": len(lines), "failed": len(lines) - len(ok), "ratio": {}}
    for kind in ("top", "random"):
        r = np.array([x["second_s"] / x["first_s"] for x in ok if x["kind"] == kind])
        if len(r):
            out["ratio"][kind] = {"n": len(r), "median": float(np.median(r)), "p10": float(np.percentile(r, 10)),
                                  "p90": float(np.percentile(r, 90)),
                                  "abs_log2_median": float(np.median(np.abs(np.log2(r))))}
    by_task: dict[str, list[dict]] = {}
    for x in ok:
        by_task.setdefault(x["task_key"], []).append(x)
    kept = [xs for xs in by_task.values() if len(xs) >= 2]
    out["tasks"] = len(kept)
    out["best_still_fastest"] = (sum(1 for xs in kept if min(xs, key=lambda x: x["first_s"]) is
                                     min(xs, key=lambda x: x["second_s"])) / len(kept)) if kept else None
    out["ceiling"] = {}
    for model, keys in test_keys.items():
        rows = [x for k in keys for x in by_task.get(k, []) if len(by_task[k]) >= 2]
        if not rows:
            continue
        gid = {k: i for i, k in enumerate(keys)}
        groups = np.array([gid[x["task_key"]] for x in rows])
        second = np.array([x["second_s"] for x in rows])
        first = np.array([x["first_s"] for x in rows])
        weights = {gid[k]: float(task_weight(tasks[k], model)) for k in keys}
        out["ceiling"][model] = {"tasks": int(len(set(groups.tolist()))),
                                 "top1": top_k_score(second, -first, groups, weights, 1),
                                 "top5": top_k_score(second, -first, groups, weights, 5)}
    if out["ceiling"]:
        out["ceiling"]["mean"] = {k: float(np.mean([v[k] for v in out["ceiling"].values()])) for k in ("top1", "top5")}
    return out


def markdown(res: dict) -> str:
    s = res["summary"]
    lines = [f"# A second measurement of the held-out programs ({res['hardware_id']})", "",
             f"Command: `{res['command']}`. Dataset manifest sha256 {res['dataset_manifest_sha256'][:12]}; re-measured "
             f"on {res['measured_on']} at load {res['loadavg']}, commit {str(res['git_commit'])[:10]}"
             + (" (**--any-hardware**: not the machine that measured the dataset; a smoke test)" if res["any_hardware"]
                else "") + f". {s['programs']} programs re-measured over {s['tasks']} held-out tasks "
             f"({s['failed']} failed); per task its {res['top']} fastest by the stored measurement (`top`) and "
             f"{res['random']} others drawn uniformly (`random`).", "",
             "| programs | n | second / first latency: median | p10 | p90 | median abs log2 ratio |", "|---|---|---|---|---|---|"]
    for kind, r in s["ratio"].items():
        lines.append(f"| {kind} | {r['n']} | {r['median']:.3f} | {r['p10']:.3f} | {r['p90']:.3f} | "
                     f"{r['abs_log2_median']:.3f} |")
    if s["best_still_fastest"] is not None:
        lines += ["", f"A task's stored best program is still the fastest of its re-measured programs in "
                      f"{s['best_still_fastest']:.0%} of the tasks."]
    lines += ["", "Noise ceiling: a model that ranks exactly by the stored measurement, scored with the second one "
                  "(TenSet's weighted top-k over the re-measured programs of each task, the models' own weights). A "
                  "held-out top-1 target above it asks for more than the labels hold.", "",
              "| held-out model | tasks | top-1 ceiling | top-5 ceiling |", "|---|---|---|---|"]
    for model, v in s["ceiling"].items():
        lines.append(f"| {model} | {v.get('tasks', '')} | {v['top1']:.3f} | {v['top5']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join("datasets", "cpu-rocketlake-2c"))
    ap.add_argument("--held-out", type=comma_list, default=list(HELD_OUT_MODELS))
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--random", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="default: experiments/costmodel/results[/<hardware id>]")
    ap.add_argument("--any-hardware", action="store_true", help="measure on another machine (a smoke test)")
    args = ap.parse_args(argv)

    def body() -> int:
        from autotune.costmodel.comparison import results_dir_for
        from autotune.costmodel.data import manifest_sha256
        from autotune.data.store import DatasetError, read_manifest

        if args.top < 1 or args.random < 0:
            raise UserError(f"--top must be >= 1 and --random >= 0, got {args.top} and {args.random}")
        try:
            manifest = read_manifest(args.dataset)
            tasks, test_keys, programs = held_out_programs(args.dataset, args.held_out)
        except DatasetError as err:
            raise UserError(f"--dataset: {err}") from None
        except ValueError as err:
            raise UserError(f"--held-out: {err}") from None
        hw = manifest["hardware"]["hardware_id"]
        from autotune.tvmrt.startup import fast_start

        fast_start("llvm")
        import tvm

        from autotune.tvmrt.target import hardware_id, parse_target, target_cores

        here = hardware_id(parse_target("llvm"))
        if here != hw and not args.any_hardware:
            raise UserError(f"--dataset {args.dataset} was measured on {hw}, this machine is {here}: a second "
                            "measurement means the same machine (--any-hardware for a smoke test)")
        out = args.out or results_dir_for(hw, os.path.join(HERE, "results"))
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "remeasure.jsonl")
        done = [json.loads(line) for line in open(path, encoding="utf-8")] if os.path.exists(path) else []
        have = {(r["task_key"], r["program"]) for r in done}
        # the target the collector measured with (`autotune.collect --target llvm` on this host); another
        # machine's dataset (a smoke test) is measured for the target its manifest names
        target = parse_target("llvm") if here == hw else tvm.target.Target(manifest["hardware"]["target"])
        os.environ.setdefault("TVM_NUM_THREADS", str(target_cores(target)))
        from autotune.tvmrt.measure import Measurer

        keys = [k for m in test_keys.values() for k in m]
        keys = sorted(set(keys), key=keys.index)
        measurer = Measurer(target)
        try:
            with open(path, "a", encoding="utf-8") as f:
                for n, key in enumerate(keys):
                    chosen = [c for c in pick(programs[key], args.top, args.random, args.seed)
                              if (key, _sha(c[0])) not in have]
                    if not chosen:
                        continue
                    for row in measure_task(measurer, manifest["hardware"]["target"], tasks[key], chosen):
                        f.write(json.dumps(row) + "\n")
                        done.append(row)
                    f.flush()
                    print(f"{n + 1}/{len(keys)} {tasks[key]['name']}: {len(chosen)} programs", flush=True)
        finally:
            measurer.close()
        res = {"dataset": args.dataset, "hardware_id": hw, "measured_on": host_cpu(), "loadavg": loadavg(),
               "git_commit": git_commit(), "top": args.top, "random": args.random, "any_hardware": here != hw,
               "dataset_manifest_sha256": manifest_sha256(manifest),
               "command": "python experiments/costmodel/remeasure.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "summary": summarize(done, tasks, test_keys)}
        write_results(os.path.join(out, "remeasure.json"), res, os.path.join(out, "remeasure.md"), markdown(res))
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
