"""What a tuning run leaves to look at: a tuning-curve PNG and a per-task markdown table (TVM-free).

Both are read from report.json's dict (``TuneSession._report``), so they describe exactly what ran:

- ``tuning_curve.png``: the estimated end-to-end latency, sum over tasks of weight x best measured
  latency, after every measured batch, against trials in the database and against this run's wall time.
  A point exists once every task that ends the run with a valid measurement has one (before that the
  sum would leave tasks out); tasks never measured are named in the title.
- ``tuning_tasks.md``: task, weight, FLOPs, trials, best ms, GFLOP/s and share of the estimated total,
  largest share first, with the measured end-to-end latency beside the estimate.
"""

from __future__ import annotations

import os

CURVE_PNG = "tuning_curve.png"
TASKS_MD = "tuning_tasks.md"


def curve_points(report: dict) -> tuple[list[tuple[int, float, float]], list[int]]:
    """[(trials in database, seconds into tuning, estimated total s)] and the tasks never measured."""
    tasks = report["tasks"]
    history = report["history"]
    start = history.get("start") or {}
    best = list(start.get("task_best_s") or [None] * len(tasks))
    final = [t["best_latency_ms"] is not None for t in tasks]
    unmeasured = [i for i, ok in enumerate(final) if not ok]
    weights = [t["weight"] for t in tasks]

    def total() -> float | None:
        if any(ok and b is None for ok, b in zip(final, best)) or not any(final):
            return None
        return sum(w * b for w, b, ok in zip(weights, best, final) if ok)

    points = []
    if total() is not None:
        points.append((int(start.get("trials", 0)), 0.0, total()))
    for trials, elapsed, task, task_best in history["rows"]:
        best[task] = task_best
        if total() is not None:
            points.append((int(trials), float(elapsed), total()))
    return points, unmeasured


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
            f"{_fmt(ms, '.4f')} | {_fmt(t['best_gflops'], '.2f')} | {share} |"
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
    for ax, column, label in ((axes[0], 0, "trials in the database"), (axes[1], 1, "wall time of this run (s)")):
        if points:
            ax.step([p[column] for p in points], [p[2] * 1e3 for p in points], where="post", marker=".")
        else:
            ax.text(0.5, 0.5, "no point yet: some task has no valid measurement", ha="center",
                    transform=ax.transAxes)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
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
