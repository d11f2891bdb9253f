"""End to end: real TVM tuning of tiny models through the CLI users run."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.tvm


def _report(work_dir) -> dict:
    with open(os.path.join(work_dir, "report.json")) as f:
        return json.load(f)


def _records(work_dir) -> list[str]:
    path = os.path.join(work_dir, "database_tuning_record.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f if line.strip()]


def test_tune_tiny_end_to_end(cli, tmp_path):
    wd = str(tmp_path / "wd")
    # layout rewrite off, the model's NCHW: stock compile_relax applies the database below to the module as
    # imported (on, NHWC: tests/test_layout_rewrite.py)
    res = cli("autotune.tune", "--model", "tiny", "--trials", "24", "--work-dir", wd, "--bench-rounds", "2",
              "--layout-rewrite", "off", "--conv-layout", "nchw")
    assert res.returncode == 0, res.stderr[-3000:]
    report = _report(wd)
    assert report["layout_rewrite"] is False
    assert report["trials"]["this_run"] == 24
    assert report["trials"]["in_database"] == 24
    assert len(_records(wd)) == 24
    measured = [t for t in report["tasks"] if t["best_latency_ms"] is not None]
    assert measured, "no task got a valid measurement"
    assert all(t["best_gflops"] is None or t["best_gflops"] > 0 for t in measured)
    assert report["numerics"]["max_rel_error"] < 1e-4
    lat = report["latency_ms"]
    assert lat["tvm_tuned"] > 0 and lat["torch_eager"] > 0 and lat["tvm_untuned"] > 0
    assert os.path.getsize(report["library"]) > 0
    assert report["target"]["mcpu"] != "x86-64", "host target must not be generic x86-64"
    assert report["wall_s"]["startup_to_first_measurement"] > 0
    # What the run leaves to look at, said in the console; known third-party noise only in the log file.
    with open(os.path.join(wd, "tuning_curve.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    table = open(os.path.join(wd, "tuning_tasks.md")).read()
    assert sum(line.startswith("| ") for line in table.splitlines()) == len(report["tasks"]) + 1
    assert "tuning_curve.png" in res.stderr and "tuning_tasks.md" in res.stderr
    assert "FutureWarning" not in res.stderr, res.stderr[:2000]
    assert "LeafSpec" in open(os.path.join(wd, "logs", "autotune.log")).read()  # routed, not dropped
    _check_resume_grouping(wd, len(report["tasks"]))
    # The database is a stock MetaSchedule JSON database that stock compile_relax applies.
    check = (
        "import sys, numpy as np;"
        "from autotune.tvmrt.startup import fast_start; fast_start();"
        "import tvm; from tvm.s_tir import meta_schedule as ms;"
        "from autotune.frontend import relax as fe; from autotune.frontend.models import load_model;"
        "from autotune.tvmrt.target import parse_target;"
        f"db = ms.database.JSONDatabase(work_dir={wd!r});"
        "m = load_model('tiny'); mod, p = fe.import_exported(m.exported); mod = fe.bind_and_simplify(mod, p);"
        "t = parse_target('llvm'); ex = ms.relax_integration.compile_relax(db, mod, t, None);"
        "out = fe.VMRunner(ex)(*m.inputs)[0]; ref = m.module(*m.inputs).detach().numpy();"
        "print(len(db.get_all_tuning_records()), float(np.abs(out - ref).max()))"
    )
    res = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    n_records, err = res.stdout.split()[-2:]
    assert int(n_records) == 24 and float(err) < 1e-4


def _check_resume_grouping(wd: str, n_tasks: int) -> None:
    """What a resumed run reads: every record under its own workload's structural hash."""
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from autotune.tuning.tuner import records_by_workload

    database = ms.database.JSONDatabase(work_dir=wd)
    expected: dict[int, int] = {}
    for record in database.get_all_tuning_records():
        key = int(tvm_ffi.structural_hash(record.workload.mod))
        expected[key] = expected.get(key, 0) + 1
    assert len(expected) == n_tasks
    assert {k: len(v) for k, v in records_by_workload(database).items()} == expected


