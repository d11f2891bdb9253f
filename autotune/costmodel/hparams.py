"""``python -m autotune.costmodel.hparams`` (``make tune-costmodel-hparams``): Optuna studies.

For each model kind, TPE searches its hyperparameters on the *training* tasks only, split by
task into fit/validation (the held-out models are never seen). Each trial is evaluated at
growing fidelity (a quarter, half, all of its trees/epochs) and reports its validation objective,
so the median pruner stops weak trials early. The objective (``--objective``):

- ``top1`` (default): TenSet's weighted top-1 score on the validation tasks, the headline metric
  of the comparison. A validation task's weight is its occurrence count in the first model that
  contains it (``tasks.jsonl``'s ``models[0]``), or 1 for a dataset without per-model weights: the
  validation tasks belong to training models, none of which is the one being scored;
- ``pairwise``: share of a task's program pairs ordered right (what earlier studies optimised;
  it rose while top-1 fell);
- ``blend``: the mean of the two;
- ``task_top1``: top-1 averaged over validation tasks, every task once (``metrics.task_mean_top_k``): the
  weighted top-1 moves in steps of the heaviest tasks' single picks, too coarse to tell configurations
  apart (what ``experiments/costmodel/ensemble_select.py`` found choosing the ensemble's members).

Held-out top-1 moves by tenths between seeds of one configuration (``results/comparison.md``), so one fit
per trial can rank configurations by their luck: ``--fit-seeds N`` fits every fidelity step N times (seeds
``--seed`` .. ``--seed``+N-1 for kinds that take a seed) and reports the mean of each score (the per-fit
values and their sd are kept in the trial's attributes). It costs N times the fits; studies with N > 1 are
separate studies in the journal.

A model-size bound (``--max-model-mb``, 5 MB) keeps ``models/`` small: after the first (quarter)
fit the saved model is measured and its full-fidelity size projected (XGBoost: bytes grow with the
number of trees; epochs do not change a network's size); a trial projected or measured over the
bound is pruned. The study lives in an Optuna journal file (resumable; one study per kind,
objective and bound) whose first trial is the kind's defaults, the bar the search is read against;
the best parameters go to ``models/hparams/<kind>.json``, where ``make train-costmodel`` picks them up.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import tempfile

from autotune.cli import run_main, setup_logging, write_json
from autotune.data import splits
from autotune.data.store import portable_path
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.hparams")

FIDELITIES = (0.25, 0.5, 1.0)
OBJECTIVES = ("top1", "pairwise", "blend", "task_top1")
MAX_MODEL_MB = 5.0
KINDS = ("xgb", "xgb-reg", "seq", "seq-lstm", "seq-top", "ms-mlp")  # kinds with a search space
# fidelity parameters the saved size grows with (trees); epochs leave a network's size unchanged
SIZE_GROWS_WITH = ("n_estimators",)


def space(kind: str, trial) -> tuple[dict, str]:
    """(params, fidelity parameter name) for one trial."""
    if kind in ("xgb", "xgb-reg"):
        return {
            "n_estimators": trial.suggest_int("n_estimators", 100, 600, step=50),
            "max_depth": trial.suggest_int("max_depth", 4, 12),
            "learning_rate": trial.suggest_float("learning_rate", 0.02, 0.3, log=True),
            "min_child_weight": trial.suggest_float("min_child_weight", 0.5, 10, log=True),
            "subsample": trial.suggest_float("subsample", 0.6, 1.0),
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.5, 1.0),
        }, "n_estimators"
    if kind in ("seq", "seq-lstm", "seq-top"):  # the mixer (and seq-top's gains) stay the registered kind's
        params = {
            "d_model": trial.suggest_categorical("d_model", [32, 48, 64, 96]),
            "n_layers": trial.suggest_int("n_layers", 1, 3),
            "lr": trial.suggest_float("lr", 3e-4, 5e-3, log=True),
            "epochs": trial.suggest_int("epochs", 10, 40, step=5),
        }
        if kind == "seq-lstm":  # LambdaRank gains 2^(s*y) - 1: s = 4 was 0.599 +- 0.042 on held-out, s = 1 0.602
            params["gain_scale"] = trial.suggest_categorical("gain_scale", [1.0, 2.0, 4.0])
            params["dropout"] = trial.suggest_float("dropout", 0.0, 0.3)
        return params, "epochs"
    if kind == "ms-mlp":
        return {
            "lr": trial.suggest_float("lr", 3e-4, 5e-3, log=True),
            "epochs": trial.suggest_int("epochs", 10, 40, step=5),
        }, "epochs"
    raise UserError(f"--models: no search space for {kind!r}; valid: {', '.join(KINDS)}")


def default_params(kind: str) -> dict:
    """The kind's default value of every parameter its search space has (the registered kind's overrides
    included: seq-top's gains stay 4)."""
    import optuna

    from . import create

    return space(kind, optuna.trial.FixedTrial(create(kind).get_params()))[0]


