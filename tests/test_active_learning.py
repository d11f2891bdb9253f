"""Experiment T1's bookkeeping: job order, resume, the done-when checks (hand-computed numbers)."""

import importlib.util
import json
import os
import sys

import pytest

from tests.conftest import ROOT

HERE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "experiments", "active_learning"
)
sys.path.insert(0, HERE)

import al_report as report  # noqa: E402


def _load(name, file):  # by path: experiments/*/run.py share the module name "run"
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _load("active_learning_run", "run.py")


def _run(kind, sampler, frac, seed, top1):
    return {
        "kind": kind,
        "sampler": sampler,
        "fraction": frac,
        "seed": seed,
        "top1": top1,
        "top5": top1 + 0.3,
        "pairwise": 0.7,
        "programs": 100,
        "fit_s": 1.0,
    }


def test_checks_from_hand_computed_means():
    runs = []
    for seed in range(3):
        runs += [
            _run("xgb", "all", 1.0, seed, 0.50 + 0.01 * seed),  # mean 0.51
            _run("xgb", "rdu", 0.10, seed, 0.49 + 0.01 * seed),  # mean 0.50: within 0.02 of 0.51
            _run("xgb", "random", 0.10, seed, 0.46 + 0.01 * seed),  # mean 0.47: rdu - random = 0.03
            _run("xgb", "rdu", 0.05, seed, 0.45 + 0.01 * seed),
        ]  # mean 0.46 < 0.47
    summary = report.summarize(runs)
    assert summary["xgb"]["rdu"][0.10]["top1"] == pytest.approx(0.50)
    assert summary["xgb"]["rdu"][0.10]["top1_sd"] == pytest.approx(0.01)
    got = {c["check"]: c["status"] for c in report.checks(summary, seeds=3)}
    assert list(got.values()) == ["reached", "reached", "not reached"]
    # two seeds are not enough for a 3-seed claim
    got = {c["check"]: c["status"] for c in report.checks(report.summarize(runs[:8]), seeds=3)}
    assert set(got.values()) == {"missing data"}


def test_job_order_xgb_matrix_first_then_seq_core():
    jobs = run.jobs(
        ["xgb", "seq"], ["random", "diversity", "rdu"], [0.02, 0.05, 0.10], [0, 1], seq_first=True
    )
    assert len(jobs) == len(set(jobs)) == 2 * (2 + 3 * 3 * 2)
    kinds = [j[3] for j in jobs]
    assert kinds == sorted(kinds, key=lambda k: k != "xgb")  # every xgb fit before any seq fit
    seq = [j for j in jobs if j[3] == "seq"]
    first_other = seq.index(next(j for j in seq if j[0] == "diversity"))
    assert seq[0] == ("all", 1.0, 0, "seq")
    assert {(j[0], j[1]) for j in seq[:first_other]} == {
        ("all", 1.0),
        ("random", 0.1),
        ("random", 0.05),
        ("rdu", 0.1),
        ("rdu", 0.05),
    }


def test_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(_run("xgb", "rdu", 0.1, 0, 0.5)) + "\n" + '{"kind": "xgb", "samp')
    assert len(run.read_runs(str(path))) == 1


@pytest.mark.tvm
def test_real_collection_scores_each_arm_without_the_held_out_tasks(tmp_path):
    """experiments/active_learning/real_collection.py --summarize-only on two collected arms (here: copies of
    the tiny dataset): each arm's programs without the tasks a held-out model uses, one model per arm scored on
    the held-out programs, the sampler's difference from random in the table. An arm as ``autotune.collect``
    leaves it has no feature cache: the script derives it (the first real run stopped there)."""
    import shutil
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(HERE))
    work, out = tmp_path / "work", tmp_path / "out"
    for arm in ("random-seed0", "rdu-seed0"):
        shutil.copytree(os.path.join(root, "tests", "data", "tiny_dataset"), work / arm)
    shutil.rmtree(work / "rdu-seed0" / "features")
    script = os.path.join(root, "experiments", "active_learning", "real_collection.py")
    res = subprocess.run([sys.executable, script, "--quick", "--summarize-only", "--work", str(work), "--out",
                          str(out)], cwd=root, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["sampler"], r["kind"]) for r in rows] == [("random", "xgb"), ("rdu", "xgb")]
    # the 5 tasks of the held-out model "tiny" are not trained on; 6 others are (8 others, less the two
    # broadcast_to tasks whose rows are copies of one schedule: not a choice between programs)
    for r in rows:
        assert r["dropped_tasks"] == 5 and r["tasks"] == 6 and 0 <= r["top1"] <= 1 and set(r["per_model"]) == {"tiny"}
    assert (work / "rdu-seed0" / "features" / "per_store.npz").exists()
    md = (out / "README.md").read_text()
    assert "| rdu | 0 | xgb |" in md and "- rdu - random, seed 0, xgb: top-1 +0.000" in md  # the same programs
    rdu_row = next(line for line in md.splitlines() if line.startswith("| rdu | xgb | 1 |"))  # over seeds
    assert rdu_row.endswith("| 0.000 ± 0.000 | 0.000 ± 0.000 |"), rdu_row
    res = subprocess.run([sys.executable, script, "--measure-fraction", "0", "--summarize-only"], cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2 and "--measure-fraction 0.0: must be in (0, 1]" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_ensemble_acquisition_selects_with_the_committee_spread(tmp_path):
    """--acquisition ensemble: the samplers that read a model read a committee of model families (its spread is
    their disagreement); selections and runs record the acquisition, land in their own folders by default, and
    uncertainty's picks differ from the bootstrap-XGBoost acquisition's on the same pool and seed."""
    from autotune.costmodel.data import load_training_data
    from autotune.data.splits import split_by_model

    model = run.acquisition_model("ensemble", seed=0, round_index=1, quick=True)
    assert model.members == list(run.ACQUISITION_MEMBERS) and model.gives_spread
    data = load_training_data(os.path.join(ROOT, "tests", "data", "tiny_dataset"))
    train_keys, _ = split_by_model(data.tasks, ["tiny"])
    train = data.select_tasks(train_keys)
    rounds = (0.01, 0.05, 0.1)
    picks = {}
    for acq in run.ACQUISITIONS:
        sel = run.selection("uncertainty", 0, train, rounds, str(tmp_path / acq), True, acq)
        assert sel["acquisition"] == acq and len(sel["order"]) == round(0.1 * len(train))
        assert len(set(sel["order"])) == len(sel["order"])
        again = run.selection("uncertainty", 0, train, rounds, str(tmp_path / acq), True, acq)  # from the cache
        assert again["order"] == sel["order"]
        picks[acq] = sel["order"]
    first = len(run.selection("random", 0, train, (0.01,), str(tmp_path / "r"), True)["order"])
    assert picks["ensemble"][:first] == picks["bootstrap-xgb"][:first]  # the same random start
    assert picks["ensemble"] != picks["bootstrap-xgb"]
