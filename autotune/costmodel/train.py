"""``python -m autotune.costmodel.train`` (``make train-costmodel``): train and compare cost models.

Trains every requested model on the dataset's training tasks (held-out models' tasks removed) once per
seed (``--seeds``, 3 by default; a model that takes no seed is trained once: it is the same model for
every seed), evaluates each fit on the held-out models in three views (``costmodel.evaluate``: all
programs, search-produced programs, tasks no training model shares), reports mean ± sd over seeds and
a paired comparison of every two models over the same seeds (``--jobs N``: N seeds fitted side by side in
their own processes, one thread each), measures prediction throughput, saves the
first seed's model with a card under ``--models-dir`` (``--save-seeds DIR``: every seed's fit as well, at
``DIR/<kind>/seed<k>``, the layout ``experiments/costmodel/variants.py --committee`` reads), and writes the comparison (markdown + JSON, with
issue 12's done-when targets checked against the numbers) and a predicted-vs-measured PNG under
``--results``.
"""

from __future__ import annotations

import argparse
import hashlib
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
    write_results,
)
from autotune.data.splits import HELD_OUT_MODELS
from autotune.data.store import portable_path
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.train")
DEFAULT_MODELS = "xgb,xgb-reg,ms-xgb,ms-mlp,seq,seq-lstm,seq-lstm-cos,seq-lstm-rows,seq-lstm-cos-x2,seq-lstm-distil,seq-top,ensemble,random"  # the comparison table's rows
DEFAULT_SEEDS = 3
HPARAMS_DIR = os.path.join("models", "hparams")
BENCH_DIR = os.path.join("benchmarks", "results")
RESULTS_ROOT = os.path.join("experiments", "costmodel", "results")
# The shipped main dataset's hardware (datasets/cpu-znver3-2c): its comparison is RESULTS_ROOT itself; another
# hardware's goes to RESULTS_ROOT/<hardware id>/ so that training on it never overwrites the main table
MAIN_HARDWARE = "cpu-znver3-2c"
# the data-curve reading names the programs per task a slope would need only up to this factor of today's
# (six doublings past the data; a flat slope "needs" millions, which is no reading)
MAX_CURVE_FACTOR = 64
FORMAT = 2  # comparison.json layout: rows with seeds, views and over_seeds per view; paired; done_when
# issue 12's done-when targets (held-out, view "all", mean over seeds; throughput on this CPU)
TARGETS = {"seq_top1": 0.75, "seq_over_ms_xgb": 0.08, "seq_top5": 0.92, "seq_programs_per_s": 20_000,
           "xgb_programs_per_s": 50_000, "seeds": 3, "models_dir_mb": 40}


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


def results_dir_for(hardware_id: str, root: str = RESULTS_ROOT) -> str:
    """The default results folder of a dataset measured on ``hardware_id`` (see ``MAIN_HARDWARE``)."""
    return root if hardware_id == MAIN_HARDWARE else os.path.join(root, hardware_id)


def resolve_results(results: str | None, hardware_id: str) -> str:
    """``--results`` or the hardware's default folder; a UserError when that folder's comparison.json
    describes another hardware's dataset (writing there would lose it)."""
    out = results or results_dir_for(hardware_id)
    path = os.path.join(out, "comparison.json")
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f).get("hardware_id")
    except (OSError, ValueError, AttributeError):
        return out
    if old and old != hardware_id:
        raise UserError(f"--results: {path} holds the comparison of {old}, this dataset is {hardware_id}; give "
                        f"--results {results_dir_for(hardware_id)} (or another folder) so it is kept")
    return out


def _summarize(args) -> int:
    from autotune.data.store import read_manifest

    args.results = resolve_results(args.results, read_manifest(args.dataset)["hardware"]["hardware_id"])
    path = os.path.join(args.results, "comparison.json")
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError) as err:
        raise UserError(f"--summarize-only: cannot read {path} ({err}); train first (make train-costmodel)") from None
    if result.get("format") != FORMAT:
        raise UserError(f"--summarize-only: {path} has layout {result.get('format')!r}, this code reads {FORMAT}; "
                        "retrain (make train-costmodel)")
    _write_comparison(result, args.models_dir, args.results)
    return 0


