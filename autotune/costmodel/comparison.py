"""The cost-model comparison (``comparison.json`` / ``.md``, TVM-free): paired differences over seeds, the fold
rotation beside the fixed split, and the markdown report.

``python -m autotune.costmodel.train`` fills the rows and writes it (``write_comparison``); readings of other
experiments' result files (the data curve, where top-1 is lost, the throughput benchmark, an issue's done-when
targets) are added by ``experiments/costmodel/readings.py``, which renders the same report with them.
"""

from __future__ import annotations

import json
import os

from autotune.cli import write_results
from autotune.errors import UserError

RESULTS_ROOT = os.path.join("experiments", "costmodel", "results")
# The shipped main dataset's hardware (datasets/cpu-znver3-2c): its comparison is RESULTS_ROOT itself; another
# hardware's goes to RESULTS_ROOT/<hardware id>/ so that training on it never overwrites the main table
MAIN_HARDWARE = "cpu-znver3-2c"
# the data-curve reading names the programs per task a slope would need only up to this factor of today's
# (six doublings past the data; a flat slope "needs" millions, which is no reading)
MAX_CURVE_FACTOR = 64
FORMAT = 2  # comparison.json layout: rows with seeds, views and over_seeds per view; paired; readings
READINGS = ("done_when", "data_curve", "top1_losses")  # what experiments/costmodel/readings.py adds


def read_comparison(dataset: str, results: str | None, flag: str) -> tuple[dict, str]:
    """(comparison.json of ``dataset``'s hardware, its folder); a missing, unreadable or older-layout file is a
    UserError naming ``flag``."""
    from autotune.data.store import read_manifest

    results = resolve_results(results, read_manifest(dataset)["hardware"]["hardware_id"])
    path = os.path.join(results, "comparison.json")
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError) as err:
        raise UserError(f"{flag}: cannot read {path} ({err}); train first (make train-costmodel)") from None
    if result.get("format") != FORMAT:
        raise UserError(f"{flag}: {path} has layout {result.get('format')!r}, this code reads {FORMAT}; "
                        "retrain (make train-costmodel)")
    return result, results


def write_comparison(result: dict, models_dir: str, results_dir: str, keep_readings: bool = True) -> None:
    """What follows from the rows — the paired table, the models folder's size, the fold rotation run on this
    dataset — then comparison.json / .md. ``keep_readings``: readings an earlier run of
    ``experiments/costmodel/readings.py`` added stay (False after a retrain: they described other rows)."""
    if not keep_readings:
        for key in READINGS:
            result.pop(key, None)
    result.update({"paired": paired_table(result["rows"]), "models_dir_bytes": folder_bytes(models_dir),
                   "folds": folds_reading(results_dir, result["dataset_manifest_sha256"])})
    write_results(os.path.join(results_dir, "comparison.json"), result, os.path.join(results_dir, "comparison.md"),
                  markdown_table(result))


def results_dir_for(hardware_id: str, root: str = RESULTS_ROOT) -> str:
    """The default results folder of a dataset measured on ``hardware_id`` (see ``MAIN_HARDWARE``)."""
    return root if hardware_id == MAIN_HARDWARE else os.path.join(root, hardware_id)


def resolve_results(results: str | None, hardware_id: str) -> str:
    """``--results`` or the hardware's default folder; a UserError when that folder's comparison.json
    describes another hardware's dataset (writing there would lose it)."""
    out = results or results_dir_for(hardware_id)
    path = os.path.join(out, "comparison.json")
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f).get("hardware_id")
    except (OSError, ValueError, AttributeError):
        return out
    if old and old != hardware_id:
        raise UserError(f"--results: {path} holds the comparison of {old}, this dataset is {hardware_id}; give "
                        f"--results {results_dir_for(hardware_id)} (or another folder) so it is kept")
    return out


def _per_seed(row: dict, view: str, metric: str) -> dict:
    """seed -> the row's mean ``metric`` in ``view`` (seed None: a model without a seed)."""
    over = row["metrics"].get("over_seeds", {}).get(view)
    if not over:
        return {}
    return dict(zip(row["seeds"], over["runs"][metric]))