def validation_weights(data, keys) -> dict[int, float]:
    """group id -> weight of each validation task: its count in the first model that contains it, or 1
    when the dataset has no per-model weights (see the module docstring)."""
    out = {}
    for key in keys:
        task = data.tasks[key]
        first = (task.get("models") or [None])[0]
        out[data.task_keys.index(key)] = float((task.get("model_weights") or {}).get(first, 1))
    return out


def score(objective: str, val, weights: dict, pred) -> dict:
    """Validation top-1, pairwise, task-mean top-1 and the objective's value for predictions ``pred`` on ``val``."""
    from .metrics import pairwise_accuracy, task_mean_top_k, top_k_score

    top1 = top_k_score(val.latency, pred, val.groups, weights, 1)
    pairwise = pairwise_accuracy(val.latency, pred, val.groups)
    task_top1 = task_mean_top_k(val.latency, pred, val.groups, 1)
    value = {"top1": top1, "pairwise": pairwise, "blend": (top1 + pairwise) / 2, "task_top1": task_top1}[objective]
    return {"top1": top1, "pairwise": pairwise, "task_top1": task_top1, "value": value}


def mean_scores(runs: list[dict]) -> dict:
    """The mean of each score over fits of one configuration (``score`` results), with the objective value's
    per-fit values and sd (None for one fit)."""
    import statistics

    out = {k: float(statistics.fmean(r[k] for r in runs)) for k in runs[0]}
    values = [r["value"] for r in runs]
    return {**out, "value_runs": values, "value_sd": statistics.stdev(values) if len(values) > 1 else None}


def saved_bytes(model) -> int:
    """Bytes of ``model`` as ``save`` writes it (all files of its folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save(tmp)
        return sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))


def _study_data(dataset: str, kind: str, objective: str, max_model_mb: float, held_out: list[str] | None, seed: int,
                fit_seeds: int = 1):
    """Check the study's settings and split the training tasks into fit / validation (one line on bad input)."""
    from autotune.data.splits import split_by_task

    from .data import load_selection_split

    if kind not in KINDS:
        raise UserError(f"--models: no search space for {kind!r}; valid: {', '.join(KINDS)}")
    if objective not in OBJECTIVES:
        raise UserError(f"--objective: unknown {objective!r}; valid: {', '.join(OBJECTIVES)}")
    if not max_model_mb > 0:
        raise UserError(f"--max-model-mb: {max_model_mb} is not a size; give a positive number of MB")
    if fit_seeds < 1:
        raise UserError(f"--fit-seeds: {fit_seeds}; give 1 or more fits per trial")
    data, train_keys, _ = load_selection_split(dataset, held_out, ())
    fit_keys, val_keys = split_by_task(train_keys, test_fraction=0.2, seed=seed)
    return data.select_tasks(fit_keys), data.select_tasks(val_keys), validation_weights(data, val_keys), val_keys


