"""``make train-costmodel`` end to end on the committed tiny dataset (features cached: no TVM), and the
comparison over seeds (paired differences, done-when block) on hand-made rows."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from autotune.costmodel.comparison import compare, paired_table
from autotune.costmodel.train import _keep_other_rows
from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "experiments", "costmodel"))  # readings.py: issue 12's targets and readers
from readings import TARGETS, done_when  # noqa: E402  experiments/costmodel/readings.py

TEST_DATASET = os.path.join(ROOT, "tests", "data", "tiny_dataset")
READINGS = os.path.join(ROOT, "experiments", "costmodel", "readings.py")


def _add_readings(models, results) -> None:
    """What make train-costmodel runs after training: the experiments' readings and the done-when block."""
    res = subprocess.run([sys.executable, READINGS, "--dataset", TEST_DATASET, "--models-dir", str(models),
                          "--results", str(results)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]


def test_train_costmodel_quick(cli, tmp_path):
    """Default --seeds (3): every model fit per seed, three views with mean ± sd, a paired table over
    every model pair and the done-when block computed from the rows."""
    models, results = tmp_path / "models", tmp_path / "results"
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb,ms-xgb,ms-mlp,seq,random", "--models-dir", str(models), "--results", str(results),
              timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "done_when" not in json.loads((results / "comparison.json").read_text())  # the package's part alone
    _add_readings(models, results)
    comparison = json.loads((results / "comparison.json").read_text())
    kinds = [r["kind"] for r in comparison["rows"]]
    assert kinds == ["xgb", "ms-xgb", "ms-mlp", "seq", "random"]
    assert comparison["seeds"] == [0, 1, 2]
    for row in comparison["rows"]:
        m = row["metrics"]["tiny"]
        assert 0 < m["top1"] <= 1 and m["top1"] <= m["top5"] + 1e-12 and 0 <= m["pairwise"] <= 1
        assert row["predict_programs_per_s"] > 0
        assert row["seeds"] == [0, 1, 2] and len(row["fit_seconds_per_seed"]) == 3
        over = row["metrics"]["over_seeds"]
        assert {"all", "search"} <= set(over)  # the tiny data has search-produced programs
        for view, agg in over.items():
            assert agg["n"] == 3 and len(agg["runs"]["top1"]) == 3
            assert agg["mean"]["top1"] == pytest.approx(sum(agg["runs"]["top1"]) / 3)
            assert agg["sd"]["top1"] >= 0
            # the first seed's run is the one at the top level of the metrics
            assert agg["runs"]["top1"][0] == pytest.approx(row["metrics"]["views"][view]["mean"]["top1"])
        # the search view scores only the evolutionary sampler's programs: fewer than all
        views = row["metrics"]["views"]
        assert views["search"]["tiny"]["programs"] < views["all"]["tiny"]["programs"]
    # paired table: every pair once, over the three common seeds, numbers from the rows' runs
    pairs = comparison["paired"]
    assert [(p["a"], p["b"]) for p in pairs] == [(a, b) for i, a in enumerate(kinds) for b in kinds[i + 1:]]
    rows = {r["kind"]: r for r in comparison["rows"]}
    for p in pairs:
        cell = p["all"]["top1"]
        ra, rb = rows[p["a"]]["metrics"]["over_seeds"]["all"], rows[p["b"]]["metrics"]["over_seeds"]["all"]
        assert cell["n"] == 3 and cell["seeds"] == [0, 1, 2]
        assert cell["mean_diff"] == pytest.approx(ra["mean"]["top1"] - rb["mean"]["top1"])
        assert cell["clear"] == (abs(cell["mean_diff"]) > cell["sd_diff"] > 1e-12)
    # done-when: computed from the rows (seq is the only sequence model here)
    top1 = next(d for d in comparison["done_when"] if "mean top-1" in d["target"])
    assert top1["value"] == pytest.approx(rows["seq"]["metrics"]["over_seeds"]["all"]["mean"]["top1"])
    assert top1["reached"] == (top1["value"] >= TARGETS["seq_top1"])
    margin = next(d for d in comparison["done_when"] if "ms-xgb" in d["target"])
    assert margin["value"] == pytest.approx(compare(rows["seq"], rows["ms-xgb"])["mean_diff"])
    thr = next(d for d in comparison["done_when"] if d["target"].startswith("xgb programs/s"))
    assert thr["value"] == rows["xgb"]["predict_programs_per_s"]
    assert thr["reached"] == (thr["value"] >= 50_000)
    assert len(comparison["done_when"]) == 7
    size = next(d for d in comparison["done_when"] if d["target"].startswith("models folder"))
    on_disk = sum(f.stat().st_size for f in models.rglob("*") if f.is_file())
    assert size["value"] == pytest.approx(on_disk / 1e6) and size["reached"] is True  # quick models: small
    md = (results / "comparison.md").read_text()
    assert "| xgb |" in md and "## Paired comparison" in md and "| seq − random |" in md
    assert re.search(r"- best sequence model \(seq\) mean top-1 ≥ 0.75: 0\.\d{3} — \*\*(not )?reached\*\*", md)
    assert "## Done when" in md and "ms-xgb paired top-1" in md
    hw = comparison["hardware_id"]
    for kind in kinds:
        card = json.loads((models / hw / kind / "card.json").read_text())
        assert card["dataset_manifest_sha256"] == comparison["dataset_manifest_sha256"]
        assert card["hardware"]["hardware_id"] == hw and card["train"]["programs"] > 0
        assert card["seeds"] == [0, 1, 2] and card["saved_seed"] == 0 == card["params"]["seed"]
        assert re.fullmatch(r"[0-9a-f]{40}", card["git_commit"] or "")
        assert (models / hw / kind / "model.json").exists()
    assert (results / "pred_vs_measured_xgb.png").stat().st_size > 1000
    for row in comparison["rows"]:
        lo, hi = row["metrics"]["tiny"]["top1_interval90"]
        assert lo <= row["metrics"]["tiny"]["top1"] <= hi


def test_train_costmodel_over_seeds(cli, tmp_path):
    """--seeds N: mean and spread; retraining one model keeps the others' rows and re-pairs them."""
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb,random", "--seeds", "3", "--models-dir", str(tmp_path / "m"),
              "--results", str(tmp_path / "r"), "--save-seeds", str(tmp_path / "s"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    comparison = json.loads((tmp_path / "r" / "comparison.json").read_text())
    # --save-seeds: every seed's fit, loadable; seed 0's is the model saved in --models-dir
    from autotune.costmodel import load

    hw = comparison["hardware_id"]
    assert sorted(os.listdir(tmp_path / "s")) == ["random", "xgb"]
    for kind in ("xgb", "random"):
        assert sorted(os.listdir(tmp_path / "s" / kind)) == ["seed0", "seed1", "seed2"]
    first, shipped = load(str(tmp_path / "s" / "xgb" / "seed0")), load(str(tmp_path / "m" / hw / "xgb"))
    assert first.get_params() == shipped.get_params()
    assert load(str(tmp_path / "s" / "xgb" / "seed2")).get_params()["seed"] == 2
    random_row = [r for r in comparison["rows"] if r["kind"] == "random"][0]
    assert random_row["metrics"]["over_seeds"]["all"]["sd"]["pairwise"] > 0  # different seeds, different scores
    # --summarize-only fits nothing and rebuilds the same table from comparison.json
    md = (tmp_path / "r" / "comparison.md").read_text()
    stamp = (tmp_path / "m").stat().st_mtime_ns
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--summarize-only", "--models-dir",
              str(tmp_path / "m"), "--results", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "r" / "comparison.md").read_text() == md and (tmp_path / "m").stat().st_mtime_ns == stamp
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--summarize-only", "--results",
              str(tmp_path / "none"), timeout=300)
    assert res.returncode == 2 and "--summarize-only" in res.stderr and "Traceback" not in res.stderr
    # retraining one model keeps the other models' rows (same dataset and split) and replaces its own
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick",
              "--models", "xgb", "--seeds", "1", "--models-dir", str(tmp_path / "m"), "--results", str(tmp_path / "r"),
              timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    _add_readings(tmp_path / "m", tmp_path / "r")
    again = json.loads((tmp_path / "r" / "comparison.json").read_text())
    assert [r["kind"] for r in again["rows"]] == ["xgb", "random"]
    assert again["rows"][1] == random_row
    over = again["rows"][0]["metrics"]["over_seeds"]["all"]
    assert over["n"] == 1 and over["sd"]["top1"] is None
    cell = again["paired"][0]["all"]["top1"]  # xgb (seed 0 only) vs random (seeds 0-2): seed 0 in common
    assert cell["n"] == 1 and cell["seeds"] == [0] and cell["clear"] is False
    seeds_target = next(d for d in again["done_when"] if "seeds" in d["target"])
    assert seeds_target["value"] == 1 and seeds_target["reached"] is False
    assert "short by 2" in (tmp_path / "r" / "comparison.md").read_text()


