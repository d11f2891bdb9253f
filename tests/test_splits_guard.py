"""The three-way split is structural: selection code cannot reach the test networks (issue 47).

Every choice (variants, hyperparameter studies, committees, combination rules) is made on validation networks;
the test networks are read once, by the final comparison. Two checks: selection modules do not name the test
split at all (read from their source), and at run time they run inside ``splits.selection()``, where asking for
the test split raises."""

import ast
import os

import pytest

from autotune.data import splits
from tests.conftest import ROOT

TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")
# every module that chooses something (a variant, hyperparameters, a committee, a rule)
SELECTION_MODULES = ("experiments/costmodel/variants.py", "experiments/costmodel/ensemble_select.py",
                     "experiments/costmodel/risk_select.py", "autotune/costmodel/hparams.py",
                     "experiments/online_update/run.py")
# what reaches the test split: its names, the splitter that returns it, the loader that calls it
FORBIDDEN = {"TEST_MODELS", "HELD_OUT_MODELS", "split_by_model", "_partition", "load_split", "validation_split"}


def test_split_names(source: str) -> set[str]:
    """The forbidden names a module's source uses (imported, called or read as attributes)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in FORBIDDEN:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN:
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found |= {a.name for a in node.names if a.name in FORBIDDEN}
    return found


test_split_names.__test__ = False  # a helper, not a test


@pytest.mark.parametrize("path", SELECTION_MODULES)
def test_selection_modules_do_not_name_the_test_split(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert test_split_names(f.read()) == set(), f"{path} reaches the test split"


def test_the_source_check_catches_a_planted_reach():
    planted = ("from autotune.data.splits import HELD_OUT_MODELS\n"
               "import autotune.costmodel.data as d\n"
               "def pick(root):\n    return d.load_split(root, HELD_OUT_MODELS)\n")
    assert test_split_names(planted) == {"HELD_OUT_MODELS", "load_split"}


def test_inside_selection_the_test_split_raises_and_selection_split_never_returns_it():
    from autotune.costmodel.data import load_selection_split, load_split

    data, train_keys, test_keys = load_split(TEST_DATASET, ["tiny"])  # the final evaluation may
    tiny = set(test_keys["tiny"])
    with splits.selection():
        with pytest.raises(splits.TestSplitForbidden):
            load_split(TEST_DATASET, ["tiny"])
        with pytest.raises(splits.TestSplitForbidden):
            splits.split_by_model({k: data.tasks[k] for k in data.task_keys}, ["tiny"])
        _, fit_keys, val = load_selection_split(TEST_DATASET, ["tiny"], ["tiny_mlp"])
    assert not tiny & (set(fit_keys) | set().union(*val.values()))  # no test task in any form
    assert set(fit_keys) | set(val["tiny_mlp"]) == set(train_keys) and not set(fit_keys) & set(val["tiny_mlp"])
    assert not splits.selecting()  # left on exit
    with pytest.raises(ValueError, match="held-out models"):
        splits.selection_split(data.tasks, ["tiny"], ["tiny"])


@pytest.mark.parametrize("module,argv", [
    ("variants", ["--spec", 'q:ms-xgb:{"n_estimators": 2}', "--seeds", "0"]),
    ("ensemble_select", ["--candidates", "ms-xgb,xgb-reg", "--seeds", "0"]),
    ("risk_select", ["--kind", "xgb-reg", "--members", "2", "--seeds", "0,1"]),
    ("hparams", ["--models", "xgb", "--trials", "1"]),
    ("online_update/run", ["--pretrained", "xgb-reg", "--quick"]),
])
def test_selection_entry_points_run_inside_selection(module, argv, monkeypatch, tmp_path):
    """Each selection CLI asks for its data inside ``splits.selection()`` (so any path to the test split raises)."""
    import importlib
    import importlib.util
    import sys

    import autotune.costmodel.data as cdata
    from autotune.errors import UserError

    seen = []

    def spy(*a, **k):
        seen.append(splits.selecting())
        raise UserError("spy: stop here")

    monkeypatch.setattr(cdata, "load_selection_split", spy)
    if module == "hparams":
        mod = importlib.import_module("autotune.costmodel.hparams")
    elif module == "online_update/run":  # a script named run.py: loaded from its file under its own name
        spec = importlib.util.spec_from_file_location("online_update_run", os.path.join(
            ROOT, "experiments", "online_update", "run.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        monkeypatch.syspath_prepend(os.path.join(ROOT, "experiments", "costmodel"))
        sys.modules.pop(module, None)
        mod = importlib.import_module(module)
    out = ["--out", str(tmp_path / "o.jsonl")] if module == "variants" else (
        ["--out-dir", str(tmp_path), "--storage", str(tmp_path / "j.log")] if module == "hparams"
        else ["--out", str(tmp_path), "--cache", str(tmp_path / "c")])
    if module == "online_update/run":
        from autotune.cli import run_main

        assert run_main(lambda: mod.main(["--dataset", TEST_DATASET, *argv, "--out", str(tmp_path)])) == 2
        assert seen == [True]
        return
    assert mod.main(["--dataset", TEST_DATASET, *argv, *out]) == 2
    assert seen == [True]


def test_unseen_networks_are_in_no_dataset_and_no_split():
    """Protocol v2's network new to every model: no dataset holds a task of it, and it is none of the named splits."""
    import json

    from autotune.zoo import MODELS

    for name in splits.UNSEEN_MODELS:
        assert name in MODELS and name not in splits.ZOO_DATASET_MODELS
        assert name not in splits.TEST_MODELS + splits.VALIDATION_MODELS
    for hw in os.listdir(os.path.join(ROOT, "datasets")):
        path = os.path.join(ROOT, "datasets", hw, "tasks.jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                models = {m for line in f if line.strip() for m in json.loads(line).get("models", [])}
            assert not models & set(splits.UNSEEN_MODELS), f"{hw} holds tasks of an unseen network"


def test_online_update_replay_on_validation_networks(tmp_path):
    """experiments/online_update/run.py fits its pretrained kind without the replayed (validation) network and
    replays the modes on that network only."""
    import json
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "experiments/online_update/run.py", "--dataset", TEST_DATASET, "--held-out",
                          "tiny", "--validation-models", "tiny_mlp", "--pretrained", "xgb-reg", "--quick", "--ks", "2",
                          "--seeds", "1", "--modes", "none,online", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads((tmp_path / "online_update.json").read_text())
    assert out["validation_models"] == ["tiny_mlp"] and {r["held_out_model"] for r in out["rows"]} == {"tiny_mlp"}
    assert {r["mode"] for r in out["rows"]} == {"none", "online"} and "tiny_mlp" in (tmp_path / "online_update.md").read_text()