def _write_comparison(result: dict, models_dir: str, results_dir: str) -> None:
    """What follows from the rows — the paired table, the models folder's size, the done-when checks (with the
    newest throughput benchmark of these models), the data-curve reading — then comparison.json / .md."""
    size = folder_bytes(models_dir)
    result.update({"paired": paired_table(result["rows"]), "models_dir_bytes": size,
                   "done_when": done_when(result["rows"], size, latest_throughput_benchmark(
                       os.path.join(models_dir, result["hardware_id"])), models_dir),
                   "data_curve": data_curve_reading(results_dir, result["dataset_manifest_sha256"]),
                   "folds": folds_reading(results_dir, result["dataset_manifest_sha256"])})
    best = best_sequence_kind(result["rows"])
    result["top1_losses"] = best and top1_loss_reading(results_dir, result["dataset_manifest_sha256"], best)
    write_results(os.path.join(results_dir, "comparison.json"), result, os.path.join(results_dir, "comparison.md"),
                  markdown_table(result))


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
        _write_comparison(result, args.models_dir, args.results)
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


# ---- comparison over seeds: paired differences and the done-when block ----

def _per_seed(row: dict, view: str, metric: str) -> dict:
    """seed -> the row's mean ``metric`` in ``view`` (seed None: a model without a seed)."""
    over = row["metrics"].get("over_seeds", {}).get(view)
    if not over:
        return {}
    return dict(zip(row["seeds"], over["runs"][metric]))


def compare(a: dict, b: dict, view: str = "all", metric: str = "top1") -> dict:
    """``evaluate.paired`` of rows ``a`` and ``b`` over their common seeds; a model without a seed is the
    same model for every seed, so its one score pairs with each of the other's."""
    from .evaluate import paired

    ra, rb = _per_seed(a, view, metric), _per_seed(b, view, metric)
    if not ra or not rb:
        return {"n": 0}
    if None in ra and None in rb:
        seeds = [None]
    elif None in ra or None in rb:
        seeds = sorted(rb if None in ra else ra)
    else:
        seeds = sorted(set(ra) & set(rb))
    xa = [ra[None] if None in ra else ra[s] for s in seeds]
    xb = [rb[None] if None in rb else rb[s] for s in seeds]
    return {**paired(xa, xb), "seeds": seeds}


def paired_table(rows: list[dict]) -> list[dict]:
    """Every model pair (row order, a before b): the paired a - b difference per view and metric."""
    from .evaluate import METRICS, VIEWS

    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            out.append({"a": a["kind"], "b": b["kind"],
                        **{v: {m: compare(a, b, v, m) for m in METRICS} for v in VIEWS
                           if a["metrics"].get("over_seeds", {}).get(v)}})
    return out


def folder_bytes(path: str) -> int:
    """Bytes of every file under ``path`` (``du``'s apparent size)."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def _descriptor_of(hardware: dict) -> dict | None:
    """The CPU descriptor a card records (``autotune.hardware.describe``); None for a GPU dataset."""
    from autotune.hardware import describe

    return describe(hardware) if hardware.get("target", {}).get("kind") == "llvm" else None


def manifest_sha256(manifest: dict) -> str:
    """The dataset identity results and cards record: sha256 of its manifest as sorted JSON."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def _result_of_dataset(path: str, manifest_hash: str) -> dict | None:
    """An experiment's result JSON when it is readable and was measured on the dataset of ``manifest_hash``."""
    try:
        with open(path, encoding="utf-8") as f:
            got = json.load(f)
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and got.get("dataset_manifest_sha256") == manifest_hash else None


def folds_reading(results_dir: str, manifest_hash: str) -> dict | None:
    """The fold rotation's summary (``folds.py``: every network held out once) when it was run on this dataset."""
    got = _result_of_dataset(os.path.join(results_dir, "folds.json"), manifest_hash)
    return got and got.get("summary")