def _row(kind, seeds, top1, top5=None, thr=1e5):
    top5 = top5 or [min(1.0, v + 0.2) for v in top1]
    runs = {"top1": top1, "top5": top5, "pairwise": [0.7] * len(top1)}
    n = len(top1)
    mean = {k: sum(v) / n for k, v in runs.items()}
    return {"kind": kind, "seeds": seeds, "predict_programs_per_s": thr,
            "metrics": {"over_seeds": {"all": {"n": n, "mean": mean, "sd": {}, "runs": runs}}}}


def test_paired_over_common_seeds_and_seedless_models():
    a = _row("seq", [0, 1, 2], [0.8, 0.9, 0.85])
    b = _row("ms-xgb", [1, 2, 3], [0.7, 0.7, 0.6])
    p = compare(a, b)  # common seeds 1, 2: differences 0.2, 0.15
    assert p["seeds"] == [1, 2] and p["n"] == 2 and p["mean_diff"] == pytest.approx(0.175) and p["wins"] == 2
    # a model without a seed is the same model for every seed: its one score pairs with each seed
    c = _row("nosed", [None], [0.5])
    p = compare(a, c)
    assert p["seeds"] == [0, 1, 2] and p["mean_diff"] == pytest.approx(0.35) and p["clear"] is True
    assert compare(c, c)["seeds"] == [None] and compare(c, c)["clear"] is False
    table = paired_table([a, b, c])
    assert [(t["a"], t["b"]) for t in table] == [("seq", "ms-xgb"), ("seq", "nosed"), ("ms-xgb", "nosed")]


