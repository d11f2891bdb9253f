"""Where the speedup comes from (protocol v2, issue 47): a chain of arms, each adding one thing to the one before.

    stock MetaSchedule as a user runs it -> + our layouts -> + our loop (no pretrained model) -> + pretrained model
    (no online update) -> + online update (the default)

Each step is read against the step before it, paired by (model, seed), from the measured snapshots:
- "trials to reach": the trials the previous step needed to reach its own final compiled latency over the trials
  this step needed to reach that latency (> 1: fewer trials; "not reached" when this step never got there);
- "final latency": this step's final compiled latency over the previous step's (< 1: faster at equal budget).
Geometric means over the pairs; every row names the pairs it averages. Two summary rows read the same way: the
product features (our loop with our layouts, no pretrained model, against stock as a user runs it) and the learned
model's share (the default against the same loop without a pretrained model) -- what a learning claim is read on.
TVM-free: it reads what real_budget.py kept.
"""

from __future__ import annotations

import numpy as np

# (label, arm): the v2 arms. The budget of every arm is 32 trials per task (one global budget); stock's
# num_trials_per_iter is 8 so its XGBModel guides >= 3/4 of its budget (stock_ms.V2_TRIALS_PER_ITER says why).
CHAIN = (
    ("stock MetaSchedule as a user runs it (NCHW, no weight prepack)", "stock-ms+iter8"),
    ("+ our layouts (layout rewrite + NHWC): a product feature", "stock-ms+lr+nhwc+iter8"),
    ("+ our loop (start-up, 4-trial first rounds, task scheduler), online XGBoost only: a product feature",
     "ms-xgb+lr+nhwc+first4"),
    ("+ pretrained model for this CPU, no online update: the learned model", "auto:none+lr+nhwc+first4"),
    ("+ online update (finetune): the default `make tune`", "auto+lr+nhwc+first4"),
)
# summary rows: (label, arm, against)
SUMMARY = (
    ("product features: our loop + layouts, no pretrained model, vs stock as a user runs it",
     "ms-xgb+lr+nhwc+first4", "stock-ms+iter8"),
    ("the learned model's share: the default vs the same loop and layouts without a pretrained model",
     "auto+lr+nhwc+first4", "ms-xgb+lr+nhwc+first4"),
    ("the default vs same-layout stock (the baseline of every learning claim)",
     "auto+lr+nhwc+first4", "stock-ms+lr+nhwc+iter8"),
    ("the default at 32 trials per task vs same-layout stock at 128 (4x our budget)",
     "auto+lr+nhwc+first4", "stock-ms+lr+nhwc+iter8+x4"),
)
V2_BASELINE = "stock-ms+lr+nhwc+iter8"  # same-layout stock: what every learning claim is read against
# protocol v2's arms: the chain, stock at 4x the budget (seed 0)
V2_ARMS = tuple(a for _, a in CHAIN) + ("stock-ms+lr+nhwc+iter8+x4",)


def geo(values: list[float]) -> float | None:
    return float(np.exp(np.mean(np.log(values)))) if values else None


def trials_to_reach(run: dict, target_ms: float) -> int | None:
    """Records in the first snapshot of ``run`` whose compiled latency is at most ``target_ms`` (None: never)."""
    for s in run["snapshots"]:
        if s["latency_ms"] <= target_ms:
            return int(s["records"])
    return None


def step(runs: list[dict], arm: str, before: str) -> dict:
    """``arm`` against ``before``, paired by (model, seed): the ratios per pair and their geometric means."""
    by = {(r["model"], r["arm"], r["seed"]): r for r in runs if "failed" not in r}
    pairs = sorted((m, k) for (m, a, k) in by if a == arm and (m, before, k) in by)
    per, trial_ratios, final_ratios, unreached = [], [], [], []
    for m, k in pairs:
        mine, prev = by[(m, arm, k)], by[(m, before, k)]
        target = prev["snapshots"][-1]["latency_ms"]
        n = trials_to_reach(mine, target)
        fin = mine["snapshots"][-1]["latency_ms"] / target
        tr = prev["snapshots"][-1]["records"] / n if n else None
        per.append({"model": m, "seed": k, "trials_ratio": tr, "final_ratio": fin})
        final_ratios.append(fin)
        (trial_ratios if tr else unreached).append(tr or f"{m} s{k}")
    return {"arm": arm, "against": before, "pairs": [f"{m} s{k}" for m, k in pairs], "per_pair": per,
            # "reached by" lists only the pairs where it got there: read with "not reached in"
            "trials_ratio_geo": geo([t for t in trial_ratios if t]), "not_reached_in": unreached,
            "final_ratio_geo": geo(final_ratios)}


def attribution(runs: list[dict]) -> dict:
    chain = [dict(step(runs, arm, prev), label=label)
             for (label, arm), (_, prev) in zip(CHAIN[1:], CHAIN[:-1])]
    summary = [dict(step(runs, arm, before), label=label) for label, arm, before in SUMMARY]
    return {"chain": chain, "summary": summary}


def _row(s: dict) -> str:
    if not s["pairs"]:
        return f"| {s['label']} | `{s['arm']}` vs `{s['against']}` | not run | - | - |"
    tr = "-" if s["trials_ratio_geo"] is None else f"{s['trials_ratio_geo']:.2f}x"
    if s["not_reached_in"]:
        tr += f" (not reached in {', '.join(s['not_reached_in'])})"
    return (f"| {s['label']} | `{s['arm']}` vs `{s['against']}` | {', '.join(s['pairs'])} | {tr} | "
            f"{s['final_ratio_geo']:.3f} |")


def markdown_lines(runs: list[dict]) -> list[str]:
    """The generated "where the speedup comes from" table (README claims quote this and nothing else)."""
    att = attribution(runs)
    if not any(s["pairs"] for s in att["chain"] + att["summary"]):
        return []
    head = ["| step | arms | pairs (model, seed) | trials to reach the previous step's final (geo-mean) | "
            "final latency / previous step's (geo-mean) |", "|---|---|---|---|---|"]
    return ["", "## Where the speedup comes from (attribution, protocol v2)", "",
            "Each step against the one before it, paired by model and seed, read off the measured snapshots "
            "(`attribution.py`): trials the previous step needed to reach its own final compiled latency over the "
            "trials this step needed to reach it (only the snapshot grid's points count, so at most 32x is "
            "visible), and final latency over the previous step's at equal budget. Layout and loop gains are "
            "product features; the pretrained model's rows are the learned model's share.", "",
            *head, *[_row(s) for s in att["chain"]], "", "Summary rows:", "", *head,
            *[_row(s) for s in att["summary"]]]
