"""experiments/costmodel/offline_vs_tuning.py (rank agreement on hand-made results, the script on the committed
result files) and top1_analysis.py (loss shares on a hand-computed case)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "experiments", "costmodel", "offline_vs_tuning.py")
spec = importlib.util.spec_from_file_location("offline_vs_tuning", SCRIPT)
ovt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ovt)
spec = importlib.util.spec_from_file_location("top1_analysis", SCRIPT.replace("offline_vs_tuning", "top1_analysis"))
t1a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t1a)


def _rescored(scores: dict) -> dict:
    return {"rows": [{"kind": k, "views": {v: {"m": {"top1": s, "top5": s, "pairwise": s}} for v in ("all", "search")}}
                     for k, s in scores.items()]}


def test_same_order_is_tau_one_and_reversed_minus_one():
    tuning = {"summary": {"m": {"a": {"final_latency_ms": 1.0}, "b": {"final_latency_ms": 2.0},
                                "c": {"final_latency_ms": 3.0}}}}
    same = ovt.compare(_rescored({"a": 0.9, "b": 0.5, "c": 0.1}), tuning)["m"]
    assert same["best_by_tuning"] == "a"
    assert same["metrics"]["top1 (all)"]["kendall_tau"] == pytest.approx(1.0)
    assert same["metrics"]["top1 (all)"]["agrees_on_best"]
    rev = ovt.compare(_rescored({"a": 0.1, "b": 0.5, "c": 0.9}), tuning)["m"]["metrics"]["top1 (all)"]
    assert rev["kendall_tau"] == pytest.approx(-1.0) and not rev["agrees_on_best"]


def test_script_on_the_committed_results(tmp_path):
    res = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "offline_vs_tuning.json").read_text())
    assert set(out["per_model"]) == {"resnet50", "mobilenet_v2", "bert_base"}
    for entry in out["per_model"].values():
        for m in entry["metrics"].values():
            assert -1.0 <= m["kendall_tau"] <= 1.0
    bad = subprocess.run([sys.executable, SCRIPT, "--tuning", str(tmp_path / "none.json")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "none.json" in bad.stderr


class _Part:
    """The fields per_task_losses reads from a TrainingData."""

    def __init__(self, latency, groups, weights):
        self.latency, self.groups, self.task_keys = np.asarray(latency), np.asarray(groups), ["t0", "t1"]
        self._w = weights

    def weights_for(self, model):
        return self._w


def test_loss_shares_add_up_to_one_minus_top1():
    # task 0 (weight 2): best 1.0, the model picks 4.0; task 1 (weight 1): best 2.0 and picked
    part = _Part([1.0, 4.0, 2.0, 3.0], [0, 0, 1, 1], {0: 2.0, 1: 1.0})
    rows = t1a.per_task_losses(part, np.array([0.0, 1.0, 1.0, 0.0]), "m")
    # weighted picks 2*4 + 1*2 = 10, best 2*1 + 1*2 = 4: top-1 0.4, task 0 loses 2*(4-1)/10
    assert rows[0]["task"] == "t0" and rows[0]["loss_share"] == pytest.approx(0.6)
    assert rows[0]["pick_over_best"] == pytest.approx(4.0)
    assert rows[1]["loss_share"] == pytest.approx(0.0)
    from autotune.costmodel.metrics import top_k_score

    top1 = top_k_score(part.latency, np.array([0.0, 1.0, 1.0, 0.0]), part.groups, {0: 2.0, 1: 1.0}, 1)
    assert 1 - sum(r["loss_share"] for r in rows) == pytest.approx(top1)
    z = t1a.zscore_per_task(np.array([1.0, 3.0, 10.0, 30.0]), part.groups)
    np.testing.assert_allclose(z, [-1, 1, -1, 1])


def test_variants_script_runs_resumes_and_refuses_bad_specs(tmp_path):
    """Fits are saved and scored; a seed ensemble is made from the saved fits (ensemble seed 0 = fits 0 and 1),
    scored like any row; a rerun fits and scores nothing again; bad specs are one line, exit 2."""
    script = os.path.join(ROOT, "experiments", "costmodel", "variants.py")
    out, saved = tmp_path / "v.jsonl", tmp_path / "fits"
    args = [sys.executable, script, "--dataset", os.path.join(ROOT, "tests", "data", "tiny_dataset"), "--held-out",
            "tiny", "--validation-models", "tiny_mlp", "--models-dir", str(saved), "--seed-ensemble", "qx2=q:2", "--threads", "1",
            "--spec", 'q:ms-xgb:{"n_estimators": 20}', "--seeds", "0,1", "--out", str(out)]
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["name"], r["seed"]) for r in rows] == [("q", 0), ("q", 1), ("qx2", 0)]
    assert all(0 < r["all_top1"] <= 1 for r in rows)
    assert all(set(r["per_model_top1"]) == {"tiny_mlp"} for r in rows)  # scored on the validation network only
    assert sorted(os.listdir(saved / "q")) == ["seed0", "seed1"]
    assert rows[2]["kind"] == "ensemble" and rows[2]["member_seeds"] == [0, 1]
    assert rows[2]["params"]["members"] == ["ms-xgb", "ms-xgb"] and rows[0]["params"] == {"n_estimators": 20}
    table = (tmp_path / "v.md").read_text()
    assert "| q | ms-xgb |" in table and "0,1" in table and "| qx2 | ensemble |" in table
    assert subprocess.run(args + ["--pair", "qx2=q"], cwd=ROOT, capture_output=True, text=True, timeout=300).returncode == 0
    assert len(out.read_text().splitlines()) == 3  # resumed: nothing retrained or rescored
    paired = (tmp_path / "v.md").read_text().split("## Paired differences")[1]
    d = rows[2]["all_top1"] - rows[0]["all_top1"]
    assert f"| qx2 − q | 0 | {d:+.3f} |" in paired  # one common seed: no sd
    # --soups: rows of the same fit's best epoch and its 2 best epochs averaged
    # (a one-task network as the test split: the fit keeps tiny's tasks, enough for its own epoch validation)
    soup_args = [a if a != "tiny" else "synthetic:dense_m256_k512_n512" for a in args[:-6]] + [
        "--spec", 's:seq-lstm-cos:{"epochs": 3, "soup": 2, "d_model": 8}', "--seeds", "0",
        "--soups", "1,2", "--out", str(out)]
    res = subprocess.run(soup_args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    soups = [json.loads(line) for line in out.read_text().splitlines()][3:]
    assert [r["name"] for r in soups] == ["s", "s+soup1", "s+soup2"]
    assert soups[1]["params"]["soup_of"] == 1 and soups[2]["history"]["soup"]["ungated"] is True
    assert len(soups[2]["history"]["soup"]["epochs"]) == 2 and soups[0]["train_programs"] > 0
    # --committee: saved fits of different variants combined seed by seed (s has no seed 1: skipped); one member
    # scores its saved fit alone, the same numbers as its own row
    res = subprocess.run(args[:-6] + ["--committee", "qs=q+s", "--committee", "qa=q", "--seeds", "0,1", "--out",
                                      str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "qs: seed 1 skipped" in res.stderr
    new = [json.loads(line) for line in out.read_text().splitlines()][6:]
    assert [(r["name"], r["seed"]) for r in new] == [("qs", 0), ("qa", 0), ("qa", 1)]
    assert new[0]["kind"] == "ensemble" and new[0]["params"]["members"] == ["ms-xgb", "seq-lstm-cos"]
    assert [r["all_top1"] for r in new[1:]] == [rows[0]["all_top1"], rows[1]["all_top1"]]
    # a saved fit that does not say it was fitted without the validation networks (train.py --save-seeds) is refused
    os.remove(saved / "q" / "seed0" / "fitted_on.json")
    res = subprocess.run(args[:-6] + ["--committee", "qb=q", "--seeds", "0", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "was not fitted without" in res.stderr, res.stderr[-2000:]
    for flag, bad in (("--spec", "q:nope:{}"), ("--spec", "q:seq:[1]"), ("--spec", "q-no-colons"),
                      ("--committee", "c="), ("--committee", "c=nothing"),
                      ("--seed-ensemble", "e=q:1"), ("--seed-ensemble", "e=nothing:2"), ("--pair", "q"),
                      ("--pair", "q=nothing"), ("--soups", "1,x"), ("--soups", "0"),
                      ("--spec", 'q:seq-lstm-cos:{"task_weight": "flops"}'), ("--spec", 'q:ms-xgb:{"nope": 1}')):
        res = subprocess.run(args[:-6] + [flag, bad, "--out", str(out)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 2 and f"--{flag.strip('-')} {bad!r}"[:16] in res.stderr, (bad, res.stderr)
    res = subprocess.run(args[:-6] + ["--spec", "q:ms-xgb:{}", "--soups", "2", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # refused before any fit: q keeps no epochs
    assert res.returncode == 2 and "--soups '2': spec 'q'" in res.stderr, res.stderr


@pytest.mark.parametrize("script", ["experiments/costmodel/variants.py", "experiments/tuning_efficiency/run.py",
                                    "experiments/tuning_efficiency/real_budget.py",
                                    "experiments/active_learning/real_collection.py"])
def test_experiment_scripts_refuse_bad_seeds(script):
    """Every experiment script reads --seeds with autotune.cli.seed_list: a bad list is one line naming --seeds,
    exit 2, before anything is fitted, tuned or collected."""
    res = subprocess.run([sys.executable, os.path.join(ROOT, script), "--seeds", "0,x"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "--seeds" in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_pooled_hardware_script(tmp_path):
    """experiments/costmodel/pooled_hardware.py on the transfer slices (same tasks, two hardware): the pooled arm
    trains on both machines' programs of the training tasks (each (hardware, task) its own group, no held-out
    task from either), is scored on the target's held-out programs and paired with the target-alone arm;
    --summarize-only refits nothing; a bad arm is one line, exit 2."""
    script = os.path.join(ROOT, "experiments", "costmodel", "pooled_hardware.py")
    target = os.path.join(ROOT, "experiments", "transfer", "data", "cpu-znver3-2c")
    other = os.path.join(ROOT, "experiments", "transfer", "data", "cpu-x86-64-v2-1c")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [script, "--dataset", target, "--with", other, "--kinds", "xgb-reg", "--seeds", "0,1", "--quick",
            "--cache", str(cache), "--out", str(out)]

    def run(*a):
        return subprocess.run([sys.executable, *a], cwd=ROOT, capture_output=True, text=True, timeout=600)

    res = run(*args, "--arms", "none,all,halves")
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "pooled_hardware_quick.json").read_text())
    rows = {r["arm"]: r for r in result["rows"]}
    assert set(rows) == {"none", "all", "halves"} and result["missing"] == []
    shift = result["halves_label_shift"]  # the halves move the labels off the whole tasks'
    assert shift["seeds"] == [0, 1] and shift["top_mean_abs"] > 0 and shift["rest_mean_abs"] > 0
    assert "each task's 5 best programs" in (out / "pooled_hardware_quick.md").read_text()
    assert rows["none"]["programs_by_hardware"] == rows["halves"]["programs_by_hardware"]  # same programs, halved groups
    assert set(rows["none"]["programs_by_hardware"]) == {"target"}
    by = rows["all"]["programs_by_hardware"]
    assert set(by) == {"target", "cpu-x86-64-v2-1c"} and by["cpu-x86-64-v2-1c"] > 0
    assert by["target"] == rows["none"]["programs_by_hardware"]["target"]
    assert rows["all"]["programs"] == by["target"] + by["cpu-x86-64-v2-1c"]
    diff = rows["all"]["vs_none"]["all_top1"]
    assert diff["n"] == 2 and diff["seeds"] == [0, 1]
    assert abs(diff["mean_diff"] - (rows["all"]["all_top1"]["mean"] - rows["none"]["all_top1"]["mean"])) < 1e-9
    # the held-out models' tasks are in neither side's training programs
    from autotune.costmodel.data import load_split, load_training_data
    from autotune.data.splits import HELD_OUT_MODELS

    _, train_keys, test_keys = load_split(target, list(HELD_OUT_MODELS))
    held = set().union(*test_keys.values())
    o = load_training_data(other)
    kept = [k for k in o.task_keys if k not in held and not any(m in o.tasks[k]["models"] for m in HELD_OUT_MODELS)]
    assert by["cpu-x86-64-v2-1c"] == len(o.select_tasks(kept)) < len(o)
    stamp = sorted(p.stat().st_mtime_ns for p in cache.iterdir())
    res = run(*args, "--arms", "none,all,halves", "--summarize-only")
    assert res.returncode == 0 and sorted(p.stat().st_mtime_ns for p in cache.iterdir()) == stamp
    # anchored labels: fits of their own for the pooled arms, the target-alone fits reused (labels do not touch them)
    res = run(*args, "--arms", "none,all", "--labels", "anchored", "--name", "anchored")
    assert res.returncode == 0, res.stderr[-3000:]
    names = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert {"quick-xgb-reg-all-anchored-s0.json", "quick-xgb-reg-all-anchored-s1.json"} <= set(names)
    assert sorted(t for name, t in names.items() if "anchored" not in name) == stamp
    anchored = json.loads((out / "anchored_quick.json").read_text())
    assert anchored["labels"] == "anchored" and "--labels anchored" in (out / "anchored_quick.md").read_text()
    res = run(*args, "--arms", "none,cpu-nope")
    assert res.returncode == 2 and "--arms" in res.stderr and "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def pooled_parts():
    """The transfer slices as pooled_hardware.py selects them: the target's training programs ("target") and
    the other hardware's programs of the tasks no held-out model has ("hw2")."""
    sys.path.insert(0, os.path.join(ROOT, "experiments", "costmodel"))
    from autotune.costmodel.data import load_split, load_training_data
    from autotune.data.splits import HELD_OUT_MODELS

    target, train_keys, test_keys = load_split(os.path.join(ROOT, "experiments", "transfer", "data", "cpu-znver3-2c"),
                                               list(HELD_OUT_MODELS))
    other = load_training_data(os.path.join(ROOT, "experiments", "transfer", "data", "cpu-x86-64-v2-1c"))
    exclude = set().union(*test_keys.values())
    return {"target": target.select_tasks(train_keys),
            "hw2": other.select_tasks([k for k in other.task_keys if k not in exclude])}


