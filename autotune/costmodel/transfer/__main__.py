"""``python -m autotune.costmodel.transfer`` (``make transfer-costmodel``): a cost model for new hardware.

Takes a saved cost model of the source hardware (``models/<hw>/<kind>``) and a dataset measured on the
target hardware, measures nothing: it uses ``--fraction`` of the target's training programs as the
measured share (whole task batches, from ``--seed``), runs ``--method``, scores the result on the
target's held-out models (and on the source's, for forgetting, when the source dataset is known) and
writes ``<models-dir>/<target hardware>/<kind>/`` with a card naming source, method, fraction and scores.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from autotune.cli import git_commit, loadavg, run_main, setup_logging, versions, write_json
from autotune.data.store import portable_path, recorded_dataset
from autotune.errors import UserError

logger = logging.getLogger("autotune.costmodel.transfer")
HELD_OUT = "resnet50,mobilenet_v2,bert_base"


def main(argv=None) -> int:
    from . import REGISTRY

    ap = argparse.ArgumentParser(prog="python -m autotune.costmodel.transfer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="saved source model folder, e.g. models/cpu-znver3-2c/seq")
    ap.add_argument("--target-dataset", required=True, help="dataset measured on the target hardware")
    ap.add_argument("--method", default="ckd", help=f"one of: {', '.join(REGISTRY)}")
    ap.add_argument("--fraction", type=float, default=0.1, help="share of the target's training programs used")
    ap.add_argument("--source-dataset", help="the source model's dataset (default: the one its card names); "
                                             "replay for mtl/ckd and the forgetting score")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--held-out", default=HELD_OUT)
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a method keyword (JSON value), e.g. --param steps=200; repeatable")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _method_params(name: str, pairs: list[str]) -> dict:
    from . import method_class

    valid = method_class(name)().get_params()
    out = {}
    for item in pairs:
        key, sep, raw = item.partition("=")
        if not sep or key not in valid:
            raise UserError(f"--param {item!r}: expected KEY=VALUE with KEY one of: {', '.join(valid) or '(none)'}")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _read_card(path: str) -> dict:
    try:
        with open(os.path.join(path, "card.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _load_domain(path: str, held: list[str], what: str):
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.store import DatasetError

    from .domains import load_domain

    if not os.path.isdir(path):
        raise UserError(f"{what} {path}: not a folder; give a dataset folder (with manifest.json)")
    try:
        return load_domain(path, held)
    except (DatasetError, StaleFeatureCache) as err:
        raise UserError(f"{what}: {err}") from None
    except ValueError as err:
        raise UserError(f"{what} {path} / --held-out: {err}") from None


def _main(args) -> int:
    from .. import ModelFileError, load
    from . import REGISTRY, TransferError, TransferInputs, create
    from .domains import held_out_scores

    if args.method not in REGISTRY:
        raise UserError(f"--method {args.method!r}: unknown; valid: {', '.join(REGISTRY)}")
    if not 0.0 < args.fraction <= 1.0:
        raise UserError(f"--fraction {args.fraction}: must be in (0, 1] (share of the target's training programs)")
    params = _method_params(args.method, args.param)
    if not os.path.isdir(args.source):
        raise UserError(f"--source {args.source}: not a folder; give a saved model folder such as models/<hw>/<kind>")
    try:
        source = load(args.source)
    except ModelFileError as err:
        raise UserError(f"--source: {err}") from None
    method = create(args.method, **({"seed": args.seed} if "seed" in create(args.method).get_params() else {}),
                    **params)
    reason = method.supports(source)
    if reason:
        raise UserError(f"--method {args.method} cannot transfer a {source.name!r} model: {reason}")
    setup_logging()
    held = [m.strip() for m in args.held_out.split(",") if m.strip()]
    card = _read_card(args.source)
    if args.source_dataset and not os.path.isdir(args.source_dataset):
        raise UserError(f"--source-dataset {args.source_dataset}: not a folder")
    source_dataset = args.source_dataset or recorded_dataset(card.get("dataset"))
    if not source_dataset and card.get("dataset"):
        logger.warning("the source card's dataset %s is not here (nor datasets/%s); no replay, no forgetting score",
                       card["dataset"], os.path.basename(os.path.normpath(card["dataset"])))
    if args.method == "mtl" and not source_dataset:
        raise UserError("--method mtl trains on source programs: give --source-dataset")
    target = _load_domain(args.target_dataset, held, "--target-dataset")
    src = _load_domain(source_dataset, held, "--source-dataset") if source_dataset else None
    out_dir = os.path.join(args.models_dir, target.hardware_id, source.name)
    if os.path.abspath(out_dir) == os.path.abspath(args.source):
        raise UserError(f"--target-dataset is measured on {target.hardware_id}, the source model's own hardware: "
                        f"writing {out_dir} would overwrite the source; use another --models-dir")
    measured, unlabeled, _ = target.measured_share(args.fraction, args.seed)
    inputs = TransferInputs(target=measured, source=src.programs() if src else None, unlabeled=unlabeled)
    logger.info("%s -> %s: %s on %d measured target programs (%.0f%% of %d) over %d tasks", card.get(
        "hardware", {}).get("hardware_id", args.source), target.hardware_id, args.method, len(measured),
        100 * args.fraction, len(target.train), len(set(measured.groups.tolist())))
    t0 = time.time()
    try:
        model = method.transfer(source, inputs)
    except TransferError as err:
        raise UserError(str(err)) from None
    fit_s = time.time() - t0
    metrics = {"target": held_out_scores(model, target)}
    if src is not None:
        before, after = held_out_scores(source, src), held_out_scores(model, src)
        metrics["source_before"], metrics["source_after"] = before, after
        for k in ("top1", "pairwise"):  # top-1 hangs on single picks in heavy tasks; pairwise is steadier
            metrics[f"forgetting_{k}"] = before["mean"][k] - after["mean"][k] if "mean" in after else None
    model.save(out_dir)
    out_card = {
        "kind": model.name, "params": model.get_params(),
        "transfer": {"method": args.method, "method_params": method.get_params(), "fraction": args.fraction,
                     "seed": args.seed, "measured_programs": len(measured),
                     "measured_tasks": len(set(measured.groups.tolist())), "target_train_programs": len(target.train),
                     "fit_seconds": fit_s},
        "source": {"model": portable_path(args.source), "hardware_id": card.get("hardware", {}).get("hardware_id"),
                   "dataset": portable_path(source_dataset) if source_dataset else None,
                   "dataset_manifest_sha256": src.manifest_sha256 if src else card.get("dataset_manifest_sha256")},
        "dataset": portable_path(args.target_dataset), "dataset_manifest_sha256": target.manifest_sha256,
        "hardware": target.data.manifest["hardware"], "held_out": held, "metrics": metrics,
        "git_commit": git_commit(), "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(), "loadavg": loadavg(),
    }
    write_json(os.path.join(out_dir, "card.json"), out_card)
    mean = metrics["target"].get("mean", {})
    line = f"{out_dir}: {args.method} from {args.source}, target held-out top-1 {mean.get('top1', float('nan')):.3f} " \
           f"top-5 {mean.get('top5', float('nan')):.3f}"
    if metrics.get("forgetting_top1") is not None:
        line += (f", source top-1 {metrics['source_before']['mean']['top1']:.3f} -> "
                 f"{metrics['source_after']['mean']['top1']:.3f} (pairwise {metrics['source_before']['mean']['pairwise']:.3f}"
                 f" -> {metrics['source_after']['mean']['pairwise']:.3f})")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