def compare(a: dict, b: dict, view: str = "all", metric: str = "top1") -> dict:
    """``evaluate.paired`` of rows ``a`` and ``b`` over their common seeds; a model without a seed is the
    same model for every seed, so its one score pairs with each of the other's."""
    from .evaluate import paired

    ra, rb = _per_seed(a, view, metric), _per_seed(b, view, metric)
    if not ra or not rb:
        return {"n": 0}
    if None in ra and None in rb:
        seeds = [None]
    elif None in ra or None in rb:
        seeds = sorted(rb if None in ra else ra)
    else:
        seeds = sorted(set(ra) & set(rb))
    xa = [ra[None] if None in ra else ra[s] for s in seeds]
    xb = [rb[None] if None in rb else rb[s] for s in seeds]
    return {**paired(xa, xb), "seeds": seeds}


def paired_table(rows: list[dict]) -> list[dict]:
    """Every model pair (row order, a before b): the paired a - b difference per view and metric."""
    from .evaluate import METRICS, VIEWS

    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            out.append({"a": a["kind"], "b": b["kind"],
                        **{v: {m: compare(a, b, v, m) for m in METRICS} for v in VIEWS
                           if a["metrics"].get("over_seeds", {}).get(v)}})
    return out


def folder_bytes(path: str) -> int:
    """Bytes of every file under ``path`` (``du``'s apparent size)."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def result_of_dataset(path: str, manifest_hash: str) -> dict | None:
    """An experiment's result JSON when it is readable and was measured on the dataset of ``manifest_hash``."""
    try:
        with open(path, encoding="utf-8") as f:
            got = json.load(f)
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and got.get("dataset_manifest_sha256") == manifest_hash else None


def folds_reading(results_dir: str, manifest_hash: str) -> dict | None:
    """The fold rotation's summary (``folds.py``: every network held out once) when it was run on this dataset."""
    got = result_of_dataset(os.path.join(results_dir, "folds.json"), manifest_hash)
    return got and got.get("summary")


def view_networks(rows: list[dict]) -> str:
    """Which networks each view averages (a view without scorable tasks of a network leaves it out)."""
    views = next((r["metrics"].get("views") for r in rows if r["metrics"].get("views")), None) or {}
    return "; ".join(f"`{v}` over {', '.join(m for m in per if m != 'mean')}" for v, per in views.items())


def folds_lines(result: dict) -> list[str]:
    folds = result.get("folds")
    if not folds:
        return ["", "## Fold rotation", "", "Not run on this dataset (`python -m autotune.costmodel.folds --dataset "
                f"{result.get('dataset', 'DATASET')}`)."]
    from .folds import table_lines

    return ["", "## Fold rotation: every network held out once (`folds.json`)", "",
            "Beside the fixed split: each network of the dataset held out in turn (its tasks, shared ones included, "
            "out of training), scored on its own programs (view `all`); mean ± sd over the folds, so the spread says "
            "how much a model's score depends on which networks are new. A model with fewer folds is partial.", "",
            *table_lines(folds)]


def _pm(over: dict | None, metric: str) -> str:
    if not over:
        return "-"
    sd = over["sd"][metric]
    return f"{over['mean'][metric]:.3f}" + ("" if sd is None else f" ± {sd:.3f}")


def _diff_cell(p: dict | None) -> str:
    if not p or not p.get("n"):
        return "-"
    sd = "-" if p["sd_diff"] is None else f"{p['sd_diff']:.3f}"
    mark = " **clear**" if p["clear"] else " (no seed spread)" if p.get("no_spread") else ""
    return f"{p['mean_diff']:+.3f} ± {sd} ({p['wins']}/{p['n']}){mark}"


def _value(v, unit: str) -> str:
    if v is None:
        return "not measured"
    return {"count": f"{v:,.0f}", "difference": f"{v:+.3f}", "MB": f"{v:.1f} MB"}.get(unit, f"{v:.3f}")


