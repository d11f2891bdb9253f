"""How a seed ensemble should combine its members: chosen on validation networks, never on the held-out ones.

A seed ensemble (``seq-lstm-x3``: one kind fitted with several seeds) averages its members' scaled scores.
Held-out top-1 is lost mostly to a few picks several times slower than their task's best, picks some member
overrates; a lower confidence bound, mean - k x the members' spread, ranks a program high only when the
members agree. This script chooses k (and compares the members' min and median) the way
``ensemble_select.py`` chooses committees: three *training* networks (``--validation-models``) are set aside,
``--kind`` is fitted on the remaining training tasks once per seed of ``--seeds``, and every group of
``--members`` seeds is scored on the validation networks under each rule (members centred and scaled by their
own fit-set scores, exactly as ``EnsembleCostModel``). The rule with the best validation top-1 (TenSet's
weighted top-1, mean over the validation networks, then over every group of seeds) is the one the registered
``seq-lstm-lcb`` uses; its held-out numbers then come from ``make train-costmodel`` like every other row.

The test networks are never read here (the script runs inside ``splits.selection()``); the rules' held-out
numbers, once a rule is chosen, come from ``make train-costmodel``. (Until issue 47 a ``--saved-ensemble`` option
also scored one saved ensemble on the held-out models "for reference"; it was removed with the enforced split.)

Each fit's validation scores and fit-set scale are cached under ``--cache`` (``.npz``, no pickles; keyed by the
kind's settings, the seed, the dataset's manifest and the split: anything else is fitted again), so a stopped
run resumes and ``--summarize-only`` rebuilds the table. Writes ``<out>/risk_select.{json,md}`` (``results/`` for
the main dataset's hardware, ``results/<hardware id>/`` for another).

    python experiments/costmodel/risk_select.py --dataset datasets/cpu-rocketlake-2c --seeds 0,1,2,3,4,5
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

VALIDATION_MODELS = ",".join(splits.VALIDATION_MODELS)
RISKS = (0.0, 0.5, 1.0, 1.5, 2.0)
OBJECTIVE = "top1"


def risk_rule(k: float) -> str:
    return f"mean - {k:g} sd" if k else "mean"


RISK_RULES = {risk_rule(k): k for k in RISKS}  # the rules the choice is made among -> their risk


def rules() -> dict:
    """rule name -> f(scaled member scores [members, programs]) -> the score vectors it is judged by (their
    scores averaged): one for a combination, one per member for the members alone (what one seed gives)."""
    out = {name: (lambda m, k=k: [m.mean(0) - k * m.std(0)]) for name, k in RISK_RULES.items()}
    out["min"] = lambda m: [m.min(0)]
    out["median"] = lambda m: [np.median(m, 0)]
    out["single member (mean over members)"] = lambda m: list(m)
    return out


def mean_scores(scores: list[dict]) -> dict:
    """The average of ``ValidationSplit.score`` / ``evaluate`` results, per metric and per network."""
    return {"top1": float(np.mean([x["top1"] for x in scores])), "top5": float(np.mean([x["top5"] for x in scores])),
            "per_model_top1": {m: float(np.mean([x["per_model_top1"][m] for x in scores]))
                               for m in scores[0]["per_model_top1"]}}


def main(argv=None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--kind", default="seq-lstm", help="the ensemble's member kind (default: %(default)s)")
    ap.add_argument("--members", type=int, default=3, help="seeds per ensemble (default: %(default)s)")
    ap.add_argument("--seeds", default="0,1,2,3,4,5", help="fit seeds; every group of --members is scored")
    ap.add_argument("--held-out", default=None, help="the held-out models, never used here (default: the comparison's)")
    ap.add_argument("--validation-models", default=VALIDATION_MODELS)
    ap.add_argument("--cache", default=None, help="per-fit cache (default: <out>/risk_select)")
    ap.add_argument("--out", default=None, help="results folder (default: the comparison's for this dataset)")
    ap.add_argument("--quick", action="store_true", help="the CI's small settings for --kind (a smoke test)")
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the table from the cache")
    args = ap.parse_args(argv)
    return run_main(lambda: _selected(args))


def _selected(args) -> int:
    with splits.selection():  # the test split raises in here (splits.TestSplitForbidden)
        return _main(args)


def _main(args) -> int:
    from autotune.costmodel import REGISTRY, create_seeded, model_class
    from autotune.costmodel.comparison import resolve_results
    from autotune.costmodel.data import load_selection_split, validation_parts
    from autotune.costmodel.ensemble import EnsembleCostModel, within_task_scale
    from autotune.costmodel.train import params_for

    if args.kind not in REGISTRY or args.kind == "random" or issubclass(model_class(args.kind), EnsembleCostModel):
        raise UserError(f"--kind: {args.kind!r} is not a single seeded model; valid: "
                        f"{', '.join(k for k in REGISTRY if k != 'random' and not issubclass(model_class(k), EnsembleCostModel))}")
    seeds = seed_list(args.seeds)
    if args.members < 2 or len(seeds) < args.members:
        raise UserError(f"--members {args.members} with --seeds {args.seeds}: need 2 or more members and at least "
                        "that many seeds")
    setup_logging()
    import logging

    log = logging.getLogger("autotune.experiments.risk_select")
    held_out = comma_list(args.held_out) if args.held_out else None
    val_models = comma_list(args.validation_models)
    data, fit_keys, val_by_model = load_selection_split(args.dataset, held_out, val_models)
    split = validation_parts(data, fit_keys, val_by_model)
    out = args.out or resolve_results(None, data.manifest["hardware"]["hardware_id"])
    cache = args.cache or os.path.join(out, "risk_select")
    fit, val, masks = split.fit, split.val, split.masks
    log.info("fit: %d programs / %d tasks; validation: %s", len(fit), split.fit_tasks,
             {m: int(mask.sum()) for m, mask in masks.items()})
    os.makedirs(cache, exist_ok=True)
    params = params_for(args.kind, args.quick)

    def scaled(seed: int):
        path = os.path.join(cache, f"{args.kind}{'-quick' if args.quick else ''}-s{seed}.npz")
        key = split.fit_key(args.kind, params, seed)
        z = split.cached_fit(path, key, args.summarize_only)
        if z is not None:
            return z["val"], float(z["fit_s"])
        if args.summarize_only:
            return None
        t0 = time.time()
        model = create_seeded(args.kind, seed, **params).fit(fit.batch, fit.y, fit.groups)
        fit_s = time.time() - t0
        mu, sd = within_task_scale(model.predict(fit.batch), fit.groups)
        z = (model.predict(val.batch) - mu) / sd
        np.savez(path, val=z, fit_s=np.asarray(fit_s), key=np.asarray(key))
        log.info("%s seed %d: fit %.0f s", args.kind, seed, fit_s)
        return z, fit_s

    fits = {s: got for s in seeds if (got := scaled(s)) is not None}
    have = sorted(fits)
    if len(have) < args.members:
        raise UserError(f"--summarize-only: the cache {cache} holds {len(have)} fit(s); need {args.members}")

    groups = list(itertools.combinations(have, args.members))
    rows = []
    for name, rule in rules().items():
        runs = []
        for group in groups:
            runs.append(mean_scores([split.score(z) for z in rule(np.stack([fits[s][0] for s in group]))]))
        rows.append({"rule": name, "runs": runs, "groups": [list(g) for g in groups],
                     **{k: float(np.mean([r[k] for r in runs])) for k in ("top1", "top5")},
                     "top1_sd": float(np.std([r["top1"] for r in runs], ddof=1)) if len(runs) > 1 else None})
    best = max((r for r in rows if r["rule"] in RISK_RULES),
               key=lambda r: (round(r[OBJECTIVE], 6), -RISK_RULES[r["rule"]]))
    risk = RISK_RULES[best["rule"]]
    result = {"dataset": os.path.relpath(os.path.abspath(args.dataset), ROOT), "kind": args.kind,
              "members": args.members, "seeds": have, "validation_models": val_models,
              "held_out": held_out or "the dataset's test networks (splits.TEST_MODELS)",
              "fit_programs": len(fit), "fit_tasks": split.fit_tasks,
              "validation_programs": {m: int(mask.sum()) for m, mask in masks.items()},
              "fit_seconds": {str(s): fits[s][1] for s in have}, "rows": rows, "objective": OBJECTIVE,
              "best_rule": best["rule"], "best_risk": risk, "quick": args.quick,
              "measured_on": host_cpu(), "loadavg": loadavg(), "git_commit": git_commit()}
    write_results(os.path.join(out, "risk_select.json"), result, os.path.join(out, "risk_select.md"), markdown(result))
    log.info("best rule on validation: %s (top-1 %.3f)", best["rule"], best[OBJECTIVE])
    return 0


def markdown(result: dict) -> str:
    lines = [f"# How a seed ensemble of {result['kind']} combines its members (chosen on validation networks)", "",
             f"Dataset `{result['dataset']}`; the test networks are never read here (`splits.selection()`). "
             f"{result['kind']} fitted on {result['fit_programs']} programs of {result['fit_tasks']} training tasks "
             f"once per seed {', '.join(map(str, result['seeds']))}; scored on the validation networks "
             f"{', '.join(f'{m} ({n} programs)' for m, n in result['validation_programs'].items())}. Each row: every "
             f"group of {result['members']} seeds ({len(result['rows'][0]['groups'])} groups) combined by the rule, "
             "TenSet's weighted top-1 / top-5 (the models' own task weights), mean over the validation networks, "
             "then mean ± sd over the groups. Members are on their own fit-set scale (centred, divided by the mean "
             "within-task sd), as in `EnsembleCostModel`.", "",
             "| rule | validation top-1 | validation top-5 |", "|---|---|---|"]
    for r in result["rows"]:
        sd = "" if r["top1_sd"] is None else f" ± {r['top1_sd']:.3f}"
        bold = "**" if r["rule"] == result["best_rule"] else ""
        lines.append(f"| {bold}{r['rule']}{bold} | {r['top1']:.3f}{sd} | {r['top5']:.3f} |")
    lines += ["", f"Chosen (best validation {result['objective']} among the mean - k sd rules, the smaller k on a tie): "
              f"**{result['best_rule']}** (risk {result['best_risk']:g}). Fit seconds per seed: "
              + ", ".join(f"{s}: {v:.0f}" for s, v in result["fit_seconds"].items())
              + f". Measured on {result['measured_on']}, load {result['loadavg']}, commit {result['git_commit']}.", "",
              "Reproduce: `python experiments/costmodel/risk_select.py --dataset " + result["dataset"]
              + f" --kind {result['kind']} --members {result['members']} --seeds {','.join(map(str, result['seeds']))}"
              + f" --validation-models {','.join(result['validation_models'])}"
              + (" --quick" if result["quick"] else "")
              + "`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