@pytest.mark.slow  # ~41 s; make test keeps test_tune_tiny_end_to_end, CI runs this with the kill batteries
def test_resume_after_kill_measures_nothing_twice(tmp_path):
    """Killed mid-run (SIGKILL, a torn last line left behind), the resumed run finishes the budget. And it
    measures nothing twice: MetaSchedule's search only remembers what it measured itself, so resumed with the
    same seed it proposes the first run's programs again; they must not be measured or committed twice (stock
    TVM would count them twice toward the trials; ``db check`` reports them). With layout rewrite, the harder
    case: a fresh trace and one read back write its IndexMap and an annotation differently (``trace_key``
    makes them canonical). (One test for both: each tuning run costs ~20 s of start-up here.)"""
    from autotune.db import scan_database

    wd = str(tmp_path / "wd")
    cmd = [sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", "200",
           "--trials-per-round", "4", "--work-dir", wd, "--skip-untuned", "--layout-rewrite", "on"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    try:
        while len(_records(wd)) < 8 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = len(_records(wd))
    assert before >= 8, "the first run measured too little before it was killed"
    # A writer killed mid-line leaves a torn last line: resuming must survive it.
    with open(os.path.join(wd, "database_tuning_record.json"), "a") as f:
        f.write('[0, [[["Sample')
    total = before + 24
    res = subprocess.run(cmd[:6] + [str(total)] + cmd[7:], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = _report(wd)
    assert report["trials"]["this_run"] == total - before
    assert report["trials"]["in_database"] == total
    scan = scan_database(wd)
    assert not [str(i) for i in scan.issues], [str(i) for i in scan.issues]
    assert len(scan.record_lines) == total == len(_records(wd))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "no_such_model"], "valid models:"),
        (["--model", "tiny", "--target", "nonsense"], "--target"),
        (["--model", "tiny", "--target", '{"kind": "llvm", "mcpu": "bogus"}'], "unknown LLVM cpu"),
        (["--model", "tiny", "--target", "{broken"], "malformed JSON"),
        (["--model", "tiny", "--target", "cuda"], "no usable CUDA"),
        (["--model", "tiny", "--trials", "0"], "--trials"),
        (["--model", "tiny", "--cost-model", "magic"], "--cost-model"),
        (["--model", "tiny", "--strategy", "annealing"], "--strategy: unknown 'annealing'; valid: evolutionary"),
        (["--model", "tiny", "--population", "0"], "--population"),
        (["--model", "tiny", "--input-shape", "3,x"], "--input-shape"),
        (["--model", "tiny", "--batch-size", "-1"], "--batch-size"),
    ],
)
def test_bad_input_one_line_exit_2(cli, tmp_path, args, expected):
    res = cli("autotune.tune", *args, "--work-dir", str(tmp_path / "wd"), timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [line for line in res.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr


def test_bad_pt2_file(cli, tmp_path):
    bad = tmp_path / "model.pt2"
    bad.write_bytes(b"not a torch.export archive")
    res = cli("autotune.tune", "--model", str(bad), "--work-dir", str(tmp_path / "wd"), timeout=300)
    assert res.returncode == 2
    assert "model.pt2" in res.stderr and "Traceback" not in res.stderr


def test_work_dir_from_another_model_is_refused(cli, tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "autotune_workdir.json").write_text(json.dumps({"model": "resnet18", "target": {}}))
    res = cli("autotune.tune", "--model", "tiny", "--work-dir", str(wd), timeout=300)
    assert res.returncode == 2
    assert "resnet18" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_tune_saved_pt2_program(cli, tmp_path):
    import torch

    from autotune import zoo

    model, inputs = zoo.get_model("tiny_mlp", batch_size=2)
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, inputs), str(path))
    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", str(path), "--trials", "8", "--work-dir", wd,
              "--skip-untuned", "--bench-rounds", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    report = _report(wd)
    assert report["model"] == "mlp"
    assert report["inputs"][0]["shape"] == [2, 64]
    assert report["numerics"]["max_rel_error"] < 1e-4


def test_eta_counts_the_reachable_budget_not_trials():
    """--trials-per-task 16 --trials 100000: the ETA is for what the caps leave, less what is in the database."""
    from autotune.progress import Progress
    from autotune.tuning.config import SearchConfig
    from autotune.tuning.tuner import TaskState, _TuneRun

    progress = Progress(100_000, "tuning", done=None, enabled_rich=False)
    run = _TuneRun(None, None, None, None, SearchConfig(), progress, None)
    cap = 16
    run.states = [TaskState(None, None, budget=max(cap - n, 0), trials=n) for n in (0, 4, 16, 20)]
    run.set_budget(100_000)
    run._progress()
    assert run.remaining == 16 + 12 and progress.total == 40 + 28 and progress.done == 40
    progress.start -= 10.0  # 14 trials measured in 10 s: 14 left take 10 s more (not 99,946 x 10 / 14)
    run.total_done, run.remaining, run.states[0].budget = 54, 14, 2
    run._progress()
    assert progress.eta_s() == pytest.approx(10.0, rel=0.05)
    run.states[1].done = True  # its search space ran out: its 12 trials will never be measured
    run._progress()
    assert progress.total == 56 and progress.eta_s() == pytest.approx(10.0 / 14 * 2, rel=0.05)


