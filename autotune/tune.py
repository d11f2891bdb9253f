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

from autotune.cli import run_main, setup_logging, write_json  # noqa: E402
from autotune.errors import UserError  # noqa: E402
from autotune.lock import FolderLock  # noqa: E402
from autotune.tuning.config import (  # noqa: E402
    FIRST_ROUND_TRIALS_DEFAULT,
    TRIALS_PER_ROUND_DEFAULT,
    RPCAddress,
    SearchConfig,
    TuneConfig,
    resolve_conv_layout,
    resolve_layout_rewrite,
)
from autotune.tuning.costmodels import help_text as cost_model_help  # noqa: E402
from autotune.tuning.search import SEARCH_KINDS  # noqa: E402

logger = logging.getLogger("autotune.tune")

WORKDIR_META = "autotune_workdir.json"


def build_parser() -> argparse.ArgumentParser:
    from autotune.costmodel.online import ONLINE_UPDATES

    p = argparse.ArgumentParser(prog="python -m autotune.tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", help="zoo model name, or a torch.export .pt2 or an ONNX (.onnx) file")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU), 'cuda', or a JSON target dict")
    p.add_argument("--trials", type=int, default=400, help="total measured trials (all runs together)")
    p.add_argument("--trials-per-task", type=int, default=None, help="cap of trials for any one task")
    p.add_argument("--trials-per-round", type=int, default=TRIALS_PER_ROUND_DEFAULT, help="candidates measured per search round")
    p.add_argument("--first-round-trials", type=int, default=FIRST_ROUND_TRIALS_DEFAULT,
                   help=f"candidates measured on a task's first visit (default {FIRST_ROUND_TRIALS_DEFAULT}: every "
                        f"task gets a tuned program sooner, the rest of the budget going where the gain is; "
                        f"a value >= --trials-per-round makes the first visit a whole round)")
    p.add_argument("--work-dir", default=None, help="where the database, logs and report go (default runs/<model>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cost-model", default="auto", help=cost_model_help())
    p.add_argument("--calibrate", action="store_true",
                   help="on a CPU without its own cost model, first measure ~10 minutes of programs and adapt one "
                        "(python -m autotune.calibrate); then --cost-model auto uses it")
    p.add_argument("--strategy", default="evolutionary",
                   help="search strategy: " + "; ".join(f"{k}: {c.help}" for k, c in SEARCH_KINDS.items()))
    p.add_argument("--population", type=int, default=None,
                   help="evolutionary search population per round (default: autotune.tuning.config.SearchConfig)")
    p.add_argument("--search-iters", type=int, default=None, help="evolutionary search generations per round")
    p.add_argument("--batch-selection", default="greedy",
                   help="which proposals to measure: greedy (MetaSchedule's: best predicted + eps-greedy), or an "
                        "active-learning sampler picking --trials-per-round of --selection-oversample times as "
                        "many proposals: " + ", ".join(_sampler_names()))
    p.add_argument("--selection-oversample", type=int, default=4,
                   help="proposals per measured candidate when a sampler picks (default 4)")
    p.add_argument("--online-update", default="finetune",
                   help="how a pretrained cost model learns from this run's measurements: "
                        + "; ".join(f"{k}: {(c.__doc__ or '').strip()}" for k, c in ONLINE_UPDATES.items())
                        + " (default finetune)")
    p.add_argument("--cost-model-path", default=None,
                   help="a saved cost model folder, loaded by the kind its model.json names (overrides models/)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--input-shape", default=None, help="input shape without batch, e.g. 3,224,224 or 128")
    p.add_argument("--num-cores", type=int, default=None, help="threads for the tuned program (default: all)")
    p.add_argument("--skip-untuned", action="store_true", help="do not time the untuned TVM build")
    p.add_argument("--bench-rounds", type=int, default=5, help="alternating timing rounds per arm")
    p.add_argument("--rpc-tracker", default=None, help="host:port of a TVM RPC tracker to measure on")
    p.add_argument("--rpc-key", default=None, help="device key registered at the RPC tracker")
    p.add_argument("--layout-rewrite", default="auto",
                   help="auto|on|off: let tuned programs choose their weights' layout, packed at compile time "
                        "(MetaSchedule's RewriteLayout; stock TVM applies such a database with "
                        "static_shape_tuning_pipeline(cpu_weight_prepack=True)). auto: as the work dir was tuned, "
                        "else the target's default")
    p.add_argument("--conv-layout", default="auto",
                   help="auto|nchw|nhwc: the layout 2-D convolutions are converted to (Relax ConvertLayout) and "
                        "tuned in; auto: as the work dir was tuned, else the target's default")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


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


