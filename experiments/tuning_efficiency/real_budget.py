"""Tuning efficiency at a real budget (issue 15's protocol), measured on compiled models.

    python experiments/tuning_efficiency/real_budget.py                    # 3 held-out models x arms x 2 seeds
    python experiments/tuning_efficiency/real_budget.py --quick            # CI: tiny_mlp, 4 trials per task
    python experiments/tuning_efficiency/real_budget.py --summarize-only   # tabulate what has finished

Budget: 32 trials per task of the model, as one global budget for every arm (stock's ``max_trials_global``;
bert_base 576, resnet50 ~1,056, mobilenet_v2 ~1,056 trials): a task with a one-program design space is done
after one trial and its share goes to the other tasks. Arms:
- ``stock-ms``: MetaSchedule's own ``tune_relax`` loop with its default search (stock_ms.py) — the baseline;
- ``ms-xgb``: autotune's loop with MetaSchedule's stock online XGBModel;
- ``ms-mlp``: autotune's loop with the pretrained TenSet-MLP (TCL's baseline);
- ``auto``: autotune's default (``--cost-model auto``: this hardware's best pretrained model, or the
  nearest hardware's, adapted online);
- ``ms-mlp+rdu``: the best pretrained model so far (ms-mlp) with ``--batch-selection rdu`` (TCL's sampler
  picks each round's candidates from 4x as many proposals);
- ``auto+rdu`` (bert_base and resnet50, seed 0, run when ``auto`` still meant the nearest hardware's
  pretrained ``xgb``; since 5dec092 ``auto`` on this machine is the nearest hardware's ms-mlp, so the
  ``auto`` arm repeats ``ms-mlp`` here and later runs skip it with ``--arms``).
- ``+lr`` on any arm (``stock-ms+lr``, ``ms-mlp+lr``): tuned and compiled with layout rewrite (the weights
  packed into the layouts the tuned programs chose; stock: ``cpu_weight_prepack=True``'s marking).
- ``+nhwc`` on any arm: the model's 2-D convolutions converted to NHWC before tuning (``--conv-layout nhwc``;
  stock: the same ``autotune.frontend.relax.convert_conv_layout`` before its ``tune_relax``); every other arm
  runs with ``--conv-layout nchw``, the models' own layout. The budget stays 32 x the NCHW task count.
- ``+firstN`` on an autotune arm: ``--first-round-trials N`` (a task's first visit measures N candidates, not
  a whole round of 16: every task has a tuned program after N x tasks trials). Arms without it pass
  ``--first-round-trials 16`` (whole rounds, as they were run before 4 became the CLI's default).
- ``COST_MODEL@VARIANT`` (``ms-mlp@ckd10``): that kind's model transferred to this hardware
  (issue 14: ``--cost-model-path experiments/transfer/models/VARIANT/<hardware id>/COST_MODEL``, made with
  ``python -m autotune.costmodel.transfer ... --models-dir experiments/transfer/models/VARIANT``).
- ``+popN``, ``+genN`` on an autotune arm: the evolutionary search's population and generations per round
  (``--population N``, ``--search-iters N``; ours default to 128 x 1, stock MetaSchedule's to 512 x 4).
Arm syntax: ``stock-ms[+lr][+nhwc]`` or ``COST_MODEL[@VARIANT][:ONLINE_UPDATE][+BATCH_SELECTION][+lr][+nhwc][+firstN][+popN][+genN]``; the table's "cost model used" column says
what each run really used (from its report.json).
Every run's database is then compiled at 1/8, 1/4, 1/2 and the full budget, and the snapshots of all arms
of one model and seed are timed together in alternating rounds (snapshots.py):
compiled latency and the wall time to each point are measured, not estimated. Speedup vs stock =
the trials (and seconds) an arm needed to reach stock MetaSchedule's final compiled latency, read off
the snapshots (so it is resolved to the snapshot grid: at most 8x is visible), paired by seed.
Resumable: finished runs (report.json + snapshots.json) are kept; partial results are tabulated.
Per hardware: runs, work dirs and tables are filed under this machine's hardware id
(``results_real/<hardware id>/``, ``runs/tuning_real/<hardware id>/``), since compiled latencies of two CPUs
do not compare and the machine can differ between sittings; ``--hardware HW --summarize-only`` tabulates
another machine's runs.
Run it alone on the machine (loads are recorded with every run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)  # run.py, stock_ms.py beside this file

from attribution import CHAIN, V2_ARMS, V2_BASELINE, attribution  # noqa: E402  (beside this file)
from attribution import markdown_lines as attribution_lines  # noqa: E402
from run import cost_model_flags, this_hardware  # noqa: E402  (beside this file)
from snapshots import FRACTIONS_V2, MIN_SITTINGS, combine_sittings  # noqa: E402

from autotune.cli import loadavg, seed_list, write_json  # noqa: E402
from autotune.data.splits import HELD_OUT_MODELS  # noqa: E402
from autotune.tuning.config import TRIALS_PER_ROUND_DEFAULT  # noqa: E402

ARMS = ("stock-ms", "ms-xgb", "ms-mlp", "auto", "ms-mlp+rdu")  # protocol v1's (results_real*/)
TRIALS_PER_TASK = 32


def model_budget(model: str, trials_per_task: int, root: str) -> int:
    """The budget every arm of ``model`` gets: ``trials_per_task`` x its tasks (cached in root/budgets.json).

    One global budget, as stock MetaSchedule's ``max_trials_global``, not a cap per task: tasks whose
    design space holds one program (reshapes, ``take``) are done after one trial, and their share goes to
    the heavy tasks in every arm (a per-task cap gave autotune's arms 235 trials on bert_base against
    stock's 587)."""
    path = os.path.join(root, "budgets.json")
    cache = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    key = f"{model}:{trials_per_task}"
    if key not in cache:
        code = ("import sys\nfrom autotune.tvmrt.startup import fast_start\nfast_start('llvm')\n"
                "from autotune.frontend import relax as fe\nfrom autotune.frontend.models import load_model\n"
                "from autotune.tvmrt.target import parse_target\n"
                "m = load_model(sys.argv[1]); mod, p = fe.import_exported(m.exported)\n"
                "print(len(fe.extract_tasks(fe.bind_and_simplify(mod, p), parse_target('llvm'))))\n")
        res = subprocess.run([sys.executable, "-c", code, model], cwd=ROOT, capture_output=True, text=True, check=True)
        cache[key] = trials_per_task * int(res.stdout.split()[-1])
        os.makedirs(root, exist_ok=True)
        write_json(path, cache)
    return int(cache[key])


def parse_arm(arm: str) -> tuple[str, str, str, bool, str, int | None]:
    """``COST_MODEL[:ONLINE_UPDATE][+BATCH_SELECTION][+lr][+nhwc][+firstN]`` (or ``stock-ms[+lr][+nhwc]``) ->
    (cost model, online update, batch selection, layout rewrite, conv layout, first-round trials); the parts
    not given are '' (conv layout: nchw, the models' own; first round: None, as many as any round)."""
    base, *suffixes = arm.split("+")
    layout_rewrite = "lr" in suffixes
    conv_layout = "nhwc" if "nhwc" in suffixes else "nchw"
    first = [int(x[5:]) for x in suffixes if x.startswith("first") and x[5:].isdigit()]
    rest = [x for x in suffixes if x not in ("lr", "nhwc") and not (x.startswith("first") and x[5:].isdigit())
            and not search_setting(x) and not _count_suffix(x, "iter") and not _count_suffix(x, "x")]
    name, _, online = base.partition(":")
    return name, online, "+".join(rest), layout_rewrite, conv_layout, (first[0] if first else None)


def _count_suffix(suffix: str, prefix: str) -> int | None:
    """``iter8`` with prefix ``iter`` -> 8, ``x4`` with prefix ``x`` -> 4; anything else: None."""
    digits = suffix[len(prefix):]
    return int(digits) if suffix.startswith(prefix) and digits.isdigit() and int(digits) > 0 else None


def arm_budget_settings(arm: str) -> tuple[int, int | None]:
    """(budget multiple, stock's ``num_trials_per_iter`` or None) of an arm: ``+x4`` runs 4x the model's budget
    (stock at 128 trials per task beside our 32: "our 32 reaches stock's 128" becomes measurable), ``+iter8``
    sets stock MetaSchedule's candidates per task per iteration (its default 64, capped at the per-task budget)."""
    suffixes = arm.split("+")[1:]
    mult = [n for x in suffixes if (n := _count_suffix(x, "x"))]
    per_iter = [n for x in suffixes if (n := _count_suffix(x, "iter"))]
    return (mult[0] if mult else 1), (per_iter[0] if per_iter else None)


# Transferred models for ``COST_MODEL@VARIANT`` arms (issue 14's tuning arm): VARIANT's model of this hardware,
# made by ``python -m autotune.costmodel.transfer ... --models-dir experiments/transfer/models/VARIANT``
TRANSFER_MODELS = os.path.join(ROOT, "experiments", "transfer", "models")


def variant_model_dir(name: str, hardware: str) -> tuple[str, str | None]:
    """``ms-mlp@ckd10`` -> ("ms-mlp", <TRANSFER_MODELS>/ckd10/<hardware>/ms-mlp); a plain name -> (name, None)."""
    kind, _, variant = name.partition("@")
    return kind, (os.path.join(TRANSFER_MODELS, variant, hardware, kind) if variant else None)


SEARCH_SETTINGS = {"pop": "--population", "gen": "--search-iters"}  # +popN, +genN: the evolutionary search's size


def search_setting(suffix: str) -> tuple[str, str] | None:
    """``pop512`` -> ("--population", "512"), ``gen4`` -> ("--search-iters", "4"); other suffixes: None."""
    key, digits = suffix[:3], suffix[3:]
    return (SEARCH_SETTINGS[key], digits) if key in SEARCH_SETTINGS and digits.isdigit() else None


def arm_command(arm: str, model: str, seed: int, wd: str, trials_per_task: int, budget: int,
                hardware: str | None = None) -> list[str]:
    name, online, selection, layout_rewrite, conv_layout, first_round = parse_arm(arm)
    name, model_dir = variant_model_dir(name, hardware or this_hardware())
    search = [flag for x in arm.split("+")[1:] if (setting := search_setting(x)) for flag in setting]
    mult, per_iter = arm_budget_settings(arm)
    if name == "stock-ms":
        if first_round is not None or search:
            raise SystemExit(f"{arm}: +firstN, +popN and +genN are autotune's loop only (stock runs its defaults)")
        return [sys.executable, os.path.join(HERE, "stock_ms.py"), "--model", model, "--work-dir", wd,
                "--trials-per-task", str(trials_per_task * mult), "--seed", str(seed), "--conv-layout", conv_layout,
                *(["--num-trials-per-iter", str(per_iter)] if per_iter else []),
                *(["--layout-rewrite"] if layout_rewrite else [])]
    if per_iter:
        raise SystemExit(f"{arm}: +iterN is stock MetaSchedule's setting (autotune's rounds: --trials-per-round)")
    budget *= mult
    # a model folder relative to the repository (the command's cwd): the report names the same folder in any clone
    return [sys.executable, "-m", "autotune.tune", "--model", model,
            *cost_model_flags(name, os.path.relpath(model_dir, ROOT) if model_dir else None, hardware),
            *(["--online-update", online] if online else []),
            *(["--batch-selection", selection] if selection else []), "--trials", str(budget),
            "--seed", str(seed), "--work-dir", wd, "--skip-untuned", "--bench-rounds", "3",
            "--layout-rewrite", "on" if layout_rewrite else "off", "--conv-layout", conv_layout,
            # an arm without +firstN keeps whole first rounds (16), whatever the CLI's default
            "--first-round-trials", str(first_round or TRIALS_PER_ROUND_DEFAULT), *search]


def tune_arm(arm: str, model: str, seed: int, root: str, keep: str, trials_per_task: int, start: bool) -> dict:
    """One (model, arm, seed) tuned (or already: its report.json exists). Returns its state: ``kept`` (the
    committed copy with snapshots exists), ``wd`` (tuned, snapshots missing), ``failed`` or ``missing``."""
    rel = os.path.join(model, arm_dir(arm), f"seed{seed}")
    kept, wd = os.path.join(keep, rel), os.path.join(root, rel)
    state = {"model": model, "arm": arm, "seed": seed, "kept": kept, "wd": wd}
    if all(os.path.exists(os.path.join(kept, n)) for n in ("report.json", "snapshots.json")):
        return state | {"state": "kept"}
    if not os.path.exists(os.path.join(wd, "report.json")):
        if not start:
            return state | {"state": "missing"}
        cmd = arm_command(arm, model, seed, wd, trials_per_task, model_budget(model, trials_per_task, root))
        print(f"{time.strftime('%H:%M:%S')} {model} {arm} seed {seed}: tuning (load {loadavg()})", flush=True)
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if res.returncode != 0:
            tail = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}"
            return state | {"state": "failed", "failed": tail}
    return state | {"state": "tuned"}


