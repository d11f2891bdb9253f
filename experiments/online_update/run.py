"""Which online update works on top of a pretrained cost model? Replayed on measured data, on validation networks.

    python experiments/online_update/run.py                       # shipped dataset, the default validation networks
    python experiments/online_update/run.py --ks 8,16 --seeds 1   # smaller

During tuning, a task's measured programs arrive a batch at a time; the cost model then has to
pick the next programs among unmeasured candidates. This replays that on the validation networks' tasks
(``--validation-models``): each ``--pretrained`` kind is fitted here on the training tasks of no validation or
test network (so the networks replayed are new to it, as a tuned network is), then for each task a random ``k``
programs count as "measured so far", the cost model (pretrained + online update in each mode of
``autotune.costmodel.online``) ranks the rest, and we score the ranking as TenSet does (weighted
top-1 / top-5 over the network's tasks, pairwise accuracy), plus the seconds one update costs. The test
networks are never read (``splits.selection()``): this chooses ``--online-update``'s default.
Writes results/validation/online_update.{json,md} and a PNG (``results/online_update.*``: the replay on the
test networks with the shipped models, before issue 47, kept as the record of how the default was chosen then).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from autotune.cli import loadavg, versions, write_results  # noqa: E402
from autotune.data import splits  # noqa: E402


def pretrain(kind: str, data, fit_keys: list[str], quick: bool = False):
    """``kind`` fitted (seed 0, its registered settings) on ``fit_keys``: a model that never saw the replayed networks."""
    from autotune.costmodel import create_seeded
    from autotune.costmodel.train import params_for

    fit = data.select_tasks(fit_keys)
    return create_seeded(kind, 0, **params_for(kind, quick)).fit(fit.batch, fit.y, fit.groups, latency=fit.latency)


def run(dataset: str, kinds: list[str], modes: list[str], ks: list[int], seeds: int, held_out: list[str] | None,
        val_models: list[str], min_rest: int = 8, quick: bool = False) -> dict:
    from autotune.costmodel.data import load_selection_split
    from autotune.costmodel.metrics import pairwise_accuracy, top_k_score
    from autotune.costmodel.online import OnlineLearner

    data, fit_keys, held = load_selection_split(dataset, held_out, val_models)
    hw = data.manifest["hardware"]["hardware_id"]
    rows = []
    for kind in kinds:
        pretrained = pretrain(kind, data, fit_keys, quick)
        for model_name, keys in held.items():
            part = data.select_tasks(keys)
            weights = part.weights_for(model_name)
            for k in ks:
                for seed in range(seeds):
                    rng = np.random.default_rng([seed, k])
                    perms = {}  # every mode sees the same "measured so far" programs
                    for g in np.unique(part.groups):
                        idx = np.nonzero(part.groups == g)[0]
                        if len(idx) >= k + min_rest:
                            perms[g] = rng.permutation(idx)
                    for mode in modes:
                        lat_all, score_all, group_all, fit_s, n_tasks = [], [], [], [], 0
                        for g, perm in perms.items():
                            seen, rest = perm[:k], perm[k:]
                            learner = OnlineLearner(pretrained, mode=mode, min_online=min(k, 8), seed=seed)
                            t0 = time.perf_counter()
                            learner.add(str(g), part.batch.subset(seen), part.latency[seen])
                            fit_s.append(time.perf_counter() - t0)
                            score_all.append(learner.predict(str(g), part.batch.subset(rest)))
                            lat_all.append(part.latency[rest])
                            group_all.append(np.full(len(rest), g))
                            n_tasks += 1
                        if not n_tasks:
                            continue
                        lat, score, groups = map(np.concatenate, (lat_all, score_all, group_all))
                        rows.append({
                            "pretrained": kind, "mode": mode, "held_out_model": model_name, "k": k, "seed": seed,
                            "tasks": n_tasks, "top1": top_k_score(lat, score, groups, weights, 1),
                            "top5": top_k_score(lat, score, groups, weights, 5),
                            "pairwise": pairwise_accuracy(lat, score, groups),
                            "update_s": float(np.mean(fit_s)),
                        })
                        print(f"{kind:7s} {mode:9s} {model_name:13s} k={k:3d} seed={seed} top1 {rows[-1]['top1']:.3f} "
                              f"top5 {rows[-1]['top5']:.3f} pairwise {rows[-1]['pairwise']:.3f} "
                              f"update {rows[-1]['update_s'] * 1e3:.0f} ms", flush=True)
    return {"dataset": dataset, "hardware_id": hw, "programs": len(data), "fit_programs": len(data.select_tasks(fit_keys)),
            "validation_models": list(held), "rows": rows}


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    keys = sorted({(r["pretrained"], r["mode"], r["k"]) for r in rows}, key=lambda x: (x[0], x[2], x[1]))
    for kind, mode, k in keys:
        sel = [r for r in rows if (r["pretrained"], r["mode"], r["k"]) == (kind, mode, k)]
        out.append({"pretrained": kind, "mode": mode, "k": k,
                    **{m: float(np.mean([r[m] for r in sel])) for m in ("top1", "top5", "pairwise", "update_s")},
                    "runs": len(sel)})
    return out


def markdown(summary: list[dict], meta: dict) -> str:
    lines = [
        f"Dataset {meta['dataset']} ({meta['programs']} programs, {meta['hardware_id']}); the validation networks' "
        f"tasks ({', '.join(meta.get('validation_models') or [])}), each pretrained kind fitted on the "
        f"{meta.get('fit_programs')} programs of no validation or test network; k random programs of each task as "
        f"'measured so far', ranking the rest. Mean over validation networks and seeds. Load average at start "
        f"{meta['loadavg_start']}, end {meta['loadavg_end']}.",
        "",
        "| pretrained | k | mode | top-1 | top-5 | pairwise | update (ms) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in summary:
        lines.append(f"| {r['pretrained']} | {r['k']} | {r['mode']} | {r['top1']:.3f} | {r['top5']:.3f} | "
                     f"{r['pairwise']:.3f} | {r['update_s'] * 1e3:.0f} |")
    return "\n".join(lines) + "\n"


def plot(summary: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({r["pretrained"] for r in summary})
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for mode in sorted({r["mode"] for r in summary}):
            sel = sorted((r for r in summary if r["pretrained"] == kind and r["mode"] == mode), key=lambda r: r["k"])
            ax.plot([r["k"] for r in sel], [r["top1"] for r in sel], marker="o", label=mode)
        ax.set_title(f"pretrained {kind}")
        ax.set_xlabel("programs of the task measured so far (k)")
        ax.set_ylabel("top-1 score on the rest")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=os.path.join(ROOT, "datasets", "cpu-znver3-2c"))
    ap.add_argument("--pretrained", default="xgb,ms-mlp",
                    help="kinds fitted here without the replayed networks (default: %(default)s, what auto takes)")
    ap.add_argument("--modes", default="none,online,blend,finetune,residual")
    ap.add_argument("--ks", default="8,16,32")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--held-out", default=None, help="the test networks, dropped unread (default: the comparison's)")
    ap.add_argument("--validation-models", default=",".join(splits.VALIDATION_MODELS))
    ap.add_argument("--quick", action="store_true", help="small pretrained models (CI)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "validation"))
    args = ap.parse_args(argv)
    start_load = loadavg()
    t0 = time.time()
    with splits.selection():  # the test split raises in here (splits.TestSplitForbidden)
        res = run(args.dataset, args.pretrained.split(","), args.modes.split(","), [int(k) for k in args.ks.split(",")],
                  args.seeds, args.held_out.split(",") if args.held_out else None,
                  args.validation_models.split(","), quick=args.quick)
    res.update({"loadavg_start": start_load, "loadavg_end": loadavg(), "wall_s": time.time() - t0,
                "versions": versions(), "command": " ".join(["python", "experiments/online_update/run.py"] +
                                                           (argv if argv is not None else sys.argv[1:]))})
    res["summary"] = summarize(res["rows"])
    write_results(os.path.join(args.out, "online_update.json"), res, os.path.join(args.out, "online_update.md"),
                  markdown(res["summary"], res))
    plot(res["summary"], os.path.join(args.out, "online_update.png"))
    return 0


if __name__ == "__main__":
    from autotune.cli import run_main

    sys.exit(run_main(main))  # a bad --dataset: one line, exit 2