def test_done_when_hand_computed():
    ms = _row("ms-xgb", [0, 1, 2], [0.60, 0.62, 0.64], thr=1e5)
    xgb = _row("xgb", [0, 1, 2], [0.5, 0.5, 0.5], thr=60_000)
    good = _row("seq", [0, 1, 2], [0.78, 0.71, 0.76], top5=[0.93, 0.94, 0.95], thr=25_000)
    dw = {d["target"]: d for d in done_when([xgb, ms, good])}
    top1 = next(d for k, d in dw.items() if "mean top-1" in k)
    assert top1["value"] == pytest.approx(0.75) and top1["reached"] is True
    margin = next(d for k, d in dw.items() if "ms-xgb paired" in k)
    # differences 0.18, 0.09, 0.12: mean 0.13 >= 0.08 and > sd 0.046
    assert margin["value"] == pytest.approx(0.13) and margin["reached"] is True
    assert next(d for k, d in dw.items() if "top-5" in k)["reached"] is True
    assert [d["reached"] for k, d in dw.items() if "programs/s" in k] == [True, True]
    # differences 0.40, -0.10, 0.00: mean 0.10 >= 0.08 but sd 0.26 is larger: not reached
    noisy = _row("seq", [0, 1, 2], [1.0, 0.52, 0.64], top5=[0.9, 0.9, 0.9], thr=10_000)
    dw = done_when([xgb, ms, noisy])
    margin = next(d for d in dw if "ms-xgb paired" in d["target"])
    assert margin["value"] > 0.08 and margin["reached"] is False and "not larger than its sd" in margin["detail"]
    assert next(d for d in dw if "top-5" in d["target"])["reached"] is False
    assert next(d for d in dw if d["target"].startswith("seq programs/s"))["reached"] is False
    # no sequence model trained: not measured, not "not reached"
    dw = done_when([xgb, ms])
    assert next(d for d in dw if "mean top-1" in d["target"])["reached"] is None
    assert next(d for d in dw if d["target"].startswith("models folder"))["reached"] is None
    # the models folder is bounded from above
    sizes = [next(d for d in done_when([xgb], b) if d["target"].startswith("models folder")) for b in (39e6, 41e6)]
    assert [d["reached"] for d in sizes] == [True, False] and sizes[1]["value"] == pytest.approx(41.0)


def test_done_when_reads_the_throughput_benchmark(tmp_path):
    """The programs/s targets read the newest side-by-side benchmark of the same saved models
    (benchmarks/predict_throughput.py), not the loaded reading after a fit; a benchmark older than a model
    timed an earlier model and is not used for it; a benchmark of other models is ignored."""
    from readings import latest_throughput_benchmark  # experiments/costmodel/readings.py

    def bench(name, models_dir, time, rates):
        (tmp_path / f"predict_throughput_{name}.json").write_text(json.dumps(
            {"meta": {"machine": name, "models_dir": models_dir, "time": time},
             "rows": {k: {"median_programs_per_s": v} for k, v in rates.items()}}))

    bench("old", "models/hw-a", "2026-12-01T00:00:00Z", {"xgb": 1.0})
    bench("new", "models/hw-a", "2026-12-05T00:00:00Z", {"xgb": 85_000, "seq": 12_000})
    bench("other", "models/hw-b", "2026-12-06T00:00:00Z", {"xgb": 2.0})
    (tmp_path / "predict_throughput_broken.json").write_text("{")
    got = latest_throughput_benchmark("models/hw-a/", str(tmp_path))
    assert got["machine"] == "new" and got["programs_per_s"] == {"xgb": 85_000, "seq": 12_000}
    assert got["path"].endswith("predict_throughput_new.md")
    assert latest_throughput_benchmark("models/hw-c", str(tmp_path)) is None
    xgb = {**_row("xgb", [0, 1, 2], [0.5] * 3, thr=39_000), "trained": "2026-12-03T00:00:00Z"}
    seq = {**_row("seq", [0, 1, 2], [0.6] * 3, thr=30_000), "trained": "2026-12-05T10:00:00Z"}  # after the benchmark
    dw = {d["target"].split(" ")[0]: d for d in done_when([xgb, seq], 1e6, got) if "programs/s" in d["target"]}
    assert dw["xgb"]["value"] == 85_000 and dw["xgb"]["reached"] is True and "39,000" in dw["xgb"]["detail"]
    assert dw["seq"]["value"] == 30_000 and dw["seq"]["detail"] == ""


def test_rows_of_another_layout_are_not_kept(tmp_path):
    path = tmp_path / "comparison.json"
    old = {"dataset_manifest_sha256": "h", "held_out": ["tiny"], "quick": True, "rows": [{"kind": "random"}]}
    path.write_text(json.dumps(old))  # a file from before format 2 (rows without seeds or views)
    assert _keep_other_rows(str(path), [{"kind": "xgb"}], "h", ["tiny"], True) == [{"kind": "xgb"}]
    path.write_text(json.dumps({**old, "format": 2}))  # scored with copies of a schedule as programs
    assert _keep_other_rows(str(path), [{"kind": "xgb"}], "h", ["tiny"], True) == [{"kind": "xgb"}]
    path.write_text(json.dumps({**old, "format": 2, "duplicates": "merged"}))
    assert [r["kind"] for r in _keep_other_rows(str(path), [{"kind": "xgb"}], "h", ["tiny"], True)] == ["xgb", "random"]


