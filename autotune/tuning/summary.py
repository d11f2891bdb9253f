"""What a tuning run leaves to look at: a tuning-curve PNG and a per-task markdown table (TVM-free).

Both are read from report.json's dict (``TuneSession._report``), so they describe exactly what ran:

- ``tuning_curve.png``: the estimated end-to-end latency, sum over tasks of weight x best measured
  latency, after every measured batch, against trials in the database and against this run's wall time.
  The estimate is drawn once every task that ends the run with a valid measurement has one; before
  that, the sum over the tasks measured so far is drawn dashed (a partial sum, not an estimate);
  tasks never measured are counted in the title.
- ``tuning_tasks.md``: task, weight, FLOPs, trials, best ms, GFLOP/s and share of the estimated total,
  largest share first, with the measured end-to-end latency beside the estimate.
"""

from __future__ import annotations

import os

CURVE_PNG = "tuning_curve.png"
TASKS_MD = "tuning_tasks.md"


def curve_points(report: dict) -> tuple[list[tuple[int, float, float, bool]], list[int]]:
    """[(trials in database, seconds into tuning, sum of weight x best s, complete)] and the tasks never
    measured; ``complete``: every task measured by the end of the run has a measurement (an estimate)."""
    tasks = report["tasks"]
    history = report["history"]
    start = history.get("start") or {}
    best = list(start.get("task_best_s") or [None] * len(tasks))
    final = [t["best_latency_ms"] is not None for t in tasks]
    unmeasured = [i for i, ok in enumerate(final) if not ok]
    weights = [t["weight"] for t in tasks]

    def point(trials, elapsed) -> tuple[int, float, float, bool] | None:
        known = [w * b for w, b in zip(weights, best) if b is not None]
        complete = not any(ok and b is None for ok, b in zip(final, best))
        return (int(trials), float(elapsed), sum(known), complete) if known else None

    points = [point(start.get("trials", 0), 0.0)]
    for trials, elapsed, task, task_best in history["rows"]:
        best[task] = task_best
        points.append(point(trials, elapsed))
    return [p for p in points if p is not None], unmeasured


def task_table(report: dict) -> str:
    """The per-task markdown table (largest share of the estimated total first)."""
    tasks = report["tasks"]
    est = sum(t["weight"] * t["best_latency_ms"] for t in tasks if t["best_latency_ms"] is not None)
    measured = sum(t["best_latency_ms"] is not None for t in tasks)
    tuned = (report.get("latency_ms") or {}).get("tvm_tuned")
    lines = [
        f"# {report['model']} on {report.get('hardware_id', '?')}: tuned tasks",
        "",
        f"Estimated end-to-end latency (sum of weight x best ms over {measured} of {len(tasks)} measured tasks): "
        f"{est:.3f} ms" + (f"; measured end-to-end (compiled, tuned): {tuned:.3f} ms." if tuned else "."),
        f"Trials in the database: {report['trials']['in_database']} ({report['trials']['this_run']} this run, "
        f"{report['trials']['failed']} failed). Curve: `{CURVE_PNG}`.",
        "",
        "| task | weight | FLOPs | trials | best ms | GFLOP/s | share of estimate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t in sorted(tasks, key=lambda t: -(t["weight"] * (t["best_latency_ms"] or -1.0))):
        ms = t["best_latency_ms"]
        share = f"{t['weight'] * ms / est:.1%}" if ms is not None and est > 0 else "-"
        lines.append(
            f"| {t['name']} | {t['weight']} | {t['flops']:.3g} | {t['trials']} | "
            f"{_fmt(ms, '.4g')} | {_fmt(t['best_gflops'], '.3g')} | {share} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def plot_curve(report: dict, path: str) -> None:
    """``tuning_curve.png``: estimated latency vs trials and vs wall time (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, unmeasured = curve_points(report)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    partial = [p for p in points if not p[3]]
    if partial and len(partial) < len(points):
        partial.append(next(p for p in points if p[3]))  # join the dashed part to the estimate
    for ax, column, label in ((axes[0], 0, "trials in the database"), (axes[1], 1, "wall time of this run (s)")):
        for part, style, name in ((partial, dict(ls="--", color="0.6"), "sum over tasks measured so far"),
                                  ([p for p in points if p[3]], {}, "estimate (every task measured)")):
            if part:
                ax.step([p[column] for p in part], [p[2] * 1e3 for p in part], where="post", marker=".",
                        label=name, **style)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    if points:
        axes[0].legend()
    axes[0].set_ylabel("estimated latency (ms): sum of weight x best")
    title = f"{report['model']} on {report.get('hardware_id', '?')}"
    if unmeasured:
        title += f" ({len(unmeasured)} of {len(report['tasks'])} tasks never measured, left out)"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_run_summary(report: dict, work_dir: str) -> tuple[str, str]:
    """Write the curve PNG and the task table into ``work_dir``; their paths."""
    png, md = os.path.join(work_dir, CURVE_PNG), os.path.join(work_dir, TASKS_MD)
    plot_curve(report, png)
    with open(md, "w", encoding="utf-8") as f:
        f.write(task_table(report))
    return png, md