def test_pooled_groups_and_labels(pooled_parts):
    """pooled(): other hardware's programs get groups of their own (no id shared with the target's), every
    group's best program is labelled 1, and ``halves`` splits each target task into two groups."""
    from pooled_hardware import pooled

    parts = pooled_parts
    batch, y, groups, sizes = pooled(parts, ["hw2"])
    n = sizes["target"]
    assert len(batch) == len(y) == len(groups) == n + sizes["hw2"]
    assert not set(groups[:n].tolist()) & set(groups[n:].tolist())
    for g in np.unique(groups):
        assert abs(y[groups == g].max() - 1.0) < 1e-12
    _, y_h, g_h, sizes_h = pooled({"target": parts["target"]}, [], halves_seed=0)
    own = parts["target"].groups
    assert sizes_h == {"target": n} and len(np.unique(g_h)) > len(np.unique(own))
    assert all(len(np.unique(own[g_h == g])) == 1 for g in np.unique(g_h))  # a half never mixes two tasks
    assert (y_h >= y[:n] - 1e-12).all()  # a half's best is at most its task's: labels only rise


def test_rank_anchored_labels():
    """A group equal to its anchor keeps its labels (in any order); a smaller group's best program gets the
    anchor's label at its standing (between the anchor's best two here), not 1; order is kept, ties tie, and
    every label lies in the anchor's range."""
    from autotune.costmodel.inputs import rank_anchored

    anchor = np.array([1.0, 0.8, 0.5, 0.2])
    assert np.allclose(rank_anchored(anchor, anchor), anchor)
    perm = anchor[[2, 0, 3, 1]]
    assert np.allclose(rank_anchored(perm, anchor), perm)
    small = rank_anchored(np.array([0.3, 1.0]), anchor)  # plotting positions 0.5 and 2.5 of 0..3
    assert np.allclose(small, [0.35, 0.9])
    tied = rank_anchored(np.array([1.0, 1.0, 0.1]), anchor)
    assert tied[0] == tied[1] > tied[2] and anchor.min() <= tied.min() and tied.max() <= anchor.max()
    assert np.allclose(rank_anchored(np.array([7.0]), anchor), [0.65])  # one program: the anchor's median
    assert rank_anchored(np.array([]), anchor).shape == (0,)