def test_seeds_side_by_side_are_the_same_fits():
    """--jobs 2: each seed fitted in its own process is the fit this process makes with the same threads (same
    scores, same first model), and the first model is saved with the kind's own thread count, not the worker's."""
    from autotune.costmodel.data import load_split
    from autotune.costmodel.train import params_for, train_seeds

    data, train_keys, test_keys = load_split(TEST_DATASET, ["tiny"])
    train = data.select_tasks(train_keys)
    params = params_for("seq-lstm", quick=True)
    alone = train_seeds("seq-lstm", params, [0, 1], train, data, test_keys, threads=1)
    side = train_seeds("seq-lstm", params, [0, 1], train, data, test_keys, threads=1, jobs=2,
                       source=(TEST_DATASET, ["tiny"]))
    assert side["jobs"] == 2 and side["seeds"] == [0, 1] and len(side["fit_seconds"]) == 2
    for a, b in zip(alone["runs"], side["runs"]):
        assert a["views"]["all"]["mean"] == pytest.approx(b["views"]["all"]["mean"], abs=1e-9)
    assert alone["runs"][0]["views"]["all"]["mean"] != alone["runs"][1]["views"]["all"]["mean"]  # two seeds
    test = data.select_tasks(test_keys["tiny"])
    assert side["model"].predict(test.batch) == pytest.approx(alone["model"].predict(test.batch), abs=1e-6)
    assert side["model"].get_params()["num_threads"] == 2 and side["model"].get_params()["seed"] == 0


@pytest.mark.parametrize("args, expected", [
    (["--models", "nope"], "--models"),
    (["--held-out", "not_a_model"], "--held-out"),
    (["--seeds", "0"], "--seeds"),
    (["--jobs", "0"], "--jobs"),
])
def test_train_bad_input(cli, tmp_path, args, expected):
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, *args, "--models-dir", str(tmp_path),
              "--results", str(tmp_path), timeout=300)
    assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr


def test_distilled_row_reuses_the_teachers_row_fits(cli, tmp_path):
    """--teachers-from: seq-lstm-distil takes seq-lstm-cos-x2's saved fits (same seeds) instead of fitting them
    again — in one run as `make train-costmodel` does it (the teacher's row first, --save-seeds the same folder);
    a folder without them is refused before anything is fitted, with exit 2."""
    common = ["--dataset", TEST_DATASET, "--held-out", "tiny", "--quick", "--seeds", "1", "--models-dir",
              str(tmp_path / "m"), "--results", str(tmp_path / "r")]
    res = cli("autotune.costmodel.train", *common, "--models", "seq-lstm-cos-x2,seq-lstm-distil", "--save-seeds",
              str(tmp_path / "s"), "--teachers-from", str(tmp_path / "s"), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "s")) == ["seq-lstm-cos-x2", "seq-lstm-distil"]
    comparison = json.loads((tmp_path / "r" / "comparison.json").read_text())
    row = next(r for r in comparison["rows"] if r["kind"] == "seq-lstm-distil")
    assert row["params"]["teacher_from"] == str(tmp_path / "s" / "seq-lstm-cos-x2" / "seed{seed}")
    assert [r["kind"] for r in comparison["rows"]] == ["seq-lstm-cos-x2", "seq-lstm-distil"]
    res = cli("autotune.costmodel.train", *common, "--models", "xgb,seq-lstm-distil", "--teachers-from",
              str(tmp_path / "none"), timeout=300)
    assert res.returncode == 2 and "--teachers-from" in res.stderr and "Traceback" not in res.stderr
    assert "xgb" not in [r["kind"] for r in json.loads((tmp_path / "r" / "comparison.json").read_text())["rows"]]
    # a teacher folder that is there but refused when the row fits it (a single model, not the ensemble teacher):
    # exit 2, and the row fitted before it in the same run is in the comparison (written after every row)
    shutil.copytree(tmp_path / "s" / "seq-lstm-distil" / "seed0" / "student",
                    tmp_path / "bad" / "seq-lstm-cos-x2" / "seed0")
    res = cli("autotune.costmodel.train", *common, "--models", "xgb,seq-lstm-distil", "--teachers-from",
              str(tmp_path / "bad"), timeout=300)
    assert res.returncode == 2 and "ensemble teacher" in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]
    kept = [r["kind"] for r in json.loads((tmp_path / "r" / "comparison.json").read_text())["rows"]]
    assert kept == ["xgb", "seq-lstm-cos-x2", "seq-lstm-distil"], kept


