"""``python -m autotune.collection.reweigh DATASET [DATASET ...]``: add per-model task weights.

Datasets written before ``model_weights`` existed kept one ``weight`` per task: the occurrence count in
whichever model was extracted first, so resnet50's 3x3 convolutions shared with resnet18 carried
resnet18's counts. This re-extracts every model a dataset's tasks are tagged with (zoo models at the
dataset's shapes, synthetic operators by name) for the dataset's target and writes each model's own
count into ``tasks.jsonl`` (atomically; measured rows are not touched). Idempotent.
"""

from __future__ import annotations

import argparse
import logging

from autotune.cli import run_main, setup_logging
from autotune.errors import UserError

logger = logging.getLogger("autotune.reweigh")
SYNTHETIC_SEARCH = 1000  # synthetic_ops(n) is prefix-stable: the first n of a longer list


def fresh_weights(tags: set[str], target, seed: int = 0) -> dict[str, dict[str, int]]:
    """workload key -> {model tag: occurrences} for the given model tags (zoo names, 'synthetic:<op>')."""
    import torch

    from autotune import zoo
    from autotune.collection.taskpool import synthetic_ops, tasks_of_module
    from autotune.data.splits import ZOO_SHAPES

    out: dict[str, dict[str, int]] = {}

    def add(tag, tasks):
        for task in tasks:
            counts = out.setdefault(task.workload_hash, {})
            counts[tag] = counts.get(tag, 0) + int(task.weight)

    for name in sorted(t for t in tags if not t.startswith("synthetic:")):
        logger.info("re-extracting %s", name)
        module, inputs = zoo.get_model(name, input_shape=ZOO_SHAPES.get(name), seed=seed)
        add(name, tasks_of_module(module, inputs, target))
    wanted = {t.split(":", 1)[1] for t in tags if t.startswith("synthetic:")}
    if wanted:
        ops = {op.name: op for op in synthetic_ops(SYNTHETIC_SEARCH, seed) if op.name in wanted}
        missing = sorted(wanted - set(ops))
        if missing:
            raise UserError(f"synthetic operators {missing[:5]} are not among synthetic_ops(seed={seed})")
        for name, op in sorted(ops.items()):
            torch.manual_seed(seed)
            inputs = tuple(torch.randn(s) for s in op.inputs)
            add(f"synthetic:{name}", tasks_of_module(op.module(), inputs, target))
    return out


def reweigh(root: str) -> dict:
    """Write model_weights into ``root``'s tasks.jsonl; returns a summary (tasks, models, moved weights)."""
    import tvm

    from autotune.data.store import DatasetError, read_manifest, read_tasks, write_tasks

    try:
        target = tvm.target.Target(read_manifest(root)["hardware"]["target"])
        tasks = read_tasks(root)
    except DatasetError as err:
        raise UserError(str(err)) from None
    tags = {m for t in tasks.values() for m in t["models"]}
    fresh = fresh_weights(tags, target)
    missing = [(t["name"], m) for k, t in tasks.items() for m in t["models"] if m not in fresh.get(k, {})]
    if missing:
        raise UserError(f"{root}: {len(missing)} (task, model) pairs not found by re-extraction, e.g. {missing[:3]}; "
                        "was the dataset made with another TVM version or input shapes?")
    moved = []
    for key, task in tasks.items():
        task["model_weights"] = {m: fresh[key][m] for m in task["models"]}
        moved += [(task["name"], m, task["weight"], w) for m, w in task["model_weights"].items() if w != task["weight"]]
    write_tasks(root, tasks.values())
    return {"tasks": len(tasks), "models": len(tags), "weights_changed": len(moved), "examples": moved[:10]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autotune.collection.reweigh", description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+")
    args = ap.parse_args(argv)

    def body() -> int:
        setup_logging()
        from autotune.tvmrt.startup import fast_start

        fast_start("llvm")
        for root in args.datasets:
            summary = reweigh(root)
            print(f"{root}: {summary['tasks']} tasks over {summary['models']} models; "
                  f"{summary['weights_changed']} (task, model) weights differ from the old single weight "
                  f"{summary['examples'][:4]}")
        return 0

    return run_main(body)


if __name__ == "__main__":
    raise SystemExit(main())
