"""Experiment T1: how much of the data does a cost model need when a sampler picks it? (TCL RDU, BALTO)

    python experiments/active_learning/run.py                 # make experiments-active-learning
    python experiments/active_learning/run.py --quick         # CI: tiny dataset, < 2 min
    python experiments/active_learning/run.py --report-only   # tables, plot, checks from the finished runs

Offline, on measured data: the pool is every program of the dataset's training tasks (held-out
models resnet50, mobilenet_v2, bert_base removed, as for the shipped cost models). Each sampler
picks 2, 5, 10, 20, 50% of the pool in rounds (selection nested: the 5% set holds the 2% set);
samplers that read a model (``needs_model``) start from a random 1% and before each round an
acquisition model with a spread is fitted on what has been picked so far (``--acquisition``: a
bootstrap ensemble of small XGBoost models, or a committee of model families, ``ensemble``, whose
spread is the families' disagreement — the shipped ``ensemble`` cost model's design); the
selection is shared by every evaluated cost model. Then ``xgb`` and ``seq`` are trained on each
selection and scored on the held-out models (TenSet top-1/top-5 with each model's task weights).
Every (sampler, fraction, seed, kind) is one JSON line in results/runs.jsonl: a rerun skips what
is done, ``--deadline-min`` stops starting new fits after that many minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from al_report import write_report  # noqa: E402  (experiments/active_learning/al_report.py)

from autotune.cli import git_commit, loadavg  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402

FRACTIONS = (0.02, 0.05, 0.10, 0.20, 0.50)
SEED_FRACTION = 0.01  # random start of the samplers that need a model
ROUNDS = (0.01, 0.02, 0.035, 0.05, 0.075, 0.10, 0.15, 0.20, 0.35, 0.50)  # selection checkpoints
SAMPLERS = (
    "random",
    "rdu",
    "uncertainty",
    "diversity",
    "representativeness",
    "topk-biased",
    "random-per-task",
)
FULL = "all"  # the sampler name of the 100% rows
# --acquisition: the model the needs_model samplers read. "ensemble" is a committee of fast families (the
# shipped committee's seq-top member would cost minutes per round), one thread each
ACQUISITIONS = ("bootstrap-xgb", "ensemble")
ACQUISITION_MEMBERS = ("xgb-reg", "ms-xgb", "ms-mlp")
# How top-k treats tied scores (autotune.costmodel.metrics): runs scored before the tie-aware top-k
# (no "metric" field; a tie counted as a hit for whichever program sorted first) are kept in runs.jsonl
# but not mixed with these; a rerun re-fits them.
METRIC = "topk-expected-over-ties"


def model_params(kind: str, seed: int, quick: bool, xgb_config: str = "default") -> dict:
    """One thread each. xgb: its defaults (300 trees, depth 8) or the Optuna-tuned config of
    models/hparams/xgb.json (550 trees, depth 12: ~3x the fit time)."""
    from autotune.costmodel.train import hparams_for

    params = {**(hparams_for(kind) if kind != "xgb" or xgb_config == "tuned" else {}), "seed": seed}
    params.update({"xgb": {"nthread": 1}, "seq": {"num_threads": 1}}[kind])
    if quick:
        params.update({"xgb": {"n_estimators": 40}, "seq": {"epochs": 2}}[kind])
    return params


def config_key(kind: str, quick: bool, xgb_config: str) -> str:
    """What a run's numbers depend on besides the seed (runs of another config are not mixed in)."""
    params = model_params(kind, 0, quick, xgb_config)
    params.pop("seed")
    return json.dumps(params, sort_keys=True)


def pool_hash(train) -> str:
    h = hashlib.sha256()
    h.update(np.asarray(train.groups, np.int64).tobytes())
    h.update(np.asarray(train.latency, np.float64).tobytes())
    return h.hexdigest()[:16]


