"""``python -m autotune.tune``: tune a whole model for this machine and compile it.

    python -m autotune.tune --model resnet18 --target llvm --trials 400

Imports the model through torch.export into Relax, extracts MetaSchedule tasks, tunes
them, compiles with the database, checks numerics against torch and times untuned TVM,
tuned TVM and torch eager side by side. Re-running with the same --work-dir resumes.
"""

from __future__ import annotations

import time

_T_START = time.time()  # noqa: E402  (start-up is measured from here)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402

from autotune.cli import loadavg, run_main, setup_logging, versions, write_json  # noqa: E402
from autotune.errors import UserError  # noqa: E402
from autotune.lock import FolderLock  # noqa: E402

COST_MODELS = ("auto", "ms-xgb", "xgb", "seq", "ms-mlp", "online-xgb", "random")  # see autotune.tuning.tuner
STRATEGIES = ("evolutionary", "optuna", "replay-trace")
ONLINE_UPDATES = ("blend", "finetune", "residual", "none")  # see autotune.costmodel.online

logger = logging.getLogger("autotune.tune")

WORKDIR_META = "autotune_workdir.json"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autotune.tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", help="zoo model name or path to a torch.export .pt2 file")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU), 'cuda', or a JSON target dict")
    p.add_argument("--trials", type=int, default=400, help="total measured trials (all runs together)")
    p.add_argument("--trials-per-task", type=int, default=None, help="cap of trials for any one task")
    p.add_argument("--trials-per-round", type=int, default=16, help="candidates measured per search round")
    p.add_argument("--work-dir", default=None, help="where the database, logs and report go (default runs/<model>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cost-model", default="auto",
                   help=f"one of: {', '.join(COST_MODELS)} (auto, the default: our pretrained seq model for this "
                        "hardware if present, else MetaSchedule's online XGBoost)")
    p.add_argument("--strategy", default="evolutionary",
                   help="search strategy: evolutionary (MetaSchedule's, guided by --cost-model), optuna (TPE over the "
                        "schedule decisions, no cost model) or replay-trace (random)")
    p.add_argument("--population", type=int, default=None,
                   help="evolutionary search population per round (default: autotune.tuning.tuner.SearchConfig)")
    p.add_argument("--search-iters", type=int, default=None, help="evolutionary search generations per round")
    p.add_argument("--online-update", default="finetune",
                   help="how a pretrained cost model learns from this run's measurements: finetune (train a copy "
                        "further on each task's programs, default), blend (rank-average with an online XGBoost), "
                        "residual (XGBoost on its errors) or none")
    p.add_argument("--cost-model-path", default=None, help="a saved cost model folder (overrides models/)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--input-shape", default=None, help="input shape without batch, e.g. 3,224,224 or 128")
    p.add_argument("--num-cores", type=int, default=None, help="threads for the tuned program (default: all)")
    p.add_argument("--skip-untuned", action="store_true", help="do not time the untuned TVM build")
    p.add_argument("--bench-rounds", type=int, default=5, help="alternating timing rounds per arm")
    p.add_argument("--rpc-tracker", default=None, help="host:port of a TVM RPC tracker to measure on")
    p.add_argument("--rpc-key", default=None, help="device key registered at the RPC tracker")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _positive(name: str, value: int | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or value < 1:
        raise UserError(f"{name} must be a positive integer, got {value}")


def _parse_shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--input-shape: expected comma-separated positive integers like 3,224,224, got {text!r}") from None
    if not shape or min(shape) < 1:
        raise UserError(f"--input-shape: expected comma-separated positive integers like 3,224,224, got {text!r}")
    return shape


def _check_work_dir(work_dir: str, meta: dict) -> None:
    path = os.path.join(work_dir, WORKDIR_META)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        for key in ("model", "target", "batch_size", "input_shapes"):
            if old.get(key) != meta.get(key):
                raise UserError(
                    f"--work-dir {work_dir} holds a run for {key}={json.dumps(old.get(key))}, not "
                    f"{json.dumps(meta.get(key))}; use another --work-dir (or the same {key})"
                )
    else:
        os.makedirs(work_dir, exist_ok=True)
        write_json(path, meta)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    _positive("--trials", args.trials)
    _positive("--trials-per-task", args.trials_per_task, allow_none=True)
    _positive("--trials-per-round", args.trials_per_round)
    _positive("--batch-size", args.batch_size)
    _positive("--num-cores", args.num_cores, allow_none=True)
    _positive("--bench-rounds", args.bench_rounds)
    _positive("--population", args.population, allow_none=True)
    _positive("--search-iters", args.search_iters, allow_none=True)
    if args.strategy not in STRATEGIES:
        raise UserError(f"--strategy: unknown {args.strategy!r}; valid: {', '.join(STRATEGIES)}")
    if args.online_update not in ONLINE_UPDATES:
        raise UserError(f"--online-update: unknown {args.online_update!r}; valid: {', '.join(ONLINE_UPDATES)}")
    if args.cost_model not in COST_MODELS:
        raise UserError(f"--cost-model: unknown {args.cost_model!r}; valid: {', '.join(COST_MODELS)}")
    rpc = _rpc_settings(args)
    input_shape = _parse_shape(args.input_shape)
    from autotune.frontend.models import check_model_spec

    check_model_spec(args.model)
    from autotune.tvmrt.target import parse_target, target_json

    target = parse_target(args.target, num_cores=args.num_cores)
    kind = str(target.kind.name)
    cores = int(target_json(target).get("num-cores", 1)) if kind == "llvm" else 1
    os.environ.setdefault("TVM_NUM_THREADS", str(cores))
    # TVM's pool pins its threads to cores and spins after each call, which starves torch's
    # threads when both run in one process (measured: torch eager 5-30x slower). Unpinned, with
    # a pause between timed arms, both run at full speed. Set before any TVM thread pool starts.
    os.environ.setdefault("TVM_BIND_THREADS", "0")
    from autotune.tuning.tuner import make_cost_model
    from autotune.tvmrt.target import hardware_id

    cost_model = make_cost_model(args.cost_model, cores, hw_id=hardware_id(target), path=args.cost_model_path,
                                  online=args.online_update)
    from autotune.tvmrt.measure import Measurer

    measurer = Measurer(target, rpc=rpc)
    measurer.warm_up()  # workers import TVM while we import the model
    try:
        return _tune(args, target, input_shape, measurer, cost_model)
    finally:
        measurer.close()


def _tune(args, target, input_shape, measurer, cost_model) -> int:
    from autotune.frontend.models import load_model
    from autotune.tvmrt.target import target_json

    kind = str(target.kind.name)

    model = load_model(args.model, batch_size=args.batch_size, input_shape=input_shape, seed=args.seed)
    work_dir = args.work_dir or os.path.join("runs", f"{model.name}-{kind}")
    meta = {
        "model": model.name,
        "target": target_json(target),
        "batch_size": args.batch_size,
        "input_shapes": [list(x.shape) for x in model.inputs],
    }
    lock = FolderLock(work_dir, "--work-dir").acquire()  # noqa: F841 - one run per work dir; freed on return/death
    _check_work_dir(work_dir, meta)
    setup_logging(os.path.join(work_dir, "logs"), verbose=args.verbose)
    from autotune.tuning.session import TuneSession

    session = TuneSession(model, target, work_dir, seed=args.seed, measurer=measurer, t_start=_T_START)
    report = session.run(
        trials=args.trials,
        trials_per_task=args.trials_per_task,
        trials_per_round=args.trials_per_round,
        cost_model=cost_model,
        cost_model_name=args.cost_model,
        time_untuned=not args.skip_untuned,
        bench_rounds=args.bench_rounds,
        search=search_config(args),
    )
    report["search"] = dataclasses.asdict(search_config(args))
    report["online_update"] = args.online_update
    report["cost_model_used"] = describe_cost_model(cost_model)
    report["cost_model_card"] = getattr(cost_model, "pretrained_card", None)
    from autotune.tvmrt.target import hardware_id

    report["hardware_id"] = hardware_id(target)
    report["versions"] = versions()
    report["loadavg_end"] = loadavg()
    write_json(os.path.join(work_dir, "report.json"), report)
    _print_summary(report, work_dir)
    return 0


def describe_cost_model(cost_model) -> str:
    """What ``--cost-model`` resolved to, for the report (``auto`` and fallbacks included)."""
    learner = getattr(cost_model, "learner", None)
    if learner is None:
        return type(cost_model).__name__
    pre = learner.pretrained
    return f"pretrained {pre.name} + {learner.mode}" if pre is not None else f"online-only ({learner.mode})"


def search_config(args):
    from autotune.tuning.tuner import SearchConfig

    extra = {}
    if args.population is not None:
        extra["population_size"] = args.population
    if args.search_iters is not None:
        extra["genetic_num_iters"] = args.search_iters
    return SearchConfig(num_trials_per_iter=args.trials_per_round, kind=args.strategy, **extra)


def _rpc_settings(args):
    if args.rpc_tracker is None and args.rpc_key is None:
        return None
    host, _, port = (args.rpc_tracker or "").rpartition(":")
    if not host or not port.isdigit() or not args.rpc_key:
        raise UserError("--rpc-tracker HOST:PORT and --rpc-key KEY must be given together (e.g. 127.0.0.1:9190 and cpu)")
    from autotune.tvmrt.measure import RPCSettings

    return RPCSettings(host, int(port), args.rpc_key)


def _print_summary(report: dict, work_dir: str) -> None:
    lat = report["latency_ms"]
    parts = [f"{k} {lat[k]:.3f} ms" for k in ("tvm_untuned", "tvm_tuned", "torch_eager") if lat.get(k)]
    logger.info("end-to-end latency: %s", ", ".join(parts))
    logger.info("max abs error vs torch: %.3g", report["numerics"]["max_abs_error"])
    logger.info("report: %s", os.path.join(work_dir, "report.json"))


if __name__ == "__main__":
    raise SystemExit(main())