@pytest.mark.slow  # ~65 s on Zen 3: an experiment script's check, run with the slow suite
def test_t2_mixers_script(cli, tmp_path):
    """experiments/costmodel/t2_mixers.py on the tiny dataset: it reads make train-costmodel's rows, trains the
    LSTM and attention arms, measures every arm's throughput, writes the table and plot; a second run reuses
    the trained arms (resumable) and a missing comparison is a one-line error."""
    models, results, out = tmp_path / "models", tmp_path / "results", tmp_path / "t2"
    res = cli("autotune.costmodel.train", "--dataset", TEST_DATASET, "--held-out", "tiny", "--quick", "--seeds", "1",
              "--models", "xgb,ms-xgb,ms-mlp,seq", "--models-dir", str(models), "--results", str(results), timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    script = os.path.join(ROOT, "experiments", "costmodel", "t2_mixers.py")
    args = [script, "--dataset", TEST_DATASET, "--comparison", str(results / "comparison.json"), "--models-dir",
            str(models), "--out", str(out), "--seeds", "1", "--rounds", "1", "--quick"]

    def run(*a):
        return subprocess.run([sys.executable, *a], cwd=ROOT, capture_output=True, text=True, timeout=600)

    res = run(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    t2 = json.loads((out / "t2.json").read_text())
    assert set(t2["rows"]) == {"seq", "seq-lstm", "seq-attention", "ms-mlp", "ms-xgb", "xgb"}
    for kind, row in t2["rows"].items():
        assert row["predict_programs_per_s"] > 0 and row["model_bytes"] > 0, kind
        assert 0 < row["over_seeds"]["all"]["mean"]["top1"] <= 1, kind
    assert t2["rows"]["seq-lstm"]["parameters"] > 0 and t2["rows"]["seq-attention"]["source"] == "trained here"
    table = (out / "t2.md").read_text()
    assert "1.20x lower" in table and "seq with attention" in table and (out / "t2_pareto.png").stat().st_size > 0
    stamp = (out / "seq-lstm.json").stat().st_mtime_ns
    assert run(*args).returncode == 0
    assert (out / "seq-lstm.json").stat().st_mtime_ns == stamp  # not retrained
    res = run(*args[:4], str(tmp_path / "none.json"), *args[5:])
    assert res.returncode == 2 and "make train-costmodel" in res.stderr
    # top1_analysis reads the same saved models: loss shares per held-out model and the ensembles
    script = os.path.join(ROOT, "experiments", "costmodel", "top1_analysis.py")
    res = run(script, "--dataset", TEST_DATASET, "--models-dir", str(models), "--held-out", "tiny", "--out", str(out),
              "--members", "seq,ms-xgb,ms-mlp,xgb")
    assert res.returncode == 0, res.stderr[-3000:]
    t1 = json.loads((out / "top1_analysis.json").read_text())
    assert set(t1["models"]) == {"xgb", "ms-xgb", "ms-mlp", "seq"}
    for kind, per in t1["losses"].items():
        assert 0 < per["tiny"]["top1"] <= 1
        assert per["tiny"]["top1"] == pytest.approx(t1["ensembles"][kind]["per_model"]["tiny"]["top1"])
    assert "seq + ms-xgb" in t1["ensembles"]


def test_ensemble_select_script(tmp_path):
    """experiments/costmodel/ensemble_select.py on the tiny dataset: fits each candidate per seed on the training
    tasks without the validation networks, scores every committee, writes the table; a second run with
    --summarize-only rebuilds it from the npz cache without fitting; bad input is one line, exit 2."""
    script = os.path.join(ROOT, "experiments", "costmodel", "ensemble_select.py")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [script, "--dataset", TEST_DATASET, "--held-out", "tiny", "--validation-models", "tiny_mlp",
            "--candidates", "ms-xgb,xgb-reg", "--seeds", "0,1", "--cache", str(cache), "--out", str(out),
            "--models-dir", str(tmp_path / "no-models")]

    def run(*a):
        return subprocess.run([sys.executable, *a], cwd=ROOT, capture_output=True, text=True, timeout=600)

    res = run(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "ensemble_select.json").read_text())
    assert sorted(os.listdir(cache)) == ["ms-xgb-s0.npz", "ms-xgb-s1.npz", "xgb-reg-s0.npz", "xgb-reg-s1.npz"]
    assert sorted(tuple(r["members"]) for r in result["rows"]) == [("ms-xgb",), ("ms-xgb", "xgb-reg"), ("xgb-reg",)]
    assert result["best"] == ["ms-xgb", "xgb-reg"] and result["validation_models"] == ["tiny_mlp"]
    for row in result["rows"]:
        assert len(row["runs"]) == 2 and 0 < row["task_top1"] <= 1 and 0 < row["top1"] <= 1
        assert row["bytes"] is None and row["within_size_bound"]  # no saved members to size: not bounded
    table = (out / "ensemble_select.md").read_text()
    stamps = {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)}
    assert run(*args, "--summarize-only").returncode == 0
    assert {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)} == stamps  # nothing refitted
    assert (out / "ensemble_select.md").read_text().split("measured on")[1:] == table.split("measured on")[1:]
    for bad, expected in ((["--validation-models", "tiny"], "held-out models"),
                          (["--candidates", "ms-xgb,nope"], "--candidates"),
                          (["--held-out", "resnet50"], "--held-out")):
        res = run(*args, *bad)
        assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_risk_select_script(tmp_path):
    """experiments/costmodel/risk_select.py on the tiny dataset: fits the kind once per seed on the training tasks
    without the validation network, scores every group of seeds under each rule (the mean rule checked against
    the members' mean by hand), chooses a risk; --summarize-only refits nothing; bad input is one line, exit 2."""
    import numpy as np

    from autotune.costmodel.data import load_split
    from autotune.costmodel.evaluate import score_part
    from autotune.data.splits import split_by_model

    script = os.path.join(ROOT, "experiments", "costmodel", "risk_select.py")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [script, "--dataset", TEST_DATASET, "--held-out", "tiny", "--validation-models", "tiny_mlp",
            "--kind", "xgb-reg", "--members", "2", "--seeds", "0,1,2", "--cache", str(cache), "--out", str(out)]

    def run(*a):
        return subprocess.run([sys.executable, *a], cwd=ROOT, capture_output=True, text=True, timeout=600)

    res = run(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "risk_select.json").read_text())
    assert sorted(os.listdir(cache)) == ["xgb-reg-s0.npz", "xgb-reg-s1.npz", "xgb-reg-s2.npz"]
    rows = {r["rule"]: r for r in result["rows"]}
    assert {"mean", "mean - 1 sd", "min", "median", "single member (mean over members)"} <= set(rows)
    assert rows["mean"]["groups"] == [[0, 1], [0, 2], [1, 2]] and result["best_risk"] in (0.0, 0.5, 1.0, 1.5, 2.0)
    # the mean rule by hand: the cached scaled scores of seeds 0 and 1, averaged, scored on the validation network
    data, train_keys, _ = load_split(TEST_DATASET, ["tiny"])
    _, val_by_model = split_by_model({k: data.tasks[k] for k in train_keys}, ["tiny_mlp"])
    val = data.select_tasks(sorted(val_by_model["tiny_mlp"]))
    z = [np.load(cache / f"xgb-reg-s{s}.npz")["val"] for s in (0, 1)]
    assert rows["mean"]["runs"][0]["top1"] == pytest.approx(score_part(val, (z[0] + z[1]) / 2, "tiny_mlp")["top1"])
    stamps = {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)}
    assert run(*args, "--summarize-only").returncode == 0
    assert {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)} == stamps  # nothing refitted
    # the cache is keyed by the fit's settings and data: a fit made otherwise (its key differs) is fitted again
    with np.load(cache / "xgb-reg-s0.npz") as z0:
        kept = {k: z0[k] for k in z0.files}
    assert str(kept["key"]) == data_split_key(data, train_keys, "xgb-reg", 0)
    np.savez(cache / "xgb-reg-s0.npz", **{**kept, "key": np.asarray("other-settings")})
    stamps = {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)}
    assert run(*args).returncode == 0
    now = {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)}
    assert now["xgb-reg-s0.npz"] != stamps["xgb-reg-s0.npz"] and all(now[f] == stamps[f] for f in now if "s0" not in f)
    assert str(np.load(cache / "xgb-reg-s0.npz")["key"]) == str(kept["key"])
    for bad, expected in ((["--validation-models", "tiny"], "held-out models"), (["--kind", "ensemble"], "--kind"),
                          (["--members", "4"], "--members")):
        res = run(*args, *bad)
        assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]