def view_networks(rows: list[dict]) -> str:
    """Which networks each view averages (a view without scorable tasks of a network leaves it out)."""
    views = next((r["metrics"].get("views") for r in rows if r["metrics"].get("views")), None) or {}
    return "; ".join(f"`{v}` over {', '.join(m for m in per if m != 'mean')}" for v, per in views.items())


def folds_lines(result: dict) -> list[str]:
    folds = result.get("folds")
    if not folds:
        return ["", "## Fold rotation", "", "Not run on this dataset (`python -m autotune.costmodel.folds --dataset "
                f"{result.get('dataset', 'DATASET')}`)."]
    from .folds import table_lines

    return ["", "## Fold rotation: every network held out once (`folds.json`)", "",
            "Beside the fixed split: each network of the dataset held out in turn (its tasks, shared ones included, "
            "out of training), scored on its own programs (view `all`); mean ± sd over the folds, so the spread says "
            "how much a model's score depends on which networks are new. A model with fewer folds is partial.", "",
            *table_lines(folds)]


def data_curve_reading(results_dir: str, manifest_hash: str, target: float = TARGETS["seq_top1"]) -> dict | None:
    """What ``experiments/costmodel/data_curve.py`` measured on the same dataset (``results_dir``/data_curve.json):
    per kind, held-out top-1 when fitted on every training program, its least-squares slope per doubling of
    programs per task, and — an extrapolation, labelled so — the programs per task at which that slope would
    reach ``target``. None without a (non-quick) result for this dataset."""
    got = _result_of_dataset(os.path.join(results_dir, "data_curve.json"), manifest_hash)
    if got is None or got.get("quick"):
        return None
    kinds = {}
    for kind, slopes in got.get("slope_per_doubling", {}).items():
        full = [r for r in got.get("rows", []) if r["kind"] == kind and r["cap"] == "all" and "all_top1" in r]
        slope = slopes.get("all_top1")
        if not full or slope is None:
            continue
        top1, ppt = full[0]["all_top1"]["mean"], full[0]["programs_per_task"]
        need = ppt * 2 ** ((target - top1) / slope) if slope > 0 and top1 < target else None
        kinds[kind] = {"top1": top1, "programs_per_task": ppt, "slope_per_doubling": slope,
                       "slope_sd": got.get("slope_sd_over_seeds", {}).get(kind, {}).get("all_top1"),
                       "programs_per_task_for_target": need}
    sds = [r["all_top1"]["sd"] for r in got.get("rows", []) if r.get("all_top1", {}).get("sd") is not None]
    return {"path": os.path.join(results_dir, "data_curve.md"), "target": target, "kinds": kinds,
            "missing": len(got.get("missing", [])), "max_top1_sd": max(sds, default=None)} if kinds else None


def top1_loss_reading(results_dir: str, manifest_hash: str, kind: str) -> dict | None:
    """Where ``kind`` loses held-out top-1, as ``experiments/costmodel/top1_analysis.py`` measured it on the same
    dataset (``results_dir``/top1_analysis.json, the saved first-seed model): per held-out model its top-1, the
    share of the lost top-1 that picks >= ``catastrophic_ratio`` x slower than the task's best cost, how many tasks
    made such a pick, and the costliest task. None without a result for this dataset and kind."""
    got = _result_of_dataset(os.path.join(results_dir, "top1_analysis.json"), manifest_hash)
    per = got and got.get("losses", {}).get(kind)
    if not per:
        return None
    models = {}
    for name, e in per.items():
        lost = 1.0 - e["top1"]
        worst = e["worst"][0] if e.get("worst") else None
        models[name] = {"top1": e["top1"], "catastrophic_share": e["loss_from_catastrophic"] / lost if lost > 0 else 0.0,
                        "catastrophic_tasks": e["catastrophic_tasks"], "tasks": e["tasks"],
                        "worst": worst and {"name": worst["name"], "loss_share": worst["loss_share"],
                                            "pick_over_best": worst["pick_over_best"]}}
    return {"path": os.path.join(results_dir, "top1_analysis.md"), "kind": kind, "ratio": got["catastrophic_ratio"],
            "card_commit": got.get("cards", {}).get(kind), "models": models}


