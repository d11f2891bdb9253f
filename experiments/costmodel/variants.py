"""Exploratory variants of the cost models, scored like `make train-costmodel` (issue 12's search for a
better model), without touching `models/` or the comparison.

    python experiments/costmodel/variants.py --spec 'lstm64:seq:{"mixer": "lstm", "d_model": 64}' --seeds 0,1,2
    python experiments/costmodel/variants.py --table-only

Each ``--spec`` is ``name:kind:json`` (a registered kind and keyword overrides). Every (spec, seed) fit is
evaluated on the held-out models in the views ``all`` and ``search`` and appended as one JSON line to
``--out`` (resumable: a (name, seed) already there is skipped); the markdown table (mean ± sd over the seeds
of each name) is rewritten from the whole file. A variant that wins here is registered and trained by
`make train-costmodel` before it counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

import numpy as np  # noqa: E402

from autotune.cli import git_commit, host_cpu, run_main, seed_list, setup_logging  # noqa: E402
from autotune.errors import UserError  # noqa: E402

METRICS = ("all_top1", "all_top5", "all_pairwise", "search_top1", "search_top5")


def parse_spec(spec: str) -> tuple[str, str, dict]:
    from autotune.costmodel import REGISTRY

    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise UserError(f"--spec {spec!r}: expected name:kind:json, e.g. 'lstm64:seq:{{\"mixer\": \"lstm\"}}'")
    name, kind, raw = parts
    if kind not in REGISTRY:
        raise UserError(f"--spec {spec!r}: unknown kind {kind!r}; valid: {', '.join(REGISTRY)}")
    try:
        params = json.loads(raw or "{}")
    except ValueError as err:
        raise UserError(f"--spec {spec!r}: the keywords are not JSON ({err})") from None
    if not isinstance(params, dict):
        raise UserError(f"--spec {spec!r}: the keywords must be a JSON object")
    return name, kind, params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/variants.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--spec", action="append", default=[], help="name:kind:json (repeat)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--held-out", default=None, help="comma-separated held-out models (default: the TenSet three)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "variants.jsonl"))
    ap.add_argument("--table-only", action="store_true", help="only rewrite the markdown table from --out")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    specs = [parse_spec(s) for s in args.spec]
    seeds = seed_list(args.seeds)
    if specs and not args.table_only:
        setup_logging()
        _run(args, specs, seeds)
    rows = _read(args.out)
    md = os.path.splitext(args.out)[0] + ".md"
    with open(md, "w", encoding="utf-8") as f:
        f.write(markdown(rows))
    print(markdown(rows))
    return 0


def _read(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _run(args, specs, seeds) -> None:
    from autotune.costmodel.data import load_split
    from autotune.costmodel.train import train_seeds
    from autotune.data.splits import HELD_OUT_MODELS

    done = {(r["name"], r["seed"]) for r in _read(args.out)}
    held = args.held_out.split(",") if args.held_out else HELD_OUT_MODELS
    data, train_keys, test_keys = load_split(args.dataset, held)
    train = data.select_tasks(train_keys)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for name, kind, params in specs:
        for seed in seeds:
            if (name, seed) in done:
                continue
            fits = train_seeds(kind, params, [seed], train, data, test_keys)  # one fit, scored as the comparison
            views = fits["runs"][0]["views"]
            row = {"name": name, "kind": kind, "params": params, "seed": seed, "fit_s": fits["fit_seconds"][0],
                   "history": getattr(fits["model"], "history_", None),
                   **{f"{v}_{k}": views[v]["mean"][k] for v in ("all", "search") for k in ("top1", "top5", "pairwise")},
                   "per_model_top1": {n: views["all"][n]["top1"] for n in test_keys},
                   "dataset": os.path.relpath(args.dataset, ROOT), "measured_on": host_cpu(), "git_commit": git_commit()}
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")


def markdown(rows: list[dict]) -> str:
    lines = ["# Cost-model variants (exploratory; `experiments/costmodel/variants.py`)", "",
             "Held-out mean over the held-out models (resnet50, mobilenet_v2, bert_base unless --held-out); mean ± sd over the seeds run. Fit seconds are "
             "from whatever else ran beside (see each line's `measured_on` in the JSONL); a variant counts only "
             "once registered and trained by `make train-costmodel`.", "",
             "| name | kind | keywords | seeds | top-1 all | top-5 all | pairwise all | top-1 search | top-5 search "
             "| fit s |", "|---|---|---|---|---|---|---|---|---|---|"]
    names = list(dict.fromkeys(r["name"] for r in rows))
    for name in names:
        group = [r for r in rows if r["name"] == name]

        def cell(key, group=group):
            v = np.array([r[key] for r in group], float)
            return f"{v.mean():.3f}" + (f" ± {v.std(ddof=1):.3f}" if len(v) > 1 else "")

        seeds = ",".join(str(r["seed"]) for r in group)
        lines.append(f"| {name} | {group[0]['kind']} | `{json.dumps(group[0]['params'])}` | {seeds} | "
                     + " | ".join(cell(k) for k in METRICS) + f" | {np.mean([r['fit_s'] for r in group]):.0f} |")
    return "\n".join(lines + [""])


if __name__ == "__main__":
    raise SystemExit(main())
