"""How much does more data per task buy? Held-out scores against the number of training programs per task.

Issue 12's item 3 asks for ~2x the programs per task (every task >= 64) because the analyses say top-1 is
decided by a few heavy tasks. Before hours of collection, this measures the slope on the data we have: each
kind is fitted on the training tasks with at most ``cap`` programs per task (a uniform subsample within each
task, drawn with the fit's seed; caps 8, 16, 32, 64 and all) and scored on the held-out models exactly like
``make train-costmodel`` (views all / search / unseen, the models' own task weights). The held-out programs
never change, so the curve isolates the training side.

The slope per doubling of programs per task is fitted to the measured points (least squares on log2 of the
mean programs per task); what it says about 64 per task is an extrapolation and is labelled so.

Each fit's scores are cached as JSON under ``--cache`` (resumable; ``--summarize-only`` rebuilds the table
from the cache), keyed by kind, cap, seed and the training set's size: after changing ``models/hparams/``,
remove the cache to refit. Writes ``--out``/data_curve.{json,md,png}: ``results/`` for the main dataset's hardware,
``results/<hardware id>/`` for another (where ``make train-costmodel`` puts that dataset's comparison, which
reads it).

    python experiments/costmodel/data_curve.py --dataset datasets/cpu-znver3-2c --kinds ms-xgb,seq-lstm-cos
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

import numpy as np  # noqa: E402

from autotune.cli import (  # noqa: E402
    check_threads,
    comma_list,
    git_commit,
    host_cpu,
    loadavg,
    run_main,
    seed_list,
    setup_logging,
    write_json,
    write_results,
)
from autotune.errors import UserError  # noqa: E402

KINDS = "ms-xgb,seq-lstm-cos"
CAPS = "8,16,32,64,all"
VIEW_METRICS = (("all", "top1"), ("all", "top5"), ("all", "pairwise"), ("search", "top1"), ("unseen", "top1"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/data_curve.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--held-out", default=None, help="comma-separated held-out models (default: the comparison's)")
    ap.add_argument("--kinds", default=KINDS, help="comma-separated registry kinds (default: %(default)s)")
    ap.add_argument("--caps", default=CAPS, help="programs per training task, comma-separated integers and/or 'all' "
                                                 "(default: %(default)s)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds: subsample and fit (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="the CI's small settings per kind (a smoke test)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads per fit (default: the kind's); an LSTM fits as fast on one core as on two here, so "
                         "two processes with --threads 1 and different --seeds finish a curve in half the time")
    ap.add_argument("--cache", default=None, help="per-fit JSON cache (default: <out>/data_curve)")
    ap.add_argument("--out", default=None, help="results folder (default: results/ for the main dataset's hardware, "
                                                "results/<hardware id>/ for another, as make train-costmodel)")
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the table from the cache")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def parse_caps(text: str) -> list[int | None]:
    """'4,8,all' -> [4, 8, None] (None = every program), sorted, no repeats; anything else is a UserError."""
    caps: set = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "all":
            caps.add(None)
            continue
        try:
            value = int(part)
        except ValueError:
            value = 0
        if value < 2:
            raise UserError(f"--caps: {part!r} is not a cap; give integers >= 2 (programs per task) and/or 'all'")
        caps.add(value)
    if not caps:
        raise UserError("--caps: give at least one cap (integers >= 2 and/or 'all')")
    return sorted(caps, key=lambda c: float("inf") if c is None else c)


def cap_subsample(groups: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """Indices keeping at most ``cap`` programs of each group, drawn uniformly within the group with
    ``seed`` (sorted; every program when ``cap`` is None). The draws are nested: a smaller cap keeps a
    subset of a larger one's programs for the same seed."""
    if cap is None:
        return np.arange(len(groups))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(groups))
    rank = np.empty(len(groups), dtype=np.int64)
    seen: dict[int, int] = {}
    for i in order:  # rank of each program within its group in one random order shared by all caps
        g = int(groups[i])
        rank[i] = seen.get(g, 0)
        seen[g] = rank[i] + 1
    return np.nonzero(rank < cap)[0]


def _parse(args):
    from autotune.costmodel import REGISTRY

    kinds = comma_list(args.kinds)
    bad = [k for k in kinds if k not in REGISTRY]
    if bad or not kinds:
        raise UserError(f"--kinds: {args.kinds!r}; valid kinds: {', '.join(REGISTRY)}")
    seeds = seed_list(args.seeds)
    check_threads(args.threads)
    return kinds, parse_caps(args.caps), seeds


def _label(cap) -> str:
    return "all" if cap is None else str(cap)