def run_study(dataset: str, kind: str, n_trials: int, storage_path: str, held_out: list[str] | None, seed: int = 0,
              out_dir: str = os.path.join("models", "hparams"), objective: str = "top1",
              max_model_mb: float = MAX_MODEL_MB, fit_seeds: int = 1) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from . import create_seeded, takes_seed

    bound = int(max_model_mb * 1e6)
    fit, val, weights, val_keys = _study_data(dataset, kind, objective, max_model_mb, held_out, seed, fit_seeds)
    seeds = [seed + i for i in range(fit_seeds)] if takes_seed(kind) else [seed]

    def trial_objective(trial) -> float:
        params, fidelity_key = space(kind, trial)
        full = params[fidelity_key]
        result = {"value": float("nan")}
        for step, frac in enumerate(FIDELITIES):
            params[fidelity_key] = max(1, int(round(full * frac)))
            models = [create_seeded(kind, s, **params).fit(fit.batch, fit.y, fit.groups, latency=fit.latency) for s in seeds]
            size = max(saved_bytes(m) for m in models)
            grow = full / params[fidelity_key] if fidelity_key in SIZE_GROWS_WITH else 1.0
            trial.set_user_attr("model_bytes" if frac == 1.0 else "projected_model_bytes", int(size * grow))
            if size * grow > bound:
                trial.set_user_attr("over_size_bound", True)
                if step > 0:  # earlier steps reported a score: mark this one as worthless
                    trial.report(float("nan"), step)
                raise optuna.TrialPruned(f"model {size * grow / 1e6:.1f} MB > {max_model_mb} MB")
            result = mean_scores([score(objective, val, weights, m.predict(val.batch)) for m in models])
            trial.set_user_attr("validation", {k: result[k] for k in ("top1", "pairwise", "task_top1")})
            trial.set_user_attr("validation_runs", {"seeds": seeds, objective: result["value_runs"],
                                                    "sd": result["value_sd"]})
            trial.report(result["value"], step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return result["value"]

    os.makedirs(os.path.dirname(os.path.abspath(storage_path)), exist_ok=True)
    storage = JournalStorage(JournalFileBackend(storage_path))
    study = optuna.create_study(
        study_name=f"costmodel-{kind}-{objective}-max{max_model_mb:g}mb" + (f"-seeds{len(seeds)}" if len(seeds) > 1 else ""),
        storage=storage, direction="maximize",
        load_if_exists=True, sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0),
    )
    if not study.trials:  # the kind's defaults first: the bar every searched configuration is read against
        study.enqueue_trial(default_params(kind), user_attrs={"defaults": True})
    done = len([t for t in study.trials if t.state.is_finished()])
    study.optimize(trial_objective, n_trials=max(0, n_trials - done))
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and not math.isnan(t.value)]
    over = [t for t in study.trials if t.user_attrs.get("over_size_bound")]
    if not complete:
        sizes = [t.user_attrs.get("model_bytes", t.user_attrs.get("projected_model_bytes", 0)) for t in over]
        smallest = f"; the smallest was {min(sizes) / 1e6:.2f} MB" if sizes else ""
        raise UserError(f"--max-model-mb: no {kind} trial of {len(study.trials)} finished within {max_model_mb} MB "
                        f"({len(over)} over the bound{smallest}); raise the bound or run more --trials")
    best_trial = study.best_trial
    best = {"kind": kind, "params": best_trial.params, "objective": objective,
            f"validation_{objective}": best_trial.value, "validation": best_trial.user_attrs.get("validation"),
            "validation_runs": best_trial.user_attrs.get("validation_runs"),
            "model_bytes": best_trial.user_attrs.get("model_bytes"), "max_model_bytes": bound,
            "trials": len(study.trials), "trials_over_size_bound": len(over), "validation_tasks": len(val_keys),
            "validation_weights": "count of the task in its first model (tasks.jsonl models[0]), 1 without weights",
            "dataset": portable_path(dataset),
            "held_out_never_used": held_out or "the dataset's test networks (splits.selection())"}
    write_json(os.path.join(out_dir, f"{kind}.json"), best)
    return best


def main(argv=None) -> int:
    # before torch loads: OpenMP threads that spin-wait collapse 10-100x on cores other processes share
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.hparams", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default="xgb,seq")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--objective", default="top1",
                    help=f"validation objective, one of: {', '.join(OBJECTIVES)} (default: %(default)s)")
    ap.add_argument("--max-model-mb", type=float, default=MAX_MODEL_MB,
                    help="prune trials whose saved model is (projected to be) larger (default: %(default)s)")
    ap.add_argument("--held-out", default=None,
                    help="the test networks, dropped before anything is read (default: the comparison's)")
    ap.add_argument("--storage", default=os.path.join("models", "hparams", "optuna-journal.log"))
    ap.add_argument("--out-dir", default=os.path.join("models", "hparams"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-seeds", type=int, default=1,
                    help="fits per trial and fidelity step, scores averaged (seeds --seed..; default: %(default)s)")
    args = ap.parse_args(argv)

    def body() -> int:
        setup_logging()
        with splits.selection():  # the test split raises in here (splits.TestSplitForbidden)
            return studies()

    def studies() -> int:
        for kind in [k.strip() for k in args.models.split(",") if k.strip()]:
            best = run_study(args.dataset, kind, args.trials, args.storage,
                             args.held_out.split(",") if args.held_out else None, args.seed,
                             args.out_dir, args.objective, args.max_model_mb, args.fit_seeds)
            logger.info("%s: best validation %s %.4f (top-1 %.4f, pairwise %.4f), %.2f MB, with %s", kind,
                        args.objective, best[f"validation_{args.objective}"], best["validation"]["top1"],
                        best["validation"]["pairwise"], (best["model_bytes"] or 0) / 1e6, best["params"])
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