def markdown_table(result: dict) -> str:
    held, rows = result["held_out"], result["rows"]
    lines = [f"# Cost models on {result['hardware_id']} (held-out models: {', '.join(held)})", "",
             f"Train programs: {result['train_programs']}. Seeds {result['seeds']}. Dataset manifest sha256 "
             f"{result['dataset_manifest_sha256'][:12]}, commit {str(result['git_commit'])[:10]}. Fits, timings and "
             f"programs/s measured on {result.get('measured_on', 'an unrecorded machine')}, load {result['loadavg']}"
             + (" (--quick: small models, numbers are a smoke test)" if result.get("quick") else "") + ". "
             + ("Programs: copies of a schedule measured more than once merged into one (`merge_duplicates`)."
                if result.get("duplicates") == "merged" else
                "**Scored before copies of a schedule were merged** (each measured row counted as a program; "
                "refit to compare with tables that merge them)."), "",
             "## How the rows were chosen (issue 47)", "",
             "The held-out models are the test networks, read here once. Choices made without them: each kind's "
             "hyperparameters (Optuna studies on training tasks, `hparams.py`), the ensemble's members (validation "
             "networks, `experiments/costmodel/ensemble_select.py`). Made **on the test networks** before the split "
             "was enforced, not yet re-selected on validation networks: the sequence variants' recipes "
             "(`seq-lstm-cos`'s schedule and soup, `seq-lstm-cos-x2`, `seq-lstm-rows`) and `seq-lstm-distil`'s mode "
             "and weight (`experiments/costmodel/results/variants.jsonl`); those rows are a maximum over tries on "
             "the test set, optimistic by construction. `experiments/costmodel/variants.py` now scores validation "
             "networks only (`variants_validation.jsonl`).", "",
             "## Held-out scores, mean ± sd over seeds", "",
             "Views: `all` = every measured program of a held-out model's tasks (TenSet/TLP); `search` = only the "
             "programs the evolutionary sampler produced (where the search ranks); `unseen` = without tasks a "
             "training model shares (same task or same argument shapes). Each view: mean over the held-out models "
             f"it can score ({view_networks(rows)}).", ""]
    head = ["model", "seeds", "top-1 all", "top-5 all", "pairwise all", "top-1 search", "top-5 search",
            "top-1 unseen", "top-5 unseen", "predict programs/s", "fit s (first seed)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        over = r["metrics"].get("over_seeds", {})
        seeds = "1 (no seed)" if r["seeds"] == [None] else str(len(r["seeds"]))
        lines.append("| " + " | ".join([r["kind"], seeds, _pm(over.get("all"), "top1"), _pm(over.get("all"), "top5"),
                                        _pm(over.get("all"), "pairwise"), _pm(over.get("search"), "top1"),
                                        _pm(over.get("search"), "top5"), _pm(over.get("unseen"), "top1"),
                                        _pm(over.get("unseen"), "top5"), f"{r['predict_programs_per_s']:.0f}",
                                        f"{r['fit_seconds']:.0f}"]) + " |")
    lines += folds_lines(result)
    lines += ["", "## Paired comparison over the same seeds (a − b)", "",
              "Cell: mean difference ± its sd over seeds (seeds where a beat b / seeds); **clear** when |mean| > sd > 0 "
              "(two models that do not vary with the seed have no spread to compare with: marked *no seed spread*). "
              "A model without a seed pairs its one score with each of the other's seeds.", ""]
    head = ["a − b", "top-1 all", "top-1 search", "top-1 unseen", "top-5 all", "pairwise all"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in result["paired"]:
        cells = [_diff_cell(p.get(v, {}).get(m)) for v, m in
                 (("all", "top1"), ("search", "top1"), ("unseen", "top1"), ("all", "top5"), ("all", "pairwise"))]
        lines.append(f"| {p['a']} − {p['b']} | " + " | ".join(cells) + " |")
    lines += ["", "## Per held-out model (first seed, view all)", ""]
    head = ["model"] + [f"{m} top-1" for m in held] + [f"{m} top-5" for m in held]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        m = r["metrics"]
        lines.append("| " + " | ".join([r["kind"]] + [_top1_cell(m[h]) if h in m else "-" for h in held]
                                       + [f"{m[h]['top5']:.3f}" if h in m else "-" for h in held]) + " |")
    lines += ["", "Top-1 cells: the TenSet weighted score (each held-out model's own task weights), and in brackets "
              "its 90% bootstrap interval over the model's tasks (tasks resampled; it shows how much the few "
              "heaviest tasks' single picks move it).",
              "Pairwise: share of a task's program pairs ordered right (ties in score count one half).", ""]
    if "done_when" in result:  # added by experiments/costmodel/readings.py (make train-costmodel runs it)
        lines += ["## Done when (issue 12; computed from the numbers above)", ""]
    for d in result.get("done_when", []):
        state = {True: "**reached**", False: "**not reached**", None: "**not measured**"}[d["reached"]]
        short = ""
        if d["reached"] is False and d["unit"] == "MB":
            short = f", over by {_value(d['value'] - d['threshold'], 'MB')}"
        elif d["reached"] is False and d["value"] < d["threshold"]:
            short = f", short by {_value(d['threshold'] - d['value'], 'count' if d['unit'] == 'count' else 'score')}"
        detail = f" ({d['detail']})" if d["detail"] else ""
        lines.append(f"- {d['target']}: {_value(d['value'], d['unit'])}{detail} — {state}{short}")
    lines += why_lines(result)
    lines += ["", f"Reproduce: `{reproduce_command(result)}` (`make train-costmodel` with DATASET, MODELS, SEEDS; "
                  "see autotune/costmodel/train.py).", ""]
    return "\n".join(lines)


def why_lines(result: dict) -> list[str]:
    """The comparison's "why" blocks (markdown lines): what the data curve's slope implies for the top-1 target
    (``data_curve_reading``) and where the best sequence model loses top-1 (``top1_loss_reading``)."""
    lines: list[str] = []
    curve = result.get("data_curve")
    if curve:
        lines += ["", f"Why top-1 stays short — more training programs per task, measured (`{curve['path']}`: each "
                      "training task capped at fewer of its programs, same held-out programs; a least-squares line"
                  + (f" through points whose top-1 sd over seeds is up to {curve['max_top1_sd']:.3f}"
                     if curve.get("max_top1_sd") is not None else "")
                  + (f"; {curve['missing']} fits still missing" if curve["missing"] else "") + "):", ""]
        for kind, k in curve["kinds"].items():
            need = k["programs_per_task_for_target"]
            reach = (f"at that slope top-1 {curve['target']} would need more than {MAX_CURVE_FACTOR}x today's programs "
                     "per task — too far past the measured caps to read as a plan"
                     if need and need / k["programs_per_task"] > MAX_CURVE_FACTOR else
                     f"at that slope top-1 {curve['target']} would need ~{need:,.0f} programs per task "
                     f"({need / k['programs_per_task']:,.1f}x today's) — an extrapolation, not a measurement"
                     if need else "no gain per doubling to extrapolate from" if k["slope_per_doubling"] <= 0 else
                     "already at the target")
            lines.append(f"- {kind}: top-1 {k['top1']:.3f} at {k['programs_per_task']:.1f} programs per task, "
                         f"{k['slope_per_doubling']:+.3f}"
                         + (f" (sd {k['slope_sd']:.3f} over seeds)" if k.get("slope_sd") is not None else "")
                         + f" per doubling; {reach}")
    losses = result.get("top1_losses")
    if losses:
        lines += ["", f"Where {losses['kind']} loses top-1 (`{losses['path']}`: its saved first-seed model, card commit "
                      f"{str(losses['card_commit'])[:10]}; TenSet's score is 1 − the weighted latency the task picks "
                      "lose):", ""]
        for name, m in losses["models"].items():
            w = m["worst"]
            lines.append(f"- {name}: top-1 {m['top1']:.3f}; {m['catastrophic_share']:.0%} of the lost {1 - m['top1']:.3f} "
                         f"from picks ≥ {losses['ratio']:.0f}x slower than the task's best, in {m['catastrophic_tasks']} "
                         f"of {m['tasks']} tasks"
                         + (f"; costliest task {w['name']} ({w['loss_share']:.3f} of the score, pick "
                            f"{w['pick_over_best']:.1f}x the best)" if w else ""))
    return lines


def reproduce_command(result: dict) -> str:
    """The training command of a comparison: its dataset, models (rows), seeds and models folder."""
    if "dataset" not in result:
        return "make train-costmodel"
    cmd = (f"python -m autotune.costmodel.train --dataset {result['dataset']} --models "
           f"{','.join(r['kind'] for r in result.get('rows', []))} --seeds {len(result.get('seeds', [0]))}")
    if result.get("seeds") and result["seeds"][0] != 0:
        cmd += f" --seed {result['seeds'][0]}"
    if result.get("models_dir", "models") != "models":
        cmd += f" --models-dir {result['models_dir']}"
    out = result.get("results_dir")
    if out and os.path.normpath(out) != os.path.normpath(results_dir_for(result.get("hardware_id", ""))):
        cmd += f" --results {out}"
    return cmd + (" --quick" if result.get("quick") else "")


def _top1_cell(m: dict) -> str:
    lo_hi = m.get("top1_interval90")
    return f"{m['top1']:.3f} [{lo_hi[0]:.2f}–{lo_hi[1]:.2f}]" if lo_hi else f"{m['top1']:.3f}"