def data_split_key(data, train_keys, kind, seed, val_models=("tiny_mlp",), **params):
    from autotune.costmodel.data import validation_split
    from autotune.costmodel.train import params_for

    return validation_split(data, train_keys, ["tiny"], list(val_models)).fit_key(kind, params or params_for(kind), seed)


def test_validation_fit_key_names_what_a_fit_depends_on():
    """ValidationSplit.fit_key: equal for the same kind, settings, seed, data and split; different when any differs."""
    from autotune.costmodel.data import load_split

    data, train_keys, _ = load_split(TEST_DATASET, ["tiny"])
    key = data_split_key(data, train_keys, "xgb-reg", 0)
    assert key == data_split_key(data, train_keys, "xgb-reg", 0)
    others = [data_split_key(data, train_keys, "xgb-reg", 1), data_split_key(data, train_keys, "ms-xgb", 0),
              data_split_key(data, train_keys, "xgb-reg", 0, n_estimators=7)]
    data.manifest = {**data.manifest, "updated": "later"}  # a grown dataset: another manifest
    others.append(data_split_key(data, train_keys, "xgb-reg", 0))
    assert len({key, *others}) == 5


def test_cap_subsample_nested_and_bounded():
    """At most ``cap`` programs per task, uniform within the task, nested across caps for one seed."""
    sys.path.insert(0, os.path.join(ROOT, "experiments", "costmodel"))
    from data_curve import cap_subsample, parse_caps, slope_per_doubling

    groups = __import__("numpy").repeat([0, 1, 2], [10, 3, 7])
    small, big = cap_subsample(groups, 2, seed=5), cap_subsample(groups, 5, seed=5)
    counts = {g: int((groups[small] == g).sum()) for g in (0, 1, 2)}
    assert counts == {0: 2, 1: 2, 2: 2}
    assert {g: int((groups[big] == g).sum()) for g in (0, 1, 2)} == {0: 5, 1: 3, 2: 5}
    assert set(small) <= set(big)
    assert list(cap_subsample(groups, None, seed=5)) == list(range(20))
    assert any(set(cap_subsample(groups, 2, seed=s)) != set(small) for s in range(6, 10))  # a seed draws its own
    assert parse_caps("16,4,all,4") == [4, 16, None]
    assert slope_per_doubling([4, 8, 16], [0.1, 0.2, 0.3]) == pytest.approx(0.1)
    assert slope_per_doubling([8, 8], [0.1, 0.2]) is None