def snapshot_group(states: list[dict], model: str, rounds: int, fractions: str = "") -> str | None:
    """Compile and time the snapshots of every tuned arm of one model and seed together (one process,
    alternating rounds), then keep report + snapshots. Returns an error line or None."""
    todo = [s for s in states if s["state"] == "tuned"]
    if not todo:
        return None
    print(f"{time.strftime('%H:%M:%S')} {model} seed {todo[0]['seed']}: snapshots of "
          f"{', '.join(s['arm'] for s in todo)}", flush=True)
    res = subprocess.run([sys.executable, os.path.join(HERE, "snapshots.py"), *[s["wd"] for s in todo],
                          "--model", model, "--rounds", str(rounds), *(["--fractions", fractions] if fractions else [])],
                         cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        return "snapshots: " + res.stderr.strip()[-300:]
    for s in todo:
        os.makedirs(s["kept"], exist_ok=True)
        for name in ("report.json", "snapshots.json"):
            shutil.copyfile(os.path.join(s["wd"], name), os.path.join(s["kept"], name))
        s["state"] = "kept"
    return None


def sitting_count(kept: str) -> int:
    """Sittings recorded in a kept snapshots.json (0 for a file written before sittings were recorded: the
    protocol's sittings start afresh there)."""
    with open(os.path.join(kept, "snapshots.json"), encoding="utf-8") as f:
        return len(json.load(f).get("sittings") or [])


def sit_group(model: str, seed: int, arms: list[str], args, k: int) -> str | None:
    """Sitting ``k`` of one group: when any of its tuned arms has fewer than ``k`` sittings, time the snapshots
    of all its arms whose work dirs are here together (one snapshots.py call) and keep the result. The kept
    snapshots.json is copied into the work dir first, so the committed sittings are the ones added to."""
    keep = os.path.join(args.out, args.hardware, "runs")
    root = os.path.join(args.work_root, args.hardware)
    states = []
    for arm in arms:
        rel = os.path.join(model, arm_dir(arm), f"seed{seed}")
        kept, wd = os.path.join(keep, rel), os.path.join(root, rel)
        if all(os.path.exists(os.path.join(kept, n)) for n in ("report.json", "snapshots.json")) and \
                os.path.exists(os.path.join(wd, "database_tuning_record.json")):
            states.append({"arm": arm, "seed": seed, "kept": kept, "wd": wd, "state": "tuned",
                           "n": sitting_count(kept)})
    if not states or min(s["n"] for s in states) >= k:
        return None
    for s in states:
        shutil.copyfile(os.path.join(s["kept"], "snapshots.json"), os.path.join(s["wd"], "snapshots.json"))
    return snapshot_group(states, model, args.rounds, args.fractions)


def run_group(model: str, seed: int, arms: list[str], args) -> list[dict]:
    """All arms of one model and seed: tune each, then time their snapshots side by side. An arm whose
    snapshots were timed in an earlier sitting keeps them (its group is then timed without it)."""
    keep = os.path.join(args.out, args.hardware, "runs")
    tune_more = not (args.summarize_only or args.no_tune)
    states = [tune_arm(a, model, seed, os.path.join(args.work_root, args.hardware), keep, args.trials_per_task,
                       tune_more) for a in arms]
    if not args.summarize_only:
        err = snapshot_group(states, model, args.rounds, args.fractions)
        if err:
            for s in states:
                if s["state"] == "tuned":
                    s.update(state="failed", failed=err)
    out = []
    for s in states:
        if s["state"] == "kept":
            out.append(_result(s["arm"], model, seed, s["kept"]))
        elif s["state"] == "failed":
            out.append({"model": model, "arm": s["arm"], "seed": seed, "failed": s["failed"]})
    return out


def write_index(out: str) -> None:
    """results_real/README.md: one line per hardware with results, linking its table."""
    lines = ["# Tuning efficiency at a real budget, per hardware", "",
             "Compiled latencies compare only on one machine: every hardware id has its own runs and table "
             "(`python experiments/tuning_efficiency/real_budget.py` files its runs under this machine's id, "
             "`python -m autotune.env --hardware-id`).", ""]
    for hw in sorted(os.listdir(out)):
        path = os.path.join(out, hw, "real_budget.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            runs = json.load(f)["runs"]
        done = [r for r in runs if "failed" not in r]
        models = sorted({r["model"] for r in done})
        lines.append(f"- [{hw}]({hw}/README.md): {len(done)} runs ({', '.join(models) or 'none'}), "
                     f"seeds {', '.join(str(k) for k in sorted({r['seed'] for r in done})) or '-'}")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _result(arm: str, model: str, seed: int, folder: str) -> dict:
    with open(os.path.join(folder, "snapshots.json"), encoding="utf-8") as f:
        snaps = json.load(f)
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    # read under the current rule from the rounds kept (files timed under an older rule are recombined)
    snapshots = combine_sittings(snaps["snapshots"], snaps["sittings"]) if snaps.get("sittings") else snaps["snapshots"]
    return {"model": model, "arm": arm, "seed": seed, "snapshots": snapshots,
            "wall_s": (report.get("wall_s") or {}).get("tuning"), "loadavg": report.get("loadavg_end") or report.get("loadavg"),
            "cost_model_used": report.get("cost_model_used"), "hardware_id": report.get("hardware_id"),
            "sittings": len(snaps.get("sittings") or [None]),  # a file from before sittings were recorded: one
            "sitting_records": snaps.get("sittings") or [],  # as timed (their rounds): views re-read them
            # arm folders timed in the same snapshots.py call ("../<arm>/seedN"; its own folder is "seedN")
            "timed_with": sorted({p.split("/")[1] for p in snaps.get("timed_with", []) if p.startswith("../")}
                                 | {arm_dir(arm)})}


def arm_dir(arm: str) -> str:
    """An arm's folder name (runs and work dirs): ``+`` and ``:`` are not in file names."""
    return arm.replace(":", "-").replace("+", "-")


def sittings_lines(runs: list[dict]) -> list[str]:
    """Per (model, seed): how many sittings (snapshots.py calls) each arm's latencies are the median over, and
    which arms were timed together in the latest. Latencies compare best within a sitting; across sittings the
    machine's state differs, hence the median over MIN_SITTINGS of them (each sitting read as its fastest
    round: snapshots.sitting_latency)."""
    out = []
    for model, seed in sorted({(r["model"], r["seed"]) for r in runs if "failed" not in r}):
        mine = [r for r in runs if r["model"] == model and r["seed"] == seed and "failed" not in r]
        names = {arm_dir(r["arm"]): r["arm"] for r in mine}
        groups = sorted({tuple(sorted(names[d] for d in r.get("timed_with", []) if d in names)) for r in mine})
        counts = sorted({r.get("sittings", 1) for r in mine})
        together = ("all arms timed together" if len(groups) == 1 else
                    "latest timed in " + " | ".join("{" + ", ".join(g) + "}" for g in groups))
        per = (f"{counts[0]} sitting{'s' * (counts[0] != 1)}" if len(counts) == 1 else
               ", ".join(f"{r['arm']} {r.get('sittings', 1)}" for r in sorted(mine, key=lambda r: r["arm"])))
        out.append(f"- {model} seed {seed}: {per}; {together}")
    if out:
        out = ["", f"Sittings (each snapshot's latency is the median over sittings of the sitting's fastest round; "
                   f"the protocol wants {MIN_SITTINGS} per group, `--sittings {MIN_SITTINGS}`):", *out]
    return out


def first_reaching(run: dict, target_ms: float, key: str):
    for s in run["snapshots"]:
        if s["latency_ms"] <= target_ms:
            return s[key]
    return None


def summarize(runs: list[dict], baseline: str = "stock-ms") -> dict:
    out: dict = {}
    ok = [r for r in runs if "failed" not in r]
    for model in sorted({r["model"] for r in ok}):
        out[model] = {}
        base = {r["seed"]: r for r in ok if r["model"] == model and r["arm"] == baseline}
        for arm in sorted({r["arm"] for r in ok if r["model"] == model}):
            mine = {r["seed"]: r for r in ok if r["model"] == model and r["arm"] == arm}
            row = {"seeds": len(mine),
                   # sittings behind the latencies compared: the fewest of this arm's and its baseline's runs
                   "sittings": min(r.get("sittings", 1) for r in [*mine.values(), *base.values()]),
                   "final_latency_ms": float(np.mean([r["snapshots"][-1]["latency_ms"] for r in mine.values()])),
                   "wall_s": float(np.mean([r["wall_s"] or np.nan for r in mine.values()]))}
            ratios, tr, tm, paired = [], [], [], []
            for seed, b in base.items():
                if seed not in mine:
                    continue
                paired.append(seed)
                target = b["snapshots"][-1]["latency_ms"]
                ratios.append(mine[seed]["snapshots"][-1]["latency_ms"] / target)
                n_b, n_o = b["snapshots"][-1]["records"], first_reaching(mine[seed], target, "records")
                s_b, s_o = b["snapshots"][-1]["elapsed_s"], first_reaching(mine[seed], target, "elapsed_s")
                tr.append(n_b / n_o if n_o else None)
                tm.append(s_b / s_o if s_o and s_b else None)
            row["final_ratio_vs_stock"] = float(np.exp(np.mean(np.log(ratios)))) if ratios else None
            row["paired_seeds"] = paired
            row["speedup_trials_vs_stock_per_seed"] = tr
            row["speedup_time_vs_stock_per_seed"] = tm
            done = [x for x in tr if x]
            row["speedup_trials_vs_stock"] = float(np.exp(np.mean(np.log(done)))) if done and len(done) == len(tr) else None
            done = [x for x in tm if x]
            row["speedup_time_vs_stock"] = float(np.exp(np.mean(np.log(done)))) if done and len(done) == len(tm) else None
            out[model][arm] = row
    return out


def _geo(values: list) -> float | None:
    """Geometric mean, or None when any value is missing (an arm that did not reach the target)."""
    if not values or any(v is None for v in values):
        return None
    return float(np.exp(np.mean(np.log(values))))


SEEDS_REQUIRED = 2  # the protocol: >= 2 seeds of every held-out model


def _show(value: float | None, fmt: str = "{:.2f}x") -> str:
    return "not reached on every model" if value is None else fmt.format(value)


def mlp_arm(arm: str) -> str | None:
    """The pretrained MS-MLP arm (TCL's baseline) with ``arm``'s layout settings: what "≥ 2x fewer trials
    than pretrained MS-MLP" compares ``arm`` with. None for stock MetaSchedule and for that arm itself."""
    name, _, _, layout_rewrite, conv_layout, _ = parse_arm(arm)
    ref = "ms-mlp" + ("+lr" if layout_rewrite else "") + ("+nhwc" if conv_layout == "nhwc" else "")
    return None if name == "stock-ms" or ref == arm else ref


def trials_vs_mlp(summary: dict, arm: str) -> float | str:
    """Geometric mean over models (of the mean over seeds) of (trials MS-MLP needed) / (trials ``arm`` needed)
    to reach the baseline's final latency (the ratio of the two arms' speedups, paired by seed), or why there
    is none. The MS-MLP arm itself: 1.0."""
    if parse_arm(arm)[0] == "stock-ms":
        return "-"
    ref = mlp_arm(arm)
    if ref is None:
        return 1.0  # the MS-MLP arm itself
    pairs = [(per[arm], per.get(ref)) for per in summary.values() if arm in per]
    if any(r is None for _, r in pairs):
        return f"{ref} not run on every model"
    ratios = []
    for mine, theirs in pairs:
        by_seed = lambda row: dict(zip(row["paired_seeds"], row["speedup_trials_vs_stock_per_seed"]))  # noqa: E731
        a_s, b_s = by_seed(mine), by_seed(theirs)
        if not set(a_s) <= set(b_s):
            return f"{ref} not run on the same seeds"
        seeds = [(a_s[k], b_s[k]) for k in sorted(a_s)]
        if any(a is None for a, _ in seeds):
            return "not reached on every model"
        if any(b is None for _, b in seeds):
            return f"{ref} did not reach it"
        ratios.append(_geo([a / b for a, b in seeds]))  # per model over seeds, then over models (as the table)
    return _geo(ratios) if ratios else "-"


def done_when_lines(summary: dict, baseline: str = "stock-ms", only=None, title: str = "Targets") -> list[str]:
    """Issue 15's targets, computed from the table: per arm, geometric means over the models it ran on
    (speedups only where it reached ``baseline``'s final latency on every seed of every model), and the
    trials it saves over pretrained MS-MLP with the same layouts (≥ 2x wanted). "yes" only
    for an arm run on every held-out model (resnet50, mobilenet_v2, bert_base) with >= SEEDS_REQUIRED seeds, whatever
    the table was restricted to, and every group timed in >= MIN_SITTINGS sittings (latencies: the median over
    them); on less, "on track" says it meets them so far and "provisional" how many sittings there were."""
    with_base = {m: per for m, per in summary.items() if baseline in per}  # models where the baseline ran
    arms = sorted({a for per in with_base.values() for a in per if a != baseline and (only is None or only(a))})
    if not arms:
        return []
    lines = ["", f"{title} (issue 15: ≥ 5x fewer trials and ≥ 4x less wall time than {baseline} to reach its final "
             f"compiled latency, final latency ≤ 0.9x {baseline}'s at equal budget, ≥ 2x fewer trials than pretrained "
             f"MS-MLP with the same layouts), geometric means over models and seeds:", "",
             f"| arm | models | seeds | trials speedup | time speedup | final / {baseline}'s | trials vs MS-MLP | met |",
             "|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        rows = [per[arm] for per in with_base.values() if arm in per]
        tr = _geo([r["speedup_trials_vs_stock"] for r in rows])
        tm = _geo([r["speedup_time_vs_stock"] for r in rows])
        fin = _geo([r["final_ratio_vs_stock"] for r in rows])
        vs_mlp = trials_vs_mlp(with_base, arm)
        met = ((tr or 0) >= 5 and (tm or 0) >= 4 and fin is not None and fin <= 0.9
               and isinstance(vs_mlp, float) and vs_mlp >= 2)
        ran = {m for m, per in summary.items() if arm in per and baseline in per}
        complete = set(HELD_OUT_MODELS) <= ran and min(r["seeds"] for r in rows) >= SEEDS_REQUIRED
        sittings = min(r.get("sittings", 1) for r in rows)
        verdict = ("yes" if complete and sittings >= MIN_SITTINGS else "on track (incomplete)") if met else "no"
        if sittings < MIN_SITTINGS:
            verdict += f" (provisional: {sittings} of {MIN_SITTINGS} sittings)"
        lines.append(f"| {arm} | {len(rows)} | {min(r['seeds'] for r in rows)} | {_show(tr)} | "
                     f"{_show(tm)} | {_show(fin, '{:.3f}')} | "
                     f"{f'{vs_mlp:.2f}x' if isinstance(vs_mlp, float) else vs_mlp} | {verdict} |")
    return lines


# The field's numbers to set beside ours (authors' numbers, their baselines and hardware; shared/EXPERIMENTS.md)
CLAIMS = {"tcl_time_vs_tenset_mlp_cpu": 16.8, "tcl_latency_vs_tenset_mlp_cpu": 1.20, "pruner_time_vs_ms_gpu": 4.08}


def claims_lines(runs: list[dict], summary: dict) -> list[str]:
    """Our arms beside TCL's and Pruner's claims: per arm with an MS-MLP arm of the same layouts, the trials and
    wall time to reach MS-MLP's final compiled latency and MS-MLP's final / ours (TCL's 16.8x and 1.20x are
    against TenSet-MLP on CPU), and the wall time to stock MetaSchedule's final (Pruner's 4.08x is on a GPU)."""
    rows = []
    for arm in sorted({a for per in summary.values() for a in per}):
        ref = mlp_arm(arm)
        if ref is None:
            continue
        vs = summarize(runs, baseline=ref)
        per = [v[arm] for v in vs.values() if arm in v and ref in v]
        if not per:
            continue
        fin = _geo([r["final_ratio_vs_stock"] for r in per])
        stock_time = _geo([v[arm]["speedup_time_vs_stock"] for v in summary.values() if arm in v and "stock-ms" in v])
        rows.append(f"| {arm} | {ref} | {len(per)} | {_show(_geo([r['speedup_trials_vs_stock'] for r in per]))} | "
                    f"{_show(_geo([r['speedup_time_vs_stock'] for r in per]))} | "
                    f"{'-' if fin is None else f'{1 / fin:.3f}x'} | {_show(stock_time)} |")
    if not rows:
        return []
    return ["", "Beside the field's claims (their baselines and hardware, our arm against the matching one here; "
            "geometric means over models and seeds): TCL reports "
            f"{CLAIMS['tcl_time_vs_tenset_mlp_cpu']}x faster tuning and {CLAIMS['tcl_latency_vs_tenset_mlp_cpu']:.2f}x lower "
            f"final latency than TenSet-MLP on CPU; Pruner {CLAIMS['pruner_time_vs_ms_gpu']}x faster search than "
            "MetaSchedule on GPU.", "",
            "| arm | its MS-MLP (TenSet-MLP) arm | models | trials to MS-MLP's final | time to MS-MLP's "
            f"final (TCL: {CLAIMS['tcl_time_vs_tenset_mlp_cpu']}x) | MS-MLP's final / ours (TCL: "
            f"{CLAIMS['tcl_latency_vs_tenset_mlp_cpu']:.2f}x) | time to stock-ms's final (Pruner, GPU: "
            f"{CLAIMS['pruner_time_vs_ms_gpu']}x) |", "|---|---|---|---|---|---|---|", *rows]


def first_round_lines(runs: list[dict]) -> list[str]:
    """The ``--first-round-trials`` evidence: each ``+firstN`` arm's compiled latency over the same arm's with
    whole first rounds, at each snapshot, paired by (model, seed): geometric mean, min and max over the pairs."""
    ok = {(r["model"], r["arm"], r["seed"]): r for r in runs if "failed" not in r}
    rows = []
    for arm in sorted({a for _, a, _ in ok if parse_arm(a)[5] is not None}):
        base = "+".join(x for x in arm.split("+") if not (x.startswith("first") and x[5:].isdigit()))
        pairs = [(r, ok[(m, base, k)]) for (m, a, k), r in sorted(ok.items()) if a == arm and (m, base, k) in ok]
        if not pairs:
            continue
        cells = []
        for i in range(len(pairs[0][0]["snapshots"])):
            ratios = [r["snapshots"][i]["latency_ms"] / b["snapshots"][i]["latency_ms"] for r, b in pairs
                      if len(r["snapshots"]) > i and len(b["snapshots"]) > i]
            cells.append(f"{_geo(ratios):.3f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        rows.append(f"| {arm} | {base} | {len(pairs)} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    n = max(len(r["snapshots"]) for r in ok.values())
    fracs = next(r["snapshots"] for r in ok.values() if len(r["snapshots"]) == n)
    return ["", "First rounds (`--first-round-trials`): an arm's compiled latency over the same arm's with whole first "
                "rounds, per snapshot, geometric mean over the (model, seed) pairs (min-max); below 1 is faster:", "",
            "| arm | against | pairs | " + " | ".join(f"at {s['fraction']:g} of the budget" for s in fracs) + " |",
            "|---|---|---|" + "---|" * n, *rows]


def plot_curves(runs: list[dict], path: str) -> None:
    """Compiled latency at each snapshot vs trials and vs tuning wall time, one line per arm and seed."""
    from run import plot_latency_panels  # experiments/tuning_efficiency/run.py

    ok = [r for r in runs if "failed" not in r]
    if not ok:
        return
    color = {a: f"C{i % 10}" for i, a in enumerate(sorted({r["arm"] for r in ok}))}
    series: dict = {}
    for r in sorted(ok, key=lambda r: (r["arm"], r["seed"])):
        snaps = r["snapshots"]
        style = dict(color=color[r["arm"]], marker="o", markersize=3, alpha=0.85,
                     linestyle=("-", "--", ":", "-.")[r["seed"] % 4])
        series.setdefault(r["model"], []).append((f"{r['arm']} s{r['seed']}", [s["records"] for s in snaps],
                                                  [s["elapsed_s"] for s in snaps],
                                                  [s["latency_ms"] for s in snaps], style))
    plot_latency_panels(series, path, "compiled latency", row_size=(11, 3.3), dpi=90)


def same_layout(arm: str, baseline: str) -> bool:
    """Whether ``arm`` runs with the layout settings (layout rewrite, conv layout) of stock arm ``baseline``:
    the fair comparison for a layout, as stock-ms+lr is for +lr arms."""
    return parse_arm(arm)[3:5] == parse_arm(baseline)[3:5]


# When a sitting's reading became its fastest round (commit a9532ce). The rule was chosen after the verdict of
# the median rule had been seen, so the table also reads the targets on the sittings timed after it alone.
RULE_CHANGED_AT = "2026-12-05T03:36:39"


def since_rule_view(runs: list[dict]) -> list[dict]:
    """The runs re-read on the sittings timed after RULE_CHANGED_AT only (out of sample for the rule): a run
    without such a sitting is left out."""
    out = []
    for r in runs:
        sittings = [x for x in r.get("sitting_records", []) if x.get("at") and x["at"] >= RULE_CHANGED_AT]
        if "failed" not in r and sittings:
            out.append(dict(r, snapshots=combine_sittings(r["snapshots"], sittings), sittings=len(sittings)))
    return out


def median_rule_view(runs: list[dict]) -> list[dict]:
    """The runs with every snapshot's latency read by the rule until 2026-12-05 (median over sittings of each
    sitting's median over its rounds): the secondary view beside the verdict."""
    out = []
    for r in runs:
        if "failed" in r:
            out.append(r)
            continue
        snaps = [dict(s, latency_ms=s.get("latency_ms_median_rule", s["latency_ms"])) for s in r["snapshots"]]
        out.append(dict(r, snapshots=snaps))
    return out


def grid_header(runs: list[dict]) -> str:
    """The snapshot grid as fractions of the budget ("1/32 / 1/16 / ... / full"), from the shortest run's grid
    (the table shows as many columns as every run has)."""
    ok = [r["snapshots"] for r in runs if "failed" not in r]
    if not ok:
        return "each snapshot"
    fracs = [s["fraction"] for s in min(ok, key=len)]
    return " / ".join("full budget" if f >= 1 else f"1/{round(1 / f)}" for f in fracs)


def main_baseline(runs: list[dict]) -> str:
    """The stock arm the main table reads every arm against: v1's ``stock-ms`` where it ran, else protocol v2's
    same-layout stock (the baseline of every learning claim)."""
    arms = {r["arm"] for r in runs if "failed" not in r}
    return "stock-ms" if "stock-ms" in arms or V2_BASELINE not in arms else V2_BASELINE


def markdown(summary: dict, runs: list[dict], meta: dict, fair: dict | None = None) -> str:
    fmt = lambda v, f="{:.2f}x": "-" if v is None else f.format(v)  # noqa: E731
    base = meta.get("baseline", "stock-ms")
    lines = [f"# Tuning efficiency at a real budget on {meta.get('hardware_id', 'this machine')} (measured compiled latency)", "",
             f"Command: `{meta['command']}`; {meta['trials_per_task']} trials per task as one global budget; load at start "
             f"{meta['loadavg_start']}, end {meta['loadavg_end']}.", "",
             "| model | arm | cost model used | seeds | compiled latency at " + grid_header(runs) + " (ms, seed "
             f"mean) | tuning wall s | final / {base}'s | trials speedup vs {base} (per seed) | time speedup vs {base} |",
             "|---|---|---|---|---|---|---|---|---|"]
    for model, arms in summary.items():
        for arm, r in arms.items():
            mine = [x for x in runs if x["model"] == model and x["arm"] == arm and "failed" not in x]
            grid = " / ".join(f"{np.mean([m['snapshots'][i]['latency_ms'] for m in mine]):.4g}"
                              for i in range(min(len(m["snapshots"]) for m in mine)))
            per = ", ".join("not reached" if x is None else f"{x:.2f}x" for x in r["speedup_trials_vs_stock_per_seed"])
            used = "; ".join(sorted({str(m.get("cost_model_used") or "MetaSchedule XGBModel (tune_relax)")
                                     for m in mine}))
            lines.append(f"| {model} | {arm} | {used} | {r['seeds']} | {grid} | {r['wall_s']:.0f} | "
                         f"{fmt(r['final_ratio_vs_stock'], '{:.3f}')} | {fmt(r['speedup_trials_vs_stock'])} ({per or '-'}) | "
                         f"{fmt(r['speedup_time_vs_stock'])} |")
    lines += done_when_lines(summary, base)
    if any("latency_ms_median_rule" in s for r in runs if "failed" not in r for s in r["snapshots"]):
        lines += done_when_lines(summarize(median_rule_view(runs)), title=(
            "Secondary view, the rule until 2026-12-05: the same targets with each sitting read as the median of "
            "its rounds instead of its fastest round (snapshots.py says why the fastest: the rounds of a sitting "
            "are bimodal on this VM)"))
    fresh = since_rule_view(runs)
    if fresh:
        groups = sorted({(r["model"], r["seed"]) for r in fresh})
        lines += done_when_lines(summarize(fresh), title=(
            f"Out of sample for the rule: the same targets read on the sittings timed after it was set "
            f"({RULE_CHANGED_AT}) alone, {len(groups)} groups ({', '.join(f'{m} seed {k}' for m, k in groups)}); "
            f"fewer sittings, so provisional by construction"))
    for base, summ in (fair or {}).items():  # stock MetaSchedule with the same layouts as the arms compared
        lines += done_when_lines(summ, base, only=lambda a, b=base: same_layout(a, b))
    from stock_ms import NUM_TRIALS_PER_ITER, V2_TRIALS_PER_ITER

    v1_stock = [r for r in runs if r["arm"].startswith("stock-ms") and arm_budget_settings(r["arm"])[1] is None]
    if any(arm_budget_settings(r["arm"])[1] for r in runs if r["arm"].startswith("stock-ms")):
        lines += ["", f"Stock MetaSchedule in protocol v2 (`+iter{V2_TRIALS_PER_ITER}`): `num_trials_per_iter` "
                  f"{V2_TRIALS_PER_ITER}, so its gradient scheduler's first round-robin pass (one batch per task, "
                  "chosen before any measurement of the run joins) is a quarter of a 32-per-task budget and its "
                  "XGBModel, random until it holds 100 samples, guides the rest (`stock_ms.V2_TRIALS_PER_ITER`)."]
    if v1_stock and meta["trials_per_task"] <= NUM_TRIALS_PER_ITER:
        lines += ["", f"How stock MetaSchedule spends this budget: its `num_trials_per_iter` is capped at the "
                  f"{meta['trials_per_task']} trials per task (stock_ms.py), and its gradient task scheduler first "
                  "visits every task once in a round-robin pass, joining (measuring into the database and updating "
                  "its XGBModel) only after every task's batch was submitted — so here the whole budget is that "
                  "one pass: each task gets one batch chosen before the cost model has seen a measurement of this "
                  "run. That is what stock MetaSchedule does with its defaults at this budget (a larger budget lets "
                  "its model guide later rounds). Its snapshots' wall times are the join times, not measurement "
                  "times; its time speedup uses its total wall time."]
    lines += attribution_lines(runs)
    lines += claims_lines(runs, summary)
    lines += first_round_lines(runs)
    if meta.get("curves"):
        lines += ["", f"Curves (measured snapshots; the lines join them): ![compiled latency vs trials and wall time]"
                      f"({meta['curves']})"]
    lines += sittings_lines(runs)
    if meta.get("missing"):
        lines += ["", f"Not run yet ({len(meta['missing'])}): " + "; ".join(meta["missing"]) + "."]
    failed = [r for r in runs if "failed" in r]
    if failed:
        lines += ["", "Failed runs: " + "; ".join(f"{r['model']} {r['arm']} s{r['seed']}: {r['failed']}" for r in failed)]
    return "\n".join(lines) + "\n"


def _check_args(args) -> None:
    """Bad flags: one line naming what is wrong and what is accepted (run_main: exit 2)."""
    from run import _check_args as check_models_and_seeds  # experiments/tuning_efficiency/run.py
    from run import known_cost_model

    from autotune.costmodel.online import ONLINE_UPDATES
    from autotune.costmodel.sampling import REGISTRY as SAMPLERS
    from autotune.errors import UserError
    from autotune.tuning.costmodels import COST_MODELS

    check_models_and_seeds(args)  # --models and --seeds, as the small-budget runner checks them
    for arm in args.arms.split(","):
        name, online, selection, *_ = parse_arm(arm)
        if name == "stock-ms" and not online and not selection:
            continue
        name, model_dir = variant_model_dir(name, args.hardware or this_hardware())
        if model_dir and not os.path.isdir(model_dir):
            raise UserError(f"--arms: {arm}: no transferred model at {os.path.relpath(model_dir, ROOT)}; make it with "
                            f"python -m autotune.costmodel.transfer --source models/<source hardware>/{name} "
                            f"--target-dataset datasets/<this hardware> --method <method> --models-dir "
                            f"{os.path.relpath(os.path.dirname(os.path.dirname(model_dir)), ROOT)}")
        if (not known_cost_model(name) or (online and online not in ONLINE_UPDATES)
                or (selection and selection != "greedy" and selection not in SAMPLERS)):
            raise UserError(f"--arms: cannot read {arm!r}; an arm is stock-ms[+lr] or COST_MODEL[@VARIANT][:ONLINE_UPDATE]"
                            f"[+BATCH_SELECTION][+lr] with COST_MODEL one of {', '.join(COST_MODELS)}, ONLINE_UPDATE one "
                            f"of {', '.join(ONLINE_UPDATES)}, BATCH_SELECTION greedy or one of {', '.join(SAMPLERS)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(HELD_OUT_MODELS))
    ap.add_argument("--arms", default=",".join(a for _, a in CHAIN),
                    help="comma-separated arms (default: protocol v2's attribution chain; stock at 4x the budget, "
                         f"{V2_ARMS[-1]}, is run on seed 0 by a second call)")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--trials-per-task", type=int, default=TRIALS_PER_TASK)
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per snapshot")
    ap.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS_V2),
                    help="budget fractions compiled and timed (default: protocol v2's 1/32 ... 1, so ratios up to 32x "
                         "can be read; the v1 folders were timed at 0.125,0.25,0.5,1)")
    ap.add_argument("--work-root", default=os.path.join(ROOT, "runs", "tuning_v2"))
    ap.add_argument("--out", default=os.path.join(HERE, "results_v2"),
                    help="results folder (default: protocol v2's; the v1 tables are in results_real*/)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--hardware", default=None,
                    help="whose runs (default: this machine's hardware id); tuning only on that machine")
    ap.add_argument("--sittings", type=int, default=0, metavar="N",
                    help=f"then time every group's arms together until each has N sittings (the protocol: "
                         f"{MIN_SITTINGS}; sitting k of every group before sitting k+1 of any)")
    ap.add_argument("--no-tune", action="store_true",
                    help="start no tuning run; time the snapshots of the arms already tuned (end of a sitting)")
    args = ap.parse_args(argv)
    _check_args(args)
    here = this_hardware()
    args.hardware = args.hardware or here
    if args.hardware != here and not args.summarize_only:
        from autotune.errors import UserError

        raise UserError(f"--hardware {args.hardware}: this machine is {here}; runs of another hardware can only "
                        f"be tabulated (--summarize-only), not tuned or timed here")
    if args.quick:
        args.models, args.arms, args.seeds, args.trials_per_task, args.rounds = "tiny_mlp", "stock-ms,ms-xgb", "0", 4, 2
        args.fractions = "0.25,1"  # two compiles per arm: a smoke test of the pipeline, not of the grid
        args.work_root = os.path.join(args.work_root, "quick")
        args.out = os.path.join(args.work_root, "results")
    meta = {"command": " ".join(["python", "experiments/tuning_efficiency/real_budget.py", *(argv or sys.argv[1:])]),
            "trials_per_task": args.trials_per_task, "loadavg_start": loadavg(), "hardware_id": args.hardware}
    groups = [(model, seed) for seed in seed_list(args.seeds) for model in args.models.split(",")]
    runs = [r for model, seed in groups for r in run_group(model, seed, args.arms.split(","), args)]
    if args.sittings and not args.summarize_only:
        for k in range(1, args.sittings + 1):  # interleaved: the machine's state drifts between sittings
            for model, seed in groups:
                err = sit_group(model, seed, args.arms.split(","), args, k)
                if err:
                    print(f"{model} seed {seed}, sitting {k}: {err}", flush=True)
        args.summarize_only = True  # tabulate what the sittings kept
        runs = [r for model, seed in groups for r in run_group(model, seed, args.arms.split(","), args)]
    meta["loadavg_end"] = loadavg()
    have = {(r["model"], r["arm"], r["seed"]) for r in runs if "failed" not in r}
    meta["missing"] = [f"{m} {a} seed {k}" for k in seed_list(args.seeds)
                       for m in args.models.split(",") for a in args.arms.split(",") if (m, a, k) not in have]
    base = main_baseline(runs)
    meta["baseline"] = base
    summary = summarize(runs, baseline=base)
    # the fair baselines: stock MetaSchedule run with an arm's layouts (stock-ms+lr, stock-ms+lr+nhwc, ...)
    fair = {b: summarize(runs, baseline=b) for b in sorted({r["arm"] for r in runs if "failed" not in r})
            if b != base and parse_arm(b)[0] == "stock-ms"}
    out = os.path.join(args.out, args.hardware)
    os.makedirs(out, exist_ok=True)
    if any("failed" not in r for r in runs):
        plot_curves(runs, os.path.join(out, "curves.png"))
        meta["curves"] = "curves.png"
    kept_runs = [{k: v for k, v in r.items() if k != "sitting_records"} for r in runs]  # in their snapshots.json
    write_json(os.path.join(out, "real_budget.json"), {"meta": meta, "summary": summary,
                                                       "summary_vs_fair_stock": fair, "attribution": attribution(runs),
                                                       "runs": kept_runs})
    table = markdown(summary, runs, meta, fair)
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(table)
    write_index(args.out)
    print(table)
    return 1 if any("failed" in r for r in runs) else 0


if __name__ == "__main__":
    from autotune.cli import run_main

    raise SystemExit(run_main(main))  # bad arguments: one line, exit 2
