"""Leave-networks-out rotation: how much a cost model's score depends on which networks are new (issue 47).

    python -m autotune.costmodel.folds --dataset datasets/cpu-znver3-2c --models xgb,ms-xgb --seeds 0

The fixed test split (resnet50, mobilenet_v2, bert_base) gives one number per model; its ± over training seeds
says nothing about how the score moves with *which* networks are new. Here every network of the dataset is held
out once: a fold fits the kind on every task of no held-out network (a task the held-out network shares with
another network goes with the held-out one, as in the fixed split) and scores the held-out network's programs
(TenSet's weighted top-1 / top-5, the network's own task weights: view ``all``). A model's reading is the mean ±
sd over folds (each fold's score averaged over the seeds run); every fold names its network.

An evaluation, not a selection: nothing is chosen from it. Resumable: each (kind, network, seed) is one row of
``<results>/folds.json``, kept while the dataset (its manifest hash) and the kind's settings are the same; the
comparison (``make train-costmodel``) shows the rotation beside the fixed split when the file is of its dataset.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np

logger = logging.getLogger("autotune.costmodel.folds")

FORMAT = 1


def fold_networks(data) -> list[str]:
    """The networks of the dataset's tasks with programs, in a fixed order (synthetic tasks are no network)."""
    have = {m for k in data.task_keys for m in data.tasks[k]["models"]}
    return sorted(m for m in have if not m.startswith("synthetic:"))


def fold_split(data, network: str) -> tuple[list[str], list[str]]:
    """(training task keys, the held-out network's task keys): no task of ``network`` is trained on."""
    held = sorted(k for k in data.task_keys if network in data.tasks[k]["models"])
    held_set = set(held)
    return [k for k in data.task_keys if k not in held_set], held


def summarize(rows: list[dict]) -> dict:
    """kind -> {networks, per-network top-1 / top-5 (mean over seeds), mean and sd over folds}."""
    out = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        nets = sorted({r["network"] for r in mine})
        per = {n: {m: float(np.mean([r[m] for r in mine if r["network"] == n])) for m in ("top1", "top5")}
               for n in nets}
        top1 = [per[n]["top1"] for n in nets]
        out[kind] = {"networks": nets, "per_network": per, "folds": len(nets),
                     "seeds": sorted({r["seed"] for r in mine}),
                     "top1_mean": float(np.mean(top1)), "top1_sd": float(np.std(top1, ddof=1)) if len(top1) > 1 else None,
                     "top5_mean": float(np.mean([per[n]["top5"] for n in nets]))}
    return out


def table_lines(summary: dict) -> list[str]:
    """One row per model: folds, seeds, top-1 mean ± sd over folds, top-5 mean, each network's top-1."""
    nets = sorted({n for s in summary.values() for n in s["networks"]})
    lines = ["| model | folds | seeds | top-1 mean ± sd over folds | top-5 mean | " + " | ".join(nets) + " |",
             "|---|---|---|---|---|" + "---|" * len(nets)]
    for kind, s in summary.items():
        sd = "" if s["top1_sd"] is None else f" ± {s['top1_sd']:.3f}"
        cells = " | ".join(f"{s['per_network'][n]['top1']:.3f}" if n in s["per_network"] else "-" for n in nets)
        lines.append(f"| {kind} | {s['folds']} | {','.join(map(str, s['seeds']))} | {s['top1_mean']:.3f}{sd} | "
                     f"{s['top5_mean']:.3f} | {cells} |")
    return lines


def markdown(result: dict) -> str:
    n = len({n for s in result["summary"].values() for n in s["networks"]})
    lines = ["# Fold rotation: every network held out once (`python -m autotune.costmodel.folds`)", "",
             f"Dataset `{result['dataset']}` (manifest {result['dataset_manifest_sha256'][:12]}); {n} folds, "
             "one per network: fitted on every task of no held-out network, scored on the held-out network's "
             "programs (TenSet weighted top-1, view `all`). Mean ± sd over folds: the spread says how much the score "
             "depends on which network is new (the fixed split's ± is over training seeds only). A model with fewer "
             "folds than the others is partial (the run was stopped; rerun the command to go on).", "",
             *table_lines(result["summary"])]
    lines += ["", f"Measured on {result['measured_on']}; fits {result['fit_seconds_total']:.0f} s in all. Reproduce: "
              f"`{result['command']}`.", ""]
    return "\n".join(lines)


