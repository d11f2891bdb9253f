"""Experiment T3: cross-hardware transfer of cost models (issue 14).

For each pair source:target of datasets (same tasks, two hardware), each cost-model kind, each share of
the target's training programs measured (1 % ... 100 %, whole task batches), each seed and each transfer
method: held-out top-1 / top-5 on the target (resnet50, mobilenet_v2, bert_base: none of their tasks is
trained on, on either side) and forgetting = the source model's held-out top-1 on the source minus the
transferred model's. One JSON line per (pair, kind, method, fraction, seed) goes to runs.jsonl as it
finishes; a rerun skips the lines already there (same configuration), so the matrix can be finished over
several sittings. Then results.json, table.md and top-1-vs-fraction PNGs.

    .venv/bin/python experiments/transfer/run.py                 # make experiments-transfer
    .venv/bin/python experiments/transfer/run.py --quick         # CI: the committed slice, < 2 min
    .venv/bin/python experiments/transfer/run.py --pairs datasets/cpu-znver3-2c:datasets/cpu-rocketlake-2c
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # shared cores: spinning OpenMP threads collapse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from autotune.cli import git_commit, loadavg, run_main, setup_logging  # noqa: E402
from autotune.errors import UserError  # noqa: E402

PAIRS = "datasets/cpu-znver3-2c:datasets/cpu-x86-64-v2-1c"
QUICK_PAIRS = "experiments/transfer/data/cpu-znver3-2c:experiments/transfer/data/cpu-x86-64-v2-1c"
KINDS = "xgb,seq"  # ms-mlp runs every method too (--kinds xgb,seq,ms-mlp); left out of the default for time
METHODS = "zero-shot,scratch,finetune,mtl,ckd"
FRACTIONS = "0.01,0.05,0.1,0.25,1.0"
HELD_OUT = ["resnet50", "mobilenet_v2", "bert_base"]
SAMPLERS = "random,random-per-task,rdu"

# Method keywords per cost-model kind (one thread everywhere: 2 shared cores). Torch methods share one
# step budget so finetune, mtl and ckd differ only in their losses.
METHOD_PARAMS = {
    # xgb: 100 rounds on top of the source's 550 (ckd's pseudo-labelled pools dominate its fit time)
    "xgb": {"scratch": {"params": {"nthread": 1}}, "finetune": {"rounds": 100},
            "ckd": {"rounds": 100, "replay": 2000, "unlabeled_max": 2000}},
    "ms-mlp": {"scratch": {"params": {"num_threads": 1}}, "finetune": {"steps": 300},
               "mtl": {"steps": 300, "replay": 4000}, "ckd": {"steps": 300, "replay": 4000, "unlabeled_max": 4000}},
    # seq: ~0.15 s per target-only step and ~0.3 s per ckd/mtl step on one shared core, hence 150 steps
    # (2.5 epochs of the full target, 6+ of 10 %) and a 10-epoch scratch baseline (early stopping, patience 4)
    "seq": {"scratch": {"params": {"num_threads": 1, "epochs": 10, "patience": 4}}, "finetune": {"steps": 150},
            "mtl": {"steps": 150, "replay": 2000}, "ckd": {"steps": 150, "replay": 2000, "unlabeled_max": 2000}},
}
QUICK_PARAMS = {
    "xgb": {"scratch": {"params": {"nthread": 1, "n_estimators": 60}}, "finetune": {"rounds": 40},
            "ckd": {"rounds": 40, "replay": 300, "unlabeled_max": 300}},
    "ms-mlp": {"scratch": {"params": {"num_threads": 1, "epochs": 8}}, "finetune": {"steps": 40},
               "mtl": {"steps": 40, "replay": 300}, "ckd": {"steps": 40, "replay": 300, "unlabeled_max": 300}},
    "seq": {"scratch": {"params": {"num_threads": 1, "epochs": 3}}, "finetune": {"steps": 20},
            "mtl": {"steps": 20, "replay": 200}, "ckd": {"steps": 20, "replay": 200, "unlabeled_max": 200}},
}
QUICK_SOURCE = {"xgb": {"n_estimators": 60}, "ms-mlp": {"epochs": 8}, "seq": {"epochs": 3}}


def method_params(kind: str, method: str, quick: bool) -> dict:
    from autotune.costmodel.transfer import create

    params = dict((QUICK_PARAMS if quick else METHOD_PARAMS).get(kind, {}).get(method, {}))
    if "num_threads" in create(method).get_params():
        params["num_threads"] = 1
    return params


def source_model(kind: str, src, models_dir: str, out: str, quick: bool, held: list[str], log):
    """The shipped source model (models/<hw>/<kind>) or, if there is none (or --quick), one trained
    here on the source's training tasks and kept under <out>/sources/."""
    from autotune.costmodel import create, load
    from autotune.costmodel.train import hparams_for

    shipped = os.path.join(models_dir, src.hardware_id, kind)
    if not quick and os.path.exists(os.path.join(shipped, "model.json")):
        card = os.path.join(shipped, "card.json")
        with open(card, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("held_out") != held:
            raise UserError(f"{shipped}: trained with held-out models {meta.get('held_out')}, not {held}; retrain "
                            "it (make train-costmodel) or pass --models-dir")
        if meta.get("dataset_manifest_sha256") != src.manifest_sha256:  # e.g. task weights recomputed since
            log(f"note: {shipped} was trained on an earlier manifest of {src.path} (rows may be the same)")
        model = load(shipped)
        model.set_threads(1)  # one thread per job (its saved params may say 2)
        return model, shipped
    path = os.path.join(out, "sources", src.hardware_id, kind)
    if os.path.exists(os.path.join(path, "model.json")):
        model = load(path)
    else:
        log(f"training a {kind} source model on {src.hardware_id} ({len(src.train)} programs)")
        params = {**hparams_for(kind), **(QUICK_SOURCE.get(kind, {}) if quick else {})}
        threads = {"num_threads": 1} if "num_threads" in create(kind).get_params() else {"nthread": 1}
        model = create(kind, **params, **threads).fit(src.train.batch, src.train.y, src.train.groups)
        model.save(path)
    model.set_threads(1)
    return model, path


def scores(model, domain) -> dict:
    from autotune.costmodel.transfer.domains import held_out_scores

    out = held_out_scores(model, domain)
    return {m: {k: v[k] for k in ("top1", "top5", "pairwise") if k in v} for m, v in out.items()}


def config_hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_runs(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                if i < len(lines) - 2:
                    raise UserError(f"{path}: corrupt line {i + 1}; fix or delete it") from None
    return rows  # a torn last line (killed mid-write) is dropped and that run redone


def _key_text(row: dict) -> str:
    return json.dumps({k: row.get(k) for k in ("pair", "kind", "method", "fraction", "seed", "sampler", "config")},
                      sort_keys=True)


def plan(kinds, methods, fractions, seeds, samplers, sampler_fraction, sampler_methods, sampler_kinds) -> list[tuple]:
    """(kind, method, fraction, seed, sampler) in run order: per kind, fraction-major (a partial run has
    every method and seed of the first fractions), then the sampler arms (which programs to measure
    chosen by an active-learning sampler instead of random whole-task batches)."""
    jobs = []
    for kind in kinds:
        jobs += [(kind, m, f, s, None) for f in fractions for s in range(seeds) for m in methods]
        if kind in sampler_kinds:
            jobs += [(kind, m, sampler_fraction, s, name) for s in range(seeds) for name in samplers
                     for m in sampler_methods]
    return jobs


def pick(name: str, src, dst, fraction: float, seed: int, cache: dict) -> np.ndarray:
    """round(fraction * n) of the target's training programs chosen by sampler ``name`` before any is
    measured; samplers that need a model with a spread get a bootstrap ensemble of small XGBoost models
    trained on the source (where the source-trained models disagree on a target program)."""
    from autotune.costmodel.sampling import BootstrapEnsemble, Pool
    from autotune.costmodel.sampling import create as create_sampler

    sampler = create_sampler(name)
    model = None
    if sampler.needs_model:
        if seed not in cache:
            cache[seed] = BootstrapEnsemble("xgb", n_members=4, seed=seed).fit(src.train.batch, src.train.y,
                                                                                src.train.groups)
        model = cache[seed]
    k = int(round(fraction * len(dst.train)))
    return sampler.select(Pool(dst.train.batch, dst.train.groups), None, model, k, rng=seed)


def _drop_torn_tail(path: str, rows: list[dict]) -> None:
    """A run killed mid-write leaves a partial last line: rewrite the file without it before appending."""
    if os.path.exists(path) and os.path.getsize(path):
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            whole = f.read(1) == b"\n"
        if not whole:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            os.replace(path + ".tmp", path)


def append_run(path: str, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=PAIRS, help="source:target dataset folders, comma-separated")
    ap.add_argument("--kinds", default=KINDS)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--fractions", default=FRACTIONS, help="run in this order (a partial run covers the first)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--held-out", default=",".join(HELD_OUT))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--samplers", default=SAMPLERS, help="active-learning samplers that pick the measured share "
                    "(autotune.costmodel.sampling; '' for none)")
    ap.add_argument("--sampler-fraction", type=float, default=0.1)
    ap.add_argument("--sampler-methods", default="scratch,finetune,ckd")
    ap.add_argument("--sampler-kinds", default="xgb")
    ap.add_argument("--max-minutes", type=float, default=None, help="start no new run after this long")
    ap.add_argument("--quick", action="store_true", help="CI: the committed slice, small budgets, 1 seed")
    ap.add_argument("--summarize-only", action="store_true", help="tabulate runs.jsonl, start none")
    args = ap.parse_args(argv)
    if args.quick:
        args.pairs = QUICK_PAIRS if args.pairs == PAIRS else args.pairs
        args.fractions = "0.1,1.0" if args.fractions == FRACTIONS else args.fractions
        args.seeds = 1
        args.samplers = "" if args.samplers == SAMPLERS else args.samplers
        args.out = os.path.join(ROOT, "runs", "transfer-quick") if args.out == os.path.join(HERE, "results") else args.out
    return run_main(lambda: _main(args, argv))


def _parse(args):
    from autotune.costmodel import REGISTRY as KIND_REGISTRY
    from autotune.costmodel.transfer import REGISTRY

    kinds = [k for k in args.kinds.split(",") if k]
    methods = [m for m in args.methods.split(",") if m]
    bad = [k for k in kinds if k not in KIND_REGISTRY] + [m for m in methods if m not in REGISTRY]
    if bad:
        raise UserError(f"unknown {bad}; kinds: {', '.join(KIND_REGISTRY)}; methods: {', '.join(REGISTRY)}")
    try:
        fractions = [float(f) for f in args.fractions.split(",") if f]
    except ValueError:
        raise UserError(f"--fractions {args.fractions!r}: comma-separated numbers in (0, 1]") from None
    if not fractions or not all(0 < f <= 1 for f in fractions):
        raise UserError(f"--fractions {args.fractions!r}: comma-separated numbers in (0, 1]")
    pairs = []
    for item in (p for p in args.pairs.split(",") if p):
        src, sep, dst = item.partition(":")
        if not sep or not src or not dst:
            raise UserError(f"--pairs {item!r}: expected SOURCE_DATASET:TARGET_DATASET")
        pairs.append((os.path.join(ROOT, src), os.path.join(ROOT, dst)))
    return kinds, methods, fractions, pairs


def _load(path: str, held: list[str]):
    from autotune.costmodel.transfer.domains import load_domain
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.store import DatasetError

    try:
        return load_domain(path, held)
    except (DatasetError, StaleFeatureCache, ValueError) as err:
        raise UserError(f"{path}: {err}") from None


def _main(args, argv) -> int:
    from report import write_report

    from autotune.costmodel.transfer import TransferInputs, create

    kinds, methods, fractions, pairs = _parse(args)
    samplers = [x for x in args.samplers.split(",") if x]
    held = [m for m in args.held_out.split(",") if m]
    setup_logging()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    runs_path = os.path.join(args.out, "runs.jsonl")
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", flush=True)

    keys_wanted = []
    done_rows = read_runs(runs_path)
    _drop_torn_tail(runs_path, done_rows)
    done = {_key_text(r) for r in done_rows}
    jobs = plan(kinds, methods, fractions, args.seeds, samplers, args.sampler_fraction,
                [m for m in args.sampler_methods.split(",") if m], args.sampler_kinds.split(","))
    stopped = False
    for src_path, dst_path in pairs:
        src, dst = _load(src_path, held), _load(dst_path, held)
        pair = f"{src.hardware_id}->{dst.hardware_id}"
        log(f"{pair}: source train {len(src.train)} programs, target train {len(dst.train)} programs")
        sources, before, ensembles = {}, {}, {}
        for kind, method, fraction, seed, sampler in jobs:
            if kind not in sources:
                model, path = source_model(kind, src, args.models_dir, args.out, args.quick, held, log)
                with open(os.path.join(path, "model.json"), encoding="utf-8") as f:
                    sources[kind] = (model, config_hash(src.content_sha256, dst.content_sha256, f.read(), args.quick))
            source, base = sources[kind]
            obj = create(method, **method_params(kind, method, args.quick))
            if obj.supports(source):
                continue
            if method == "zero-shot":  # does not read the target: one run per (pair, kind)
                fraction, seed, sampler = None, 0, None
            params = {**obj.get_params(), **({"seed": seed} if "seed" in obj.get_params() else {})}
            key = {"pair": pair, "kind": kind, "method": method, "fraction": fraction, "seed": seed,
                   "sampler": sampler, "config": config_hash(base, params)}
            if key in keys_wanted:
                continue
            keys_wanted.append(key)
            if _key_text(key) in done or args.summarize_only or stopped:
                continue
            if args.max_minutes and time.time() - t_start > 60 * args.max_minutes:
                log(f"--max-minutes {args.max_minutes} reached; rerun to continue")
                stopped = True
                continue
            if kind not in before:
                before[kind] = scores(source, src)["mean"]
            if sampler is None:
                measured, unlabeled, _ = dst.measured_share(fraction or 1.0, seed)  # zero-shot reads none
            else:
                measured, unlabeled, _ = dst.share(pick(sampler, src, dst, fraction, seed, ensembles))
            inputs = TransferInputs(target=measured, source=src.programs(), unlabeled=unlabeled)
            t0 = time.time()
            model = create(method, **params).transfer(source, inputs)
            fit_s = time.time() - t0
            target, after = scores(model, dst), scores(model, src)
            row = {**key, "params": params, "measured_programs": len(measured),
                   "measured_tasks": int(len(np.unique(measured.groups))), "target": target,
                   "source_before_top1": before[kind]["top1"], "source_after_top1": after["mean"]["top1"],
                   "forgetting_top1": before[kind]["top1"] - after["mean"]["top1"],
                   "forgetting_pairwise": before[kind]["pairwise"] - after["mean"]["pairwise"], "fit_seconds": fit_s,
                   "history": getattr(model, "history_", None), "loadavg": loadavg(),
                   "git_commit": git_commit(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            append_run(runs_path, row)
            log(f"{pair} {kind} {method}{f' [{sampler}]' if sampler else ''} f={fraction} seed={seed}: target top-1 "
                f"{target['mean']['top1']:.3f} top-5 {target['mean']['top5']:.3f}, forgetting "
                f"{row['forgetting_top1']:+.3f}, fit {fit_s:.0f}s ({len(measured)} programs)")
    wanted = {_key_text(k) for k in keys_wanted}
    runs = [r for r in read_runs(runs_path) if _key_text(r) in wanted]
    command = " ".join(["python", "experiments/transfer/run.py", *(argv if argv is not None else sys.argv[1:])])
    missing = len(keys_wanted) - len(runs)
    write_report(runs, args.out, {"command": command, "quick": args.quick, "seeds": args.seeds, "fractions": fractions,
                                  "kinds": kinds, "methods": methods, "samplers": samplers,
                                  "sampler_fraction": args.sampler_fraction, "planned_runs": len(keys_wanted), "held_out": held,
                                  "missing_runs": missing, "loadavg_end": loadavg(), "git_commit": git_commit()})
    log(f"{len(runs)} runs tabulated in {args.out} ({missing} of the plan not run yet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
