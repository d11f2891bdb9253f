"""``python -m autotune.costmodel.train`` (``make train-costmodel``): train and compare cost models.

Trains every requested model on the dataset's training tasks (held-out models' tasks removed) once per
seed (``--seeds``, 3 by default; a model that takes no seed is trained once: it is the same model for
every seed), evaluates each fit on the held-out models in three views (``costmodel.evaluate``: all
programs, search-produced programs, tasks no training model shares), reports mean ± sd over seeds and
a paired comparison of every two models over the same seeds (``--jobs N``: N seeds fitted side by side in
their own processes, one thread each), measures prediction throughput, saves the
first seed's model with a card under ``--models-dir`` (``--save-seeds DIR``: every seed's fit as well, at
``DIR/<kind>/seed<k>``, the layout ``experiments/costmodel/variants.py --committee`` reads), and writes the comparison (``autotune.costmodel.comparison``: markdown +
JSON; ``experiments/costmodel/readings.py`` adds other experiments' readings and an issue's done-when targets) and a
predicted-vs-measured PNG under ``--results``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np

from autotune.cli import (
    git_commit,
    host_cpu,
    loadavg,
    run_main,
    setup_logging,
    versions,
    write_json,
)
from autotune.costmodel.comparison import (
    FORMAT,
    MAIN_HARDWARE,
    RESULTS_ROOT,
    folder_bytes,
    resolve_results,
    write_comparison,
)
from autotune.costmodel.data import manifest_sha256
from autotune.data.splits import HELD_OUT_MODELS
from autotune.data.store import portable_path
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.train")
DEFAULT_MODELS = "xgb,xgb-reg,ms-xgb,ms-mlp,seq,seq-lstm,seq-lstm-cos,seq-lstm-rows,seq-lstm-cos-x2,seq-lstm-distil,seq-top,ensemble,random"  # the comparison table's rows
DEFAULT_SEEDS = 3
HPARAMS_DIR = os.path.join("models", "hparams")


def hparams_for(kind: str, hparams_dir: str = HPARAMS_DIR) -> dict:
    """Best hyperparameters found by ``make tune-costmodel-hparams`` (empty if none)."""
    path = os.path.join(hparams_dir, f"{kind}.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("params", {})


def evaluate(model, data, held_out: dict[str, list[str]]) -> dict:
    """TenSet top-1 / top-5 / pairwise per held-out model on all its programs, and their mean
    (``costmodel.evaluate``'s ``all`` view)."""
    from .evaluate import evaluate as evaluate_views

    return evaluate_views(model, data, held_out, views=("all",))["views"]["all"]


def is_sequence_model(kind: str) -> bool:
    """Kinds that read the trace as a sequence (the done-when targets' "sequence model"), a seed ensemble of
    one included; False for a kind the registry no longer has (a kept row of an older run)."""
    from . import REGISTRY, create, model_class
    from .ensemble import EnsembleCostModel
    from .seq import SeqCostModel

    if kind not in REGISTRY:
        return False
    from .distil import DistilledCostModel

    if issubclass(model_class(kind), EnsembleCostModel):
        return all(is_sequence_model(k) for k in create(kind).members)
    if issubclass(model_class(kind), DistilledCostModel):
        return is_sequence_model(create(kind).student)
    return issubclass(model_class(kind), SeqCostModel)


def _throughput(model, batch, min_n: int = 20000) -> float:
    from .metrics import prediction_throughput

    reps = max(1, int(np.ceil(min_n / max(len(batch), 1))))
    big = batch.subset(np.tile(np.arange(len(batch)), reps))
    return prediction_throughput(model, big)


def main(argv=None) -> int:
    # before torch loads: OpenMP threads that spin-wait collapse 10-100x on cores other processes share
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, from: {DEFAULT_MODELS}")
    ap.add_argument("--held-out", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--results", default=None,
                    help=f"folder of comparison.json/.md (default: {RESULTS_ROOT} for the main dataset's hardware "
                         f"{MAIN_HARDWARE}, {RESULTS_ROOT}/<hardware id> for any other)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                    help="train each model this many times (seeds seed..seed+N-1) and report mean ± sd and a paired "
                         "comparison per model pair; the first seed's model is the one saved (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="fit this many seeds side by side, each in its own process with cores/N threads (the torch "
                         "models train about as fast on one core as on two here: 2 halves their wall time; default: "
                         "%(default)s)")
    ap.add_argument("--save-seeds", default=None, metavar="DIR",
                    help="also save every seed's fit at DIR/<kind>/seed<k> (committees of saved fits: "
                         "experiments/costmodel/variants.py --committee; default: only the first seed's, in --models-dir)")
    ap.add_argument("--teachers-from", default=None, metavar="DIR",
                    help="a distilled kind (seq-lstm-distil) takes its teacher's fits from DIR/<teacher>/seed<k> (what "
                         "--save-seeds DIR wrote for the teacher's own row: same dataset, split and seeds; refused "
                         "otherwise) instead of fitting them again; with --save-seeds DIR too, a teacher listed before "
                         "it in --models is fitted first in the same run (default: fit them)")
    ap.add_argument("--quick", action="store_true", help="small models/epochs (CI)")
    ap.add_argument("--summarize-only", action="store_true",
                    help="fit nothing: rebuild comparison.md from --results/comparison.json (the paired table and the "
                         "done-when checks recomputed, e.g. after a newer throughput benchmark of the same models)")
    args = ap.parse_args(argv)
    return run_main(lambda: _summarize(args) if args.summarize_only else _main(args))


def _summarize(args) -> int:
    from autotune.costmodel.comparison import read_comparison

    result, args.results = read_comparison(args.dataset, args.results, "--summarize-only")
    write_comparison(result, args.models_dir, args.results)
    return 0


def train_seeds(kind: str, params: dict, seeds: list[int], train, data, test_keys, threads: int | None = None,
                jobs: int = 1, source: tuple[str, list[str]] | None = None, save_seeds: str | None = None) -> dict:
    """Fit ``kind`` once per seed (once, seed None, when it takes no seed) and evaluate every fit in all
    views (``threads``: each fit's, default the kind's). Returns the first fit's model and, per seed, the
    evaluate() result and fit seconds. ``jobs`` > 1 with ``source`` = (dataset, held-out models): the seeds
    are fitted in that many processes side by side (``_fit_seed``, each loading the split itself), every fit
    the same as in this process (the kind, params and seed; threads ``cpu_count // jobs`` unless given); fit
    seconds are then each fit's own beside the others. ``save_seeds``: every fit saved at
    ``<save_seeds>/seed<k>`` (a seedless kind's one fit under every seed asked: it is the same model for each)."""
    from . import create, takes_seed
    from .evaluate import evaluate as evaluate_views

    used = list(seeds) if takes_seed(kind) else [None]
    if jobs > 1 and len(used) > 1 and source is not None:
        return _train_seeds_parallel(kind, params, used, threads or max(1, (os.cpu_count() or 1) // jobs), jobs,
                                     source, save_seeds)
    first, runs, fits = None, [], []
    for seed in used:
        model = create(kind, **(params if seed is None else {**params, "seed": seed}))
        if threads is not None:
            model.set_threads(threads)
        t0 = time.time()
        model.fit(train.batch, train.y, train.groups, latency=train.latency)
        fits.append(time.time() - t0)
        runs.append(evaluate_views(model, data, test_keys))
        for k in ([seed] if seed is not None else seeds) if save_seeds else []:
            _save_as_threads(kind, params, model, os.path.join(save_seeds, f"seed{k}"))
        if first is None:
            first = model
        _log_fit(kind, seed, runs[-1], fits[-1])
    return {"model": first, "seeds": used, "runs": runs, "fit_seconds": fits}


def _log_fit(kind, seed, run: dict, seconds: float) -> None:
    logger.info("%s seed %s: top1 %.3f (search %.3f, unseen %.3f), fit %.0f s", kind, seed,
                *(run["views"].get(v, {}).get("mean", {}).get("top1", float("nan")) for v in ("all", "search", "unseen")),
                seconds)


def _fit_seed(dataset: str, held: list[str], kind: str, params: dict, seed: int, threads: int, save_dir: str):
    """One seed's fit in a worker process: the split loaded from ``dataset``, the model saved to ``save_dir``;
    returns (evaluate() result, fit seconds)."""
    from .data import load_split

    setup_logging()
    data, train_keys, test_keys = load_split(dataset, held)
    out = train_seeds(kind, params, [seed], data.select_tasks(train_keys), data, test_keys, threads=threads)
    _save_as_threads(kind, params, out["model"], save_dir)
    return out["runs"][0], out["fit_seconds"][0]


def _save_as_threads(kind: str, params: dict, model, path: str) -> None:
    """Save ``model`` with the kind's own thread count (the search's), not the one it was fitted with."""
    saved = _default_threads(kind, params)
    if saved:
        model.set_threads(saved)
    model.save(path)


def _default_threads(kind: str, params: dict) -> int | None:
    """The thread count a ``kind`` model made with ``params`` has (an ensemble: its first member's)."""
    from . import create
    from .distil import DistilledCostModel
    from .ensemble import EnsembleCostModel

    model = create(kind, **params)
    if isinstance(model, EnsembleCostModel):
        model = model._member(model.members[0], 0)
    elif isinstance(model, DistilledCostModel):
        model = model._student()
    p = model.get_params()
    return p.get("num_threads", p.get("nthread"))


def _train_seeds_parallel(kind, params, seeds, threads, jobs, source, save_seeds=None) -> dict:
    import multiprocessing
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    from . import load

    dataset, held = source
    with tempfile.TemporaryDirectory(prefix="autotune-seeds-") as tmp, \
            ProcessPoolExecutor(max_workers=min(jobs, len(seeds)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_fit_seed, dataset, list(held), kind, params, seed, threads, os.path.join(tmp, str(seed)))
                   for seed in seeds]
        done = [f.result() for f in futures]  # a worker's error is raised here, naming what failed
        first = load(os.path.join(tmp, str(seeds[0])))
        for seed in seeds if save_seeds else []:
            dest = os.path.join(save_seeds, f"seed{seed}")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(os.path.join(tmp, str(seed)), dest)
    return {"model": first, "seeds": seeds, "runs": [r for r, _ in done], "fit_seconds": [t for _, t in done],
            "jobs": jobs, "threads": threads}


def _main(args) -> int:
    from . import REGISTRY, ModelFileError
    from .data import load_split
    from .evaluate import over_seeds

    kinds = [k.strip() for k in args.models.split(",") if k.strip()]
    bad = [k for k in kinds if k not in REGISTRY]
    if bad:
        raise UserError(f"--models: unknown {bad}; valid: {', '.join(REGISTRY)}")
    if args.seeds < 1:
        raise UserError(f"--seeds: {args.seeds} is not a number of seeds; give 1 or more (3 for the comparison)")
    if args.jobs < 1:
        raise UserError(f"--jobs: {args.jobs} is not a number of processes; give 1 or more (2 fits two seeds side by side)")
    setup_logging()
    held = [m.strip() for m in args.held_out.split(",") if m.strip()]
    data, train_keys, test_keys = load_split(args.dataset, held)
    train = data.select_tasks(train_keys)
    logger.info("train: %d programs over %d tasks; held out: %s", len(train), len(train_keys),
                {m: len(k) for m, k in test_keys.items()})
    hw = data.manifest["hardware"]["hardware_id"]
    args.results = resolve_results(args.results, hw)
    manifest_hash = manifest_sha256(data.manifest)
    seeds = list(range(args.seed, args.seed + args.seeds))
    rows = []
    test_all = data.select_tasks(sorted(set().union(*test_keys.values())))
    params_of = {kind: params_for(kind, args.quick) for kind in kinds}
    if args.teachers_from:
        _use_saved_teachers(args, kinds, params_of, seeds)
    for kind in kinds:
        params = params_of[kind]
        try:
            fits = train_seeds(kind, params, seeds, train, data, test_keys, jobs=args.jobs,
                               source=(args.dataset, held), save_seeds=args.save_seeds and os.path.join(args.save_seeds, kind))
        except ModelFileError as err:
            if "teacher_from" not in params:
                raise
            raise UserError(f"--teachers-from: {err}") from None
        model, runs = fits["model"], fits["runs"]
        metrics = {**runs[0], "over_seeds": over_seeds(runs)}
        thr = _throughput(model, test_all.batch)
        out_dir = os.path.join(args.models_dir, hw, kind)
        model.save(out_dir)
        size = folder_bytes(out_dir)
        card = {
            "kind": kind, "params": model.get_params(), "dataset": portable_path(args.dataset),
            "dataset_manifest_sha256": manifest_hash, "hardware": data.manifest["hardware"],
            "hardware_descriptor": _descriptor_of(data.manifest["hardware"]),
            "git_commit": git_commit(), "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seeds": fits["seeds"], "saved_seed": fits["seeds"][0],
            "train": {"programs": len(train), "tasks": len(train_keys), "fit_seconds": fits["fit_seconds"][0]},
            "held_out": held, "metrics": metrics, "predict_programs_per_s": thr, "model_bytes": size,
            "versions": versions(), "loadavg": loadavg(),
        }
        write_json(os.path.join(out_dir, "card.json"), card)
        over = metrics["over_seeds"].get("all", {})
        logger.info("%s over %d seed(s): top1 %.3f top5 %.3f pairwise %.3f, %.0f programs/s", kind, over.get("n", 0),
                    *(over.get("mean", {}).get(k, float("nan")) for k in ("top1", "top5", "pairwise")), thr)
        rows.append({"kind": kind, "seeds": fits["seeds"], "metrics": metrics, "predict_programs_per_s": thr,
                     "fit_seconds": fits["fit_seconds"][0], "fit_seconds_per_seed": fits["fit_seconds"],
                     "fit_jobs": fits.get("jobs", 1),
                     "model_bytes": size, "trained": card["trained"], "params": card["params"]})
        if kind == kinds[0] or kind == "seq":
            _plot(model, data, test_keys, os.path.join(args.results, f"pred_vs_measured_{kind}.png"))
        # after every row, not once at the end: a later row that fails (a refused teacher, an interrupt) loses
        # nothing already fitted and scored
        result = {"format": FORMAT, "dataset": args.dataset, "hardware_id": hw,
                  "dataset_manifest_sha256": manifest_hash, "train_programs": len(train), "held_out": held,
                  "rows": _keep_other_rows(os.path.join(args.results, "comparison.json"), rows, manifest_hash, held,
                                           args.quick),
                  "seeds": seeds, "measured_on": host_cpu(), "loadavg": loadavg(), "git_commit": git_commit(),
                  "quick": args.quick, "models_dir": args.models_dir, "duplicates": "merged", "results_dir": args.results}
        write_comparison(result, args.models_dir, args.results, keep_readings=False)
    return 0


def _use_saved_teachers(args, kinds: list[str], params_of: dict, seeds: list[int]) -> None:
    """--teachers-from: every distilled kind's params get ``teacher_from`` (DIR/<teacher>/seed{seed}); every seed's
    teacher must be there before anything is fitted (a UserError names the missing folders), unless this run fits
    the teacher's row first and saves every seed there (--save-seeds DIR)."""
    from . import create

    for kind, params in params_of.items():
        if "teacher_params" not in params:
            continue
        teacher = create(kind, **params).teacher
        params["teacher_from"] = os.path.join(args.teachers_from, teacher, "seed{seed}")
        if teacher in kinds[:kinds.index(kind)] and args.save_seeds and \
                os.path.abspath(args.save_seeds) == os.path.abspath(args.teachers_from):
            continue  # this run fits the teacher's row first and saves every seed there
        missing = [params["teacher_from"].format(seed=s) for s in seeds
                   if not os.path.exists(os.path.join(params["teacher_from"].format(seed=s), "model.json"))]
        if missing:
            raise UserError(f"--teachers-from: no saved teacher at {', '.join(missing)} (train the teacher's row "
                            f"with --save-seeds {args.teachers_from} and the same --seeds first)")


def _keep_other_rows(path: str, rows: list[dict], manifest_hash: str, held: list[str], quick: bool) -> list[dict]:
    """Retraining some models (``--models xgb``) keeps the other models' rows of the comparison when
    they were evaluated on the same dataset, split, mode and file layout; rows are kept in registry order."""
    if not os.path.exists(path):
        return rows
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except ValueError:
        return rows
    same = (old.get("format"), old.get("dataset_manifest_sha256"), old.get("held_out"), bool(old.get("quick")),
            old.get("duplicates"))
    if same != (FORMAT, manifest_hash, held, quick, "merged"):  # rows scored with copies as programs: refit
        return rows
    new = {r["kind"] for r in rows}
    merged = [r for r in old.get("rows", []) if r.get("kind") not in new] + rows
    from . import REGISTRY

    order = {k: i for i, k in enumerate(REGISTRY)}
    return sorted(merged, key=lambda r: order.get(r["kind"], len(order)))


def _quick(kind: str) -> dict:
    return {"xgb": {"n_estimators": 40}, "xgb-reg": {"n_estimators": 40}, "ms-xgb": {"n_estimators": 40},
            "ms-mlp": {"epochs": 3}, "seq": {"epochs": 3}, "seq-lstm": {"epochs": 2}, "seq-lstm-cos": {"epochs": 2},
            "seq-lstm-rows": {"epochs": 2},
            "seq-top": {"epochs": 3}}.get(kind, {})


def params_for(kind: str, quick: bool = False, hparams_dir: str = HPARAMS_DIR) -> dict:
    """What ``make train-costmodel`` trains ``kind`` with: its tuned hyperparameters (``models/hparams``), and
    the CI's small settings with ``quick``. An ``ensemble`` gives each member what that kind gets alone, so
    its member ``k`` at seed ``s`` is the model the ``k`` row trains at seed ``s``, plus what the registered kind
    sets for its members (``seq-lstm-cos-x2``'s ``soup``)."""
    from . import create, model_class
    from .distil import DistilledCostModel
    from .ensemble import EnsembleCostModel

    params = {**hparams_for(kind, hparams_dir), **(_quick(kind) if quick else {})}
    if issubclass(model_class(kind), EnsembleCostModel) and "member_params" not in params:
        default = create(kind)
        members, own = params.get("members", default.members), default.member_params or {}
        params["member_params"] = {m: {**own.get(m, {}), **params_for(m, quick, hparams_dir)}
                                   for m in dict.fromkeys(members)}
    if issubclass(model_class(kind), DistilledCostModel):  # the teacher as its own row trains it; the student too
        default = create(kind)
        teacher, student = params.get("teacher", default.teacher), params.get("student", default.student)
        params.setdefault("teacher_params", params_for(teacher, quick, hparams_dir))
        params.setdefault("student_params", {**(default.student_params or {}), **params_for(student, quick, hparams_dir)})
    return params


def _descriptor_of(hardware: dict) -> dict | None:
    """The CPU descriptor a card records (``autotune.hardware.describe``); None for a GPU dataset."""
    from autotune.hardware import describe

    return describe(hardware) if hardware.get("target", {}).get("kind") == "llvm" else None


def _plot(model, data, test_keys, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = next(iter(test_keys))
    part = data.select_tasks(test_keys[name])
    if len(part) == 0:
        return
    biggest = np.bincount(part.groups).argmax()
    task = part.subset(part.groups == biggest)
    score = model.predict(task.batch)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(task.y, score, s=8, alpha=0.6)
    ax.set_xlabel("measured normalized throughput (best = 1)")
    ax.set_ylabel(f"{model.name} score")
    key = data.task_keys[biggest]
    ax.set_title(f"{name}: {data.tasks[key]['name'][:40]} ({len(task)} programs)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