def _sampler_names() -> list[str]:
    from autotune.costmodel.sampling import REGISTRY

    return list(REGISTRY)


def config_from_args(args: argparse.Namespace) -> TuneConfig:
    """The flags, validated, as the one TuneConfig of this run (UserError names the bad flag)."""
    extra = {}
    if args.population is not None:
        extra["population_size"] = args.population
    if args.search_iters is not None:
        extra["genetic_num_iters"] = args.search_iters
    search = SearchConfig(num_trials_per_iter=args.trials_per_round, kind=args.strategy,
                          batch_selection=args.batch_selection, selection_oversample=args.selection_oversample,
                          first_round_trials=args.first_round_trials, **extra)
    return TuneConfig(
        model=args.model, target=args.target, trials=args.trials, trials_per_task=args.trials_per_task,
        work_dir=args.work_dir, seed=args.seed, cost_model=args.cost_model, cost_model_path=args.cost_model_path,
        online_update=args.online_update, search=search, batch_size=args.batch_size,
        input_shape=_parse_shape(args.input_shape), num_cores=args.num_cores, time_untuned=not args.skip_untuned,
        bench_rounds=args.bench_rounds, rpc=RPCAddress.parse(args.rpc_tracker, args.rpc_key), verbose=args.verbose,
        layout_rewrite=args.layout_rewrite, conv_layout=args.conv_layout, calibrate=args.calibrate,
    )


def _resolve_layouts(config: TuneConfig, kind: str, old: dict | None, work_dir: str) -> tuple[bool, str]:
    """Layout rewrite and conv layout of a run in ``work_dir``: as its meta file ``old`` says it was tuned (a
    contradicting flag is refused), or the flags / the target's defaults on a new work dir (``old`` None)."""
    rewrite_was = None if old is None else bool(old.get("layout_rewrite", False))
    layout_was = None if old is None else old.get("conv_layout", "nchw")
    return (resolve_layout_rewrite(config.layout_rewrite, kind, rewrite_was, work_dir),
            resolve_conv_layout(config.conv_layout, kind, layout_was, work_dir))


def _check_work_dir(work_dir: str, meta: dict, config: TuneConfig, kind: str) -> TuneConfig:
    """Refuse a work dir of another run; returns ``config`` with layout rewrite and conv layout resolved (as the
    work dir was tuned, or the flags / the target's defaults on a new one). Work dirs from before a flag were
    tuned without layout rewrite and in the model's own layout (NCHW)."""
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
        rewrite, layout = _resolve_layouts(config, kind, old, work_dir)
    else:
        rewrite, layout = _resolve_layouts(config, kind, None, work_dir)
        os.makedirs(work_dir, exist_ok=True)
        write_json(path, meta | {"layout_rewrite": rewrite, "conv_layout": layout})
    return dataclasses.replace(config, layout_rewrite="on" if rewrite else "off", conv_layout=layout)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main(lambda: _main(config_from_args(args)))


