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

With ``--saved-ensemble PATH`` (a saved seed ensemble, e.g. the first seed ``make train-costmodel`` saved), the same
rules are also applied to its members on the held-out models, for reference only: one ensemble, never used to
choose (this is how the question arose: see the table's last section).

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
sys.path.insert(0, ROOT)

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
from autotune.errors import UserError  # noqa: E402

VALIDATION_MODELS = "resnet18,mobilenet_v3_small,gpt2"  # as ensemble_select.py: one per held-out family
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
    ap.add_argument("--saved-ensemble", default=None,
                    help="a saved seed ensemble of --kind: the rules applied to its members on the held-out models, "
                         "reported for reference (never used to choose)")
    ap.add_argument("--quick", action="store_true", help="the CI's small settings for --kind (a smoke test)")
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the table from the cache")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    from autotune.costmodel import REGISTRY, create_seeded, model_class
    from autotune.costmodel.data import load_split, validation_split
    from autotune.costmodel.ensemble import EnsembleCostModel, within_task_scale
    from autotune.costmodel.train import params_for, resolve_results
    from autotune.data.splits import HELD_OUT_MODELS

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
    held_out = comma_list(args.held_out) if args.held_out else list(HELD_OUT_MODELS)
    val_models = comma_list(args.validation_models)
    data, train_keys, test_keys = load_split(args.dataset, held_out)
    split = validation_split(data, train_keys, held_out, val_models)
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
    reference = held_out_reference(args.saved_ensemble, args.kind, data, test_keys) if args.saved_ensemble else None
    best = max((r for r in rows if r["rule"] in RISK_RULES),
               key=lambda r: (round(r[OBJECTIVE], 6), -RISK_RULES[r["rule"]]))
    risk = RISK_RULES[best["rule"]]
    result = {"dataset": os.path.relpath(os.path.abspath(args.dataset), ROOT), "kind": args.kind,
              "members": args.members, "seeds": have, "validation_models": val_models, "held_out": held_out,
              "fit_programs": len(fit), "fit_tasks": split.fit_tasks,
              "validation_programs": {m: int(mask.sum()) for m, mask in masks.items()},
              "fit_seconds": {str(s): fits[s][1] for s in have}, "rows": rows, "objective": OBJECTIVE,
              "best_rule": best["rule"], "best_risk": risk, "quick": args.quick, "held_out_reference": reference,
              "measured_on": host_cpu(), "loadavg": loadavg(), "git_commit": git_commit()}
    write_results(os.path.join(out, "risk_select.json"), result, os.path.join(out, "risk_select.md"), markdown(result))
    log.info("best rule on validation: %s (top-1 %.3f)", best["rule"], best[OBJECTIVE])
    return 0


def held_out_reference(path: str, kind: str, data, test_keys: dict[str, list[str]]) -> dict:
    """The rules applied to a saved seed ensemble's members on the held-out models (view ``all``, the
    comparison's metrics): {path, members' seeds, rows: [{rule, top1, top5, per_model_top1}]}."""
    from autotune.costmodel import ModelFileError, load
    from autotune.costmodel.ensemble import EnsembleCostModel
    from autotune.costmodel.evaluate import evaluate

    try:
        model = load(path)
    except (OSError, ModelFileError, ValueError) as err:
        raise UserError(f"--saved-ensemble: {path}: {err}") from None
    if not isinstance(model, EnsembleCostModel) or set(model.members) != {kind}:
        raise UserError(f"--saved-ensemble: {path} is not a seed ensemble of {kind} "
                        f"(members: {getattr(model, 'members', type(model).__name__)})")
    held_out = list(test_keys)

    class Rule:
        def __init__(self, f):
            self.f = f

        def predict(self, batch):
            return self.f(model.member_scores(batch))

    def scores(f) -> dict:
        got = evaluate(Rule(f), data, test_keys, views=("all",))["views"]["all"]
        return {"top1": got["mean"]["top1"], "top5": got["mean"]["top5"],
                "per_model_top1": {m: got[m]["top1"] for m in held_out if m in got}}

    rows = []
    for name, rule in rules().items():
        vectors = len(rule(np.zeros((len(model.members), 1))))  # how many score vectors the rule gives
        runs = [scores(lambda m, i=i, rule=rule: rule(m)[i]) for i in range(vectors)]
        rows.append({"rule": name, **mean_scores(runs)})
    return {"path": os.path.relpath(os.path.abspath(path), ROOT), "member_seeds": model.member_seeds(), "rows": rows}


def markdown(result: dict) -> str:
    lines = [f"# How a seed ensemble of {result['kind']} combines its members (chosen on validation networks)", "",
             f"Dataset `{result['dataset']}`; held-out models ({', '.join(result['held_out'])}) never used. "
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
              + f" --held-out {','.join(result['held_out'])} --validation-models {','.join(result['validation_models'])}"
              + (" --quick" if result["quick"] else "")
              + (f" --saved-ensemble {result['held_out_reference']['path']}" if result.get("held_out_reference") else "")
              + "`", ""]
    ref = result.get("held_out_reference")
    if ref:
        lines += ["## For reference only: the rules on the held-out models (one saved ensemble)", "",
                  f"`{ref['path']}` (member seeds {', '.join(map(str, ref['member_seeds']))}), view `all`, mean over "
                  f"{', '.join(result['held_out'])}. One ensemble on the test networks: not used to choose the rule, "
                  "and no claim — the validation table above is the evidence.", "",
                  "| rule | held-out top-1 | held-out top-5 | " + " | ".join(result["held_out"]) + " |",
                  "|---|---|---|" + "---|" * len(result["held_out"])]
        for r in ref["rows"]:
            lines.append(f"| {r['rule']} | {r['top1']:.3f} | {r['top5']:.3f} | "
                         + " | ".join(f"{r['per_model_top1'].get(m, float('nan')):.3f}" for m in result["held_out"]) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
