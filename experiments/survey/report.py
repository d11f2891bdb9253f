"""Tables (markdown, side by side with the paper) and plots (PNG) from the E1/E2/E3 JSON results.

    python -m experiments.survey.report                       # results/ -> results/*.md, *.png, README
    python -m experiments.survey.report --dir runs/survey-quick --no-readme
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import timing  # noqa: E402
from .readings import PAPER_E1_MAX, PAPER_E3_REDUCTION, READINGS  # noqa: E402

PAPER = {
    "e1": f"up to **{PAPER_E1_MAX}x** for fusion-friendly graphs, limited improvement elsewhere (Inductor, RTX A6000)",
    "e2": "compile time can need **thousands of executions** to amortize (Inductor, RTX A6000)",
    "e3": f"dynamic-shape compilation cuts cumulative shape-transition cost by **~{PAPER_E3_REDUCTION:.0%}**, "
          "modest steady-state slowdown (Inductor, RTX A6000)",
}


def num(v) -> float:
    return float(v)  # JSON stores inf/nan as strings


def fx(v, digits: int = 2) -> str:
    v = num(v)
    return "∞" if math.isinf(v) else f"{v:.{digits}f}x"


def fn(v) -> str:
    v = num(v)
    if math.isinf(v):
        return "∞"
    return f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def ms(v) -> str:
    v = num(v) * 1e3
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def env_line(d: dict) -> str:
    e = d["env"]
    return (f"{d['experiment']}, {d['mode']} run {d['started']}: {e['cpu']} ({e['nproc']} cores), torch {e['torch']}, "
            f"device {e['device']}{' ' + e.get('gpu', '') if e.get('gpu') else ''}, torch threads "
            f"{e['torch_threads']}, TVM_NUM_THREADS={e['TVM_NUM_THREADS']}; loadavg start {e['loadavg']}, "
            f"end {d['loadavg_end']}."
            + (f" Records re-measured in this run were merged into the run of {d['merged_into']}." if d.get("merged_into")
               else "")
            + (f" Inductor part from the run of {d['inductor_part_from']}." if d.get("inductor_part_from") else ""))


def arm_cell(rec: dict, arm: str) -> str:
    if arm in rec["skipped"]:
        return "skipped"
    if arm not in rec["timing"]["ratio"]:
        return "—"
    r = rec["timing"]["ratio"][arm]
    ok = "" if rec["check"][arm]["ok"] else " **(numerics FAIL)**"
    return f"{fx(r['median'])} [{num(r['p25']):.2f}–{num(r['p75']):.2f}]{ok}"


def _kernel_note(r: dict) -> str:
    k = r["tuning"].get("kernel_s")
    if not k:
        return ""
    return f", kernel {ms(k)} ms (eager/kernel {fx(num(r['timing']['per_call_s']['eager']['median']) / num(k))})"


def e1_tables(d: dict) -> str:
    recs = d["workloads"]
    arms = [a for a in ("inductor", "inductor_ro", "tvm_untuned", "tvm_tuned")
            if any(a in r["timing"]["ratio"] or a in r["skipped"] for r in recs)]
    lines = [f"# E1 graph optimization\n\n{env_line(d)}\n",
             "Speedup = median over rounds of eager_time / arm_time (alternating blocks; [p25–p75]). "
             "Every arm's output checked against eager with allclose(rtol, atol) per workload.\n",
             "| workload | kind | batch | eager ms | " + " | ".join(arms) + " | Inductor 1st call s (first workload of a process incl. init) | max rel L2 err | rtol/atol |",
             "|---" * (len(arms) + 7) + "|"]
    for r in recs:
        err = max(num(c.get("rel_l2_err", 0)) for c in r["check"].values()) if r["check"] else float("nan")
        tol = f"{r['check']['inductor']['rtol']:g}/{r['check']['inductor']['atol']:g}" if r["check"] else ""
        lines.append(f"| {r['workload']} ({r['description']}) | {r['kind']} | {r['batch']} | "
                     f"{ms(r['timing']['per_call_s']['eager']['median'])} | "
                     + " | ".join(arm_cell(r, a) for a in arms)
                     + f" | {num(r['first_call_s'].get('inductor', float('nan'))):.1f} | {err:.1e} | {tol} |")
    skipped = {a: s for r in recs for a, s in r["skipped"].items()}
    if skipped:
        lines.append("\nSkipped arms: " + "; ".join(f"{a}: {s}" for a, s in skipped.items()))
    tuned = [r for r in recs if "tuning" in r]
    if tuned:
        lines.append("\nTVM tuned (autotune.api, MetaSchedule; timed through its torch callable, which converts "
                     "inputs and outputs each call; 'kernel' = TVM time_evaluator without conversion): "
                     + "; ".join(f"{r['workload']} {r['tuning']['trials']} trials, tuning {num(r['tuning']['tuning_s']):.0f} s"
                                 + _kernel_note(r) for r in tuned))
    if d["batch_sweep"]:
        lines += ["\n## Batch-size sweep (eager vs Inductor)\n", "| workload | batch | eager ms | Inductor |",
                  "|---|---|---|---|"]
        for r in d["batch_sweep"]:
            lines.append(f"| {r['workload']} | {r['batch']} | {ms(r['timing']['per_call_s']['eager']['median'])} | "
                         f"{arm_cell(r, 'inductor')} |")
    fusion = [num(r["timing"]["ratio"]["inductor"]["median"]) for r in recs if r["kind"] == "fusion"]
    compute = [num(r["timing"]["ratio"]["inductor"]["median"]) for r in recs if r["kind"] == "compute"]
    tvm_best = [num(r["timing"]["ratio"][a]["median"]) for r in recs for a in ("tvm_untuned", "tvm_tuned")
                if a in r["timing"]["ratio"]]
    lines += ["\n## Side by side with the paper\n", "| | paper | here |", "|---|---|---|",
              f"| claim | {PAPER['e1']} | Inductor, CPU, 1 thread |",
              f"| max speedup, fusion-friendly | {PAPER_E1_MAX}x | {fx(max(fusion)) if fusion else '—'} |",
              f"| range, fusion-friendly | — | {fx(min(fusion)) if fusion else '—'} … {fx(max(fusion)) if fusion else '—'} |",
              f"| range, GEMM/conv-bound | limited | {fx(min(compute)) if compute else '—'} … "
              f"{fx(max(compute)) if compute else '—'} |",
              f"| TVM best arm, any workload | — | {fx(max(tvm_best)) if tvm_best else '—'} |"]
    return "\n".join(lines) + "\n"


def e2_tables(d: dict) -> str:
    s = d["startup"]
    lines = [f"# E2 compile overhead\n\n{env_line(d)}\n",
             f"Process start-up (separate): bare python {num(s['python_s']):.2f} s, python + import torch "
             f"{num(s['python_import_torch_s']):.2f} s. Inductor framework init (first trivial compile in a process): "
             "column 'init'. compile = first call − steady call of the workload (after init); "
             "N* = compile / (t_eager − t_compiled); ∞ where compiled is not faster. Compile times: medians over "
             f"{d['config']['repeats']} fresh-process repeats; steady-state times: medians pooled over all "
             f"{2 * d['config']['repeats']} processes (alternating blocks in each).\n",
             "| workload | kind | speedup | eager / compiled ms | cold compile s | warm compile s | init cold/warm s "
             "| N* cold | N* warm | N* cold incl. init |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["inductor"]:
        c, w, st = r["cold"], r["warm"], r["steady"]
        lines.append(f"| {r['workload']} | {r['kind']} | {fx(st['speedup'])} | {ms(st['t_eager'])} / "
                     f"{ms(st['t_compiled'])} | {num(c['compile_s']):.2f} | {num(w['compile_s']):.2f} | "
                     f"{num(c['framework_init_s']):.1f}/{num(w['framework_init_s']):.1f} | "
                     f"{fn(c['n_star'])} | {fn(w['n_star'])} | {fn(c['n_star_incl_init'])} |")
    t = d["tvm"]
    if "skipped" in t:
        lines.append(f"\nTVM part skipped: {t['skipped']}")
    else:
        lines += ["\n## TVM: tuning time as the compile overhead\n",
                  "| workload | arm | overhead s | ms/call | vs eager | N* vs eager | N* vs untuned | warm (database) compile s "
                  "| N* warm vs eager |", "|---|---|---|---|---|---|---|---|---|"]
        for row in t["workloads"]:
            u, te = row["untuned"], num(row["t_eager"])
            lines.append(f"| {row['workload']} | untuned | {num(u['compile_s']):.2f} | {ms(u['t'])} | "
                         f"{fx(te / num(u['t']))} | {fn(u['n_star_vs_eager'])} | — | — | — |")
            for b in row["budgets"]:
                kernel = f" ({ms(b['kernel_s'])})" if b.get("kernel_s") else ""
                lines.append(f"| {row['workload']} | tuned {b['trials']} trials | {num(b['overhead_s']):.0f} | "
                             f"{ms(b['t_tuned'])}{kernel} | {fx(b['speedup_vs_eager'])} | {fn(b['n_star_vs_eager'])} | "
                             f"{fn(b['n_star_vs_untuned'])} | {num(b['warm_compile_s']):.2f} | "
                             f"{fn(b['n_star_warm_vs_eager'])} |")
        if t.get("tuned_skipped"):
            lines.append(f"\nTuned arm skipped: {t['tuned_skipped']}")
        else:
            lines.append("\nTuned rows: overhead = tuning + compile; ms/call through autotune.api's torch callable "
                         "(in parentheses: TVM time_evaluator, no conversion); N* vs untuned uses the untuned "
                         "compile through the same callable; warm = compile_torch re-using the tuning database.")
    finite = [num(r["cold"]["n_star"]) for r in d["inductor"] if not math.isinf(num(r["cold"]["n_star"]))]
    lines += ["\n## Side by side with the paper\n", "| | paper | here (Inductor, CPU, 1 thread) |", "|---|---|---|",
              f"| claim | {PAPER['e2']} | |",
              f"| N* (cold cache), finite cases | thousands | {fn(min(finite)) if finite else '—'} … "
              f"{fn(max(finite)) if finite else '—'} |",
              f"| workloads never amortized (N* = ∞) | — | {len(d['inductor']) - len(finite)} of {len(d['inductor'])} |"]
    return "\n".join(lines) + "\n"


def e3_tables(d: dict) -> str:
    cfg, ind = d["config"], d["inductor"]
    lines = [f"# E3 dynamic shapes\n\n{env_line(d)}\n",
             f"FFN block hidden {cfg['hidden']}, ffn {cfg['ffn']}, batch {cfg['batch']}, seq = {d['seqs']} (in this "
             f"order); each shape called {cfg['calls']} times (TVM: {cfg['tvm_calls']}) as it arrives. Cumulative "
             "= wall time incl. compiles; reduction = 1 − dynamic/static. Steady ratio = dynamic/static latency "
             "(>1: dynamic slower), median of per-round ratios.\n",
             "| framework | N | static cumulative s | dynamic cumulative s | eager s | reduction | graphs static/dynamic |",
             "|---|---|---|---|---|---|---|"]
    for s in ind["summary"]:
        lines.append(f"| Inductor | {s['n']} | {num(s['static_s']):.2f} | {num(s['dynamic_s']):.2f} | "
                     f"{num(s['eager_s']):.2f} | {100 * num(s['reduction']):.0f}% | "
                     f"{s['graphs']['static']}/{s['graphs']['dynamic']} |")
    t = d["tvm"]
    if "skipped" not in t:
        for s in t["summary"]:
            lines.append(f"| TVM Relax untuned | {s['n']} | {num(s['static_s']):.2f} | {num(s['dynamic_s']):.2f} | — | "
                         f"{100 * num(s['reduction']):.0f}% | {s['n']}/1 |")
    st = ind["steady_dyn_over_static"]
    lines += ["", f"Inductor steady-state dynamic/static: median {num(st['median']):.3f} "
                  f"(per-shape range {num(st['min']):.3f}–{num(st['max']):.3f}); one-time Inductor init before "
                  f"the clock: {', '.join(f'{num(v):.1f}' for v in ind['framework_init_s'])} s."]
    if "skipped" not in t:
        lines.append(f"TVM steady-state dynamic/static (untuned): median {num(t['steady_dyn_over_static']['median']):.3f} "
                     f"over seq {[s['seq'] for s in t['steady']]}.")
    else:
        lines.append(f"TVM part skipped: {t['skipped']}")
    last = ind["summary"][-1]
    reductions = ", ".join(f"{100 * num(s['reduction']):.0f}% at N={s['n']}" for s in ind["summary"])
    lines += ["\n## Side by side with the paper\n", "| | paper | here (Inductor, CPU, 1 thread) |", "|---|---|---|",
              f"| claim | {PAPER['e3']} | |",
              f"| cumulative reduction | ~{PAPER_E3_REDUCTION:.0%} | {reductions} |",
              f"| steady-state slowdown | modest | {num(st['median']):.3f}x (dynamic/static) |",
              f"| graphs at N={last['n']} | — | static {last['graphs']['static']}, dynamic {last['graphs']['dynamic']} |"]
    return "\n".join(lines) + "\n"


def plot_e1(d: dict, path: Path) -> None:
    recs = d["workloads"]
    arms = [a for a in ("inductor", "inductor_ro", "tvm_untuned", "tvm_tuned") if any(a in r["timing"]["ratio"] for r in recs)]
    fig, axes = plt.subplots(1, 2 if d["batch_sweep"] else 1, figsize=(14 if d["batch_sweep"] else 10, 4.5),
                             squeeze=False)
    ax, width = axes[0][0], 0.8 / max(len(arms), 1)
    for i, a in enumerate(arms):
        ys = [num(r["timing"]["ratio"][a]["median"]) if a in r["timing"]["ratio"] else 0 for r in recs]
        ax.bar([k + i * width for k in range(len(recs))], ys, width, label=a)
    ax.axhline(1, color="k", lw=0.8)
    ax.axhline(PAPER_E1_MAX, color="r", ls="--", lw=0.8, label=f"paper max {PAPER_E1_MAX}x (A6000)")
    ax.set_yscale("log")
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(recs))], [r["workload"] for r in recs], rotation=35, ha="right")
    ax.set_ylabel("speedup vs eager (log)")
    ax.set_title(f"E1 speedup per workload ({d['env']['device']}, {d['env']['torch_threads']} thread)")
    ax.legend(fontsize=7)
    if d["batch_sweep"]:
        ax2 = axes[0][1]
        for name in dict.fromkeys(r["workload"] for r in d["batch_sweep"]):
            rs = [r for r in d["batch_sweep"] if r["workload"] == name]
            ax2.plot([r["batch"] for r in rs], [num(r["timing"]["ratio"]["inductor"]["median"]) for r in rs], "o-",
                     label=name)
        ax2.axhline(1, color="k", lw=0.8)
        ax2.set_xscale("log", base=2)
        ax2.set_xlabel("batch")
        ax2.set_ylabel("Inductor speedup vs eager")
        ax2.set_title("batch-size sweep")
        ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_tvm_budgets(ax, tvm: dict) -> None:
    """N*(trials): tuning + compile time over the per-call gain, against eager and against untuned TVM."""
    for row in tvm["workloads"]:
        for key, style in (("n_star_vs_eager", "o-"), ("n_star_vs_untuned", "s--")):
            pts = [(b["trials"], num(b[key])) for b in row["budgets"] if not math.isinf(num(b[key]))]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=f"{row['workload']} {key[7:]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("MetaSchedule trials")
    ax.set_ylabel("N* (log); missing points: ∞")
    ax.set_title("E2 TVM: N*(trials)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "N* = ∞ at every budget", ha="center", transform=ax.transAxes)


def plot_e2(d: dict, path: Path) -> None:
    rows = d["inductor"]
    tuned = [r for r in d["tvm"].get("workloads", []) if r["budgets"]]
    fig, axes = plt.subplots(1, 2 if tuned else 1, figsize=(15 if tuned else 10, 4.5), squeeze=False,
                             gridspec_kw={"width_ratios": [2, 1]} if tuned else None)
    ax = axes[0][0]
    if tuned:
        plot_tvm_budgets(axes[0][1], d["tvm"])
    finite = [num(r[a]["n_star"]) for r in rows for a in ("cold", "warm") if not math.isinf(num(r[a]["n_star"]))]
    top = max(finite + [10]) * 10
    for i, arm in enumerate(("cold", "warm")):
        vals = [num(r[arm]["n_star"]) for r in rows]
        bars = ax.bar([k + i * 0.4 for k in range(len(rows))], [top if math.isinf(v) else v for v in vals], 0.4,
                      label=f"N* {arm} cache", hatch=None)
        for b, v in zip(bars, vals, strict=True):
            if math.isinf(v):
                b.set_hatch("//")
                b.set_alpha(0.35)
                ax.text(b.get_x() + b.get_width() / 2, top, "∞", ha="center", va="bottom")
    ax.set_yscale("log")
    ax.axhspan(1000, 10000, color="r", alpha=0.08, label="paper: thousands")
    ax.set_xticks([k + 0.2 for k in range(len(rows))], [r["workload"] for r in rows], rotation=35, ha="right")
    ax.set_ylabel("break-even executions N* (log)")
    ax.set_title("E2 Inductor break-even N* = compile / (t_eager − t_compiled); hatched: never")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_e3(d: dict, path: Path) -> None:
    parts = [("Inductor", d["inductor"]["cumulative_s"])]
    if "skipped" not in d["tvm"]:
        parts.append(("TVM Relax (untuned)", d["tvm"]["cumulative_s"]))
    fig, axes = plt.subplots(1, len(parts), figsize=(6 * len(parts), 4.2), squeeze=False)
    for ax, (title, cum) in zip(axes[0], parts, strict=True):
        for arm, ys in cum.items():
            ax.plot(range(1, len(ys) + 1), [num(y) for y in ys], "o-", ms=3, label=arm)
        ax.set_xlabel("distinct shapes N")
        ax.set_ylabel("cumulative time incl. compiles (s)")
        ax.set_title(f"E3 {title}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(readme: Path, tables: dict[str, str]) -> None:
    text = readme.read_text()
    for key, body in tables.items():
        pattern = re.compile(rf"(<!-- {key}:start -->\n).*?(<!-- {key}:end -->)", re.S)
        text = pattern.sub(lambda m, b=body: m.group(1) + b + m.group(2), text)
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=timing.RESULTS)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-readme", action="store_true")
    p.add_argument("--strict", action="store_true", help="exit 1 if any run recorded a failed check")
    args = p.parse_args(argv)
    makers = {"e1": (e1_tables, plot_e1, "e1_speedup.png"), "e2": (e2_tables, plot_e2, "e2_nstar.png"),
              "e3": (e3_tables, plot_e3, "e3_cumulative.png")}
    tables, failed = {}, []
    for key, (table, plot, png) in makers.items():
        src = args.dir / f"{key}_{args.device}.json"
        if not src.exists():
            print(f"missing {src}: skipped", file=sys.stderr)
            continue
        d = json.loads(src.read_text())
        failed += [f"{key}: {c['what']} ({c['detail']})" for c in d.get("checks", []) if not c["ok"]]
        body = table(d)
        if key in READINGS:
            body += f"\n## Reading\n\n{READINGS[key](d, args.dir)}\n"
        (args.dir / f"{key}_{args.device}.md").write_text(body)
        plot(d, args.dir / f"{args.device}_{png}")
        tables[key] = body.split("\n", 2)[2].replace("\n## ", "\n#### ") + f"\n![{key}](results/{args.device}_{png})\n"
        print(f"wrote {args.dir / f'{key}_{args.device}.md'} and {args.device}_{png}")
    if not args.no_readme and tables:
        update_readme(timing.HERE / "README.md", tables)
    for f in failed:
        print(f"FAILED CHECK {f}", file=sys.stderr)
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