def _load_rows(path: str, manifest_hash: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        old = json.load(f)
    if old.get("format") != FORMAT or old.get("dataset_manifest_sha256") != manifest_hash:
        return []  # another dataset (or format): start afresh
    return old["rows"]


def run(args) -> int:
    from autotune.cli import host_cpu, seed_list, setup_logging, write_results
    from autotune.errors import UserError

    from . import REGISTRY, create, takes_seed
    from .comparison import resolve_results
    from .data import load_training_data, manifest_sha256
    from .evaluate import evaluate as evaluate_views
    from .train import params_for

    setup_logging()
    kinds = [k for k in args.models.split(",") if k]
    bad = [k for k in kinds if k not in REGISTRY]
    if bad or not kinds:
        raise UserError(f"--models: unknown {bad or args.models!r}; valid: {', '.join(REGISTRY)}")
    data = load_training_data(args.dataset)
    digest = manifest_sha256(data.manifest)
    out = resolve_results(args.results, data.manifest["hardware"]["hardware_id"])
    path = os.path.join(out, "folds.json")
    rows = _load_rows(path, digest)
    networks = fold_networks(data) if not args.networks else args.networks.split(",")
    for kind in kinds:
        params = params_for(kind, args.quick)
        for net in networks:
            train_keys, held = fold_split(data, net)
            if not held:
                raise UserError(f"--networks: {net} has no tasks in {args.dataset}")
            train = data.select_tasks(train_keys)
            for seed in seed_list(args.seeds) if takes_seed(kind) else [None]:
                done = [r for r in rows if (r["kind"], r["network"], r["seed"]) == (kind, net, seed)
                        and r["params"] == params]
                if done:
                    continue
                model = create(kind, **(params if seed is None else {**params, "seed": seed}))
                t0 = time.time()
                model.fit(train.batch, train.y, train.groups, latency=train.latency)
                fit_s = time.time() - t0
                got = evaluate_views(model, data, {net: held}, views=("all",))["views"]["all"][net]
                rows = [r for r in rows if (r["kind"], r["network"], r["seed"]) != (kind, net, seed)]
                rows.append({"kind": kind, "network": net, "seed": seed, "params": params, "top1": got["top1"],
                             "top5": got["top5"], "train_programs": len(train), "held_programs": got["programs"],
                             "fit_s": fit_s})
                logger.info("%s without %s (seed %s): top-1 %.3f, fit %.0f s", kind, net, seed, got["top1"], fit_s)
                result = {"format": FORMAT, "dataset": os.path.relpath(os.path.abspath(args.dataset)),
                          "dataset_manifest_sha256": digest, "rows": rows, "summary": summarize(rows),
                          "measured_on": host_cpu(), "fit_seconds_total": float(sum(r["fit_s"] for r in rows)),
                          "command": "python -m autotune.costmodel.folds " + " ".join(args.argv)}
                write_results(path, result, os.path.join(out, "folds.md"), markdown(result))  # after every fold
    return 0


def main(argv=None) -> int:
    import sys

    from autotune.cli import run_main

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.folds", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default="xgb,ms-xgb", help="comma-separated kinds (default: %(default)s)")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--networks", default=None, help="only these folds (default: every network of the dataset)")
    ap.add_argument("--results", default=None, help="folder of folds.json/.md (default: the comparison's)")
    ap.add_argument("--quick", action="store_true", help="small models (CI)")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return run_main(lambda: run(args))


if __name__ == "__main__":
    raise SystemExit(main())