def test_data_curve_slope_and_its_spread_over_seeds():
    """Per seed a line through its caps: seed 0 rises 0.1 per doubling (0.4 -> 0.5), seed 1 0.3 (0.4 -> 0.7); the
    table's slope is their mean 0.2 and its spread their sd (0.1414); a seed missing at a cap leaves no spread."""
    sys.path.insert(0, os.path.join(ROOT, "experiments", "costmodel"))
    from data_curve import VIEW_METRICS, summarize

    def run(seed, cap, top1):
        return {"seed": seed, "programs": cap * 10, "tasks": 10, "fit_s": 1.0,
                "views": {v: {m: top1 for vv, m in VIEW_METRICS if vv == v} for v, _ in VIEW_METRICS}}

    runs = {("k", "8", 0): run(0, 8, 0.4), ("k", "16", 0): run(0, 16, 0.5),
            ("k", "8", 1): run(1, 8, 0.4), ("k", "16", 1): run(1, 16, 0.7)}
    got = summarize(runs, ["k"], ["8", "16"], [0, 1])
    assert got["slope_per_doubling"]["k"]["all_top1"] == pytest.approx(0.2)
    assert got["slope_sd_over_seeds"]["k"]["all_top1"] == pytest.approx(0.02 ** 0.5)  # sd of (0.1, 0.3)
    del runs[("k", "16", 1)]
    assert summarize(runs, ["k"], ["8", "16"], [0, 1])["slope_sd_over_seeds"]["k"] == {}


def test_data_curve_script(tmp_path):
    """experiments/costmodel/data_curve.py on the tiny dataset: one fit per (kind, cap, seed) on the capped
    training tasks, scored on the held-out model; --summarize-only refits nothing; bad input is one line."""
    script = os.path.join(ROOT, "experiments", "costmodel", "data_curve.py")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = [script, "--dataset", TEST_DATASET, "--held-out", "tiny", "--kinds", "ms-xgb,xgb-reg", "--caps", "4,all",
            "--seeds", "0,1", "--quick", "--threads", "1", "--cache", str(cache), "--out", str(out)]

    def run(*a):
        return subprocess.run([sys.executable, *a], cwd=ROOT, capture_output=True, text=True, timeout=600)

    res = run(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(os.listdir(cache)) == 8
    result = json.loads((out / "data_curve_quick.json").read_text())
    rows = {(r["kind"], r["cap"]): r for r in result["rows"]}
    assert set(rows) == {(k, c) for k in ("ms-xgb", "xgb-reg") for c in ("4", "all")}
    for (_kind, cap), row in rows.items():
        assert row["seeds"] == [0, 1] and 0 < row["all_top1"]["mean"] <= 1
        assert row["programs_per_task"] <= 4 if cap == "4" else row["programs"] == result["train_programs"]
    assert rows[("ms-xgb", "4")]["programs"] < rows[("ms-xgb", "all")]["programs"]
    assert result["missing"] == [] and set(result["slope_per_doubling"]) == {"ms-xgb", "xgb-reg"}
    assert (out / "data_curve_quick.png").stat().st_size > 0
    stamps = {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)}
    assert run(*args, "--summarize-only").returncode == 0
    assert {f: (cache / f).stat().st_mtime_ns for f in os.listdir(cache)} == stamps
    for bad, expected in ((["--caps", "1"], "--caps"), (["--kinds", "nope"], "--kinds"),
                          (["--seeds", "x"], "--seeds"), (["--held-out", "resnet50"], "--held-out"),
                          (["--threads", "0"], "--threads")):
        res = run(*args, *bad)
        assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_data_curve_reading_hand_computed(tmp_path):
    """comparison.md's 'why' block reads data_curve.json of the same dataset: top-1 at all programs, the slope
    per doubling and the programs per task that slope would need for 0.75 (0.55 + 0.05·d = 0.75: d = 4
    doublings of 30 programs per task: 480); a quick run or another dataset's curve is not read."""
    from readings import data_curve_reading  # experiments/costmodel/readings.py

    from autotune.costmodel.comparison import markdown_table

    curve = {"dataset_manifest_sha256": "abc", "quick": False, "missing": [],
             "slope_per_doubling": {"ms-xgb": {"all_top1": 0.05}, "xgb": {"all_top1": -0.01},
                                    "xgb-reg": {"all_top1": 0.01}}, "slope_sd_over_seeds": {"ms-xgb": {"all_top1": 0.02}},
             "rows": [{"kind": "ms-xgb", "cap": "all", "programs_per_task": 30.0, "all_top1": {"mean": 0.55}},
                      {"kind": "xgb", "cap": "all", "programs_per_task": 30.0, "all_top1": {"mean": 0.40}},
                      {"kind": "xgb-reg", "cap": "all", "programs_per_task": 30.0, "all_top1": {"mean": 0.40}}]}
    (tmp_path / "data_curve.json").write_text(json.dumps(curve))
    got = data_curve_reading(str(tmp_path), "abc")
    assert got["kinds"]["ms-xgb"]["programs_per_task_for_target"] == pytest.approx(480.0)
    assert got["kinds"]["xgb"]["programs_per_task_for_target"] is None
    assert data_curve_reading(str(tmp_path), "other") is None
    (tmp_path / "data_curve.json").write_text(json.dumps({**curve, "quick": True}))
    assert data_curve_reading(str(tmp_path), "abc") is None
    result = {"hardware_id": "hw", "held_out": ["m"], "rows": [], "train_programs": 1, "seeds": [0],
              "dataset_manifest_sha256": "abc", "git_commit": None, "loadavg": None, "paired": [], "done_when": [],
              "data_curve": got}
    md = markdown_table(result)
    assert "- ms-xgb: top-1 0.550 at 30.0 programs per task, +0.050 (sd 0.020 over seeds) per doubling; at that slope top-1 0.75 " \
           "would need ~480 programs per task (16.0x today's) — an extrapolation" in md
    assert "- xgb: top-1 0.400 at 30.0 programs per task, -0.010 per doubling; no gain per doubling" in md
    # +0.01 per doubling from 0.40: 35 doublings (2^35 x today's) — past the readable range, said so, no number
    assert "- xgb-reg: top-1 0.400 at 30.0 programs per task, +0.010 per doubling; at that slope top-1 0.75 would " \
           "need more than 64x today's programs per task — too far past the measured caps" in md


