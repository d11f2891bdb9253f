"""Experiment T1's bookkeeping: job order, resume, the done-when checks (hand-computed numbers)."""

import importlib.util
import json
import os
import sys

import pytest

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