def test_pooled_anchored_labels(pooled_parts):
    """--labels anchored: the target's whole tasks keep their labels; every other group (other hardware's, or
    a half) is labelled by rank on the target's labels of the same task: order within the group kept, labels
    inside the task's range, and a small group's best no longer 1."""
    from pooled_hardware import pooled

    from autotune.costmodel.inputs import normalized_throughput

    parts = pooled_parts
    _, y, groups, sizes = pooled(parts, ["hw2"])
    _, y_a, groups_a, _ = pooled(parts, ["hw2"], labels="anchored")
    n = sizes["target"]
    assert (groups_a == groups).all() and np.allclose(y_a[:n], y[:n])
    whole = normalized_throughput(parts["target"].latency, parts["target"].groups)
    lo = {g: whole[parts["target"].groups == g].min() for g in np.unique(parts["target"].groups)}
    moved = 0
    for g in np.unique(groups[n:]):
        m = groups == g
        assert ((y[m][:, None] > y[m][None, :]) <= (y_a[m][:, None] >= y_a[m][None, :])).all()  # order kept
        key = parts["hw2"].task_keys[g - (int(parts["target"].groups.max()) + 1)]
        if key in parts["target"].task_keys:
            t = parts["target"].task_keys.index(key)
            assert lo[t] - 1e-12 <= y_a[m].min() and y_a[m].max() <= 1 + 1e-12
            moved += y_a[m].max() < 1 - 1e-9
    assert moved > 0
    _, y_h, g_h, _ = pooled({"target": parts["target"]}, [], halves_seed=0, labels="anchored")
    assert (y_h <= 1 + 1e-12).all() and any(y_h[g_h == g].max() < 1 - 1e-9 for g in np.unique(g_h))
    with pytest.raises(Exception, match="--labels"):
        pooled(parts, [], labels="ranks")