def test_top1_loss_reading_hand_computed(tmp_path):
    """comparison.md says where the best sequence model loses top-1, from top1_analysis.json of the same dataset:
    top-1 0.6 loses 0.4, of which 0.3 in catastrophic picks = 75%; another dataset's or kind's analysis is not
    read; the best sequence model is the one with the highest mean top-1."""
    from readings import best_sequence_kind, top1_loss_reading  # experiments/costmodel/readings.py

    from autotune.costmodel.comparison import markdown_table

    worst = {"name": "fused_conv2d5", "loss_share": 0.2, "pick_over_best": 8.0, "task": "k", "weight": 1.0}
    analysis = {"dataset_manifest_sha256": "abc", "catastrophic_ratio": 2.0, "cards": {"seq-lstm-cos": "0123456789ab"},
                "losses": {"seq-lstm-cos": {"m": {"top1": 0.6, "loss_from_catastrophic": 0.3, "catastrophic_tasks": 2,
                                                   "tasks": 10, "worst": [worst]}}}}
    (tmp_path / "top1_analysis.json").write_text(json.dumps(analysis))
    got = top1_loss_reading(str(tmp_path), "abc", "seq-lstm-cos")
    assert got["models"]["m"]["catastrophic_share"] == pytest.approx(0.75)
    assert top1_loss_reading(str(tmp_path), "other", "seq-lstm-cos") is None
    assert top1_loss_reading(str(tmp_path), "abc", "seq-lstm-rows") is None
    assert top1_loss_reading(str(tmp_path / "missing"), "abc", "seq-lstm-cos") is None

    def row(kind, top1):
        return {"kind": kind, "metrics": {"over_seeds": {"all": {"mean": {"top1": top1}}}}}

    assert best_sequence_kind([row("xgb", 0.9), row("seq-lstm-cos", 0.6), row("seq-lstm-rows", 0.5)]) == "seq-lstm-cos"
    assert best_sequence_kind([row("xgb", 0.9)]) is None
    result = {"hardware_id": "hw", "held_out": ["m"], "rows": [], "train_programs": 1, "seeds": [0],
              "dataset_manifest_sha256": "abc", "git_commit": None, "loadavg": None, "paired": [], "done_when": [],
              "top1_losses": got}
    md = markdown_table(result)
    assert "Where seq-lstm-cos loses top-1" in md and "card commit 0123456789" in md
    assert "- m: top-1 0.600; 75% of the lost 0.400 from picks ≥ 2x slower than the task's best, in 2 of 10 tasks; " \
           "costliest task fused_conv2d5 (0.200 of the score, pick 8.0x the best)" in md


def test_results_folder_per_hardware(tmp_path):
    """The main dataset's comparison is the results root; another hardware's goes to a subfolder by default,
    and a folder holding another hardware's comparison is refused (it would be overwritten) with exit 2."""
    from autotune.costmodel.comparison import MAIN_HARDWARE, RESULTS_ROOT, resolve_results, results_dir_for
    from autotune.errors import UserError

    assert results_dir_for(MAIN_HARDWARE) == RESULTS_ROOT
    assert results_dir_for("cpu-rocketlake-2c") == os.path.join(RESULTS_ROOT, "cpu-rocketlake-2c")
    assert resolve_results(None, "cpu-rocketlake-2c") == os.path.join(RESULTS_ROOT, "cpu-rocketlake-2c")
    (tmp_path / "comparison.json").write_text(json.dumps({"hardware_id": MAIN_HARDWARE}))
    assert resolve_results(str(tmp_path), MAIN_HARDWARE) == str(tmp_path)
    with pytest.raises(UserError, match="--results: .* holds the comparison of cpu-znver3-2c"):
        resolve_results(str(tmp_path), "cpu-rocketlake-2c")


def test_reproduce_command_names_dataset_models_seeds_and_folder():
    from autotune.costmodel.comparison import reproduce_command

    result = {"dataset": "datasets/x", "rows": [{"kind": "xgb"}, {"kind": "seq-lstm"}], "seeds": [0, 1, 2]}
    assert reproduce_command(result) == "python -m autotune.costmodel.train --dataset datasets/x --models xgb,seq-lstm --seeds 3"
    result.update(seeds=[5], models_dir="runs/m", quick=True)
    assert reproduce_command(result).endswith("--seeds 1 --seed 5 --models-dir runs/m --quick")
    result.update(hardware_id="cpu-a-2c", results_dir="experiments/costmodel/results/cpu-a-2c/")  # its default
    assert reproduce_command(result).endswith("--models-dir runs/m --quick")
    result.update(results_dir="experiments/costmodel/results/merged")
    assert reproduce_command(result).endswith("--models-dir runs/m --results experiments/costmodel/results/merged --quick")