def _main(args) -> int:
    kinds, caps, seeds = _parse(args)
    setup_logging()
    import logging

    from autotune.costmodel import create_seeded
    from autotune.costmodel.comparison import results_dir_for
    from autotune.costmodel.data import load_split, manifest_sha256
    from autotune.costmodel.evaluate import evaluate
    from autotune.costmodel.train import params_for
    from autotune.data.splits import HELD_OUT_MODELS

    log = logging.getLogger("autotune.experiments.data_curve")
    held = comma_list(args.held_out) if args.held_out else list(HELD_OUT_MODELS)
    data, train_keys, test_keys = load_split(args.dataset, held)
    train = data.select_tasks(train_keys)
    args.out = args.out or results_dir_for(data.manifest["hardware"]["hardware_id"], os.path.join(HERE, "results"))
    args.cache = args.cache or os.path.join(args.out, "data_curve")
    os.makedirs(args.cache, exist_ok=True)
    tag = "quick-" if args.quick else ""

    def run(kind: str, cap, seed: int) -> dict | None:
        path = os.path.join(args.cache, f"{tag}{kind}-c{_label(cap)}-s{seed}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                got = json.load(f)
            if got.get("train_programs_total") == len(train):
                return got
        if args.summarize_only:
            return None
        idx = cap_subsample(train.groups, cap, seed)
        part = train.subset(idx)
        t0 = time.time()
        model = create_seeded(kind, seed, **params_for(kind, args.quick))
        if args.threads is not None:
            model.set_threads(args.threads)
        model.fit(part.batch, part.y, part.groups)
        fit_s = time.time() - t0
        scores = evaluate(model, data, test_keys)["views"]
        got = {"kind": kind, "cap": cap, "seed": seed, "programs": len(part), "tasks": int(len(set(part.groups.tolist()))),
               "train_programs_total": len(train), "fit_s": fit_s, "loadavg": loadavg(),
               "views": {v: s["mean"] for v, s in scores.items() if s}}
        write_json(path, got)
        log.info("%s cap %s seed %d: %d programs, top1 %.3f (unseen %.3f), fit %.0f s", kind, _label(cap), seed,
                 len(part), got["views"]["all"]["top1"], got["views"].get("unseen", {}).get("top1", float("nan")), fit_s)
        return got

    runs: dict = {}
    for seed in seeds:  # every kind and cap at seed 0 first: a stopped run still has one whole curve
        for kind in kinds:
            for cap in caps:
                got = run(kind, cap, seed)
                if got is not None:
                    runs[(kind, _label(cap), seed)] = got
    if not runs:
        raise UserError(f"--summarize-only: no cached fits under {args.cache}; run without it")
    result = summarize(runs, kinds, [_label(c) for c in caps], seeds)
    result.update({"dataset": os.path.relpath(os.path.abspath(args.dataset), ROOT), "held_out": held,
                   "train_programs": len(train), "train_tasks": len(set(train.groups.tolist())), "quick": args.quick,
                   "measured_on": host_cpu(), "loadavg_end": loadavg(), "git_commit": git_commit(),
                   "dataset_manifest_sha256": manifest_sha256(data.manifest)})
    os.makedirs(args.out, exist_ok=True)
    name = "data_curve_quick" if args.quick else "data_curve"
    write_results(os.path.join(args.out, f"{name}.json"), result, os.path.join(args.out, f"{name}.md"), markdown(result))
    _plot(result, os.path.join(args.out, f"{name}.png"))
    return 0


def slope_per_doubling(x: list[float], y: list[float]) -> float | None:
    """Least-squares slope of ``y`` against log2(``x``): the change per doubling of ``x`` (None with fewer
    than two distinct x)."""
    lx = np.log2(np.asarray(x, float))
    if len(set(lx.round(9).tolist())) < 2:
        return None
    return float(np.polyfit(lx, np.asarray(y, float), 1)[0])


def mean_sd(vals: list[float]) -> dict:
    """A table cell over seeds: mean, sd (None for one value: JSON has no NaN) and the values."""
    return {"mean": float(np.mean(vals)), "sd": float(np.std(vals, ddof=1)) if len(vals) > 1 else None, "runs": vals}


def fmt_mean_sd(cell: dict | None) -> str:
    """``mean_sd``'s cell as markdown: "0.598 ± 0.010", "0.598" without an sd, "—" without a cell."""
    if cell is None:
        return "—"
    return f"{cell['mean']:.3f}" + (f" ± {cell['sd']:.3f}" if cell.get("sd") is not None else "")


def summarize(runs: dict, kinds: list[str], caps: list[str], seeds: list[int]) -> dict:
    rows = []
    for kind in kinds:
        for cap in caps:
            got = [runs[(kind, cap, s)] for s in seeds if (kind, cap, s) in runs]
            if not got:
                continue
            row = {"kind": kind, "cap": cap, "seeds": [g["seed"] for g in got],
                   "programs": float(np.mean([g["programs"] for g in got])),
                   "programs_per_task": float(np.mean([g["programs"] / g["tasks"] for g in got])),
                   "fit_s": float(np.mean([g["fit_s"] for g in got]))}
            for view, metric in VIEW_METRICS:
                vals = [g["views"][view][metric] for g in got if view in g["views"]]
                if vals:
                    row[f"{view}_{metric}"] = mean_sd(vals)
            rows.append(row)
    slopes, slope_sd = {}, {}
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind and len(r["seeds"]) == len(seeds)]
        x = [r["programs_per_task"] for r in mine]
        slopes[kind], slope_sd[kind] = {}, {}
        for v, m in VIEW_METRICS:
            key = f"{v}_{m}"
            if not all(key in r for r in mine):
                continue
            slopes[kind][key] = slope_per_doubling(x, [r[key]["mean"] for r in mine])
            # each seed's own line through its points: the spread of the slope over seeds (their mean is the
            # slope above, the caps giving every seed the same programs per task)
            if len(seeds) < 2 or not mine or not all(len(r[key]["runs"]) == len(seeds) for r in mine):
                continue
            per_seed = [slope_per_doubling(x, [r[key]["runs"][i] for r in mine]) for i in range(len(seeds))]
            if all(p is not None for p in per_seed):
                slope_sd[kind][key] = float(np.std(per_seed, ddof=1))
    missing = [f"{k} cap {c} seed {s}" for k in kinds for c in caps for s in seeds if (k, c, s) not in runs]
    return {"kinds": kinds, "caps": caps, "seeds": seeds, "rows": rows, "slope_per_doubling": slopes,
            "slope_sd_over_seeds": slope_sd, "missing": missing}


