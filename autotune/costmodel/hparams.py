"""``python -m autotune.costmodel.hparams`` (``make tune-costmodel-hparams``): Optuna studies.

For each model kind, TPE searches its hyperparameters on the *training* tasks only, split by
task into fit/validation (the held-out models are never seen). Each trial is evaluated at
growing fidelity (a quarter, half, all of its trees/epochs) and reports validation pairwise
accuracy, so the median pruner stops weak trials early. The study lives in an Optuna journal
file (resumable); the best parameters go to ``models/hparams/<kind>.json``, where
``make train-costmodel`` picks them up.
"""

from __future__ import annotations

import argparse
import logging
import os

from autotune.cli import run_main, setup_logging, write_json
from autotune.data.splits import HELD_OUT_MODELS
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.hparams")

FIDELITIES = (0.25, 0.5, 1.0)


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
    if kind == "seq":
        return {
            "d_model": trial.suggest_categorical("d_model", [32, 48, 64, 96]),
            "n_layers": trial.suggest_int("n_layers", 1, 3),
            "lr": trial.suggest_float("lr", 3e-4, 5e-3, log=True),
            "epochs": trial.suggest_int("epochs", 10, 40, step=5),
        }, "epochs"
    if kind == "ms-mlp":
        return {
            "lr": trial.suggest_float("lr", 3e-4, 5e-3, log=True),
            "epochs": trial.suggest_int("epochs", 10, 40, step=5),
        }, "epochs"
    raise UserError(f"--model: no search space for {kind!r}; valid: xgb, xgb-reg, seq, ms-mlp")


def run_study(dataset: str, kind: str, n_trials: int, storage_path: str, held_out: list[str], seed: int = 0,
              out_dir: str = os.path.join("models", "hparams")) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from autotune.data.splits import split_by_model, split_by_task

    from . import create
    from .data import load_training_data
    from .metrics import pairwise_accuracy

    data = load_training_data(dataset)
    train_keys, _ = split_by_model({k: data.tasks[k] for k in data.task_keys}, held_out)
    fit_keys, val_keys = split_by_task(train_keys, test_fraction=0.2, seed=seed)
    fit, val = data.select_tasks(fit_keys), data.select_tasks(val_keys)

    def objective(trial) -> float:
        params, fidelity_key = space(kind, trial)
        full = params[fidelity_key]
        acc = float("nan")
        for step, frac in enumerate(FIDELITIES):
            params[fidelity_key] = max(1, int(round(full * frac)))
            model = create(kind, **params).fit(fit.batch, fit.y, fit.groups)
            acc = pairwise_accuracy(val.latency, model.predict(val.batch), val.groups)
            trial.report(acc, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return acc

    os.makedirs(os.path.dirname(os.path.abspath(storage_path)), exist_ok=True)
    storage = JournalStorage(JournalFileBackend(storage_path))
    study = optuna.create_study(
        study_name=f"costmodel-{kind}", storage=storage, direction="maximize", load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0),
    )
    done = len([t for t in study.trials if t.state.is_finished()])
    study.optimize(objective, n_trials=max(0, n_trials - done))
    best = {"kind": kind, "params": study.best_params, "validation_pairwise": study.best_value,
            "trials": len(study.trials), "dataset": os.path.abspath(dataset), "held_out_never_used": held_out}
    write_json(os.path.join(out_dir, f"{kind}.json"), best)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.hparams", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default="xgb,seq")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--held-out", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--storage", default=os.path.join("models", "hparams", "optuna-journal.log"))
    ap.add_argument("--out-dir", default=os.path.join("models", "hparams"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    def body() -> int:
        setup_logging()
        for kind in [k.strip() for k in args.models.split(",") if k.strip()]:
            best = run_study(args.dataset, kind, args.trials, args.storage, args.held_out.split(","), args.seed,
                             args.out_dir)
            logger.info("%s: best validation pairwise %.4f with %s", kind, best["validation_pairwise"], best["params"])
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