def test_pooled_reading_counts_clear_differences():
    sys.path.insert(0, os.path.join(ROOT, "experiments", "costmodel"))
    from pooled_hardware import reading

    def row(kind, arm, mean, sd, n=3):
        return {"kind": kind, "arm": arm, "vs_none": {"all_top1": {"n": n, "mean_diff": mean, "sd_diff": sd,
                                                                     "clear": abs(mean) > sd}}}

    result = {"arms": ["none", "all"], "rows": [row("a", "all", -0.2, 0.05), row("b", "all", 0.01, 0.05),
                                                row("c", "all", 0.1, 0.01)]}
    text = reading(result)
    assert "clearly higher for c, clearly lower for a of 3 kinds" in text and "-0.200 to +0.100" in text
    assert reading({"arms": ["none", "all"], "rows": [row("a", "all", -0.2, 0.0, n=1)]}).startswith("no arm")


@pytest.mark.parametrize("members", ["seq-lstm-cos,nope", ","])
def test_top1_analysis_refuses_unknown_committee_kinds(tmp_path, members):
    """--members names registered kinds (one missing from the models folder is left out); a typo or nothing is one
    line naming the flag, exit 2, before any data is read."""
    script = SCRIPT.replace("offline_vs_tuning", "top1_analysis")
    res = subprocess.run([sys.executable, script, "--members", members, "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "--members" in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert os.listdir(tmp_path) == []
