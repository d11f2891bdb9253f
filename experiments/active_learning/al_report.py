"""Tables, learning curves, the issue's done-when checks and what is missing, from results/runs.jsonl."""

from __future__ import annotations

import os
import sys

import numpy as np

from autotune.cli import git_commit, write_json

# the anchors of EXPERIMENTS.md (authors' numbers, their datasets and models)
CLAIMS = [
    (
        "TCL RDU (Apr 2026)",
        "10%",
        "near-full-data accuracy; ablation top-1 without -> with RDU 0.741 -> 0.902 (CPU, secondary source)",
    ),
    ("BALTO (ICLR'23, biased diversity)", "5%", "full-data accuracy"),
]


def summarize(runs: list[dict]) -> dict:
    """(kind, sampler, fraction) -> mean / sd / n of top-1, top-5 over seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["kind"], r["sampler"], float(r["fraction"])), []).append(r)
    out = {}
    for (kind, sampler, frac), rs in sorted(groups.items()):
        cell = {"n": len(rs), "seeds": sorted(r["seed"] for r in rs), "programs": rs[0]["programs"]}
        for m in ("top1", "top5", "pairwise"):
            vals = np.array([r[m] for r in rs], float)
            cell[m] = float(vals.mean())
            cell[m + "_sd"] = float(vals.std(ddof=1)) if len(vals) > 1 else float("nan")
        cell["fit_s"] = float(np.mean([r["fit_s"] for r in rs]))
        out.setdefault(kind, {}).setdefault(sampler, {})[frac] = cell
    return out


# (check, (sampler, fraction) compared, against (sampler, fraction), margin): a.top1 >= b.top1 + margin
CHECKS = [
    ("RDU@10% top-1 within 0.02 of the 100% model", ("rdu", 0.10), ("all", 1.0), -0.02),
    ("RDU@10% top-1 >= random@10% + 0.03", ("rdu", 0.10), ("random", 0.10), 0.03),
    ("RDU@5% top-1 >= random@10%", ("rdu", 0.05), ("random", 0.10), 0.0),
]


def _label(sampler: str, frac: float) -> str:
    return "100%" if sampler == "all" else f"{sampler}@{frac:.0%}"


def checks(summary: dict, seeds: int) -> list[dict]:
    """The issue's done-when rows, per cost model: reached / not reached (numbers) / missing data."""
    out = []
    for kind, table in summary.items():
        for name, (sa, fa), (sb, fb), margin in CHECKS:
            a, b = table.get(sa, {}).get(fa), table.get(sb, {}).get(fb)
            if not a or not b or a["n"] < seeds or b["n"] < seeds:
                out.append(
                    {
                        "kind": kind,
                        "check": name,
                        "status": "missing data",
                        "detail": f"needs {seeds} seeds of {_label(sa, fa)} and {_label(sb, fb)}",
                    }
                )
                continue
            diff = a["top1"] - b["top1"]
            detail = (
                f"{_label(sa, fa)} {a['top1']:.3f} ± {a['top1_sd']:.3f} vs {_label(sb, fb)} {b['top1']:.3f} ± "
                f"{b['top1_sd']:.3f} (diff {diff:+.3f}, needs >= {margin:+.2f})"
            )
            out.append(
                {
                    "kind": kind,
                    "check": name,
                    "status": "reached" if diff >= margin - 1e-12 else "not reached",
                    "detail": detail,
                    "diff": diff,
                }
            )
    return out


def _cell(c: dict | None, metric: str = "top1") -> str:
    if not c:
        return "–"
    sd = "" if np.isnan(c[metric + "_sd"]) else f" ± {c[metric + '_sd']:.3f}"
    return f"{c[metric]:.3f}{sd}" + (f" (n={c['n']})" if c["n"] < 3 else "")


def tables(summary: dict, fractions: list[float], samplers: list[str]) -> list[str]:
    lines = []
    for kind, table in summary.items():
        full = table.get("all", {}).get(1.0)
        for metric, label in (("top1", "top-1"), ("top5", "top-5"), ("pairwise", "pairwise accuracy")):
            head = ["sampler"] + [f"{f:.0%}" for f in fractions] + ["100%"]
            lines += [
                f"### `{kind}`: held-out mean {label} (mean ± sd over seeds)",
                "",
                "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head),
            ]
            for s in samplers:
                if s in table:
                    cells = [_cell(table[s].get(f), metric) for f in fractions]
                    lines.append("| " + " | ".join([s, *cells, ""]) + " |")
            lines += [
                f"| all {full['programs'] if full else '?'} programs |"
                + " |" * len(fractions)
                + f" {_cell(full, metric)} |",
                "",
            ]
    return lines


