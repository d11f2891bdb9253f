"""Cost models for tuning on a CPU as if it were new (issue 48, item 5): the arms ``xgb@<variant>`` of
``experiments/tuning_efficiency/real_budget.py`` load them.

For the target CPU's dataset, trained without any of the target's programs (its labels only pick the
calibration sample, as ``autotune.calibrate`` would have measured it on the machine):

- ``loho-nearest``: the nearest other CPU's own xgb (what ``auto`` takes on a CPU without a model);
- ``loho-pooled``: xgb with the hardware features over every other CPU, told the target's descriptor (zero-shot);
- ``loho-calib``: ``loho-pooled`` adapted to the target's calibration sample (``loho.calib_sample``: the tasks
  ``calibrate.choose_tasks`` picks, its programs per task) the way ``autotune.calibrate`` adapts.

Each is written to ``experiments/transfer/models/<variant>/<target hardware id>/xgb`` with a card naming the
target (so ``--cost-model-path`` accepts it there) and what it was made from. The test networks' tasks are
left out everywhere, as in the shipped models.

    python experiments/transfer/loho_models.py --target datasets/cpu-znver3-2c
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from loho import DATASETS, calib_sample, kind_params, load_cpus, nearest_source  # noqa: E402

from autotune.cli import comma_list, git_commit, run_main, setup_logging, write_json  # noqa: E402

MODELS = os.path.join(HERE, "models")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/transfer/loho_models.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="the CPU dataset to treat as new hardware")
    ap.add_argument("--datasets", default=DATASETS, help="every CPU dataset (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="which calibration sample (default: %(default)s)")
    args = ap.parse_args(argv)
    return run_main(lambda: make(args))


def make(args) -> int:
    from autotune.calibrate import ADAPT, ADAPT_ROUNDS, RESIDUAL
    from autotune.costmodel.pooled import stack
    from autotune.costmodel.xgb import XGBCostModel
    from autotune.data.splits import TEST_MODELS
    from autotune.hardware import descriptor

    setup_logging()
    paths = comma_list(args.datasets)
    if os.path.realpath(args.target) not in {os.path.realpath(p) for p in paths}:
        paths.append(args.target)
    from autotune.data.store import read_manifest

    cpus = load_cpus(paths)
    target = read_manifest(args.target)["hardware"]["hardware_id"]
    sources = [h for h in cpus if h != target]
    keep = {hw: d.select_tasks([k for k in d.task_keys if not set(d.tasks[k]["models"]) & set(TEST_MODELS)])
            for hw, d in cpus.items()}
    params = kind_params("xgb", quick=False)
    desc = descriptor(cpus[target].manifest["hardware"])
    near = nearest_source(target, sources, cpus)
    t = keep[near]
    nearest = XGBCostModel(**{**params, "seed": 0}).fit(t.batch, t.y, t.groups)
    batch, y, groups = stack([keep[s] for s in sources])
    pooled = XGBCostModel(**{**params, "seed": 0, "hardware_features": True}).fit(batch, y, groups).set_hardware(desc)
    sample = keep[target].subset(calib_sample(keep[target], args.seed, quick=False))
    if ADAPT == "residual":
        calib = pooled.boost_more(sample.batch, sample.y, sample.groups, **RESIDUAL).set_hardware(desc)
    else:
        calib = pooled.fine_tune(sample.batch, sample.y, sample.groups, steps=ADAPT_ROUNDS).set_hardware(desc)
    made = {"loho-nearest": (nearest, f"{near}'s own xgb"),
            "loho-pooled": (pooled, f"xgb with hardware features over {', '.join(sources)}, told {target}'s descriptor"),
            "loho-calib": (calib, f"loho-pooled adapted ({ADAPT}) on {len(sample)} programs of "
                                  f"{len(set(sample.groups.tolist()))} tasks of {target} (calibrate's sample, seed "
                                  f"{args.seed})")}
    for variant, (model, how) in made.items():
        out = os.path.join(MODELS, variant, target, "xgb")
        model.save(out)
        write_json(os.path.join(out, "card.json"), {
            "kind": "xgb", "hardware": cpus[target].manifest["hardware"], "made": how, "variant": variant,
            "left_out_models": list(TEST_MODELS), "git_commit": git_commit(),
            "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        print(f"{os.path.relpath(out, ROOT)}: {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
