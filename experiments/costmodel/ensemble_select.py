"""Which kinds make the ``ensemble`` cost model: chosen on validation models, never on the held-out ones.

The held-out protocol asks how a model ranks the programs of networks it never saw. The members are
chosen the same way one level down: three *training* models (one per family, like the held-out
resnet50 / mobilenet_v2 / bert_base) are set aside as validation networks, every candidate kind is fitted
on the remaining training tasks once per seed, and every committee of 2..``--max-members`` candidates is
scored on the validation networks exactly as ``EnsembleCostModel`` would score them (each member centred
and scaled by its own fit-set scores, averaged). The committee with the best validation task-mean top-1
(``metrics.task_mean_top_k``: every validation task counts once; see ``OBJECTIVE``), mean over seeds, is
the one ``REGISTRY["ensemble"]`` ships; its held-out numbers then come from
``make train-costmodel`` like every other row.

Each fit's validation scores and fit-set scale are cached under ``--cache`` (one ``.npz`` per kind and
seed, no pickles; keyed by the kind's settings, the seed, the dataset's manifest and the split, so
a fit made with other settings or data is fitted again), so a stopped run resumes and the table can be rebuilt without fitting
(``--summarize-only``). Writes ``results/ensemble_select.{json,md}``.

    python experiments/costmodel/ensemble_select.py --dataset datasets/cpu-znver3-2c --seeds 0,1
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autotune.cli import (  # noqa: E402
    comma_list,
    git_commit,
    host_cpu,
    loadavg,
    run_main,
    seed_list,
    setup_logging,
    write_results,
)
from autotune.data import splits  # noqa: E402
from autotune.errors import UserError  # noqa: E402

CANDIDATES = "ms-xgb,xgb,xgb-reg,ms-mlp,seq-lstm,seq-top"
VALIDATION_MODELS = ",".join(splits.VALIDATION_MODELS)
RESULTS = os.path.join(ROOT, "experiments", "costmodel", "results")
# what picks the committee: the mean over validation tasks of best / picked latency (every task once). The
# networks' weighted top-1 moves in steps of one heavy task's pick (gpt2's set-aside tasks: 0.08 / 0.10 / 0.20 /
# 0.50 for one seed's models), too coarse to choose between committees; it is reported beside.
OBJECTIVE = "task_top1"
# A shipped ensemble holds a copy of each member: the tuned xgb alone is 22 MB of models/ (40 MB at most)
MAX_MODEL_MB = 10.0


def main(argv=None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--candidates", default=CANDIDATES, help="comma-separated registry kinds (default: %(default)s)")
    ap.add_argument("--held-out", default=None, help="the held-out models, never used here (default: the comparison's)")
    ap.add_argument("--validation-models", default=VALIDATION_MODELS,
                    help="training models set aside as validation networks (default: %(default)s)")
    ap.add_argument("--seeds", default="0,1", help="comma-separated fit seeds (default: %(default)s)")
    ap.add_argument("--max-members", type=int, default=3)
    ap.add_argument("--max-model-mb", type=float, default=MAX_MODEL_MB,
                    help="the shipped committee's size bound: the sum of its members' saved models under "
                         "--models-dir (default: %(default)s MB; models/ stays under 40 MB)")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--cache", default=os.path.join(RESULTS, "ensemble_select"))
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the table from the cache")
    args = ap.parse_args(argv)
    return run_main(lambda: _selected(args))


def _selected(args) -> int:
    with splits.selection():  # the test split raises in here (splits.TestSplitForbidden)
        return _main(args)


def _parse(args):
    from autotune.costmodel import REGISTRY

    kinds = comma_list(args.candidates)
    bad = [k for k in kinds if k not in REGISTRY or k in ("ensemble", "random")]
    if bad or len(kinds) < 2:
        raise UserError(f"--candidates: need 2 or more of {', '.join(k for k in REGISTRY if k not in ('ensemble', 'random'))}"
                        f"; got {args.candidates!r}")
    seeds = seed_list(args.seeds)
    if args.max_members < 2:
        raise UserError(f"--max-members: {args.max_members}; a committee has 2 or more members")
    if not args.max_model_mb > 0:
        raise UserError(f"--max-model-mb: {args.max_model_mb} is not a size; give a positive number of MB")
    return kinds, seeds, comma_list(args.validation_models)


def _main(args) -> int:
    kinds, seeds, val_models = _parse(args)
    setup_logging()
    import logging

    from autotune.costmodel import create_seeded
    from autotune.costmodel.data import load_selection_split, validation_parts
    from autotune.costmodel.ensemble import within_task_scale
    from autotune.costmodel.metrics import task_mean_top_k
    from autotune.costmodel.train import hparams_for
    log = logging.getLogger("autotune.experiments.ensemble_select")
    held_out = comma_list(args.held_out) if args.held_out else None
    data, fit_keys, val_by_model = load_selection_split(args.dataset, held_out, val_models)
    split = validation_parts(data, fit_keys, val_by_model)
    fit, val, masks = split.fit, split.val, split.masks
    log.info("fit: %d programs / %d tasks; validation: %s", len(fit), split.fit_tasks,
             {m: int(mask.sum()) for m, mask in masks.items()})
    os.makedirs(args.cache, exist_ok=True)

    def cached(kind: str, seed: int):
        path = os.path.join(args.cache, f"{kind}-s{seed}.npz")
        params = hparams_for(kind)
        key = split.fit_key(kind, params, seed)
        z = split.cached_fit(path, key, args.summarize_only)
        if z is not None:
            return z["val"], tuple(z["norm"]), float(z["fit_s"])
        if args.summarize_only:
            return None
        t0 = time.time()
        model = create_seeded(kind, seed, **params).fit(fit.batch, fit.y, fit.groups)
        fit_s = time.time() - t0
        norm = within_task_scale(model.predict(fit.batch), fit.groups)
        pred = model.predict(val.batch)
        np.savez(path, val=pred, norm=np.asarray(norm), fit_s=np.asarray(fit_s), key=np.asarray(key))
        log.info("%s seed %d: fit %.0f s", kind, seed, fit_s)
        return pred, norm, fit_s

    preds: dict = {}
    for seed in seeds:
        for kind in kinds:
            got = cached(kind, seed)
            if got is not None:
                preds[(kind, seed)] = got
    have = [k for k in kinds if all((k, s) in preds for s in seeds)]
    if len(have) < 2:
        raise UserError(f"--summarize-only: the cache {args.cache} has all seeds of fewer than 2 candidates; run without it")

    def score(combo, seed) -> dict:
        z = sum((preds[(k, seed)][0] - preds[(k, seed)][1][0]) / preds[(k, seed)][1][1] for k in combo) / len(combo)
        return {"task_top1": task_mean_top_k(val.latency, z, val.groups, 1), **split.score(z)}

    def sd(values):
        return float(np.std(values, ddof=1)) if len(values) > 1 else None

    rows = []
    for r in range(1, min(args.max_members, len(have)) + 1):
        for combo in itertools.combinations(have, r):
            runs = [score(combo, s) for s in seeds]
            rows.append({"members": list(combo), "runs": runs,
                         **{m: float(np.mean([x[m] for x in runs])) for m in ("task_top1", "top1", "top5")},
                         "task_top1_sd": sd([x["task_top1"] for x in runs]), "top1_sd": sd([x["top1"] for x in runs])})
    from autotune.costmodel.comparison import folder_bytes

    hw_dir = os.path.join(args.models_dir, data.manifest["hardware"]["hardware_id"])
    sizes = {k: folder_bytes(os.path.join(hw_dir, k)) for k in have
             if os.path.exists(os.path.join(hw_dir, k, "model.json"))}
    for row in rows:
        row["bytes"] = sum(sizes[k] for k in row["members"]) if all(k in sizes for k in row["members"]) else None
        row["within_size_bound"] = row["bytes"] is None or row["bytes"] <= args.max_model_mb * 1e6
    rows.sort(key=lambda r: -r[OBJECTIVE])
    eligible = [r for r in rows if len(r["members"]) >= 2 and r["within_size_bound"]]
    if not eligible:
        raise UserError(f"--max-model-mb: no committee of these candidates fits in {args.max_model_mb} MB")
    best = eligible[0]
    result = {"dataset": os.path.relpath(os.path.abspath(args.dataset), ROOT), "candidates": have,
              "missing": [k for k in kinds if k not in have], "seeds": seeds, "validation_models": val_models,
              "fit_programs": len(fit), "fit_tasks": split.fit_tasks,
              "validation_programs": {m: int(mask.sum()) for m, mask in masks.items()},
              "fit_seconds": {f"{k}-s{s}": v[2] for (k, s), v in preds.items()},
              "rows": rows, "best": best["members"], "max_model_mb": args.max_model_mb,
              "member_bytes": sizes, "member_bytes_from": os.path.relpath(os.path.abspath(hw_dir), ROOT), "measured_on": host_cpu(), "loadavg": loadavg(),
              "git_commit": git_commit()}
    write_results(os.path.join(args.out, "ensemble_select.json"), result, os.path.join(args.out, "ensemble_select.md"),
                  markdown(result))
    log.info("best committee on validation: %s (task-mean top-1 %.3f)", " + ".join(best["members"]), best[OBJECTIVE])
    return 0


def markdown(result: dict) -> str:
    seeds = ", ".join(map(str, result["seeds"]))
    lines = [
        "# Choosing the `ensemble` cost model's members on validation networks",
        "",
        f"Command: `python experiments/costmodel/ensemble_select.py --seeds {','.join(map(str, result['seeds']))}`. "
        f"Fit on {result['fit_programs']} programs of {result['fit_tasks']} training tasks; validation networks "
        f"(training models set aside, never the held-out ones): "
        + ", ".join(f"{m} ({n} programs)" for m, n in result["validation_programs"].items())
        + f". Seeds {seeds}; measured on {result['measured_on']}.",
        "",
        f"Best committee (2 or more members): **{' + '.join(result['best'])}**, by task-mean top-1 (mean over the "
        "validation tasks of best / picked latency, every task once). Each member centred and scaled by its own "
        "fit-set scores (`autotune.costmodel.ensemble.within_task_scale`), averaged; one member = the kind alone. "
        "Every column is a mean over seeds; `top-1` / `top-5` are the networks' weighted TenSet scores (mean over "
        "the three), decided by each network's few heaviest tasks."
        + f" Size: the sum of the members' saved models in `{result['member_bytes_from']}/` (the configs the "
        f"ensemble ships with); committees over {result['max_model_mb']:g} MB are marked (over) and not chosen."
        + (f" Not fitted: {', '.join(result['missing'])}." if result["missing"] else ""),
        "",
        "| members | task-mean top-1 | ± sd | top-1 | ± sd | top-5 | "
        + " | ".join(f"{m} top-1" for m in result["validation_programs"]) + " | MB |",
        "|---|---|---|---|---|---|" + "---|" * len(result["validation_programs"]) + "---|",
    ]

    def pm(v):
        return "—" if v is None else f"{v:.3f}"

    def mb(n):
        return "?" if n is None else f"{n / 1e6:.1f}"

    for r in result["rows"]:
        per = {m: np.mean([x["per_model_top1"][m] for x in r["runs"]]) for m in result["validation_programs"]}
        lines.append(f"| {' + '.join(r['members'])} | {r['task_top1']:.3f} | {pm(r['task_top1_sd'])} | {r['top1']:.3f} | "
                     f"{pm(r['top1_sd'])} | {r['top5']:.3f} | " + " | ".join(f"{v:.3f}" for v in per.values())
                     + f" | {mb(r['bytes'])}" + ("" if r["within_size_bound"] else " (over)") + " |")
    lines += ["", "Fit seconds (this machine, fit set): " + ", ".join(
        f"{k} {v:.0f}" for k, v in sorted(result["fit_seconds"].items())), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
