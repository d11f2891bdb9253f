"""``make tune-costmodel-hparams`` on the committed tiny dataset: a 3-trial study on validation top-1
with a model-size bound (features cached: no TVM)."""

import json
import os

import numpy as np
import pytest

from autotune.costmodel.data import load_training_data
from autotune.costmodel.hparams import saved_bytes, score, validation_weights
from tests.conftest import ROOT

TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")


def test_study_optimises_validation_top1_within_size_bound(cli, tmp_path):
    res = cli("autotune.costmodel.hparams", "--dataset", TEST_DATASET, "--held-out", "tiny", "--models", "xgb",
              "--trials", "3", "--objective", "top1", "--storage", str(tmp_path / "journal.log"),
              "--out-dir", str(tmp_path), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    best = json.loads((tmp_path / "xgb.json").read_text())
    assert best["objective"] == "top1" and best["trials"] == 3
    assert 0 < best["validation_top1"] <= 1 and best["validation_top1"] == best["validation"]["top1"]
    assert 0 <= best["validation"]["pairwise"] <= 1
    assert 0 < best["model_bytes"] <= best["max_model_bytes"] == 5_000_000
    assert {"n_estimators", "max_depth"} <= set(best["params"])
    # resumable: the same command with more trials continues the same study (3 done + 1)
    res = cli("autotune.costmodel.hparams", "--dataset", TEST_DATASET, "--held-out", "tiny", "--models", "xgb",
              "--trials", "4", "--storage", str(tmp_path / "journal.log"), "--out-dir", str(tmp_path), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((tmp_path / "xgb.json").read_text())["trials"] == 4


def test_study_over_several_fit_seeds(cli, tmp_path):
    """--fit-seeds 2: every trial fits twice (seeds 0 and 1) and its value is the mean of the two fits'
    task-mean top-1; it is a separate study from the one-fit study in the same journal."""
    common = ["--dataset", TEST_DATASET, "--held-out", "tiny", "--models", "xgb", "--objective", "task_top1",
              "--storage", str(tmp_path / "journal.log"), "--out-dir", str(tmp_path)]
    res = cli("autotune.costmodel.hparams", *common, "--trials", "2", "--fit-seeds", "2", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    best = json.loads((tmp_path / "xgb.json").read_text())
    runs = best["validation_runs"]
    assert runs["seeds"] == [0, 1] and len(runs["task_top1"]) == 2
    assert best["validation_task_top1"] == pytest.approx(sum(runs["task_top1"]) / 2)
    assert best["validation"]["task_top1"] == pytest.approx(best["validation_task_top1"])
    assert runs["sd"] is not None and runs["sd"] >= 0
    res = cli("autotune.costmodel.hparams", *common, "--trials", "1", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    one = json.loads((tmp_path / "xgb.json").read_text())
    assert one["trials"] == 1 and one["validation_runs"]["seeds"] == [0] and one["validation_runs"]["sd"] is None


def test_mean_scores_hand_computed():
    from autotune.costmodel.hparams import mean_scores

    got = mean_scores([{"top1": 0.5, "value": 0.5}, {"top1": 0.7, "value": 0.7}])
    assert got["top1"] == pytest.approx(0.6) and got["value"] == pytest.approx(0.6)
    assert got["value_runs"] == [0.5, 0.7] and got["value_sd"] == pytest.approx(0.1414, abs=1e-4)


def test_size_bound_prunes_every_larger_trial(cli, tmp_path):
    """A bound smaller than any fitted model: every trial is pruned and the run says so in one line."""
    res = cli("autotune.costmodel.hparams", "--dataset", TEST_DATASET, "--held-out", "tiny", "--models", "xgb",
              "--trials", "2", "--max-model-mb", "0.001", "--storage", str(tmp_path / "journal.log"),
              "--out-dir", str(tmp_path), timeout=600)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--max-model-mb" in res.stderr and "2 over the bound" in res.stderr
    assert not (tmp_path / "xgb.json").exists()


@pytest.mark.parametrize("args, expected", [
    (["--objective", "rmse"], "--objective"),
    (["--models", "random"], "--models"),
    (["--max-model-mb", "0"], "--max-model-mb"),
    (["--fit-seeds", "0"], "--fit-seeds"),
])
def test_hparams_bad_input(cli, tmp_path, args, expected):
    res = cli("autotune.costmodel.hparams", "--dataset", TEST_DATASET, "--held-out", "tiny", "--trials", "1",
              "--storage", str(tmp_path / "j.log"), "--out-dir", str(tmp_path), *args, timeout=300)
    assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr


def test_validation_weights_and_objectives():
    data = load_training_data(TEST_DATASET)
    shared = data.task_keys[0]
    # a task two training models share: it counts as often as in the first of them
    task = {**data.tasks[shared], "models": ["vgg16", "resnet18"], "model_weights": {"resnet18": 2, "vgg16": 7}}
    tasks = {**data.tasks, shared: task}
    data.tasks = tasks
    gid = data.task_keys.index(shared)
    assert validation_weights(data, [shared]) == {gid: 7.0}
    # a dataset without per-model weights counts every task once
    data.tasks = {**tasks, shared: {k: v for k, v in task.items() if k != "model_weights"}}
    assert validation_weights(data, [shared]) == {gid: 1.0}
    # objectives: the latency itself as the score ranks every task's best program first
    part = data.select_tasks([shared])
    perfect = score("top1", part, {gid: 1.0}, -part.latency)
    assert perfect["value"] == perfect["top1"] == pytest.approx(1.0) and perfect["pairwise"] > 0.99
    worst = score("blend", part, {gid: 1.0}, part.latency)
    assert worst["top1"] < 1 and worst["value"] == pytest.approx((worst["top1"] + worst["pairwise"]) / 2)
    # one task: task-mean top-1 is that task's best / picked latency
    task = score("task_top1", part, {gid: 1.0}, part.latency)
    assert task["value"] == task["task_top1"] == pytest.approx(part.latency.min() / part.latency.max())


def test_saved_bytes_grows_with_trees():
    from autotune.costmodel import create

    data = load_training_data(TEST_DATASET)
    small = create("xgb", n_estimators=10).fit(data.batch, data.y, data.groups)
    big = create("xgb", n_estimators=40).fit(data.batch, data.y, data.groups)
    assert 0 < saved_bytes(small) < saved_bytes(big)
    assert np.isclose(saved_bytes(big) / saved_bytes(small), 4, rtol=0.5)  # about linear: the projection's basis


def test_seq_variants_search_their_own_kind():
    """A seq-lstm trial's parameters keep the LSTM block (the registered kind's override) and add the gains;
    seq-top keeps its sharpened gains (not in its space)."""
    import optuna

    from autotune.costmodel import create, registered_kind
    from autotune.costmodel.hparams import space

    fixed = {"d_model": 32, "n_layers": 1, "lr": 1e-3, "epochs": 10, "gain_scale": 2.0, "dropout": 0.1}
    params, fidelity = space("seq-lstm", optuna.trial.FixedTrial(fixed))
    assert fidelity == "epochs" and params == fixed
    assert registered_kind(create("seq-lstm", **params)) == "seq-lstm"
    params, _ = space("seq-top", optuna.trial.FixedTrial(fixed))
    assert "gain_scale" not in params and create("seq-top", **params).gain_scale == 4.0


def test_defaults_are_a_point_of_every_space():
    from autotune.costmodel import create
    from autotune.costmodel.hparams import KINDS, default_params

    for kind in KINDS:
        params = default_params(kind)
        defaults = create(kind).get_params()
        assert params and all(defaults[k] == v for k, v in params.items()), kind