def acquisition_model(acquisition: str, seed: int, round_index: int, quick: bool):
    """The unfitted model the ``needs_model`` samplers read before round ``round_index`` (see ACQUISITIONS)."""
    from autotune.costmodel import create as create_model
    from autotune.costmodel.sampling import BootstrapEnsemble

    if acquisition == "bootstrap-xgb":
        member = {"n_estimators": 20, "max_depth": 4, "nthread": 1} if quick else None
        return BootstrapEnsemble("xgb", n_members=4, member_params=member, seed=seed * 100 + round_index)
    quick_params = {"xgb-reg": {"n_estimators": 20}, "ms-xgb": {"n_estimators": 20}, "ms-mlp": {"epochs": 2}}
    return create_model("ensemble", members=list(ACQUISITION_MEMBERS), seed=seed * 100 + round_index,
                        member_params=quick_params if quick else None).set_threads(1)


def selection(sampler_name: str, seed: int, train, rounds, cache_dir: str, quick: bool,
              acquisition: str = "bootstrap-xgb") -> dict:
    """The sampler's nested pick order over the pool (up to the last round), cached as JSON."""
    from autotune.costmodel.sampling import Pool, create

    path = os.path.join(cache_dir, f"{sampler_name}-s{seed}.json")
    key = pool_hash(train)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            cached = json.load(f)
        if (cached.get("pool") == key and cached.get("rounds") == list(rounds)
                and cached.get("acquisition", "bootstrap-xgb") == acquisition):
            return cached
    sampler = create(sampler_name)
    pool = Pool(train.batch, train.groups)
    rng = np.random.default_rng([seed, 7])
    n = len(train)
    picked = np.zeros(0, np.int64)
    log = []
    for r, frac in enumerate(rounds):
        target = int(round(frac * n))
        k = target - len(picked)
        if k <= 0:
            continue
        t0 = time.perf_counter()
        model, fit_s = None, 0.0
        if sampler.needs_model and len(picked) == 0:
            new = create("random").select(pool, picked, None, k, rng)  # the random start
        else:
            if sampler.needs_model:
                sub = train.subset(picked)
                model = acquisition_model(acquisition, seed, r, quick)
                model.fit(sub.batch, sub.y, sub.groups)
                fit_s = time.perf_counter() - t0
            new = sampler.select(pool, picked, model, k, rng)
        picked = np.concatenate([picked, new])
        log.append(
            {
                "fraction": frac,
                "programs": len(picked),
                "model_fit_s": fit_s,
                "select_s": time.perf_counter() - t0 - fit_s,
            }
        )
        print(
            f"  select {sampler_name} seed {seed}: {frac:.3f} -> {len(picked)} programs "
            f"(model fit {fit_s:.1f} s, select {log[-1]['select_s']:.1f} s)",
            flush=True,
        )
    out = {
        "sampler": sampler_name,
        "seed": seed,
        "pool": key,
        "rounds": list(rounds),
        "acquisition": acquisition,
        "order": picked.tolist(),
        "log": log,
    }
    os.makedirs(cache_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    return out


def score_shipped(shipped, train, data, held: dict) -> dict:
    from autotune.costmodel import load
    from autotune.costmodel.train import evaluate

    path, card = shipped
    metrics = evaluate(load(path), data, held)
    return _result(metrics, train, card["train"]["fit_seconds"], held) | {
        "source": os.path.relpath(path, ROOT)
    }


def _result(metrics: dict, sub, fit_s: float, held: dict) -> dict:
    return {
        "fit_s": fit_s,
        "programs": len(sub),
        "tasks": int(len(np.unique(sub.groups))),
        "tasks_with_2plus": int((np.bincount(sub.groups) >= 2).sum()),
        "top1": metrics["mean"]["top1"],
        "top5": metrics["mean"]["top5"],
        "pairwise": metrics["mean"]["pairwise"],
        "per_model": {
            m: {k: metrics[m][k] for k in ("top1", "top5", "pairwise")} for m in held if m in metrics
        },
    }


def fit_and_score(kind: str, seed: int, train, rows, data, held: dict, quick: bool, xgb_config: str) -> dict:
    from autotune.costmodel import create
    from autotune.costmodel.train import evaluate

    sub = train.subset(np.sort(rows))
    model = create(kind, **model_params(kind, seed, quick, xgb_config))
    t0 = time.perf_counter()
    model.fit(sub.batch, sub.y, sub.groups)
    fit_s = time.perf_counter() - t0
    metrics = evaluate(model, data, held)
    return _result(metrics, sub, fit_s, held)


def shipped_full_model(kind: str, params: dict, n_train: int, held_names: list[str], models_dir: str):
    """The shipped model of ``kind`` when it is exactly this 100% run (same number of training programs,
    held-out models, hyperparameters and seed; threads aside), else None: re-scoring it saves a long fit."""
    from autotune.costmodel import create

    path = os.path.join(models_dir, kind)
    try:
        with open(os.path.join(path, "card.json"), encoding="utf-8") as f:
            card = json.load(f)
    except (OSError, ValueError):
        return None

    def strip(p: dict) -> dict:
        return {k: v for k, v in p.items() if k not in ("nthread", "num_threads")}

    ours = strip(create(kind, **params).get_params())
    same = card.get("train", {}).get("programs") == n_train and card.get("held_out") == held_names
    return (path, card) if same and strip(card.get("params", {})) == ours else None


def jobs(kinds, samplers, fractions, seeds, seq_first) -> list[tuple[str, float, int, str]]:
    """Priority order (a deadline-cut run keeps the most useful part): the whole xgb matrix first
    (100%; random and rdu at 10 and 5%; the other samplers there; then 2, 20, 50%), then seq in the
    same order (a seq fit costs ~10x an xgb fit). ``seq_first`` False: every sampler in plain order."""
    core = [f for f in (0.10, 0.05) if f in fractions]
    rest = [f for f in fractions if f not in core]
    first = [sm for sm in ("random", "rdu") if sm in samplers] if seq_first else list(samplers)
    others = [sm for sm in samplers if sm not in first]
    order = []
    for kind in [k for k in ("xgb", "seq") if k in kinds]:
        order += [(FULL, 1.0, seeds[0], kind)]
        order += [(sm, f, s, kind) for s in seeds for f in core for sm in first]
        order += [(FULL, 1.0, s, kind) for s in seeds]
        order += [(sm, f, s, kind) for s in seeds for f in core for sm in others]
        order += [(sm, f, s, kind) for f in rest for s in seeds for sm in samplers]
    seen, out = set(), []
    for job in order:
        if job not in seen:
            seen.add(job)
            out.append(job)
    return out


def read_runs(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:  # a torn last line from a killed run: that job reruns
                    continue
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--held-out", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--kinds", default="xgb,seq")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--fractions", default=",".join(str(f) for f in FRACTIONS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--acquisition", choices=ACQUISITIONS, default="bootstrap-xgb",
                    help="the model uncertainty / rdu / topk-biased read (default: %(default)s); each acquisition "
                         "has its own results and selection folders")
    ap.add_argument("--out", default=None, help="results folder (default: results/, results_acq_ensemble/ "
                                                "with --acquisition ensemble)")
    ap.add_argument("--cache", default=None, help="selection cache (default: runs/active_learning/selections"
                                                  "[_acq_ensemble])")
    ap.add_argument(
        "--deadline-min", type=float, default=None, help="start no new fit after this many minutes"
    )
    ap.add_argument(
        "--xgb-config",
        choices=("default", "tuned"),
        default="default",
        help="xgb hyperparameters: its defaults, or models/hparams/xgb.json (~3x slower to fit)",
    )
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument(
        "--quick", action="store_true", help="CI: tiny dataset, small models, 2 seeds, 5, 10, 50%%"
    )
    args = ap.parse_args(argv)
    suffix = "" if args.acquisition == "bootstrap-xgb" else f"_acq_{args.acquisition}"
    args.out = args.out or os.path.join(HERE, "results" + suffix)
    args.cache = args.cache or os.path.join(ROOT, "runs", "active_learning", "selections" + suffix)
    if args.quick:
        args.dataset = os.path.join(ROOT, "tests", "data", "tiny_dataset")
        args.held_out, args.seeds, args.fractions = "tiny", 2, "0.05,0.1,0.5"
        args.out = os.path.join(ROOT, "runs", "active_learning", "quick", "results" + suffix)
        args.cache = os.path.join(ROOT, "runs", "active_learning", "quick", "selections" + suffix)
    import torch

    torch.set_num_threads(1)
    from autotune.costmodel.data import load_training_data
    from autotune.data.splits import split_by_model

    kinds = [k for k in args.kinds.split(",") if k]
    samplers = [s for s in args.samplers.split(",") if s]
    fractions = [float(f) for f in args.fractions.split(",") if f]
    seeds = list(range(args.seeds))
    held_names = [m for m in args.held_out.split(",") if m]
    t_load = time.perf_counter()
    data = load_training_data(args.dataset)
    train_keys, held = split_by_model(data.tasks, held_names)
    held = {m: [k for k in keys if k in data.task_keys] for m, keys in held.items()}
    train = data.select_tasks(train_keys)
    print(
        f"pool: {len(train)} programs of {len(np.unique(train.groups))} training tasks; held out "
        f"{ {m: len(k) for m, k in held.items()} } (loaded in {time.perf_counter() - t_load:.0f} s)",
        flush=True,
    )
    os.makedirs(args.out, exist_ok=True)
    runs_path = os.path.join(args.out, "runs.jsonl")
    key = pool_hash(train)
    configs = {k: config_key(k, args.quick, args.xgb_config) for k in kinds}

    def ours(r: dict) -> bool:
        return (r.get("pool") == key and r.get("config") == configs.get(r["kind"]) and r.get("metric") == METRIC
                and r.get("acquisition", "bootstrap-xgb") == args.acquisition)

    done = {(r["sampler"], r["fraction"], r["seed"], r["kind"]) for r in read_runs(runs_path) if ours(r)}
    rounds = tuple(sorted(set(r for r in ROUNDS if r <= max(fractions)) | set(fractions)))
    t0 = time.time()
    todo = [j for j in jobs(kinds, samplers, fractions, seeds, seq_first=True) if j not in done]
    print(f"{len(done)} runs done, {len(todo)} to do", flush=True)
    for sampler_name, frac, seed, kind in [] if args.report_only else todo:
        if args.deadline_min is not None and time.time() - t0 > 60 * args.deadline_min:
            print(
                f"deadline of {args.deadline_min} min reached; {len(todo)} runs left for a rerun", flush=True
            )
            break
        shipped = None
        if sampler_name == FULL and not args.quick:
            hw_dir = os.path.join(ROOT, "models", data.manifest["hardware"]["hardware_id"])
            params = model_params(kind, seed, args.quick, args.xgb_config)
            shipped = shipped_full_model(kind, params, len(train), held_names, hw_dir)
        if shipped is not None:
            res = score_shipped(shipped, train, data, held)
        else:
            if sampler_name == FULL:
                rows = np.arange(len(train))
            else:
                sel = selection(sampler_name, seed, train, rounds, args.cache, args.quick, args.acquisition)
                rows = np.asarray(sel["order"][: int(round(frac * len(train)))])
            res = fit_and_score(kind, seed, train, rows, data, held, args.quick, args.xgb_config)
        line = {
            "sampler": sampler_name,
            "fraction": frac,
            "seed": seed,
            "kind": kind,
            "pool": key,
            "config": configs[kind],
            "metric": METRIC,
            "acquisition": args.acquisition,
            "pool_programs": len(train),
            **res,
            "loadavg": loadavg(),
            "commit": git_commit(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        with open(runs_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        print(
            f"{kind:4s} {sampler_name:18s} {frac:5.2f} seed {seed}: top1 {res['top1']:.3f} top5 {res['top5']:.3f} "
            f"({res['programs']} programs, fit {res['fit_s']:.0f} s, {time.time() - t0:.0f} s so far)",
            flush=True,
        )
    runs = [r for r in read_runs(runs_path) if ours(r)]
    wanted = jobs(kinds, samplers, fractions, seeds, seq_first=False)
    sel_logs = {}
    for name in samplers:
        path = os.path.join(args.cache, f"{name}-s0.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                sel_logs[name] = json.load(f)["log"]
    write_report(runs, wanted, args, len(train), sel_logs)
    return 0


if __name__ == "__main__":
    from autotune.cli import run_main

    raise SystemExit(run_main(main))  # a bad --dataset: one line, exit 2
