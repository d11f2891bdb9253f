"""``python -m autotune.collect``: measure programs of many tasks into a dataset.

    python -m autotune.collect --out datasets/cpu-znver3-2c --programs-per-task 100

For every task of the pool (zoo models + synthetic operators, see autotune.collection.taskpool) it
measures uniform random samples of the MetaSchedule design space and programs from a short
XGBoost-guided evolutionary search (so fast programs are represented too). Tasks are visited
in passes (``--pass-size`` programs each), so a partial dataset already covers many tasks.
Resumable: rerun the same command; a kill loses at most the batch in flight.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import time

from autotune.cli import loadavg, run_main, setup_logging, versions
from autotune.errors import UserError
from autotune.lock import folder_lock

logger = logging.getLogger("autotune.collect")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autotune.collect", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="dataset folder (created or resumed)")
    p.add_argument("--target", default="llvm", help="'llvm', 'cuda' or a JSON target dict (as for tune)")
    p.add_argument("--models", default=None, help="comma-separated zoo models (default: the dataset set)")
    p.add_argument("--synthetic", type=int, default=200, help="synthetic operators in the pool")
    p.add_argument("--programs-per-task", type=int, default=100)
    p.add_argument("--pass-size", type=int, default=32, help="programs per task per pass")
    p.add_argument("--random-fraction", type=float, default=0.5, help="share of random samples per visit")
    p.add_argument("--max-tasks", type=int, default=None, help="only the first N tasks of the pool")
    p.add_argument("--only-models", default=None, help="keep only tasks tagged with these models")
    p.add_argument("--same-tasks-as", default=None,
                   help="another dataset folder: only its measured tasks (e.g. a transfer set for new hardware)")
    p.add_argument("--time-limit", type=float, default=None, help="stop after this many hours")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retry-exhausted", action="store_true",
                   help="visit again the tasks an earlier run found no new program for (the manifest's "
                        "exhausted_tasks; skipped by default)")
    p.add_argument("--sampler", default=None,
                   help="active learning: draw a pool of candidates per task and measure only the ones this "
                        "sampler picks (autotune.costmodel.sampling: random, rdu, diversity, ...; see "
                        "autotune/collection/active.py); --programs-per-task and --pass-size are then unused")
    p.add_argument("--pool-per-task", type=int, default=256, help="with --sampler: candidates drawn per task")
    p.add_argument("--measure-fraction", type=float, default=0.1, help="with --sampler: share of the pool measured")
    p.add_argument("--active-rounds", type=int, default=4, help="with --sampler: rounds (the model is refit between)")
    p.add_argument("--rpc-tracker", default=None, help="host:port of a TVM RPC tracker")
    p.add_argument("--rpc-key", default=None)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    for name in ("programs_per_task", "pass_size", "synthetic"):
        if getattr(args, name) < (0 if name == "synthetic" else 1):
            raise UserError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if not 0.0 <= args.random_fraction <= 1.0:
        raise UserError(f"--random-fraction must be in [0, 1], got {args.random_fraction}")
    if args.sampler is not None:
        from autotune.costmodel.sampling import REGISTRY

        if args.sampler not in REGISTRY:
            raise UserError(f"--sampler: unknown {args.sampler!r}; valid: {', '.join(REGISTRY)}")
        if args.pool_per_task < 1 or args.active_rounds < 1:
            raise UserError(f"--pool-per-task and --active-rounds must be positive integers, got "
                            f"{args.pool_per_task} and {args.active_rounds}")
        if not 0.0 < args.measure_fraction <= 1.0:
            raise UserError(f"--measure-fraction must be in (0, 1], got {args.measure_fraction}")
    from autotune.tuning.config import RPCAddress
    from autotune.tvmrt.target import parse_target

    only_keys = _tasks_of(args.same_tasks_as) if args.same_tasks_as else None
    address = RPCAddress.parse(args.rpc_tracker, args.rpc_key)
    rpc = address.settings() if address else None
    target = parse_target(args.target)
    from autotune.tvmrt.target import target_cores

    os.environ.setdefault("TVM_NUM_THREADS", str(target_cores(target)))  # measuring workers: pinned (as collected)
    _check_out(args.out)
    with folder_lock(args.out, "--out"):
        return _collect(args, target, rpc, only_keys)


def _check_out(out: str) -> None:
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"--out {out} is a file; a dataset folder (new, or one made by autotune.collect) is expected")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as err:
        raise UserError(f"--out {out}: cannot create the dataset folder ({err.strerror})") from None


def _collect(args, target, rpc, only_keys) -> int:
    setup_logging(os.path.join(args.out, "logs"), verbose=args.verbose)

    from autotune.collection.collector import Collector, hardware_fingerprint
    from autotune.data.store import DatasetError

    fingerprint = hardware_fingerprint(target, rpc_key=args.rpc_key)
    try:
        collector = Collector(args.out, target, fingerprint, rpc=rpc, seed=args.seed)
    except DatasetError as err:
        raise UserError(f"--out: {err}") from None

    def request_stop(signum, _frame):
        # a KeyboardInterrupt raised inside TVM's callbacks can be swallowed: stop at a batch boundary
        collector.stop_requested = True
        logger.info("stop requested (signal %d): finishing the batch in flight", signum)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C aborts at once (journal is safe)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        collector.ensure_pool(
            models=args.models.split(",") if args.models else None, n_synthetic=args.synthetic
        )
        if args.sampler is not None:
            from autotune.collection.active import ActiveCollection

            ActiveCollection(collector, args.sampler, args.pool_per_task, args.measure_fraction, args.active_rounds,
                             seed=args.seed).run(
                max_tasks=args.max_tasks, only_models=args.only_models.split(",") if args.only_models else None,
                only_keys=only_keys, deadline=time.time() + args.time_limit * 3600 if args.time_limit else None)
        else:
            collector.run(
                programs_per_task=args.programs_per_task, pass_size=args.pass_size,
                random_fraction=args.random_fraction, max_tasks=args.max_tasks,
                only_models=args.only_models.split(",") if args.only_models else None, only_keys=only_keys,
                deadline=time.time() + args.time_limit * 3600 if args.time_limit else None,
                retry_exhausted=args.retry_exhausted,
            )
    finally:
        collector.close()
    logger.info("dataset %s: %s", args.out, json.dumps(collector.writer.manifest.get("counts")))
    return 0


def _tasks_of(root: str) -> set[str]:
    from autotune.data.store import DatasetError, read_records

    try:
        table = read_records(root, valid_only=True)
    except (DatasetError, FileNotFoundError, OSError) as err:
        raise UserError(f"--same-tasks-as: {root} is not a readable dataset ({err})") from None
    keys = set(table.column("task_key").to_pylist())
    if not keys:
        raise UserError(f"--same-tasks-as: {root} has no measured tasks")
    return keys


def fingerprint_extras() -> dict:
    return {"versions": versions(), "loadavg_at_start": loadavg()}


if __name__ == "__main__":
    raise SystemExit(main())