def markdown(result: dict) -> str:
    lines = [
        f"# Held-out scores against training programs per task ({result['dataset']})",
        "",
        f"Command: `python experiments/costmodel/data_curve.py --dataset {result['dataset']} --kinds {','.join(result['kinds'])} --caps "
        f"{','.join(result['caps'])} --seeds {','.join(map(str, result['seeds']))}`"
        + (" `--quick` (small models: a smoke test, not a result)" if result["quick"] else "")
        + f". Training: {result['train_programs']} programs over {result['train_tasks']} tasks, each task capped at "
        f"`cap` programs (a uniform draw within the task, seeded; nested across caps); held out "
        f"{', '.join(result['held_out'])}, scored on all their programs as in `results/comparison.md` (mean over the "
        f"held-out models; mean ± sd over seeds). Measured on {result['measured_on']}; dataset manifest sha256 "
        f"{result['dataset_manifest_sha256'][:12]}, commit {str(result['git_commit'])[:10]}.",
        "",
        "| kind | cap | programs/task | programs | top-1 all | top-5 all | pairwise all | top-1 search | top-1 unseen | fit s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(f"| {r['kind']} | {r['cap']} | {r['programs_per_task']:.1f} | {r['programs']:.0f} | "
                     + " | ".join(fmt_mean_sd(r.get(f"{v}_{m}")) for v, m in VIEW_METRICS) + f" | {r['fit_s']:.0f} |")
    lines += ["", "Least-squares slope per doubling of programs per task (over the caps with every seed; ± the sd of "
                  "each seed's own slope; a measured trend — what it implies beyond the largest cap is an "
                  "extrapolation):", "",
              "| kind | top-1 all | top-5 all | pairwise all | top-1 search | top-1 unseen |", "|---|---|---|---|---|---|"]
    for kind, s in result["slope_per_doubling"].items():
        sd = result.get("slope_sd_over_seeds", {}).get(kind, {})
        lines.append(f"| {kind} | " + " | ".join(
            "—" if s.get(f"{v}_{m}") is None else f"{s[f'{v}_{m}']:+.3f}"
            + (f" ± {sd[f'{v}_{m}']:.3f}" if f"{v}_{m}" in sd else "") for v, m in VIEW_METRICS) + " |")
    if result["missing"]:
        lines += ["", f"Not fitted yet ({len(result['missing'])}): " + ", ".join(result["missing"][:20])
                  + (" ..." if len(result["missing"]) > 20 else "") + ". Rerun the command to continue."]
    lines += ["", "Plot: `" + ("data_curve_quick.png" if result["quick"] else "data_curve.png") + "`.", ""]
    return "\n".join(lines)


def _plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (view, metric) in zip(axes, (("all", "top1"), ("all", "top5"), ("all", "pairwise"))):
        for kind in result["kinds"]:
            rows = [r for r in result["rows"] if r["kind"] == kind and f"{view}_{metric}" in r]
            if not rows:
                continue
            x = [r["programs_per_task"] for r in rows]
            y = [r[f"{view}_{metric}"]["mean"] for r in rows]
            e = [r[f"{view}_{metric}"]["sd"] or 0.0 for r in rows]
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=kind)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("training programs per task (mean)")
        ax.set_title(f"held-out {metric} ({view})")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"{result['dataset']}: held out {', '.join(result['held_out'])}; mean ± sd over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
