"""How much of a dataset is the same schedule measured again, and what counting the copies as programs did
to the held-out scores.

    python experiments/costmodel/duplicates.py [--datasets datasets/cpu-znver3-2c,...]

For each dataset: valid rows, distinct programs (task, trace), rows that repeat a program, tasks whose every
row is one schedule, and the repeatability of the measurement (max/min of the mean latencies of one program's
copies). Then the models saved under ``--models-dir``/<hardware id>/ are scored on the held-out models twice,
with no refit: every row a program (how the tables before 2026-12-06 scored) and copies merged
(``autotune.costmodel.data.merge_duplicates``, how they are scored now). The saved models were trained on
rows, so the second column changes only the evaluation. Writes results/duplicates.{json,md}.
"""

from __future__ import annotations

import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

from autotune.cli import git_commit, host_cpu, loadavg, run_main, write_results  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402


def held_out_tasks(data, test_keys: dict) -> dict:
    present = {data.task_keys[g] for g in set(data.groups.tolist())}
    return {m: sum(1 for k in keys if k in present) for m, keys in test_keys.items()}


def analyse(dataset: str, models_dir: str, held: list[str]) -> dict:
    from autotune.costmodel import load
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.evaluate import evaluate
    from autotune.data.splits import split_by_model
    from autotune.data.stats import dataset_stats

    stats = dataset_stats(dataset)
    out = {"dataset": dataset, "hardware_id": stats["hardware_id"], "valid_rows": stats["valid"],
           "programs": stats["programs"], "scoring": {}, "models": []}
    scores: dict[str, dict] = {}
    folder = os.path.join(models_dir, stats["hardware_id"])
    if not os.path.isdir(folder):  # no saved models of this hardware: the counts only (no feature cache needed)
        return out
    for mode in ("rows", "merged"):
        data = load_training_data(dataset, merge=mode == "merged")
        _, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held)
        out["scoring"][mode] = {"held_out_programs": int(sum(len(data.select_tasks(k)) for k in test_keys.values())),
                                "held_out_tasks": held_out_tasks(data, test_keys)}
        for kind in sorted(os.listdir(folder)):
            if not os.path.exists(os.path.join(folder, kind, "model.json")):
                continue
            views = evaluate(load(os.path.join(folder, kind)), data, test_keys)["views"]["all"]
            scores.setdefault(kind, {})[mode] = {m: {k: views[m][k] for k in ("top1", "top5")}
                                                 for m in [*test_keys, "mean"] if m in views}
    out["models"] = [{"kind": k, **v} for k, v in scores.items()]
    return out


def markdown(res: dict) -> str:
    lines = ["# The same schedule measured more than once", "",
             f"Command: `python experiments/costmodel/duplicates.py`. Measured on {res['measured_on']}, load "
             f"{res['loadavg']}, commit {str(res['git_commit'])[:10]}. A program is a (task, trace) pair; its copies "
             "are rows measuring the same trace again (MetaSchedule's ReplayTrace draws with replacement, and the tuner "
             "measured every copy it drew until commit ccd6d80 of 2026-12-03, after the main set was collected: small "
             "design spaces came back many times).", "",
             "Two measures of the timing noise: the repeats of one row (one measurement, run back to back) and the "
             "copies of one program (measured again at another time, possibly beside other jobs).", "",
             "| dataset | valid rows | distinct programs | rows repeating one | tasks with one schedule | "
             "one row's repeats, CV (median / p90) | copies' max/min latency (median / p90) |",
             "|---|---|---|---|---|---|---|"]
    for d in res["datasets"]:
        p, r = d["programs"], d["programs"]["repeat_spread"]
        spread = f"{r['median']:.2f}x / {r['p90']:.2f}x over {r['programs']}" if r["programs"] else "-"
        cv = p["row_repeat_cv"]
        cv_text = f"{cv['median']:.1%} / {cv['p90']:.1%}" if cv["rows"] else "-"
        lines.append(f"| {d['hardware_id']} | {d['valid_rows']} | {p['distinct']} | {p['repeated_rows']} | "
                     f"{p['single_program_tasks']} | {cv_text} | {spread} |")
    for d in res["datasets"]:
        if not d["models"]:
            continue
        sc = d["scoring"]
        held = list(sc["rows"]["held_out_tasks"])
        lines += ["", f"## {d['hardware_id']}: saved models scored with copies as programs → copies merged (no refit)", "",
                  "Held-out tasks with ≥ 2 programs: " + ", ".join(
                      f"{m} {sc['rows']['held_out_tasks'][m]} → {sc['merged']['held_out_tasks'][m]}" for m in held)
                  + f"; held-out programs {sc['rows']['held_out_programs']} → {sc['merged']['held_out_programs']}.", "",
                  "| model | mean top-1 | mean top-5 | " + " | ".join(f"{m} top-1" for m in held) + " |",
                  "|" + "---|" * (3 + len(held))]
        for m in d["models"]:
            a, b = m["rows"], m["merged"]
            per = " | ".join(f"{a[h]['top1']:.3f} → {b[h]['top1']:.3f}" if h in a and h in b else "-" for h in held)
            lines.append(f"| {m['kind']} | {a['mean']['top1']:.3f} → {b['mean']['top1']:.3f} | "
                         f"{a['mean']['top5']:.3f} → {b['mean']['top5']:.3f} | {per} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="datasets/cpu-znver3-2c,datasets/cpu-rocketlake-2c,datasets/cpu-znver4-2c,"
                                          "datasets/cpu-x86-64-v2-1c")
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--held-out", default=",".join(HELD_OUT_MODELS), help="comma-separated zoo models")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)

    def body() -> int:
        from autotune.data.feature_cache import StaleFeatureCache
        from autotune.data.store import DatasetError
        from autotune.errors import UserError

        datasets = []
        for path in [p for p in args.datasets.split(",") if p]:
            try:
                datasets.append(analyse(path, args.models_dir, [m for m in args.held_out.split(",") if m]))
            except (DatasetError, StaleFeatureCache) as err:
                raise UserError(f"--datasets: {err}") from None
            except ValueError as err:
                raise UserError(f"--held-out: {err}") from None
        res = {"datasets": datasets, "measured_on": host_cpu(), "loadavg": loadavg(), "git_commit": git_commit()}
        write_results(os.path.join(args.out, "duplicates.json"), res, os.path.join(args.out, "duplicates.md"),
                      markdown(res))
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