def test_first_round_trials_caps_only_a_tasks_first_visit():
    from autotune.errors import UserError
    from autotune.tuning.config import SearchConfig
    from autotune.tuning.tuner import TaskState, _TuneRun

    def caps(search):
        run = _TuneRun(None, None, None, None, search, None, None)
        run.states = [TaskState(None, None, budget=32, trials=n) for n in (0, 0, 5)]
        run.set_budget(96)
        return [run._cap(s) for s in run.states]

    # 96 left over 2 untouched tasks: a first visit may take 48 (the round then measures 16) unless capped
    assert caps(SearchConfig()) == [32, 32, 32]  # None: a whole round (collection, the strategy tests)
    assert caps(SearchConfig(first_round_trials=4)) == [4, 4, 32]  # later visits are not capped
    # the CLI's default follows the real-budget evidence (FIRST_ROUND_TRIALS_DEFAULT, 4); 16 = whole rounds
    from autotune.tune import build_parser, config_from_args

    assert config_from_args(build_parser().parse_args(["--model", "tiny"])).search.first_round_trials == 4
    flags = ["--model", "tiny", "--first-round-trials", "16"]
    assert caps(config_from_args(build_parser().parse_args(flags)).search) == [16, 16, 32]
    with pytest.raises(UserError, match="--first-round-trials"):
        SearchConfig(first_round_trials=0)


def test_curve_and_task_table_from_the_report(tmp_path):
    from autotune.tuning.summary import curve_points, task_table, write_run_summary

    tasks = [{"name": f"t{i}", "weight": w, "flops": 1e6, "trials": 8, "best_latency_ms": ms,
              "best_gflops": 1e6 / ms / 1e6 if ms else None}
             for i, (w, ms) in enumerate([(2, 1.0), (1, 0.5), (1, None)])]
    report = {"model": "m", "hardware_id": "hw", "tasks": tasks, "latency_ms": {"tvm_tuned": 2.7},
              "trials": {"in_database": 24, "this_run": 16, "failed": 8},
              "history": {"rows": [[12, 1.0, 1, 0.8e-3], [16, 2.0, 0, 1.0e-3], [20, 3.0, 1, 0.5e-3],
                                   [24, 4.0, 2, None]],
                          "start": {"trials": 8, "task_best_s": [1.5e-3, None, None]}}}
    points, unmeasured = curve_points(report)
    # t0 started at 1.5 ms from the database (a partial sum); t1 first measured at 12 trials; t2 never
    assert unmeasured == [2]
    assert points == [(8, 0.0, pytest.approx(3e-3), False), (12, 1.0, pytest.approx(3.8e-3), True),
                      (16, 2.0, pytest.approx(2.8e-3), True), (20, 3.0, pytest.approx(2.5e-3), True),
                      (24, 4.0, pytest.approx(2.5e-3), True)]
    table = task_table(report)
    rows = [line for line in table.splitlines() if line[:4] in ("| t0", "| t1", "| t2")]
    assert [r.split(" | ")[0] for r in rows] == ["| t0", "| t1", "| t2"]  # largest share first
    assert "| 80.0% |" in rows[0] and "| 20.0% |" in rows[1] and rows[2].endswith("| - | - | - |")
    assert "2.500 ms" in table and "2.700 ms" in table
    png, md = write_run_summary(report, str(tmp_path))
    assert open(png, "rb").read(4) == b"\x89PNG" and open(md).read() == table


def test_known_warning_noise_goes_to_the_log_file_only(tmp_path):
    """In a fresh interpreter (pytest's own warning capture would otherwise sit in between)."""
    import subprocess
    import sys

    script = f"""
import warnings
from autotune.cli import setup_logging
warnings.simplefilter("always")
setup_logging(None)  # before the work dir is known: kept, then written to its log file
warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning, stacklevel=1)
setup_logging({str(tmp_path / "logs")!r})
warnings.warn("autotune: a warning users must see", UserWarning, stacklevel=1)
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "LeafSpec" not in res.stderr and "UserWarning: autotune: a warning users must see" in res.stderr
    log = (tmp_path / "logs" / "autotune.log").read_text()
    assert "FutureWarning: `isinstance(treespec, LeafSpec)`" in log and "a warning users must see" in log
