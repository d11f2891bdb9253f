"""TCL claim T2: accuracy vs cost of the Mamba-style sequence model against a same-size LSTM, a small
transformer (attention, as TLP) and the MLP / XGBoost baselines.

    python experiments/costmodel/t2_mixers.py [--dataset datasets/cpu-znver3-2c] [--seeds 3]

The sequence arms are ``seq`` with only its mixer changed (``mixer=mamba|lstm|attention``: same width,
layers, pack-sum branch, loss and training). ``seq`` (Mamba) and the baselines (``ms-mlp``, ``ms-xgb``,
``xgb``) are read from ``make train-costmodel``'s comparison (``results/comparison.json``, the same split
and seeds) and their first-seed models from ``models/<hardware>/``; the LSTM and attention arms are trained
here over the same seeds (resumable: an arm whose result file exists under ``--out`` is not retrained,
``--force`` retrains). Prediction throughput is measured for every arm side by side in this run
(alternating rounds, 2 threads, median). Writes ``--out``/t2.json, t2.md and t2_pareto.png.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads

import numpy as np  # noqa: E402

from autotune.cli import git_commit, host_cpu, loadavg, run_main, setup_logging, write_json, write_results  # noqa: E402
from autotune.errors import UserError  # noqa: E402

TRAINED_HERE = {"seq-lstm": {"mixer": "lstm"}, "seq-attention": {"mixer": "attention"}}
FROM_COMPARISON = ("seq", "ms-mlp", "ms-xgb", "xgb")
LABEL = {"seq": "seq (Mamba)", "seq-lstm": "seq with LSTM", "seq-attention": "seq with attention",
         "ms-mlp": "TenSet-MLP (ms-mlp)", "ms-xgb": "MetaSchedule XGB (ms-xgb)", "xgb": "XGBoost rank (xgb)"}
CLAIM = ("TCL: a Mamba-based model captures long-range schedule dependencies at low parameter count and "
         "inference cost; 1.20x lower inference latency than TenSet-MLP on CPU (authors' numbers).")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python experiments/costmodel/t2_mixers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--comparison", default=os.path.join(HERE, "results", "comparison.json"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t2"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5, help="alternating throughput rounds (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="retrain arms whose results exist")
    ap.add_argument("--quick", action="store_true", help="3 epochs per trained arm (tests; numbers are a smoke test)")
    ap.add_argument("--train-only", action="store_true",
                    help="train the LSTM and attention arms and stop (no comparison needed yet: it can run beside "
                         "make train-costmodel; a later run without this flag reuses them)")
    args = ap.parse_args(argv)
    return run_main(lambda: _main(args))


def _main(args) -> int:
    if args.seeds < 1 or args.rounds < 1:
        raise UserError("--seeds and --rounds: positive integers")
    comparison = None if args.train_only else _read_comparison(args.comparison)
    setup_logging()
    from autotune.costmodel import load
    from autotune.costmodel.comparison import folder_bytes
    from autotune.costmodel.data import load_training_data
    from autotune.costmodel.evaluate import over_seeds
    from autotune.costmodel.train import train_seeds
    from autotune.data.splits import HELD_OUT_MODELS, split_by_model

    data = load_training_data(args.dataset)
    hw = data.manifest["hardware"]["hardware_id"]
    held = comparison["held_out"] if comparison else HELD_OUT_MODELS
    train_keys, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held)
    train = data.select_tasks(train_keys)
    seeds = list(range(args.seeds))
    rows, models = {}, {}
    by_kind = {r["kind"]: r for r in comparison["rows"]} if comparison else {}
    for kind in FROM_COMPARISON if comparison else ():
        if kind not in by_kind:
            raise UserError(f"--comparison: no {kind!r} row; run `make train-costmodel`")
        r = by_kind[kind]
        models[kind] = load(os.path.join(args.models_dir, hw, kind))
        rows[kind] = {"seeds": r["seeds"], "over_seeds": r["metrics"]["over_seeds"],
                      "fit_seconds_per_seed": r["fit_seconds_per_seed"], "source": "comparison.json"}
    os.makedirs(args.out, exist_ok=True)
    for kind, params in TRAINED_HERE.items():
        arm_json, arm_model = os.path.join(args.out, f"{kind}.json"), os.path.join(args.out, "models", kind)
        if os.path.exists(arm_json) and os.path.exists(os.path.join(arm_model, "model.json")) and not args.force:
            with open(arm_json, encoding="utf-8") as f:
                rows[kind] = json.load(f)
            models[kind] = load(arm_model)
            continue
        fits = train_seeds("seq", {**params, **({"epochs": 3} if args.quick else {})}, seeds, train, data, test_keys)
        fits["model"].save(arm_model)
        rows[kind] = {"seeds": fits["seeds"], "over_seeds": over_seeds(fits["runs"]),
                      "fit_seconds_per_seed": fits["fit_seconds"], "params": params, "source": "trained here",
                      "git_commit": git_commit()}
        write_json(arm_json, rows[kind])
        models[kind] = fits["model"]
    if args.train_only:
        return 0
    for kind, model in models.items():
        rows[kind]["parameters"] = model.num_parameters() if hasattr(model, "num_parameters") else None
        rows[kind]["model_bytes"] = folder_bytes(os.path.join(args.models_dir, hw, kind)) if kind in FROM_COMPARISON \
            else folder_bytes(os.path.join(args.out, "models", kind))
    thr, load_at = _side_by_side(models, data, test_keys, args.rounds)
    for kind in rows:
        rows[kind]["predict_programs_per_s"] = thr[kind]
    result = {"dataset": os.path.relpath(args.dataset, ROOT), "hardware_id": hw, "held_out": held, "seeds": seeds,
              "rows": rows, "claim": CLAIM, "measured_on": host_cpu(), "loadavg": load_at,
              "comparison_commit": comparison.get("git_commit"), "git_commit": git_commit(),
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _plot(rows, os.path.join(args.out, "t2_pareto.png"))
    write_results(os.path.join(args.out, "t2.json"), result, os.path.join(args.out, "t2.md"), markdown(result))
    return 0


def _read_comparison(path: str) -> dict:
    if not os.path.exists(path):
        raise UserError(f"--comparison: {path} does not exist; run `make train-costmodel` first")
    with open(path, encoding="utf-8") as f:
        comparison = json.load(f)
    if comparison.get("format") != 2:
        raise UserError(f"--comparison: {path} is not format 2; rerun `make train-costmodel`")
    return comparison


def _side_by_side(models: dict, data, test_keys, rounds: int, programs: int = 20000) -> tuple[dict, list]:
    """Median programs/s of every model's predict on the held-out programs (tiled to ``programs``), the
    models taking turns in each round so that load hits all alike."""
    from autotune.costmodel.metrics import timed_in_turns

    batch = data.select_tasks(sorted(set().union(*test_keys.values()))).batch
    big = batch.subset(np.tile(np.arange(len(batch)), max(1, -(-programs // len(batch)))))
    for m in models.values():
        m.set_threads(2)
        m.predict(batch.subset(np.arange(min(len(batch), 512))))  # warm-up
    load_at = [loadavg()]
    seconds = timed_in_turns({n: functools.partial(m.predict, big) for n, m in models.items()}, rounds,
                             lambda: load_at.append(loadavg()))
    return {n: len(big) / statistics.median(s) for n, s in seconds.items()}, load_at


def markdown(result: dict) -> str:
    from autotune.costmodel.comparison import _pm

    rows = result["rows"]
    mamba, mlp = rows["seq"]["predict_programs_per_s"], rows["ms-mlp"]["predict_programs_per_s"]
    lines = [f"# TCL claim T2: accuracy vs cost of the sequence mixers ({result['hardware_id']} data)", "",
             f"Command: `python experiments/costmodel/t2_mixers.py`. Held-out models {', '.join(result['held_out'])}; "
             f"seeds {result['seeds']}; scores mean ± sd over seeds (view `all`, and `search` = only the evolutionary "
             f"sampler's programs). seq, ms-mlp, ms-xgb and xgb from `results/comparison.json` (commit "
             f"{str(result['comparison_commit'])[:10]}); the LSTM and attention arms trained by this script (commit "
             f"{', '.join(sorted({str(r.get('git_commit'))[:10] for r in rows.values() if r.get('source') == 'trained here'}))}"
             "). Programs/s: measured side by side in this run on "
             f"{result['measured_on']} (2 threads, median of alternating rounds; load {result['loadavg'][0]} at start, "
             f"{result['loadavg'][-1]} at end).", "",
             "| model | seeds | top-1 all | top-5 all | top-1 search | pairwise all | predict programs/s | parameters "
             "| model KB | fit s per seed |", "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, r in rows.items():
        over = r["over_seeds"]
        fit = r["fit_seconds_per_seed"]
        lines.append("| " + " | ".join([
            LABEL.get(kind, kind), "1 (no seed)" if r["seeds"] == [None] else str(len(r["seeds"])),
            _pm(over.get("all"), "top1"), _pm(over.get("all"), "top5"), _pm(over.get("search"), "top1"),
            _pm(over.get("all"), "pairwise"), f"{r['predict_programs_per_s']:,.0f}",
            "-" if r.get("parameters") is None else f"{r['parameters']:,}", f"{r['model_bytes'] / 1e3:,.0f}",
            f"{statistics.mean(fit):.0f}"]) + " |")
    best_seq = max((k for k in rows if k.startswith("seq")), key=lambda k: rows[k]["over_seeds"]["all"]["mean"]["top1"])
    lines += ["", "Pareto plot (held-out top-1 vs programs/s): `t2_pareto.png`.", "",
              f"The seed's claim: {result['claim']}", "",
              "Our reading (computed from the rows above):",
              f"- inference: seq (Mamba) predicts {mamba:,.0f} programs/s, TenSet-MLP {mlp:,.0f}: the Mamba model's "
              f"latency per program is {mlp / mamba:.1f}x TenSet-MLP's ({'lower' if mamba > mlp else 'higher'}; "
              "the claim is 1.20x lower).",
              f"- accuracy: the best sequence mixer on held-out top-1 is {LABEL[best_seq]} "
              f"({rows[best_seq]['over_seeds']['all']['mean']['top1']:.3f}); TenSet-MLP "
              f"{rows['ms-mlp']['over_seeds']['all']['mean']['top1']:.3f}, MetaSchedule XGB "
              f"{rows['ms-xgb']['over_seeds']['all']['mean']['top1']:.3f}.", ""]
    return "\n".join(lines)


def _plot(rows: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for kind, r in rows.items():
        over = r["over_seeds"]["all"]
        x, y, sd = r["predict_programs_per_s"], over["mean"]["top1"], over["sd"]["top1"] or 0.0
        ax.errorbar(x, y, yerr=sd, fmt="o" if kind.startswith("seq") else "s", capsize=3)
        ax.annotate(LABEL.get(kind, kind), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("predictions per second (2 threads, log scale)")
    ax.set_ylabel("held-out mean top-1 (± sd over seeds)")
    ax.set_title("TCL T2: accuracy vs inference cost", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