def _precheck_work_dir(config: TuneConfig) -> None:
    """The layout flags against an existing work dir, before TVM and the model load (~10 s here): a contradicting
    flag is refused at once. Anything else about the work dir (another model, a damaged file) is checked later,
    under its lock, by ``_check_work_dir``."""
    path = os.path.join(config.work_dir, WORKDIR_META) if config.work_dir else None
    if not path or not os.path.isfile(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
        kind = old["target"]["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    _resolve_layouts(config, kind, old, config.work_dir)


def _main(config: TuneConfig) -> int:
    from autotune.frontend.models import check_model_spec

    check_model_spec(config.model)
    _precheck_work_dir(config)
    setup_logging(None, verbose=config.verbose)  # the console, until the work dir (and its log file) is known
    from autotune.tuning.costmodels import resolve
    from autotune.tvmrt.target import parse_target, use_target_threads

    target = parse_target(config.target, num_cores=config.num_cores)
    use_target_threads(target)  # before any TVM thread pool or measuring worker starts
    if config.calibrate:
        _calibrate_first(target)
    cost_model = resolve(config.cost_model, target, path=config.cost_model_path, online=config.online_update,
                         uses_cost_model=config.search.uses_cost_model)
    from autotune.tvmrt.measure import Measurer

    measurer = Measurer(target, rpc=config.rpc.settings() if config.rpc else None)
    measurer.warm_up()  # workers import TVM while we import the model
    try:
        return _tune(config, target, measurer, cost_model)
    finally:
        measurer.close()


def _calibrate_first(target) -> None:
    """``--calibrate``: this CPU's model first, when it has none (a GPU target has nothing to calibrate)."""
    from autotune.tuning.costmodels import find_pretrained
    from autotune.tvmrt.target import hardware_id, target_json

    if target.kind.name != "llvm":
        logger.warning("--calibrate: only CPU (llvm) targets are calibrated; tuning without")
        return
    if find_pretrained("xgb", hardware_id(target)) is not None:
        logger.info("--calibrate: %s has its cost model already", hardware_id(target))
        return
    from autotune import calibrate

    calibrate.main(["--target", json.dumps(target_json(target))])


def _tune(config: TuneConfig, target, measurer, cost_model) -> int:
    from autotune.frontend.models import load_model

    model = load_model(config.model, batch_size=config.batch_size, input_shape=config.input_shape, seed=config.seed)
    run_session(config, target, measurer, cost_model, model)
    return 0


def run_session(config: TuneConfig, target, measurer, cost_model, model):
    """The one pipeline of the CLI and the API: lock the work dir, check it against this run, tune, compile,
    check and time, write report.json and the run summary. Returns (report, session)."""
    from autotune.tuning.session import TuneSession
    from autotune.tuning.summary import write_run_summary
    from autotune.tvmrt.target import target_json

    work_dir = config.work_dir or os.path.join("runs", f"{model.name}-{target.kind.name}")
    meta = {
        "model": model.name,
        "target": target_json(target),
        "batch_size": config.batch_size,
        "input_shapes": [list(x.shape) for x in model.inputs],
    }
    lock = FolderLock(work_dir, "--work-dir").acquire()  # noqa: F841 - one run per work dir; freed on return/death
    config = _check_work_dir(work_dir, meta, config, target.kind.name)
    setup_logging(os.path.join(work_dir, "logs"), verbose=config.verbose)
    logger.debug("cost model: %s", cost_model.used)  # into the work dir's log file (the console had it)
    session = TuneSession(model, target, work_dir, config=config, measurer=measurer, t_start=_T_START)
    report = session.run(cost_model)
    write_json(os.path.join(work_dir, "report.json"), report)
    _print_summary(report, work_dir, *write_run_summary(report, work_dir))
    return report, session


def _print_summary(report: dict, work_dir: str, curve_png: str, tasks_md: str) -> None:
    lat = report["latency_ms"]
    parts = [f"{k} {lat[k]:.3f} ms" for k in ("tvm_untuned", "tvm_tuned", "torch_eager", "onnxruntime") if lat.get(k)]
    logger.info("end-to-end latency: %s", ", ".join(parts))
    logger.info("max abs error vs %s: %.3g", "ONNX Runtime" if "onnxruntime" in lat else "torch",
                report["numerics"]["max_abs_error"])
    logger.info("report: %s", os.path.join(work_dir, "report.json"))
    logger.info("tuning curve: %s; per-task table: %s", curve_png, tasks_md)


if __name__ == "__main__":
    raise SystemExit(main())
