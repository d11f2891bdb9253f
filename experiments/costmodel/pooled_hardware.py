"""Does another machine's data help? Held-out scores of a model trained on this hardware's programs alone vs
pooled with the programs other CPUs measured for the same tasks.

The data curve (``data_curve.py``) says top-1 grows with programs per task, and the main set cannot grow off
its own hardware. The other CPU datasets of this repository were collected over the same task pool (same task
keys) on other machines; their programs are *different* programs of the same tasks, labelled with another
machine's latencies. Pooling them adds programs per task whose ranking is correlated with this machine's (the
transfer experiment's zero-shot scores say how much). Here each arm trains a kind on the target dataset's
training tasks plus the training tasks of the arm's other datasets, every (hardware, task) its own group: a
rank loss compares programs only within one machine's measurements of one task, and each group's labels are
normalised within the group (``normalized_throughput``), so machines of different speed mix without a scale.
The held-out models' tasks are removed from every dataset, and scores are the target's held-out programs
exactly as in ``make train-costmodel`` (views all / search / unseen, each model's own task weights).

Arms (``--arms``): ``none`` (the target alone: reproduces the comparison's row), ``all`` (every ``--with``
dataset), or a ``+``-joined list of hardware ids; and ``halves``, a control without other hardware: the
target's programs alone, each task split at random (the fit's seed) into two groups normalised separately —
what smaller groups alone do to the labels, since the other sets hold ~14 programs per task where the target
holds ~36 and ``normalized_throughput`` labels each group's best program 1. ``--labels anchored`` tests that
cause: every group but the target's whole tasks (other hardware's, or the halves) is labelled
by rank on the target's labels of the same task (``inputs.rank_anchored``), so a small group's best program
gets the label of the target's program at the same standing, not 1. Each fit is cached as JSON under ``--cache`` (resumable;
``--summarize-only``), keyed by kind, arm, labels, seed and the training set's size. Writes
``--out``/``--name``.{json,md} (default pooled_hardware): mean ± sd over seeds and, per arm, the paired difference to ``none`` over
the same seeds.

    python experiments/costmodel/pooled_hardware.py --dataset datasets/cpu-znver3-2c \\
        --with datasets/cpu-znver4-2c,datasets/cpu-rocketlake-2c,datasets/cpu-x86-64-v2-1c
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from data_curve import VIEW_METRICS, fmt_mean_sd, mean_sd  # noqa: E402  (experiments/costmodel/data_curve.py)

from autotune.cli import (  # noqa: E402
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

KINDS = "ms-xgb,xgb-reg,seq-lstm"
LABELS = ("group", "anchored")
WITH = "datasets/cpu-znver3-2c,datasets/cpu-znver4-2c,datasets/cpu-rocketlake-2c,datasets/cpu-x86-64-v2-1c"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/pooled_hardware.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join("datasets", "cpu-znver3-2c"), help="the target hardware's set")
    ap.add_argument("--with", dest="others", default=WITH, help="comma-separated datasets of other hardware over the "
                                                                "same tasks, the target's own skipped (default: "
                                                                "%(default)s)")
    ap.add_argument("--arms", default="none,all", help="comma-separated: none, all, or hardware ids joined by '+' "
                                                       "(default: %(default)s)")
    ap.add_argument("--labels", default="group", choices=LABELS,
                    help="group: each group's labels normalised within it; anchored: every group but the target's "
                         "whole tasks mapped by rank onto the target's labels of the task (default: %(default)s)")
    ap.add_argument("--held-out", default=None, help="comma-separated held-out models (default: the comparison's)")
    ap.add_argument("--kinds", default=KINDS, help="comma-separated registry kinds (default: %(default)s)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated fit seeds (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="the CI's small settings per kind (a smoke test)")
    ap.add_argument("--cache", default=None, help="per-fit JSON cache (default: <out>/pooled_hardware)")
    ap.add_argument("--out", default=None, help="results folder (default: results/ for the main dataset's hardware, "
                                                "results/<hardware id>/ for another)")
    ap.add_argument("--name", default="pooled_hardware", help="results file name (default: %(default)s; "
                                                              "_quick is added with --quick)")
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the table from the cache")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def parse_arms(text: str, hardware: list[str]) -> list[str]:
    """'none,all,cpu-a+cpu-b' -> arm labels, each naming hardware of ``hardware`` (a UserError otherwise)."""
    arms = comma_list(text)
    if not arms:
        raise UserError("--arms: give at least one arm (none, all, halves, or hardware ids joined by '+')")
    for arm in arms:
        if arm in ("none", "all", "halves"):
            continue
        bad = [h for h in arm.split("+") if h not in hardware]
        if bad:
            raise UserError(f"--arms: {arm!r} names {bad}, not among the --with datasets' hardware "
                            f"({', '.join(hardware) or 'none given'}); give none, all, halves or ids joined by '+'")
    return arms


def arm_members(arm: str, hardware: list[str]) -> list[str]:
    return [] if arm in ("none", "halves") else list(hardware) if arm == "all" else arm.split("+")


def pooled(parts: dict, members: list[str], halves_seed: int | None = None, labels: str = "group"):
    """(batch, y, groups, programs per member) of ``parts["target"]`` (the target's training programs) plus
    ``parts[hw]`` for each member hardware (its programs of the training tasks); labels and groups as
    ``pooled_labels``."""
    from autotune.costmodel.online import concat_batches

    y, groups = pooled_labels(parts, members, halves_seed, labels)
    sizes = {"target": len(parts["target"]), **{hw: len(parts[hw]) for hw in members}}
    return concat_batches([parts["target"].batch, *(parts[hw].batch for hw in members)]), y, groups, sizes


def pooled_labels(parts: dict, members: list[str], halves_seed: int | None = None, labels: str = "group"):
    """(y, groups) of the target's programs then each member's, in ``pooled``'s order; every (hardware, task)
    its own group. ``halves_seed``: the target's tasks each split at random into two groups. ``labels``:
    ``group``, each group's labels normalised within it (``normalized_throughput``: its best program 1), or
    ``anchored``, each group other than the target's whole task mapped by rank onto the target's labels of the
    same task (``rank_anchored``; a task the target lacks keeps its own normalisation), so a group's size does
    not set its labels."""
    from autotune.costmodel.inputs import normalized_throughput, rank_anchored

    if labels not in LABELS:
        raise UserError(f"--labels: {labels!r}; accepted: {', '.join(LABELS)}")
    part = parts["target"]
    own = part.groups
    if halves_seed is not None:
        own = own * 2 + np.random.default_rng([halves_seed, 2]).integers(0, 2, len(own))
    latency, groups = [part.latency], [own]
    target_ids = np.unique(own).tolist()
    task_of = {g: part.task_keys[g // 2 if halves_seed is not None else g] for g in target_ids}  # group -> task
    base = int(own.max()) + 1 if len(own) else 0
    for hw in members:
        sub = parts[hw]
        latency.append(sub.latency)
        groups.append(sub.groups + base)
        task_of.update({int(g) + base: sub.task_keys[g] for g in np.unique(sub.groups)})
        base += len(sub.task_keys)
    groups_all = np.concatenate(groups)
    y = normalized_throughput(np.concatenate(latency), groups_all)
    if labels == "anchored":
        whole = normalized_throughput(part.latency, part.groups)  # the target's own labels of each whole task
        anchor = {part.task_keys[g]: whole[part.groups == g] for g in np.unique(part.groups)}
        keep = set(target_ids) if halves_seed is None else set()  # the target's whole tasks keep their labels
        for g, key in task_of.items():
            if g in keep or key not in anchor:
                continue
            m = groups_all == g
            y[m] = rank_anchored(y[m], anchor[key])
    return y, groups_all


def _main(args) -> int:
    from autotune.costmodel import REGISTRY

    kinds = comma_list(args.kinds)
    bad = [k for k in kinds if k not in REGISTRY]
    if bad or not kinds:
        raise UserError(f"--kinds: {args.kinds!r}; valid kinds: {', '.join(REGISTRY)}")
    seeds = seed_list(args.seeds)
    setup_logging()
    import logging

    from autotune.costmodel import create_seeded
    from autotune.costmodel.comparison import results_dir_for
    from autotune.costmodel.data import load_split, load_training_data, manifest_sha256
    from autotune.costmodel.evaluate import evaluate
    from autotune.costmodel.train import params_for
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.splits import HELD_OUT_MODELS
    from autotune.data.store import DatasetError

    log = logging.getLogger("autotune.experiments.pooled_hardware")
    held = comma_list(args.held_out) if args.held_out else list(HELD_OUT_MODELS)
    data, train_keys, test_keys = load_split(args.dataset, held)
    hw_target = data.manifest["hardware"]["hardware_id"]
    exclude = set().union(*test_keys.values())
    others = {}
    paths = {}
    for path in comma_list(args.others):
        if os.path.realpath(path) == os.path.realpath(args.dataset):
            continue  # the default list names every CPU set; the target is not its own other hardware
        try:
            other = load_training_data(path)
        except (DatasetError, StaleFeatureCache) as err:
            raise UserError(f"--with: {err}") from None
        hw = other.manifest["hardware"]["hardware_id"]
        if hw == hw_target or hw in others:
            raise UserError(f"--with: {path} is hardware {hw}, already the target or another --with dataset")
        paths[hw] = path
        exclude |= {k for k in other.task_keys if any(m in other.tasks[k]["models"] for m in held)}
        others[hw] = other
    if not others:
        raise UserError("--with: no dataset of other hardware given (comma-separated dataset folders)")
    arms = parse_arms(args.arms, list(others))
    args.out = args.out or results_dir_for(hw_target, os.path.join(HERE, "results"))
    args.cache = args.cache or os.path.join(args.out, "pooled_hardware")
    os.makedirs(args.cache, exist_ok=True)
    tag = "quick-" if args.quick else ""
    # each side's training programs, selected once for every fit (held-out models' tasks out of every set)
    parts = {"target": data.select_tasks(train_keys),
             **{hw: o.select_tasks([k for k in o.task_keys if k not in exclude]) for hw, o in others.items()}}

    def run(kind: str, arm: str, seed: int) -> dict | None:
        members = arm_members(arm, list(others))
        lab = "" if arm == "none" or args.labels == "group" else f"{args.labels}-"  # none: the same fit either way
        path = os.path.join(args.cache, f"{tag}{kind}-{arm}-{lab}s{seed}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                got = json.load(f)
            if got.get("programs_by_hardware") == {h: len(parts[h]) for h in ["target", *members]}:
                return got
        if args.summarize_only:
            return None
        batch, y, groups, sizes = pooled(parts, members, halves_seed=seed if arm == "halves" else None,
                                         labels=args.labels)
        t0 = time.time()
        model = create_seeded(kind, seed, **params_for(kind, args.quick)).fit(batch, y, groups)
        fit_s = time.time() - t0
        scores = evaluate(model, data, test_keys)["views"]
        got = {"kind": kind, "arm": arm, "labels": args.labels if lab else "group", "members": members, "seed": seed, "programs": int(len(y)),
               "programs_by_hardware": sizes, "fit_s": fit_s, "loadavg": loadavg(),
               "views": {v: s["mean"] for v, s in scores.items() if s}}
        write_json(path, got)
        log.info("%s %s seed %d: %d programs, top1 %.3f (search %.3f, unseen %.3f), fit %.0f s", kind, arm, seed,
                 len(y), got["views"]["all"]["top1"], got["views"].get("search", {}).get("top1", float("nan")),
                 got["views"].get("unseen", {}).get("top1", float("nan")), fit_s)
        return got

    runs: dict = {}
    for seed in seeds:  # every kind and arm at seed 0 first: a stopped run still compares every arm
        for kind in kinds:
            for arm in arms:
                got = run(kind, arm, seed)
                if got is not None:
                    runs[(kind, arm, seed)] = got
    if not runs:
        raise UserError(f"--summarize-only: no cached fits under {args.cache}; run without it")
    result = summarize(runs, kinds, arms, seeds)
    result.update({"dataset": os.path.relpath(os.path.abspath(args.dataset), ROOT), "hardware_id": hw_target,
                   "with": {hw: os.path.relpath(os.path.abspath(p), ROOT) for hw, p in paths.items()},
                   "labels": args.labels, "held_out": held, "quick": args.quick, "name": args.name, "measured_on": host_cpu(), "loadavg_end": loadavg(),
                   "git_commit": git_commit(), "dataset_manifest_sha256": manifest_sha256(data.manifest),
                   "with_manifest_sha256": {hw: manifest_sha256(o.manifest) for hw, o in others.items()}})
    if "halves" in arms:
        result["halves_label_shift"] = halves_label_shift(parts["target"], seeds, args.labels)
    name = f"{args.name}_quick" if args.quick else args.name
    write_results(os.path.join(args.out, f"{name}.json"), result, os.path.join(args.out, f"{name}.md"), markdown(result))
    return 0


def halves_label_shift(part, seeds: list[int], labels: str, top: int = 5) -> dict:
    """How far the ``halves`` arm moves the target's labels from its whole tasks' (no fit needed): mean |change|
    over each task's ``top`` best programs and over the rest, mean over ``seeds``."""
    whole, groups = pooled_labels({"target": part}, [])
    rank = np.zeros(len(whole), np.int64)
    for g in np.unique(groups):
        idx = np.nonzero(groups == g)[0]
        rank[idx[np.argsort(-whole[idx], kind="stable")]] = np.arange(len(idx))
    is_top = rank < top
    shift = [np.abs(pooled_labels({"target": part}, [], halves_seed=s, labels=labels)[0] - whole) for s in seeds]
    return {"top": top, "labels": labels, "seeds": seeds,
            "top_mean_abs": float(np.mean([d[is_top].mean() for d in shift])),
            "rest_mean_abs": float(np.mean([d[~is_top].mean() for d in shift]))}


def summarize(runs: dict, kinds: list[str], arms: list[str], seeds: list[int]) -> dict:
    """Rows per (kind, arm): mean ± sd over seeds per view/metric, and the paired difference to the ``none``
    arm over the seeds both have (``evaluate.paired``)."""
    from autotune.costmodel.evaluate import paired

    rows = []
    for kind in kinds:
        for arm in arms:
            got = [runs[(kind, arm, s)] for s in seeds if (kind, arm, s) in runs]
            if not got:
                continue
            row = {"kind": kind, "arm": arm, "members": got[0]["members"], "seeds": [g["seed"] for g in got],
                   "programs": float(np.mean([g["programs"] for g in got])),
                   "programs_by_hardware": got[0]["programs_by_hardware"],
                   "fit_s": float(np.mean([g["fit_s"] for g in got])), "vs_none": {}}
            for view, metric in VIEW_METRICS:
                vals = [g["views"][view][metric] for g in got if view in g["views"]]
                if vals:
                    row[f"{view}_{metric}"] = mean_sd(vals)
                both = [s for s in row["seeds"] if (kind, "none", s) in runs and view in runs[(kind, "none", s)]["views"]]
                if arm != "none" and both:
                    row["vs_none"][f"{view}_{metric}"] = {**paired(
                        [runs[(kind, arm, s)]["views"][view][metric] for s in both],
                        [runs[(kind, "none", s)]["views"][view][metric] for s in both]), "seeds": both}
            rows.append(row)
    missing = [f"{k} {a} seed {s}" for k in kinds for a in arms for s in seeds if (k, a, s) not in runs]
    return {"kinds": kinds, "arms": arms, "seeds": seeds, "rows": rows, "missing": missing}


def markdown(result: dict) -> str:
    def diff(d):
        if not d or not d.get("n"):
            return "—"
        sd = "" if d["sd_diff"] is None else f" ± {d['sd_diff']:.3f}"
        return f"{d['mean_diff']:+.3f}{sd} ({d['wins']}/{d['n']})" + (" **clear**" if d["clear"] else "")

    withs = ", ".join(f"{hw} (`{p}`)" for hw, p in result["with"].items())
    lines = [
        f"# Pooling other hardware's programs into training ({result['dataset']}, {result['hardware_id']})",
        "",
        f"Command: `python experiments/costmodel/pooled_hardware.py --dataset {result['dataset']} --with "
        f"{','.join(result['with'].values())} --arms {','.join(result['arms'])} --kinds {','.join(result['kinds'])} "
        f"--seeds {','.join(map(str, result['seeds']))}"
        + ("" if result.get("labels", "group") == "group" else f" --labels {result['labels']}")
        + ("" if result.get("name", "pooled_hardware") == "pooled_hardware" else f" --name {result['name']}") + "`"
        + (" `--quick` (small models: a smoke test, not a result)" if result["quick"] else "")
        + f". Other hardware: {withs}. Each arm trains on the target's training tasks plus the named hardware's "
        f"programs of the same training tasks (each (hardware, task) its own group; held-out models' tasks removed "
        f"everywhere; arm `halves`: the target alone, each task split at random into two groups, a control for "
        f"group size); labels: "
        + ("each group's normalised within it (its best program 1)" if result.get("labels", "group") == "group" else
           "every group but the target's whole tasks mapped by rank onto the target's labels of the same task "
           "(`rank_anchored`)")
        + f"; scores are the target's held-out models {', '.join(result['held_out'])} on all their programs "
        f"as in `comparison.md` (mean over held-out models; mean ± sd over seeds). Measured on "
        f"{result['measured_on']}; target manifest sha256 {result['dataset_manifest_sha256'][:12]}, commit "
        f"{str(result['git_commit'])[:10]}.",
        "",
        "| kind | arm | training programs (target + others) | top-1 all | top-5 all | pairwise all | top-1 search | "
        "top-1 unseen | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        by = r["programs_by_hardware"]
        extra = sum(v for k, v in by.items() if k != "target")
        lines.append(f"| {r['kind']} | {r['arm']} | {by['target']} + {extra} | "
                     + " | ".join(fmt_mean_sd(r.get(f"{v}_{m}")) for v, m in VIEW_METRICS) + f" | {r['fit_s']:.0f} |")
    lines += ["", "Paired difference to the target alone (arm − none) over the same seeds: mean ± sd (seeds where "
                  "the arm was higher / seeds); **clear** when |mean| > sd.", "",
              "| kind | arm | top-1 all | top-5 all | pairwise all | top-1 search | top-1 unseen |",
              "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if r["arm"] != "none":
            lines.append(f"| {r['kind']} | {r['arm']} | "
                         + " | ".join(diff(r["vs_none"].get(f"{v}_{m}")) for v, m in VIEW_METRICS) + " |")
    lines += ["", "Reading (computed from the paired table, top-1 all): " + reading(result)]
    shift = result.get("halves_label_shift")
    if shift:
        lines += ["", f"The `halves` arm's labels against the target's whole-task labels ({shift['labels']} labels, "
                      f"seeds {', '.join(map(str, shift['seeds']))}): mean |change| {shift['top_mean_abs']:.3f} on "
                      f"each task's {shift['top']} best programs, {shift['rest_mean_abs']:.3f} on the rest."]
    if result["missing"]:
        lines += ["", f"Not fitted yet ({len(result['missing'])}): " + ", ".join(result["missing"][:20])
                  + (" ..." if len(result["missing"]) > 20 else "") + ". Rerun the command to continue."]
    lines.append("")
    return "\n".join(lines)


def reading(result: dict, view_metric: str = "all_top1") -> str:
    """One sentence per arm: for how many kinds pooling raised / lowered the metric clearly (|mean| > sd over
    >= 2 seeds) and the range of the mean differences."""
    out = []
    for arm in [a for a in result["arms"] if a != "none"]:
        diffs = {r["kind"]: r["vs_none"].get(view_metric) for r in result["rows"] if r["arm"] == arm}
        diffs = {k: d for k, d in diffs.items() if d and d.get("n", 0) >= 2}
        if not diffs:
            continue
        up = [k for k, d in diffs.items() if d["clear"] and d["mean_diff"] > 0]
        down = [k for k, d in diffs.items() if d["clear"] and d["mean_diff"] < 0]
        lo, hi = min(d["mean_diff"] for d in diffs.values()), max(d["mean_diff"] for d in diffs.values())
        out.append(f"`{arm}` vs the target alone: clearly higher for {', '.join(up) or 'no kind'}, clearly lower for "
                   f"{', '.join(down) or 'no kind'} of {len(diffs)} kinds (mean differences {lo:+.3f} to {hi:+.3f}).")
    return " ".join(out) or "no arm has >= 2 paired seeds yet."


if __name__ == "__main__":
    sys.exit(main())
