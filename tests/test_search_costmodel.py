"""Learned cost models inside MetaSchedule's search, with real TVM on tiny tasks."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.tvm
TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """Train a quick xgb on the committed test dataset, labelled for this host's hardware id."""
    from autotune.costmodel.train import main as train_main
    from autotune.tvmrt.target import hardware_id, parse_target

    out = tmp_path_factory.mktemp("models")
    data = tmp_path_factory.mktemp("ds") / "ds"
    shutil.copytree(TEST_DATASET, data)
    rc = train_main(["--dataset", str(data), "--models", "xgb,seq,seq-lstm,ensemble", "--held-out", "tiny", "--quick", "--seeds", "1",
                     "--models-dir", str(out), "--results", str(out / "results")])
    assert rc == 0
    hw_made = json.load(open(data / "manifest.json"))["hardware"]["hardware_id"]
    here = hardware_id(parse_target("llvm"))
    if hw_made != here:  # the committed data came from another CPU: relabel the copy for this host
        shutil.move(out / hw_made, out / here)
        for kind in ("xgb", "seq", "seq-lstm", "ensemble"):
            card_path = out / here / kind / "card.json"
            card = json.load(open(card_path))
            card["hardware"]["hardware_id"] = here
            json.dump(card, open(card_path, "w"))
    return out, here


@pytest.mark.parametrize("online", ["blend", "finetune", "residual"])
def test_adapter_predicts_and_learns(pretrained, online):
    from autotune.tvmrt.startup import fast_start

    fast_start()
    from tvm.s_tir import meta_schedule as ms

    from autotune.costmodel import load
    from autotune.frontend.models import load_model
    from autotune.frontend.relax import Task
    from autotune.tuning.costmodels import Resolved
    from autotune.tuning.search_costmodel import LearnedCostModel
    from autotune.tuning.session import TuneSession
    from autotune.tuning.tuner import tune
    from autotune.tvmrt.measure import Measurer
    from autotune.tvmrt.target import parse_target

    models_dir, hw = pretrained
    target = parse_target("llvm")
    model = load_model("tiny_mlp")
    _, tasks = TuneSession(model, target, "/tmp").prepare()
    adapter = LearnedCostModel(pretrained=load(str(models_dir / hw / "xgb")), online=online, min_online=8)
    measurer = Measurer(target)
    try:
        db = ms.database.MemoryDatabase()
        states, _ = tune(tasks[:1], target, db, measurer, work_dir=str(models_dir / "wd"), max_trials=24,
                         cost_model=Resolved.given(adapter, f"pretrained xgb + {online}"))
    finally:
        measurer.close()
    assert adapter.calls["predict"] > 0 and adapter.calls["predicted"] >= 24
    assert adapter.calls["update"] >= 2
    assert adapter.calls["learned"] == states[0].trials - states[0].failures
    assert adapter.online_mode == online
    assert tasks[0].name in adapter.learner.fitted, "no online model was fitted from the measured programs"
    assert adapter.learner.programs(tasks[0].name) == adapter.calls["learned"]
    assert isinstance(tasks[0], Task) and np.isfinite(states[0].best_s)


# --cost-model (and --cost-model-path, --online-update) -> what report.json must say ran, read from the model
# object: class, pretrained model kind (None: no pretrained model), online-update mode (None: no online learner).
# case: (--cost-model family, saved folder passed as --cost-model-path or None, extra flags, expected)
# A saved ms-xgb folder resolving to our MSXGBCostModel: tests/test_costmodels.py.
USED = {
    "stock": ("stock", None, [], ("XGBModel", None, None)),
    "xgb": ("xgb", "xgb", [], ("LearnedCostModel", "xgb", "finetune")),
    "seq": ("seq", "seq", [], ("LearnedCostModel", "seq", "finetune")),
    "seq-lstm": ("seq", "seq-lstm", [], ("LearnedCostModel", "seq-lstm", "finetune")),  # a recipe's folder
    "ensemble": ("ensemble", "ensemble", [], ("LearnedCostModel", "ensemble", "finetune")),
    "xgb-online": ("xgb", None, ["--online-update", "online"], ("LearnedCostModel", None, "online")),
    "random": ("random", None, [], ("RandomModel", None, None)),
}


@pytest.mark.parametrize("case", [pytest.param(k, marks=[] if k in ("stock", "seq") else [pytest.mark.slow])
                                  for k in USED])