def latest_throughput_benchmark(models_dir: str, bench_dir: str = BENCH_DIR) -> dict | None:
    """The newest ``benchmarks/predict_throughput.py`` result that timed the models of ``models_dir``
    (e.g. ``models/cpu-znver3-2c``): {"path", "machine", "time", "programs_per_s": {kind: median}}, or None.
    That benchmark times every model side by side in alternating rounds, alone on the machine: the reading
    the throughput targets mean; the number a training run records right after each fit shares the CPU
    with whatever else ran then."""
    import glob

    want = os.path.normpath(models_dir)
    best = None
    for path in glob.glob(os.path.join(bench_dir, "predict_throughput_*.json")):
        try:
            with open(path, encoding="utf-8") as f:
                got = json.load(f)
            meta, rows = got["meta"], got["rows"]
        except (OSError, ValueError, KeyError):
            continue
        if os.path.normpath(str(meta.get("models_dir", ""))) != want or not isinstance(rows, dict):
            continue
        if best is None or str(meta.get("time", "")) > best["time"]:
            best = {"path": os.path.join(bench_dir, os.path.basename(path))[: -len(".json")] + ".md",
                    "machine": meta.get("machine"), "time": str(meta.get("time", "")),
                    "programs_per_s": {k: v["median_programs_per_s"] for k, v in rows.items()
                                       if isinstance(v, dict) and "median_programs_per_s" in v}}
    return best


def best_sequence_kind(rows: list[dict]) -> str | None:
    """The sequence model with the highest mean held-out top-1 (view all) over its seeds; None without one."""
    def top1(row):
        return row["metrics"].get("over_seeds", {}).get("all", {}).get("mean", {}).get("top1")

    seqs = [r for r in rows if is_sequence_model(r["kind"]) and top1(r) is not None]
    return max(seqs, key=top1)["kind"] if seqs else None


def done_when(rows: list[dict], models_dir_bytes: int | None = None, benchmark: dict | None = None,
              models_dir: str | None = None) -> list[dict]:
    """Issue 12's targets checked against ``rows`` (and the size of the models folder):
    [{target, value, threshold, reached (None: not measured), detail, unit}]. With ``benchmark``
    (``latest_throughput_benchmark``), the programs/s targets read its side-by-side reading of the same
    saved models, and the detail gives the training run's own reading beside it."""
    by_kind = {r["kind"]: r for r in rows}

    def mean(row, metric):
        return row["metrics"].get("over_seeds", {}).get("all", {}).get("mean", {}).get(metric)

    best = by_kind.get(best_sequence_kind(rows))
    name = best["kind"] if best else "no sequence model"
    out = []

    def check(target, value, threshold, detail="", also=True, unit="score", at_most=False):
        reached = None if value is None else bool((value <= threshold if at_most else value >= threshold) and also)
        out.append({"target": target, "value": value, "threshold": threshold, "reached": reached, "detail": detail,
                    "unit": unit})

    check(f"best sequence model ({name}) mean top-1 ≥ {TARGETS['seq_top1']}", best and mean(best, "top1"),
          TARGETS["seq_top1"])
    ms = by_kind.get("ms-xgb")
    diff = compare(best, ms) if best and ms else {"n": 0}
    margin = diff.get("mean_diff")
    sd = diff.get("sd_diff")
    check(f"{name} − ms-xgb paired top-1 ≥ +{TARGETS['seq_over_ms_xgb']} and larger than its sd", margin,
          TARGETS["seq_over_ms_xgb"],
          "" if margin is None else f"± {'-' if sd is None else f'{sd:.3f}'} over {diff['n']} seed(s), "
          f"{'larger than its sd' if diff.get('clear') and margin > 0 else 'not larger than its sd'}",
          also=bool(diff.get("clear")) and margin is not None and margin > 0, unit="difference")
    check(f"best sequence model ({name}) mean top-5 ≥ {TARGETS['seq_top5']}", best and mean(best, "top5"),
          TARGETS["seq_top5"])
    def programs_per_s(row) -> tuple:
        if not row:
            return None, ""
        own = row["predict_programs_per_s"]
        bench = (benchmark or {}).get("programs_per_s", {}).get(row["kind"])
        if bench is None or benchmark["time"] < str(row.get("trained", "")):  # it timed an older model
            return own, ""
        return bench, (f"{benchmark['path']} on {benchmark['machine']}, every model side by side, median; this "
                       f"training run's own reading after the fit: {own:,.0f}")

    value, detail = programs_per_s(best)
    check(f"{name} programs/s ≥ {TARGETS['seq_programs_per_s']:,}", value, TARGETS["seq_programs_per_s"], detail,
          unit="count")
    value, detail = programs_per_s(by_kind.get("xgb"))
    check(f"xgb programs/s ≥ {TARGETS['xgb_programs_per_s']:,}", value, TARGETS["xgb_programs_per_s"], detail,
          unit="count")
    seeded = [len(r["seeds"]) for r in rows if r["seeds"] != [None]]
    check(f"every seeded model over ≥ {TARGETS['seeds']} seeds", min(seeded) if seeded else None, TARGETS["seeds"],
          unit="count")
    where = f" ({os.path.relpath(models_dir)})" if models_dir else ""  # the folder these models were written to
    check(f"models folder{where} ≤ {TARGETS['models_dir_mb']} MB", None if models_dir_bytes is None else models_dir_bytes / 1e6,
          TARGETS["models_dir_mb"], unit="MB", at_most=True)
    return out