def plot(summary: dict, fractions: list[float], path: str) -> None:
    """Rows: top-1 (noisy: a few heavy tasks' single picks) and pairwise accuracy; one column per cost model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    kinds = list(summary)
    if not kinds:
        return
    names = sorted({s for t in summary.values() for s in t if s != "all"})
    colors = {s: plt.cm.tab10(i % 10) for i, s in enumerate(names)}
    fig, axes = plt.subplots(2, len(kinds), figsize=(5.5 * len(kinds), 8), squeeze=False)
    for col, kind in enumerate(kinds):
        table = summary[kind]
        for row, (metric, label) in enumerate((("top1", "top-1"), ("pairwise", "pairwise accuracy"))):
            ax = axes[row][col]
            for s in names:
                cells = table.get(s, {})
                fs = [f for f in fractions if f in cells]
                if not fs:
                    continue
                mean = np.array([cells[f][metric] for f in fs])
                sd = np.nan_to_num(np.array([cells[f][metric + "_sd"] for f in fs]))
                ax.errorbar(
                    fs,
                    mean,
                    yerr=sd,
                    marker="o",
                    ms=4,
                    capsize=3,
                    label=s,
                    color=colors[s],
                    lw=2.4 if s in ("rdu", "random") else 1.0,
                    ls="-" if s in ("rdu", "random") else ":",
                )
            full = table.get("all", {}).get(1.0)
            if full:
                ax.axhline(
                    full[metric], color="k", ls="--", lw=1, label=f"100% ({full[metric]:.3f}, n={full['n']})"
                )
                if not np.isnan(full[metric + "_sd"]):
                    lo, hi = full[metric] - full[metric + "_sd"], full[metric] + full[metric + "_sd"]
                    ax.axhspan(lo, hi, color="k", alpha=0.08)
            ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(fractions)
            ax.set_xticklabels([f"{f:.0%}" for f in fractions])
            ax.set_xlabel("share of the training pool measured")
            ax.set_ylabel(f"held-out mean {label} (mean ± sd over seeds)")
            ax.set_title(f"{kind}: {label}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(runs: list[dict], wanted: list[tuple], args, pool_programs: int, sel_logs: dict) -> None:
    fractions = [float(f) for f in args.fractions.split(",") if f]
    samplers = [s for s in args.samplers.split(",") if s]
    summary = summarize(runs)
    done = {(r["sampler"], float(r["fraction"]), r["seed"], r["kind"]) for r in runs}
    missing = [j for j in wanted if (j[0], float(j[1]), j[2], j[3]) not in done]
    chk = checks(summary, args.seeds)
    command = " ".join(["python", "experiments/active_learning/run.py", *sys.argv[1:]])
    result = {
        "dataset": args.dataset,
        "held_out": args.held_out.split(","),
        "pool_programs": pool_programs,
        "seeds": args.seeds,
        "fractions": fractions,
        "samplers": samplers,
        "summary": _keys_to_str(summary),
        "checks": chk,
        "missing": [list(j) for j in missing],
        "selection_rounds_seed0": sel_logs,
        "commit": git_commit(),
        "command": command,
        "quick": args.quick,
        "acquisition": getattr(args, "acquisition", "bootstrap-xgb"),
    }
    write_json(os.path.join(args.out, "active_learning.json"), result)
    plot(summary, fractions, os.path.join(args.out, "learning_curves.png"))
    lines = [
        f"# Active learning (T1) on {os.path.basename(os.path.normpath(args.dataset))}",
        "",
        f"Pool: {pool_programs} programs of the training tasks (held out: {args.held_out}). "
        f"Seeds: {args.seeds}. Runs done: {len(runs)}, missing: {len(missing)}. Acquisition model of the samplers "
        f"that read one: `{result['acquisition']}`.",
        "",
        "![learning curves](learning_curves.png)",
        "",
    ]
    if args.quick:
        lines[2:2] = [
            "**Quick run (CI smoke check)**: tests/data/tiny_dataset, small models; the numbers say nothing "
            "about the samplers.",
            "",
        ]
    lines += tables(summary, fractions, samplers)
    lines += [
        "## Done-when checks of the issue (computed from the runs)",
        "",
        "| cost model | check | status | numbers |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c['kind']} | {c['check']} | **{c['status']}** | {c['detail']} |" for c in chk]
    lines += [
        "",
        "## Side by side with the papers' claims (their datasets, models and baselines)",
        "",
        "| source | share measured | claim | here (same share, mean top-1 over seeds) |",
        "|---|---|---|---|",
    ]
    for name, share, claim in CLAIMS:
        sampler, frac = ("rdu", 0.10) if "TCL" in name else ("topk-biased", 0.05)
        here = []
        for kind, table in summary.items():
            cell, full = table.get(sampler, {}).get(frac), table.get("all", {}).get(1.0)
            if cell and full:
                here.append(
                    f"{kind}: `{sampler}` {cell['top1']:.3f} = {cell['top1'] / full['top1']:.0%} of 100% "
                    f"({full['top1']:.3f})"
                )
        lines.append(f"| {name} | {share} | {claim} | {'; '.join(here) or '–'} |")
    if missing:
        gaps: dict[tuple, dict[float, list[int]]] = {}
        for sampler, frac, seed, kind in missing:
            gaps.setdefault((kind, sampler), {}).setdefault(float(frac), []).append(seed)
        parts = []
        for (kind, sampler), by_frac in sorted(gaps.items()):
            n_wanted = sum(1 for j in wanted if (j[3], j[0]) == (kind, sampler))
            if sum(len(v) for v in by_frac.values()) == n_wanted:
                parts.append(f"{kind} {sampler}: all")
            else:
                parts.append(
                    f"{kind} {sampler}: "
                    + ", ".join(
                        f"{f:.0%} seed {'/'.join(map(str, sorted(v)))}" for f, v in sorted(by_frac.items())
                    )
                )
        lines += [
            "",
            f"## Not run yet ({len(missing)} of {len(wanted)} runs)",
            "",
            "; ".join(parts) + ".",
            "",
            "Rerun the command to continue (done runs are skipped).",
        ]
    lines += [
        "",
        f"Reproduce: `make experiments-active-learning` (python experiments/active_learning/run.py; "
        f"`--deadline-min N` stops starting fits after N minutes). These tables: `{command}`, commit "
        f"{str(git_commit())[:10]}. Raw runs: `runs.jsonl`, summary: `active_learning.json`.",
        "",
    ]
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def _keys_to_str(summary: dict) -> dict:
    return {
        k: {s: {f"{f:g}": c for f, c in cells.items()} for s, cells in t.items()} for k, t in summary.items()
    }