def test_tune_tiny_with_each_cost_model(cli, tmp_path, pretrained, case):
    """Fails on a silent fallback: the report's cost-model fields come from the object the search called."""
    models_dir, hw = pretrained
    wd = str(tmp_path / "wd")
    name, saved, flags, expected = USED[case]
    extra = ["--cost-model-path", str(models_dir / hw / saved)] if saved else []
    res = cli("autotune.tune", "--model", "tiny_mlp", "--trials", "16", "--trials-per-round", "8",
              "--work-dir", wd, "--cost-model", name, "--skip-untuned", "--bench-rounds", "1", *extra, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.load(open(os.path.join(wd, "report.json")))
    used = report["cost_model_resolved"]
    assert (used["class"], used["pretrained_kind"], used["online_update"]) == expected, report["cost_model_used"]
    assert used["fallback"] is None and report["cost_model"] == name
    if saved:
        assert report["cost_model_card"]["path"] == str(models_dir / hw / saved) and used["trained_for"] == hw
    assert report["trials"]["this_run"] == 16 and report["search"]["num_trials_per_iter"] == 8
    assert report["numerics"]["max_rel_error"] < 1e-4


@pytest.mark.parametrize("old, new", [("ms-xgb", "--cost-model stock"), ("seq-lstm-distil", "--cost-model seq"),
                                      ("online-xgb", "--online-update online")])
def test_retired_names_say_their_new_form(cli, old, new):
    res = cli("autotune.tune", "--model", "tiny_mlp", "--cost-model", old)
    assert res.returncode == 2 and new in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_tune_tiny_with_optuna_strategy(cli, tmp_path):
    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", "tiny_mlp", "--trials", "16", "--trials-per-round", "8",
              "--work-dir", wd, "--strategy", "optuna", "--skip-untuned", "--bench-rounds", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.load(open(os.path.join(wd, "report.json")))
    assert report["search"]["kind"] == "optuna" and report["trials"]["this_run"] == 16
    assert report["cost_model_resolved"]["class"] is None  # the optuna search asks no cost model
    assert report["numerics"]["max_rel_error"] < 1e-4


def test_model_for_another_target_is_refused(cli, tmp_path, pretrained):
    models_dir, hw = pretrained
    other = tmp_path / "xgb"
    shutil.copytree(models_dir / hw / "xgb", other)
    card = json.load(open(other / "card.json"))
    card["hardware"]["hardware_id"] = "cpu-skylake-avx512-8c"
    json.dump(card, open(other / "card.json", "w"))
    res = cli("autotune.tune", "--model", "tiny_mlp", "--cost-model", "xgb", "--cost-model-path", str(other),
              "--work-dir", str(tmp_path / "wd"))
    assert res.returncode == 2
    assert "cpu-skylake-avx512-8c" in res.stderr and "Traceback" not in res.stderr


def test_trace_tokens_from_objects_equal_the_json_path():
    """Search time reads trace tokens straight from Trace objects; training reads the dataset's JSON
    traces: both must give the same tokens, on real post-processed candidates (conv, matmul, reduction
    tasks of the committed test dataset: Split/Reorder/CacheWrite/RFactor/Annotate/... instructions)."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from autotune.collection.taskpool import task_module
    from autotune.costmodel.inputs import encode_trace
    from autotune.data.store import read_tasks
    from autotune.tuning.search_costmodel import encode_trace_object
    from autotune.tvmrt.database import to_py

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    kinds, checked = set(), 0
    for task in read_tasks(TEST_DATASET).values():
        if task["flops"] == 0:
            continue
        mod = task_module(task)
        ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                             search_strategy="replay-trace", task_name=task["name"], num_threads=1, rand_state=1)
        spaces = ctx.space_generator.generate_design_space(mod)
        ctx.pre_tuning(max_trials=8, num_trials_per_iter=8, design_spaces=spaces, database=None, cost_model=None)
        for cand in ctx.search_strategy.generate_measure_candidates() or []:
            want = encode_trace(to_py(cand.sch.trace.as_json(remove_postproc=False)))
            got = encode_trace_object(cand.sch.trace)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            kinds.update(inst.kind.name for inst in cand.sch.trace.insts)
            checked += 1
    assert checked >= 40
    assert {"SamplePerfectTile", "Split", "Annotate", "SampleCategorical", "EnterPostproc"} <= kinds