# ---- markdown ----

def _pm(over: dict | None, metric: str) -> str:
    if not over:
        return "-"
    sd = over["sd"][metric]
    return f"{over['mean'][metric]:.3f}" + ("" if sd is None else f" ± {sd:.3f}")


def _diff_cell(p: dict | None) -> str:
    if not p or not p.get("n"):
        return "-"
    sd = "-" if p["sd_diff"] is None else f"{p['sd_diff']:.3f}"
    mark = " **clear**" if p["clear"] else " (no seed spread)" if p.get("no_spread") else ""
    return f"{p['mean_diff']:+.3f} ± {sd} ({p['wins']}/{p['n']}){mark}"


def _value(v, unit: str) -> str:
    if v is None:
        return "not measured"
    return {"count": f"{v:,.0f}", "difference": f"{v:+.3f}", "MB": f"{v:.1f} MB"}.get(unit, f"{v:.3f}")


def markdown_table(result: dict) -> str:
    held, rows = result["held_out"], result["rows"]
    lines = [f"# Cost models on {result['hardware_id']} (held-out models: {', '.join(held)})", "",
             f"Train programs: {result['train_programs']}. Seeds {result['seeds']}. Dataset manifest sha256 "
             f"{result['dataset_manifest_sha256'][:12]}, commit {str(result['git_commit'])[:10]}. Fits, timings and "
             f"programs/s measured on {result.get('measured_on', 'an unrecorded machine')}, load {result['loadavg']}"
             + (" (--quick: small models, numbers are a smoke test)" if result.get("quick") else "") + ". "
             + ("Programs: copies of a schedule measured more than once merged into one (`merge_duplicates`)."
                if result.get("duplicates") == "merged" else
                "**Scored before copies of a schedule were merged** (each measured row counted as a program; "
                "refit to compare with tables that merge them)."), "",
             "## How the rows were chosen (issue 47)", "",
             "The held-out models are the test networks, read here once. Choices made without them: each kind's "
             "hyperparameters (Optuna studies on training tasks, `hparams.py`), the ensemble's members (validation "
             "networks, `experiments/costmodel/ensemble_select.py`). Made **on the test networks** before the split "
             "was enforced, not yet re-selected on validation networks: the sequence variants' recipes "
             "(`seq-lstm-cos`'s schedule and soup, `seq-lstm-cos-x2`, `seq-lstm-rows`) and `seq-lstm-distil`'s mode "
             "and weight (`experiments/costmodel/results/variants.jsonl`); those rows are a maximum over tries on "
             "the test set, optimistic by construction. `experiments/costmodel/variants.py` now scores validation "
             "networks only (`variants_validation.jsonl`).", "",
             "## Held-out scores, mean ± sd over seeds", "",
             "Views: `all` = every measured program of a held-out model's tasks (TenSet/TLP); `search` = only the "
             "programs the evolutionary sampler produced (where the search ranks); `unseen` = without tasks a "
             "training model shares (same task or same argument shapes). Each view: mean over the held-out models "
             f"it can score ({view_networks(rows)}).", ""]
    head = ["model", "seeds", "top-1 all", "top-5 all", "pairwise all", "top-1 search", "top-5 search",
            "top-1 unseen", "top-5 unseen", "predict programs/s", "fit s (first seed)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        over = r["metrics"].get("over_seeds", {})
        seeds = "1 (no seed)" if r["seeds"] == [None] else str(len(r["seeds"]))
        lines.append("| " + " | ".join([r["kind"], seeds, _pm(over.get("all"), "top1"), _pm(over.get("all"), "top5"),
                                        _pm(over.get("all"), "pairwise"), _pm(over.get("search"), "top1"),
                                        _pm(over.get("search"), "top5"), _pm(over.get("unseen"), "top1"),
                                        _pm(over.get("unseen"), "top5"), f"{r['predict_programs_per_s']:.0f}",
                                        f"{r['fit_seconds']:.0f}"]) + " |")
    lines += folds_lines(result)
    lines += ["", "## Paired comparison over the same seeds (a − b)", "",
              "Cell: mean difference ± its sd over seeds (seeds where a beat b / seeds); **clear** when |mean| > sd > 0 "
              "(two models that do not vary with the seed have no spread to compare with: marked *no seed spread*). "
              "A model without a seed pairs its one score with each of the other's seeds.", ""]
    head = ["a − b", "top-1 all", "top-1 search", "top-1 unseen", "top-5 all", "pairwise all"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in result["paired"]:
        cells = [_diff_cell(p.get(v, {}).get(m)) for v, m in
                 (("all", "top1"), ("search", "top1"), ("unseen", "top1"), ("all", "top5"), ("all", "pairwise"))]
        lines.append(f"| {p['a']} − {p['b']} | " + " | ".join(cells) + " |")
    lines += ["", "## Per held-out model (first seed, view all)", ""]
    head = ["model"] + [f"{m} top-1" for m in held] + [f"{m} top-5" for m in held]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        m = r["metrics"]
        lines.append("| " + " | ".join([r["kind"]] + [_top1_cell(m[h]) if h in m else "-" for h in held]
                                       + [f"{m[h]['top5']:.3f}" if h in m else "-" for h in held]) + " |")
    lines += ["", "Top-1 cells: the TenSet weighted score (each held-out model's own task weights), and in brackets "
              "its 90% bootstrap interval over the model's tasks (tasks resampled; it shows how much the few "
              "heaviest tasks' single picks move it).",
              "Pairwise: share of a task's program pairs ordered right (ties in score count one half).", "",
              "## Done when (issue 12; computed from the numbers above)", ""]
    for d in result["done_when"]:
        state = {True: "**reached**", False: "**not reached**", None: "**not measured**"}[d["reached"]]
        short = ""
        if d["reached"] is False and d["unit"] == "MB":
            short = f", over by {_value(d['value'] - d['threshold'], 'MB')}"
        elif d["reached"] is False and d["value"] < d["threshold"]:
            short = f", short by {_value(d['threshold'] - d['value'], 'count' if d['unit'] == 'count' else 'score')}"
        detail = f" ({d['detail']})" if d["detail"] else ""
        lines.append(f"- {d['target']}: {_value(d['value'], d['unit'])}{detail} — {state}{short}")
    lines += why_lines(result)
    lines += ["", f"Reproduce: `{reproduce_command(result)}` (`make train-costmodel` with DATASET, MODELS, SEEDS; "
                  "see autotune/costmodel/train.py).", ""]
    return "\n".join(lines)


def why_lines(result: dict) -> list[str]:
    """The comparison's "why" blocks (markdown lines): what the data curve's slope implies for the top-1 target
    (``data_curve_reading``) and where the best sequence model loses top-1 (``top1_loss_reading``)."""
    lines: list[str] = []
    curve = result.get("data_curve")
    if curve:
        lines += ["", f"Why top-1 stays short — more training programs per task, measured (`{curve['path']}`: each "
                      "training task capped at fewer of its programs, same held-out programs; a least-squares line"
                  + (f" through points whose top-1 sd over seeds is up to {curve['max_top1_sd']:.3f}"
                     if curve.get("max_top1_sd") is not None else "")
                  + (f"; {curve['missing']} fits still missing" if curve["missing"] else "") + "):", ""]
        for kind, k in curve["kinds"].items():
            need = k["programs_per_task_for_target"]
            reach = (f"at that slope top-1 {curve['target']} would need more than {MAX_CURVE_FACTOR}x today's programs "
                     "per task — too far past the measured caps to read as a plan"
                     if need and need / k["programs_per_task"] > MAX_CURVE_FACTOR else
                     f"at that slope top-1 {curve['target']} would need ~{need:,.0f} programs per task "
                     f"({need / k['programs_per_task']:,.1f}x today's) — an extrapolation, not a measurement"
                     if need else "no gain per doubling to extrapolate from" if k["slope_per_doubling"] <= 0 else
                     "already at the target")
            lines.append(f"- {kind}: top-1 {k['top1']:.3f} at {k['programs_per_task']:.1f} programs per task, "
                         f"{k['slope_per_doubling']:+.3f}"
                         + (f" (sd {k['slope_sd']:.3f} over seeds)" if k.get("slope_sd") is not None else "")
                         + f" per doubling; {reach}")
    losses = result.get("top1_losses")
    if losses:
        lines += ["", f"Where {losses['kind']} loses top-1 (`{losses['path']}`: its saved first-seed model, card commit "
                      f"{str(losses['card_commit'])[:10]}; TenSet's score is 1 − the weighted latency the task picks "
                      "lose):", ""]
        for name, m in losses["models"].items():
            w = m["worst"]
            lines.append(f"- {name}: top-1 {m['top1']:.3f}; {m['catastrophic_share']:.0%} of the lost {1 - m['top1']:.3f} "
                         f"from picks ≥ {losses['ratio']:.0f}x slower than the task's best, in {m['catastrophic_tasks']} "
                         f"of {m['tasks']} tasks"
                         + (f"; costliest task {w['name']} ({w['loss_share']:.3f} of the score, pick "
                            f"{w['pick_over_best']:.1f}x the best)" if w else ""))
    return lines


def reproduce_command(result: dict) -> str:
    """The training command of a comparison: its dataset, models (rows), seeds and models folder."""
    if "dataset" not in result:
        return "make train-costmodel"
    cmd = (f"python -m autotune.costmodel.train --dataset {result['dataset']} --models "
           f"{','.join(r['kind'] for r in result.get('rows', []))} --seeds {len(result.get('seeds', [0]))}")
    if result.get("seeds") and result["seeds"][0] != 0:
        cmd += f" --seed {result['seeds'][0]}"
    if result.get("models_dir", "models") != "models":
        cmd += f" --models-dir {result['models_dir']}"
    out = result.get("results_dir")
    if out and os.path.normpath(out) != os.path.normpath(results_dir_for(result.get("hardware_id", ""))):
        cmd += f" --results {out}"
    return cmd + (" --quick" if result.get("quick") else "")


def _top1_cell(m: dict) -> str:
    lo_hi = m.get("top1_interval90")
    return f"{m['top1']:.3f} [{lo_hi[0]:.2f}–{lo_hi[1]:.2f}]" if lo_hi else f"{m['top1']:.3f}"


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
