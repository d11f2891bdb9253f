"""Leave-one-hardware-out (issue 48): one cost model over every CPU with a dataset, scored on the CPU left out.

For each CPU dataset as the *target*, trained on the others (the *sources*), scored on the target's labels of
the test networks (resnet50, mobilenet_v2, bert_base: no task of theirs is trained on, on any CPU) and of the
validation networks (resnet18, mobilenet_v3_small, gpt2: likewise never trained on; every choice reads these):

- ``own``: the target's own model on 100 % of its training programs (the ceiling, TCL's reference);
- ``single:<cpu>``: each source's own model as is; ``nearest`` is the one today's ``auto`` would take
  (``tuning.costmodels.hardware_distance``), ``best-single`` the best of them on the *test* networks (an
  oracle choice: it makes the baseline stronger, never ours);
- ``pooled``: XGBoost on every source's programs, labels normalised per (CPU, task), each (CPU, task) its own
  ranking group, the plain 164 pack-summed features: what "pooling" meant before;
- ``pooled-hw``: the same with ``hardware_features`` (``autotune.hardware``: roofline terms, vector and
  parallel extents against lanes and cores, working set against caches, the CPU's descriptor);
- few-shot, with 1 %, 5 %, 10 % of the target's training programs measured (whole task batches,
  ``transfer.sample_fraction``; the same programs for every method of a (fraction, seed)), and ``calib``: what
  ``autotune.calibrate`` would measure (its coverage-chosen tasks, ``choose_tasks``, with up to its programs per
  task drawn from the target's data) — for each: ``target-only``
  (the model fitted on them alone, baseline b), ``finetune:<base>`` (more boosting rounds from the base's
  trees on them) and ``residual:<base>`` (a small ranking booster fitted on top of the base's scores as
  margins; the base is untouched, so nothing is forgotten on the sources; on pooled-hw it is
  ``XGBCostModel.boost_more``, shallow trees added to the base's, which ``autotune.calibrate`` can run), for base =
  nearest and pooled-hw (the plain pool is read zero-shot only).

Every fit is one JSON line in ``<out>/runs.jsonl`` as it finishes (resumable: a rerun skips lines already
there); then ``loho.json`` / ``loho.md`` and ``loho.png``. Hyperparameters: the shipped ``xgb`` recipe
(``models/hparams/xgb.json``) for every full fit.

    python experiments/transfer/loho.py                         # the four CPU sets, seeds 0,1,2
    python experiments/transfer/loho.py --summarize-only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

import numpy as np  # noqa: E402

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

DATASETS = "datasets/cpu-znver3-2c,datasets/cpu-znver4-2c,datasets/cpu-rocketlake-2c,datasets/cpu-x86-64-v2-1c"
QUICK_DATASETS = "experiments/transfer/data/cpu-znver3-2c,experiments/transfer/data/cpu-x86-64-v2-1c"
FRACTIONS = "0.01,0.05,0.1"
KINDS = ("xgb", "ms-mlp")
FINETUNE_STEPS = {"xgb": 60, "ms-mlp": 150}  # boosting rounds / optimizer steps on the target's programs
RESIDUAL = {"max_depth": 4, "eta": 0.1, "rounds": 80, "min_child_weight": 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/transfer/loho.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=DATASETS, help="comma-separated CPU datasets over the same tasks "
                                                         "(default: %(default)s)")
    ap.add_argument("--seeds", default="0,1,2", help="few-shot draws and fit seeds (default: %(default)s)")
    ap.add_argument("--fractions", default=FRACTIONS, help="shares of the target measured (default: %(default)s)")
    ap.add_argument("--kind", default="xgb", choices=KINDS, help="model family (default: %(default)s)")
    ap.add_argument("--out", default=None, help="results folder (default: results/loho/<kind>)")
    ap.add_argument("--quick", action="store_true", help="the committed two-CPU slices, small fits (CI smoke)")
    ap.add_argument("--summarize-only", action="store_true", help="no fits: the tables from runs.jsonl")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


# ---- data ----

def load_cpus(paths: list[str]) -> dict:
    """hardware id -> TrainingData (with each program's CPU descriptor). Bad input: one UserError line."""
    from autotune.costmodel.data import load_training_data
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.store import DatasetError

    out = {}
    for path in paths:
        try:
            data = load_training_data(path)
        except (DatasetError, StaleFeatureCache) as err:
            raise UserError(f"--datasets: {err}") from None
        hw = data.manifest["hardware"]["hardware_id"]
        if hw in out:
            raise UserError(f"--datasets: {path} is {hw} again; give one dataset per CPU")
        if data.manifest["hardware"].get("target", {}).get("kind") != "llvm":
            raise UserError(f"--datasets: {path} is not a CPU (llvm) dataset; accepted: CPU datasets")
        out[hw] = data
    if len(out) < 2:
        raise UserError("--datasets: give at least two CPU datasets (one to hold out, one to train on)")
    return out


def split_keys(cpus: dict) -> tuple[set, dict, dict]:
    """(task keys trained on nowhere, test network -> keys, validation network -> keys): a task any test or
    validation network uses, on any CPU, is trained on by no model."""
    from autotune.data.splits import TEST_MODELS, VALIDATION_MODELS

    excluded: set = set()
    for data in cpus.values():
        for key in data.task_keys:
            if set(data.tasks[key]["models"]) & (set(TEST_MODELS) | set(VALIDATION_MODELS)):
                excluded.add(key)
    return excluded, list(TEST_MODELS), list(VALIDATION_MODELS)


def by_model(data, models: list[str]) -> dict:
    return {m: [k for k in data.task_keys if m in data.tasks[k]["models"]] for m in models
            if any(m in data.tasks[k]["models"] for k in data.task_keys)}


def training_part(data, excluded: set):
    return data.select_tasks([k for k in data.task_keys if k not in excluded])


# ---- models ----

def kind_params(kind: str, quick: bool) -> dict:
    from autotune.costmodel.train import params_for

    params = params_for(kind, quick=quick)
    params["nthread" if kind == "xgb" else "num_threads"] = 2
    return params


def fit_kind(kind: str, params: dict, batch, y, groups, seed: int, hardware: bool):
    from autotune.costmodel import create

    return create(kind, **{**params, "seed": seed, "hardware_features": hardware}).fit(batch, y, groups)


class ResidualRanker:
    """A base model's scores as margins plus a small ranking booster fitted on the target's programs: the base
    is not changed, so its sources lose nothing (TenSet's ``plus_mix_task`` for a ranking objective)."""

    def __init__(self, base, batch, y, groups, seed: int, quick: bool):
        import xgboost as xgb

        from autotune.costmodel.xgb import _sorted_by_group

        self.base = base
        order, counts = _sorted_by_group(groups)
        feats = self._feats(batch)
        dtrain = xgb.DMatrix(feats[order], label=y[order], base_margin=base.predict(batch)[order])
        dtrain.set_group(counts)
        params = {"objective": "rank:pairwise", "max_depth": RESIDUAL["max_depth"], "eta": RESIDUAL["eta"],
                  "min_child_weight": RESIDUAL["min_child_weight"], "subsample": 0.9, "seed": seed, "nthread": 2,
                  "tree_method": "hist", "verbosity": 0}
        self.booster = xgb.train(params, dtrain, num_boost_round=10 if quick else RESIDUAL["rounds"])

    @staticmethod
    def _feats(batch):
        from autotune.hardware import program_features

        return np.concatenate([batch.packsum(), program_features(batch.store_feats, batch.offsets, batch.hw)], axis=1)

    def predict(self, batch):
        return self.base.predict(batch) + self.booster.inplace_predict(self._feats(batch))


def nearest_source(target_hw: str, sources: list[str], cpus: dict) -> str:
    from autotune.tuning.costmodels import hardware_distance

    ours = cpus[target_hw].manifest["hardware"]["target"]
    dist = {s: hardware_distance(ours, cpus[s].manifest["hardware"]["target"]) for s in sources}
    return min(sources, key=lambda s: (dist[s], s))


def score(model, data, keys_by_model: dict) -> dict:
    from autotune.costmodel.evaluate import evaluate

    res = evaluate(model, data, keys_by_model, views=("all",))
    return {m: {"top1": v["top1"], "top5": v["top5"], "pairwise": v["pairwise"]} for m, v in res.items()
            if m != "views"}


# ---- the run ----

def _main(args) -> int:
    fractions = [float(f) for f in comma_list(args.fractions)]
    if any(not 0 < f < 1 for f in fractions):
        raise UserError(f"--fractions: {args.fractions!r}; accepted: comma-separated shares in (0, 1)")
    seeds = seed_list(args.seeds)
    out = args.out or os.path.join(HERE, "results", "loho" + ("_quick" if args.quick else ""), args.kind)
    os.makedirs(out, exist_ok=True)
    runs_path = os.path.join(out, "runs.jsonl")
    if not args.summarize_only:
        setup_logging()
        paths = comma_list(QUICK_DATASETS if args.quick and args.datasets == DATASETS else args.datasets)
        run_all(args.kind, load_cpus(paths), fractions, seeds[:1] if args.quick else seeds, runs_path, args.quick)
    return summarize(runs_path, out, args.kind)


def _done(path: str) -> dict:
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    out[row["key"]] = row
    return out


def run_all(kind: str, cpus: dict, fractions: list[float], seeds: list[int], runs_path: str, quick: bool) -> None:
    from autotune.costmodel.pooled import stack
    from autotune.costmodel.transfer.base import sample_fraction

    done = _done(runs_path)
    excluded, test_models, val_models = split_keys(cpus)
    params = kind_params(kind, quick)
    steps = 10 if quick else FINETUNE_STEPS[kind]
    train = {hw: training_part(d, excluded) for hw, d in cpus.items()}
    own: dict = {}  # hw -> seed -> its own model (seed 0 only: the sources' models are fixed references)

    def record(key: str, target: str, arm: str, fraction, seed, model, n_train: int, started: float, **extra):
        row = {"key": key, "target": target, "arm": arm, "fraction": fraction, "seed": seed, "n_train": n_train,
               "val": score(model, cpus[target], by_model(cpus[target], val_models)),
               "test": score(model, cpus[target], by_model(cpus[target], test_models)),
               "fit_s": round(time.time() - started, 1), "load": loadavg(), "host": host_cpu(),
               "commit": git_commit(), **extra}
        with open(runs_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        done[key] = row
        print(f"{target} {arm} f={fraction} s={seed}: test top-1 {_mean(row['test']):.3f} "
              f"val {_mean(row['val']):.3f} ({row['fit_s']} s)", flush=True)

    def own_model(hw: str):
        if hw not in own:
            t = train[hw]
            own[hw] = fit_kind(kind, params, t.batch, t.y, t.groups, 0, hardware=False)
        return own[hw]

    for target in cpus:
        sources = [h for h in cpus if h != target]
        started = time.time()
        key = f"{target}|own"
        if key not in done:
            record(key, target, "own", 1.0, 0, own_model(target), len(train[target]), started)
        nearest = nearest_source(target, sources, cpus)
        for src in sources:
            key = f"{target}|single:{src}"
            if key not in done:
                started = time.time()
                record(key, target, f"single:{src}", 0.0, 0, own_model(src), len(train[src]), started,
                       nearest=src == nearest)
        # few-shot from today's choice (the nearest CPU's model) and from the CPU-spanning model; the plain pool
        # (no hardware features) is read zero-shot only, the control for what the features add
        bases = {"nearest": None, "pooled-hw": None}
        methods = ("finetune", "residual") if kind == "xgb" else ("finetune",)
        batch, y, groups = stack([train[s] for s in sources])  # labels normalised per (CPU, task)
        for arm, hw_feats in (("pooled", False), ("pooled-hw", True)):
            key = f"{target}|{arm}"
            needed = key not in done or (arm in bases and any(f"{target}|{m}:{arm}|{f}|{s}" not in done
                                                              for m in methods for f in [*fractions, "calib"]
                                                              for s in seeds))
            if needed:
                started = time.time()
                model = fit_kind(kind, params, batch, y, groups, 0, hardware=hw_feats)
                if arm in bases:
                    bases[arm] = model
                if key not in done:
                    record(key, target, arm, 0.0, 0, model, len(y), started, sources=sources)
        bases["nearest"] = own_model(nearest)
        tgt = train[target]
        for fraction in [*fractions, "calib"]:
            for seed in seeds:
                if fraction == "calib":
                    idx = calib_sample(tgt, seed, quick)
                else:
                    rng = np.random.default_rng(np.random.SeedSequence([seed, int(round(fraction * 1e6))]))
                    idx = sample_fraction(tgt.groups, fraction, rng)
                part = tgt.subset(idx)
                key = f"{target}|target-only|{fraction}|{seed}"
                if key not in done:
                    started = time.time()
                    record(key, target, "target-only", fraction, seed,
                           fit_kind(kind, params, part.batch, part.y, part.groups, seed, hardware=False), len(part),
                           started)
                for name, base in bases.items():
                    if base is None:
                        continue
                    key = f"{target}|finetune:{name}|{fraction}|{seed}"
                    if key not in done:
                        started = time.time()
                        model = base.fine_tune(part.batch, part.y, part.groups, steps=steps)
                        record(key, target, f"finetune:{name}", fraction, seed, model, len(part), started)
                    key = f"{target}|residual:{name}|{fraction}|{seed}"
                    if "residual" in methods and key not in done:
                        started = time.time()
                        if getattr(base, "hardware_features", False):  # the same features: what calibrate runs
                            model = base.boost_more(part.batch, part.y, part.groups, 10 if quick else RESIDUAL["rounds"],
                                                    RESIDUAL["max_depth"], RESIDUAL["eta"])
                        else:
                            model = ResidualRanker(base, part.batch, part.y, part.groups, seed, quick)
                        record(key, target, f"residual:{name}", fraction, seed, model, len(part), started)


def calib_sample(part, seed: int, quick: bool) -> np.ndarray:
    """Indices of ``part`` that ``autotune.calibrate`` would have measured: its tasks (``choose_tasks`` over the
    part's tasks with FLOPs), up to its programs per task, drawn at random (the seed draws both)."""
    from autotune.calibrate import DEFAULT_PER_TASK, DEFAULT_TASKS, choose_tasks

    present = sorted({part.task_keys[g] for g in np.unique(part.groups)})
    tasks = {k: part.tasks[k] for k in present if float(part.tasks[k].get("flops", 0)) > 0}
    chosen = choose_tasks(tasks, 8 if quick else DEFAULT_TASKS, seed)
    rng = np.random.default_rng([seed, 7])
    idx = []
    for key in chosen:
        members = np.nonzero(part.groups == part.task_keys.index(key))[0]
        idx.append(rng.choice(members, size=min(DEFAULT_PER_TASK, len(members)), replace=False))
    return np.sort(np.concatenate(idx)) if idx else np.zeros(0, np.int64)


def _mean(scores: dict, metric: str = "top1") -> float:
    return float(np.mean([v[metric] for v in scores.values()])) if scores else float("nan")


# ---- tables ----

def summarize(runs_path: str, out: str, kind: str = "xgb") -> int:
    rows = list(_done(runs_path).values())
    if not rows:
        raise UserError(f"{runs_path}: no runs yet; run without --summarize-only first")
    targets = list(dict.fromkeys(r["target"] for r in rows))
    fractions = sorted({r["fraction"] for r in rows if isinstance(r["fraction"], float) and 0 < r["fraction"] < 1})
    shares = fractions + (["calib"] if any(r["fraction"] == "calib" for r in rows) else [])
    cells: dict = {}
    for r in rows:
        arm = r["arm"]
        if arm.startswith("single:"):
            cells.setdefault((r["target"], "single"), []).append(r)
            if r.get("nearest"):
                cells.setdefault((r["target"], "nearest", 0.0), []).append(r)
            continue
        cells.setdefault((r["target"], arm, r["fraction"]), []).append(r)
    for target in targets:  # best single source on the test networks: an oracle baseline
        singles = cells.get((target, "single"), [])
        if singles:
            cells[(target, "best-single", 0.0)] = [max(singles, key=lambda r: _mean(r["test"]))]
    arms = ["own", "best-single", "nearest", "pooled", "pooled-hw"]
    few = ["target-only"] + [f"{m}:{b}" for b in ("nearest", "pooled", "pooled-hw") for m in ("finetune", "residual")]

    def cell(target, arm, fraction, part="test"):
        got = cells.get((target, arm, fraction), [])
        vals = [_mean(r[part]) for r in got]
        return (float(np.mean(vals)), float(np.std(vals, ddof=1)) if len(vals) > 1 else None, len(vals)) if vals else None

    def fmt(c):
        if c is None:
            return "–"
        mean, sd, n = c
        return f"{mean:.3f}" + (f" ± {sd:.3f}" if sd is not None else "") + (f" ({n})" if n > 1 else "")

    table = {}
    lines = [f"# Leave-one-hardware-out: one `{kind}` cost model over CPUs, scored on the CPU left out", "",
             "Generated by `python experiments/transfer/loho.py` from `runs.jsonl` (one line per fit). Top-1 = TenSet "
             "top-1 on the held-out CPU's own labels, mean over the test networks (resnet50, mobilenet_v2, bert_base); "
             "`val` = the same over the validation networks (resnet18, mobilenet_v3_small, gpt2), which every choice "
             "reads. No task of either is trained on, on any CPU. Few-shot cells: mean ± sd over seeds (draws of the "
             "measured programs), n in brackets. `best-single` is chosen on the test networks (an oracle baseline).",
             "", f"Command: `python experiments/transfer/loho.py --kind {kind}`. Machines: {sorted({r['host'] for r in rows})}; loads {_load_range(rows)}; commits "
             f"{sorted({(r.get('commit') or '')[:10] for r in rows})}.", ""]
    for target in targets:
        lines += [f"## held out: {target}", "", "| arm | " + " | ".join(["zero-shot / full"] +
                  [_share(f) for f in shares]) + " | val (zero-shot / 10 %) |", "|---" * (len(shares) + 3) + "|"]
        for arm in arms:
            c = cell(target, arm, 1.0 if arm == "own" else 0.0)
            if c is None:
                continue
            table[f"{target}|{arm}"] = {"test": c, "val": cell(target, arm, 1.0 if arm == "own" else 0.0, "val")}
            lines.append(f"| {arm} | {fmt(c)} |" + " |" * len(shares) + f" {fmt(table[f'{target}|{arm}']['val'])} |")
        for arm in few:
            cs = [cell(target, arm, f) for f in shares]
            if not any(cs):
                continue
            for f, c in zip(shares, cs):
                table[f"{target}|{arm}|{f}"] = {"test": c, "val": cell(target, arm, f, "val")}
            ten = [f for f in fractions if abs(f - 0.1) < 1e-9]
            last = cell(target, arm, ten[0], "val") if ten else None
            lines.append(f"| {arm} | |" + "".join(f" {fmt(c)} |" for c in cs) + f" {fmt(last)} |")
        lines.append("")
    lines += reading(table, targets, fractions, bool(shares[len(fractions):]))
    write_results(os.path.join(out, "loho.json"), {"cells": table, "runs": len(rows)}, os.path.join(out, "loho.md"),
                  "\n".join(lines) + "\n")
    plot(table, targets, fractions, os.path.join(out, "loho.png"))
    return 0


def _load_range(rows) -> str:
    loads = [r["load"][0] for r in rows if r.get("load")]
    return f"{min(loads):.1f}–{max(loads):.1f} (1-min)" if loads else "not recorded"


def _share(f) -> str:
    return "calib (its tasks x programs)" if f == "calib" else f"{f:.0%}"


def reading(table: dict, targets: list, fractions: list, calib: bool = False) -> list[str]:
    """The done-when quantities of issue 48, computed from the cells (test networks)."""
    def get(target, arm, f=None):
        c = table.get(f"{target}|{arm}" + (f"|{f}" if f is not None else ""))
        return c["test"][0] if c and c["test"] else None

    out = ["## Reading (computed from the cells above)", ""]

    def val(target, arm, f=None):
        c = table.get(f"{target}|{arm}" + (f"|{f}" if f is not None else ""))
        return c["val"][0] if c and c.get("val") else None

    def val_mean(arm, f=None):
        got = [val(t, arm, f) for t in targets]
        return float(np.mean(got)) if got and None not in got else None

    zero = {a: val_mean(a) for a in ("nearest", "pooled", "pooled-hw")}
    zero = {a: v for a, v in zero.items() if v is not None}
    if zero:
        pick = max(zero, key=zero.get)
        out.append("- **Choices, on the validation networks** (mean over the held-out CPUs): zero-shot " +
                   ", ".join(f"{a} {v:.3f}" for a, v in zero.items()) + f"; best `{pick}` (what `auto` takes on a CPU "
                   "without its own model follows this: `tuning.costmodels.AUTO_POOLED_KIND`).")
    if calib:
        few = {a: val_mean(a, "calib") for a in ("target-only", "finetune:nearest", "residual:nearest",
                                                 "finetune:pooled-hw", "residual:pooled-hw")}
        few = {a: v for a, v in few.items() if v is not None}
        if few:
            pick = max(few, key=few.get)
            out.append("- **Calibration's method, on the validation networks** (calibrate's sample, mean over CPUs): " +
                       ", ".join(f"{a} {v:.3f}" for a, v in few.items()) + f"; best `{pick}` (`autotune.calibrate`'s "
                       f"ADAPT and base follow it); the target's own 100 % model: {val_mean('own') or float('nan'):.3f}.")
    zs = [(t, get(t, "pooled-hw"), get(t, "pooled"), get(t, "nearest")) for t in targets]
    zs = [z for z in zs if None not in z]
    if zs:
        out.append(f"- Zero-shot, mean over {len(zs)} held-out CPUs: pooled-hw {np.mean([z[1] for z in zs]):.3f}, "
                   f"pooled {np.mean([z[2] for z in zs]):.3f}, nearest single source {np.mean([z[3] for z in zs]):.3f} "
                   f"(target: pooled-hw ≥ nearest + 0.05: {'met' if np.mean([z[1] - z[3] for z in zs]) >= 0.05 else 'missed'}, "
                   f"difference {np.mean([z[1] - z[3] for z in zs]):+.3f}).")
    if fractions:
        f = max(x for x in fractions if x <= 0.1 + 1e-9) if any(x <= 0.1 + 1e-9 for x in fractions) else None
        if f is not None:
            met = []
            for t in targets:
                ownv = get(t, "own")
                best = max(((get(t, a, f) or -1, a) for a in ("finetune:pooled-hw", "residual:pooled-hw",
                                                             "finetune:pooled", "residual:pooled",
                                                             "finetune:nearest", "residual:nearest")), default=(-1, None))
                if ownv is not None and best[1]:
                    met.append((t, best[0] - ownv, best[1]))
            if met:
                n_ok = sum(d >= -0.02 for _, d, _ in met)
                out.append(f"- With {f:.0%} of the target's programs, best transfer arm minus the target's own 100 % "
                           f"model (chosen per CPU on the test networks, so an upper bound): " +
                           ", ".join(f"{t} {d:+.3f} ({a})" for t, d, a in met) +
                           f"; within 0.02 on {n_ok} of {len(met)} CPUs (target: ≥ 3 of 4).")
    if calib:
        for t in targets:
            got = {a: get(t, a, "calib") for a in ("target-only", "finetune:pooled-hw", "residual:pooled-hw",
                                                  "finetune:nearest", "residual:nearest")}
            got = {a: v for a, v in got.items() if v is not None}
            if got:
                best = max(got, key=got.get)
                out.append(f"- {t}, calibration's sample: " + ", ".join(f"{a} {v:.3f}" for a, v in got.items()) +
                           f"; best {best}, against the bar max(nearest zero-shot, target-only) "
                           f"{max(get(t, 'nearest') or 0, got.get('target-only', 0)):.3f}.")
    out.append("- Forgetting: `residual` keeps its base unchanged (0 on the sources by construction); `finetune` "
               "adds trees fitted on the target to a copy, the sources keep their models.")
    return out + [""]


def plot(table: dict, targets: list, fractions: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not fractions:
        return
    fig, axes = plt.subplots(1, len(targets), figsize=(4.2 * len(targets), 3.6), squeeze=False)
    for ax, target in zip(axes[0], targets):
        for arm in ("target-only", "finetune:pooled-hw", "residual:pooled-hw", "residual:nearest", "residual:pooled"):
            pts = [(f, table.get(f"{target}|{arm}|{f}", {}).get("test")) for f in fractions]
            pts = [(f, c[0]) for f, c in pts if c]
            if pts:
                ax.plot([p[0] * 100 for p in pts], [p[1] for p in pts], marker="o", label=arm)
        for arm, style in (("own", "k--"), ("nearest", "r:"), ("pooled-hw", "g-.")):
            c = table.get(f"{target}|{arm}", {}).get("test")
            if c:
                ax.axhline(c[0], linestyle=style[1:], color=style[0], label=f"{arm} (zero-shot/full)")
        ax.set_title(f"held out: {target}", fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel("% of the target's programs measured")
        ax.set_ylabel("test top-1")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
