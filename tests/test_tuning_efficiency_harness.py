"""The tuning-efficiency harness's bookkeeping (TVM-free but one slow real case): a finished run made with an older
pretrained model is recognised as stale and measured again."""

import json
import os
import sys
import time

import pytest

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "experiments", "tuning_efficiency"))
import run as te  # noqa: E402


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f)


def test_stale_when_the_pretrained_model_was_retrained(tmp_path):
    model_dir = tmp_path / "models" / "cpu-x-2c" / "seq"
    _write(str(model_dir / "card.json"), {"kind": "seq", "trained": "2026-12-02T18:00:00Z"})
    report = str(tmp_path / "run" / "report.json")
    used = {"path": str(model_dir), "trained": "2026-12-02T18:00:00Z"}
    _write(report, {"target": {"mcpu": "x", "num-cores": 2}, "cost_model_card": used})
    assert te.stale_reason(report, "seq") is None
    assert te.stale_reason(report, "seq:blend") is None
    _write(str(model_dir / "card.json"), {"kind": "seq", "trained": "2026-12-02T19:00:00Z"})
    assert "retrained" in te.stale_reason(report, "seq")
    assert te.stale_reason(report, "ms-xgb") is None  # stock model: nothing pretrained to go stale


def test_old_reports_without_a_card_are_judged_by_time(tmp_path):
    model_dir = tmp_path / "models" / "cpu-x-2c" / "xgb"
    report = str(tmp_path / "run" / "report.json")
    _write(report, {"target": {"mcpu": "x", "num-cores": 2}, "cost_model_card": {"path": str(model_dir)}})
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(report)))
    _write(str(model_dir / "card.json"), {"kind": "xgb", "trained": "2000-01-01T00:00:00Z"})
    assert te.stale_reason(report, "xgb") is None
    _write(str(model_dir / "card.json"), {"kind": "xgb", "trained": "2999-01-01T00:00:00Z"})
    assert made in te.stale_reason(report, "xgb")


def test_the_card_is_found_through_the_reports_hardware_id(tmp_path, monkeypatch):
    # a report without the card's path: the card is looked up under models/<hardware_id>/<kind>
    monkeypatch.setattr(te, "ROOT", str(tmp_path))
    _write(str(tmp_path / "models" / "cuda-sm_90" / "seq" / "card.json"),
           {"kind": "seq", "trained": "2026-12-02T19:00:00Z"})
    report = str(tmp_path / "run" / "report.json")
    _write(report, {"target": {"kind": "cuda", "arch": "sm_90"}, "hardware_id": "cuda-sm_90",
                    "cost_model_card": {"trained": "2026-12-02T18:00:00Z"}})
    assert "retrained" in te.stale_reason(report, "seq")
    _write(report, {"target": {"kind": "cuda", "arch": "sm_90"},  # old report: CPU-style id, no card there
                    "cost_model_card": {"trained": "2026-12-02T18:00:00Z"}})
    assert te.stale_reason(report, "seq") is None


def _run(cm, seed, curve, per_trial=1.0):
    trials = list(range(1, len(curve) + 1))
    return {"model": "m", "cost_model": cm, "seed": seed, "trials": trials, "curve_ms": curve,
            "elapsed_s": [t * per_trial for t in trials], "final_latency_ms": curve[-1], "per_trial_s": per_trial}


def test_speedups_are_paired_by_seed_and_hand_computed():
    runs = [_run("ms-xgb", 0, [9, 8, 6, 5]),        # reaches its final 5 at trial 4
            _run("seq", 0, [6, 5, 4, 4], 2.0),      # reaches 5 at trial 2: 2x fewer trials, same seconds
            _run("ms-xgb", 1, [9, 3, 3, 3]),        # final 3 at trial 2
            _run("seq", 1, [8, 7, 6, 4])]           # never reaches 3
    row = te.summarize(runs, baselines=("ms-xgb",))["m"]["seq"]
    assert row["per_seed_speedup_trials_vs_ms-xgb"] == {0: 2.0, 1: None}
    assert row["reached_ms-xgb_final"] == "1/2"
    assert row["speedup_trials_vs_ms-xgb"] is None  # not reached on every seed: no aggregate claim
    assert abs(row["final_ratio_vs_ms-xgb"] - ((4 / 5) * (4 / 3)) ** 0.5) < 1e-12
    # baseline needs 4 and 2 trials, the arm's first point is 1 trial: at most 4x and 2x could show
    assert abs(row["speedup_cap_vs_ms-xgb"] - (4 * 2) ** 0.5) < 1e-12
    base = te.summarize(runs, baselines=("ms-xgb",))["m"]["ms-xgb"]
    assert base["speedup_trials_vs_ms-xgb"] == 1.0 and base["final_ratio_vs_ms-xgb"] == 1.0
    both = te.summarize(runs[:2], baselines=("ms-xgb",))["m"]["seq"]
    assert both["speedup_trials_vs_ms-xgb"] == 2.0 and both["speedup_time_vs_ms-xgb"] == 1.0
    assert "s1: not reached" in te.markdown(te.summarize(runs, baselines=("ms-xgb",)), {})


def test_wall_time_per_trial_is_split_by_phase():
    report = {"wall_s": {"search": 8.0, "build": 4.0, "run": 2.0, "total": 30.0}, "trials": {"this_run": 4}}
    assert te.wall_per_trial(report) == {"search_per_trial_s": 2.0, "build_per_trial_s": 1.0, "run_per_trial_s": 0.5}
    assert te.wall_per_trial({"wall_s": {"search": 1.0}, "trials": {"this_run": 0}}) == {}
    runs = [{**_run("ms-xgb", 0, [2, 1]), **te.wall_per_trial(report)}]
    table = te.markdown(te.summarize(runs, baselines=("ms-xgb",)), {})
    assert "1.00 (2.00 / 1.00 / 0.50)" in table


def test_task_sequences_read_the_database_in_measured_order(tmp_path):
    """MetaSchedule's JSON database (one line per workload / record): latencies per task in the order
    measured, failures as inf, records of other workloads ignored, a line cut by a kill skipped."""
    wd = str(tmp_path)
    report = {"tasks": [{"workload_hash": "0x1f"}, {"workload_hash": "0x2a"}]}
    with open(os.path.join(wd, "database_workload.json"), "w") as f:
        f.write("".join(json.dumps([h, {}]) + "\n" for h in ("42", "999", "31")))
    recs = [(2, [1.0, 3.0]), (0, [5.0]), (1, [7.0]), (2, [1e10]), (0, None)]
    with open(os.path.join(wd, "database_tuning_record.json"), "w") as f:
        f.write("".join(json.dumps([w, [[], secs, {}, []]]) + "\n" for w, secs in recs) + '[0, [[], [9')
    assert te.task_sequences(wd, report) == [[2.0, float("inf")], [5.0, float("inf")]]


def _kept(root, arm, seed, latencies, timed_with, wall=100.0):
    """A kept real-budget run: report.json + snapshots.json as real_budget.py keeps them."""
    import real_budget as rb

    folder = os.path.join(root, "m", rb.arm_dir(arm), f"seed{seed}")
    snaps = [{"fraction": (i + 1) / len(latencies), "records": 10 * (i + 1), "elapsed_s": 5.0 * (i + 1),
              "latency_ms": lat} for i, lat in enumerate(latencies)]
    _write(os.path.join(folder, "snapshots.json"), {"snapshots": snaps, "timed_with": timed_with})
    _write(os.path.join(folder, "report.json"), {"wall_s": {"tuning": wall}})
    return rb._result(arm, "m", seed, folder)


def test_real_budget_speedups_and_sittings_from_kept_runs(tmp_path):
    import real_budget as rb

    # sitting 1: stock-ms with ours; sitting 2: the +first4 arm with stock-ms+lr+nhwc
    runs = [_kept(tmp_path, "stock-ms", 0, [90, 80, 70, 40], ["seed0", "../ms-mlp-lr-nhwc/seed0"]),
            _kept(tmp_path, "ms-mlp+lr+nhwc", 0, [60, 40, 30, 20], ["../stock-ms/seed0", "seed0"]),
            _kept(tmp_path, "ms-mlp+lr+nhwc+first4", 0, [35, 30, 25, 22], ["seed0", "../stock-ms-lr-nhwc/seed0"]),
            _kept(tmp_path, "stock-ms+lr+nhwc", 0, [99, 99, 99, 21], ["../ms-mlp-lr-nhwc-first4/seed0", "seed0"])]
    summary = rb.summarize(runs)["m"]
    # stock's final 40 ms at 40 records / 20 s: ours reaches it at 20 records (2x) / 10 s; +first4 at 10 (4x)
    assert summary["ms-mlp+lr+nhwc"]["speedup_trials_vs_stock"] == 2.0
    assert summary["ms-mlp+lr+nhwc"]["speedup_time_vs_stock"] == 2.0
    assert summary["ms-mlp+lr+nhwc+first4"]["speedup_trials_vs_stock"] == 4.0
    assert abs(summary["ms-mlp+lr+nhwc"]["final_ratio_vs_stock"] - 0.5) < 1e-12
    # "≥ 2x fewer trials than pretrained MS-MLP": +first4 needs 10 records where ms-mlp+lr+nhwc needs 20
    full = rb.summarize(runs)
    assert rb.mlp_arm("ms-mlp+lr+nhwc+first4") == "ms-mlp+lr+nhwc" and rb.mlp_arm("stock-ms+lr") is None
    assert abs(rb.trials_vs_mlp(full, "ms-mlp+lr+nhwc+first4") - 2.0) < 1e-12
    assert rb.trials_vs_mlp(full, "ms-mlp+lr+nhwc") == 1.0 and rb.trials_vs_mlp(full, "stock-ms+lr+nhwc") == "-"
    assert rb.trials_vs_mlp(rb.summarize(runs[:1] + runs[2:]), "ms-mlp+lr+nhwc+first4") == "ms-mlp+lr+nhwc not run on every model"
    # arms keep their first rounds whatever the CLI's default: whole (16) unless +firstN
    first = lambda arm: rb.arm_command(arm, "m", 0, "wd", 32, 64, hardware="hw")[-1]  # noqa: E731
    assert first("ms-mlp+lr+nhwc") == "16" and first("ms-mlp+lr+nhwc+first4") == "4"
    # +popN/+genN size the search; the arm is still MS-MLP with these layouts (its MS-MLP arm is the plain one)
    cmd = rb.arm_command("ms-mlp+lr+nhwc+first4+pop512+gen4", "m", 0, "wd", 32, 64, hardware="hw")
    assert cmd[-4:] == ["--population", "512", "--search-iters", "4"] and cmd[cmd.index("--first-round-trials") + 1] == "4"
    assert rb.parse_arm("ms-mlp+lr+nhwc+first4+pop512+gen4")[2] == ""  # not read as a batch selection
    assert rb.mlp_arm("ms-mlp+lr+nhwc+first4+pop512") == "ms-mlp+lr+nhwc"
    with pytest.raises(SystemExit, match="autotune's loop only"):
        rb.arm_command("stock-ms+pop512", "m", 0, "wd", 32, 64, hardware="hw")
    row = next(x for x in rb.done_when_lines(full) if x.startswith("| ms-mlp+lr+nhwc+first4 |"))
    assert row.endswith("| 2.00x | no (provisional: 1 of 3 sittings) |")  # 4x trials < 5x: not met
    # beside the claims: +first4 never reaches MS-MLP's final 20 ms (ends at 22); 20/22; stock's final at 5 of 20 s
    claims = [x for x in rb.claims_lines(runs, full) if x.startswith("| ms-mlp+lr+nhwc+first4 |")]
    assert claims == ["| ms-mlp+lr+nhwc+first4 | ms-mlp+lr+nhwc | 1 | not reached on every model | "
                      "not reached on every model | 0.909x | 4.00x |"]
    # +first4 against the same arm with whole first rounds, snapshot by snapshot: 35/60, 30/40, 25/30, 22/20
    first = rb.first_round_lines(runs)
    assert first[-1] == ("| ms-mlp+lr+nhwc+first4 | ms-mlp+lr+nhwc | 1 | 0.583x (0.58-0.58) | 0.750x (0.75-0.75) | "
                         "0.833x (0.83-0.83) | 1.100x (1.10-1.10) |")
    assert rb.first_round_lines(runs[:1] + runs[2:]) == []  # no whole-round arm to compare with
    rb.plot_curves(runs, str(tmp_path / "curves.png"))
    assert (tmp_path / "curves.png").stat().st_size > 1000
    lines = rb.sittings_lines(runs)
    assert lines[-1] == ("- m seed 0: 1 sitting; latest timed in {ms-mlp+lr+nhwc, stock-ms} | "
                         "{ms-mlp+lr+nhwc+first4, stock-ms+lr+nhwc}")
    assert rb.sittings_lines(runs[:2])[-1] == "- m seed 0: 1 sitting; all arms timed together"


def test_v2_arms_budgets_and_attribution_hand_computed(tmp_path):
    """Protocol v2: +iterN and +xK reach stock's command, +xK multiplies our budget, +iterN is refused on our
    loop; the attribution chain reads each step against the one before, paired by seed."""
    import attribution as at
    import real_budget as rb

    cmd = rb.arm_command("stock-ms+lr+nhwc+iter8+x4", "m", 0, "wd", 32, 64, hardware="hw")
    assert cmd[cmd.index("--trials-per-task") + 1] == "128" and cmd[cmd.index("--num-trials-per-iter") + 1] == "8"
    assert "--layout-rewrite" in cmd and cmd[cmd.index("--conv-layout") + 1] == "nhwc"
    assert "--num-trials-per-iter" not in rb.arm_command("stock-ms", "m", 0, "wd", 32, 64, hardware="hw")
    ours = rb.arm_command("auto:none+lr+nhwc+first4+x2", "m", 0, "wd", 32, 64, hardware="hw")
    assert ours[ours.index("--trials") + 1] == "128" and ours[ours.index("--online-update") + 1] == "none"
    assert rb.parse_arm("stock-ms+lr+nhwc+iter8+x4")[2] == ""  # not read as a batch selection
    with pytest.raises(SystemExit, match="stock MetaSchedule's setting"):
        rb.arm_command("ms-xgb+iter8", "m", 0, "wd", 32, 64, hardware="hw")
    lat = {"stock-ms+iter8": [99, 90, 80], "stock-ms+lr+nhwc+iter8": [70, 60, 50],
           "ms-xgb+lr+nhwc+first4": [55, 50, 45], "auto:none+lr+nhwc+first4": [44, 42, 40],
           "auto+lr+nhwc+first4": [46, 41, 41]}
    runs = [_kept(tmp_path, arm, 0, v, ["seed0"]) for arm, v in lat.items()]  # records 10 / 20 / 30
    att = at.attribution(runs)
    layouts, loop, model, online = att["chain"]
    close = lambda a, b: abs(a - b) < 1e-9  # noqa: E731  (geometric means go through exp(log))
    assert close(layouts["trials_ratio_geo"], 3.0) and close(layouts["final_ratio_geo"], 50 / 80)  # 70 <= 80 at 10
    assert close(loop["trials_ratio_geo"], 1.5) and close(loop["final_ratio_geo"], 45 / 50)  # 50 at 20 of 30
    assert close(model["trials_ratio_geo"], 3.0) and close(model["final_ratio_geo"], 40 / 45)
    # the default never reaches the pretrained-only arm's 40 ms: no ratio, the pair named
    assert online["trials_ratio_geo"] is None and online["not_reached_in"] == ["m s0"]
    share = next(s for s in att["summary"] if s["label"].startswith("the learned model's share"))
    assert close(share["trials_ratio_geo"], 1.5) and close(share["final_ratio_geo"], 41 / 45)  # 41 <= 45 at 20
    x4 = next(s for s in att["summary"] if s["against"].endswith("+x4"))
    assert x4["pairs"] == [] and "| not run |" in at._row(x4)
    md = "\n".join(at.markdown_lines(runs))
    assert "| 3.00x | 0.625 |" in md and "- (not reached in m s0)" in md


def test_real_budget_reads_kept_sittings_by_the_fastest_round(tmp_path):
    """A kept snapshots.json is read under the current rule from its rounds (whatever latency it recorded):
    each sitting's fastest round, the median over sittings; the median-of-rounds rule is the secondary view,
    and there the verdict can differ (here ours reaches stock's final only by the fastest rounds)."""
    import real_budget as rb

    def kept(arm, rounds_per_sitting):  # rounds_per_sitting[k][i]: sitting k, snapshot i
        folder = os.path.join(str(tmp_path), "m", rb.arm_dir(arm), "seed0")
        snaps = [{"fraction": f, "records": n, "elapsed_s": n / 2, "latency_ms": -1.0} for f, n in ((0.5, 10), (1.0, 20))]
        sittings = [{"latency_ms": [-1.0, -1.0], "latency_ms_rounds": r, "at": at}
                    for r, at in zip(rounds_per_sitting, ("2026-12-04T10:00:00", "2026-12-05T01:00:00", "2026-12-06T00:00:00"))]
        _write(os.path.join(folder, "snapshots.json"), {"snapshots": snaps, "sittings": sittings, "timed_with": ["seed0"]})
        _write(os.path.join(folder, "report.json"), {"wall_s": {"tuning": 10.0}})
        return rb._result(arm, "m", 0, folder)

    stock = kept("stock-ms", [[[200, 201, 202], [120, 121, 122]]] * 3)  # steady: 120 at the full budget
    # bimodal: fast rounds 115 / 110 (the last sitting, after the rule change: 119 / 118)
    ours = kept("ms-mlp+lr+nhwc", [[[115, 140, 141], [110, 139, 138]]] * 2 + [[[119, 140, 141], [118, 139, 138]]])
    assert [s["latency_ms"] for s in ours["snapshots"]] == [115, 110] and ours["sittings"] == 3
    assert [s["latency_ms_median_rule"] for s in ours["snapshots"]] == [140, 138]
    summary = rb.summarize([stock, ours])["m"]["ms-mlp+lr+nhwc"]
    assert summary["speedup_trials_vs_stock"] == 2.0  # 115 <= 120 at 10 of stock's 20 records
    view = rb.summarize(rb.median_rule_view([stock, ours]))["m"]["ms-mlp+lr+nhwc"]
    assert view["speedup_trials_vs_stock"] is None and view["final_ratio_vs_stock"] == 138 / 121
    # out of sample for the rule: the sittings timed after it alone (one here), provisional
    fresh = rb.since_rule_view([stock, ours])
    assert [r["sittings"] for r in fresh] == [1, 1] and [s["latency_ms"] for s in fresh[1]["snapshots"]] == [119, 118]
    md = rb.markdown(rb.summarize([stock, ours]), [stock, ours],
                     {"command": "x", "trials_per_task": 64, "loadavg_start": [], "loadavg_end": []})
    assert "Secondary view, the rule until 2026-12-05" in md
    assert "Out of sample for the rule" in md and "1 groups (m seed 0)" in md and "provisional: 1 of 3" in md


def test_snapshot_sittings_median_and_restart(tmp_path):
    """A sitting is added to the sittings of the same database and grid; the latency read is the median over
    sittings; another database (more records), another grid or a file from before sittings starts afresh."""
    import snapshots as sn

    rows = [{"fraction": 0.5, "records": 5}, {"fraction": 1.0, "records": 10}]
    sit = lambda *lat: {"latency_ms": list(lat)}  # noqa: E731
    three = [sit(100.0, 50.0), sit(130.0, 40.0), sit(90.0, 70.0)]
    comb = sn.combine_sittings(rows, three)
    assert [r["latency_ms"] for r in comb] == [100.0, 50.0] and comb[1]["latency_ms_sittings"] == [50.0, 40.0, 70.0]
    assert comb[0]["sittings"] == 3 and comb[0]["records"] == 5
    # with its rounds kept, a sitting reads as its fastest round (interference only adds time); the rule until
    # 2026-12-05 (median of rounds, then median over sittings) stays beside it
    rounds = [{"latency_ms": [0.0], "latency_ms_rounds": [r]} for r in
              ([100.0, 140.0, 141.0], [120.0, 121.0, 150.0], [101.0, 139.0, 138.0])]
    (row,) = sn.combine_sittings(rows[:1], rounds)
    assert row["latency_ms_sittings"] == [100.0, 120.0, 101.0] and row["latency_ms"] == 101.0
    assert row["latency_ms_median_rule"] == 138.0  # medians 140, 121, 138
    path = str(tmp_path / "snapshots.json")
    assert sn.earlier_sittings(path, 10, rows) == []  # no file yet
    _write(path, {"records": 10, "snapshots": comb, "sittings": three})
    assert sn.earlier_sittings(path, 10, rows) == three
    assert sn.earlier_sittings(path, 11, rows) == []  # the database grew
    assert sn.earlier_sittings(path, 10, rows[:1]) == []  # another grid
    _write(path, {"records": 10, "snapshots": comb})  # written before sittings were recorded
    assert sn.earlier_sittings(path, 10, rows) == []


def test_snapshot_estimate_is_weighted_best_of_the_first_records(tmp_path):
    """The estimated view of a snapshot: weight x best valid mean of each task among the first n records."""
    import snapshots as sn

    wd = str(tmp_path)
    report = {"tasks": [{"workload_hash": "0x1f", "weight": 2}, {"workload_hash": "0x2a", "weight": 3}]}
    with open(os.path.join(wd, "database_workload.json"), "w") as f:
        f.write("".join(json.dumps([h, {}]) + "\n" for h in ("42", "999", "31")))
    recs = [(2, [0.004, 0.002]), (0, [0.010]), (2, [1e10]), (2, [0.001]), (1, [0.0001])]
    with open(os.path.join(wd, "database_tuning_record.json"), "w") as f:
        f.write("".join(json.dumps([w, [[], secs, {}, []]]) + "\n" for w, secs in recs))
    first1, first3, first5 = sn.estimated_ms(wd, report, [1, 3, 5])
    assert first1 == (2 * 3.0, 1)  # 0x1f (= 31): mean 3 ms; 0x2a (= 42) not yet
    total, untuned = first3  # a failed run (1e10) does not count
    assert untuned == 0 and abs(total - (2 * 3.0 + 3 * 10.0)) < 1e-9
    total, _ = first5  # 1 ms beats 3 ms; another model's workload (999) is ignored
    assert abs(total - (2 * 1.0 + 3 * 10.0)) < 1e-9


def test_real_budget_sittings_time_whole_groups(tmp_path, monkeypatch):
    """--sittings: a group is timed (all its arms with a work dir here, together) while any arm has fewer
    sittings than asked; arms without a work dir are left out; verdicts stay provisional below 3 sittings."""
    import argparse

    import real_budget as rb

    out, work = tmp_path / "out", tmp_path / "work"
    for arm, n in (("stock-ms", 2), ("ms-mlp+lr+nhwc", 1), ("ms-mlp+lr+nhwc+first4", 0)):
        kept = out / "hw" / "runs" / "m" / rb.arm_dir(arm) / "seed0"
        _write(str(kept / "snapshots.json"), {"snapshots": [], "sittings": [{}] * n})
        _write(str(kept / "report.json"), {})
        if arm != "ms-mlp+lr+nhwc+first4":  # this arm's work dir is not on this machine
            wd = work / "hw" / "m" / rb.arm_dir(arm) / "seed0"
            wd.mkdir(parents=True)
            (wd / "database_tuning_record.json").write_text("")
    timed = []
    monkeypatch.setattr(rb, "snapshot_group", lambda states, model, rounds, fractions: timed.append(
        sorted(s["arm"] for s in states)))
    args = argparse.Namespace(out=str(out), work_root=str(work), hardware="hw", rounds=5, fractions="")
    arms = ["stock-ms", "ms-mlp+lr+nhwc", "ms-mlp+lr+nhwc+first4"]
    assert rb.sit_group("m", 0, arms, args, 1) is None and timed == []  # both present arms have >= 1
    rb.sit_group("m", 0, arms, args, 2)
    assert timed == [["ms-mlp+lr+nhwc", "stock-ms"]]  # ms-mlp+lr+nhwc has 1 < 2: the whole group is timed
    assert (work / "hw" / "m" / "stock-ms" / "seed0" / "snapshots.json").exists()  # the kept sittings copied in


@pytest.mark.tvm
@pytest.mark.slow  # a real tuning run and two compile-and-time sittings (~40 s): CI runs it with the slow cases
def test_snapshots_two_real_sittings(tmp_path):
    """snapshots.py on a real tuned work dir: each call compiles the database at the fractions and times it;
    the second call adds a sitting and the latency read is the median over both."""
    import subprocess

    wd = str(tmp_path / "wd")
    res = subprocess.run([sys.executable, "-m", "autotune.tune", "--model", "tiny_mlp", "--trials", "8",
                          "--trials-per-round", "4", "--cost-model", "stock", "--work-dir", wd, "--skip-untuned",
                          "--bench-rounds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    script = os.path.join(ROOT, "experiments", "tuning_efficiency", "snapshots.py")
    for k in (1, 2):
        res = subprocess.run([sys.executable, script, wd, "--model", "tiny_mlp", "--fractions", "0.5,1",
                              "--rounds", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        assert f"(sitting {k})" in res.stdout, res.stdout
    with open(os.path.join(wd, "snapshots.json"), encoding="utf-8") as f:
        snaps = json.load(f)
    assert len(snaps["sittings"]) == 2 and [s["records"] for s in snaps["snapshots"]] == [4, 8]
    for i, row in enumerate(snaps["snapshots"]):
        both = [s["latency_ms"][i] for s in snaps["sittings"]]
        assert row["latency_ms_sittings"] == both and abs(row["latency_ms"] - sum(both) / 2) < 1e-9
        assert all(s["latency_ms"][i] == min(s["latency_ms_rounds"][i]) for s in snaps["sittings"])  # fastest round
        assert all(len(s["latency_ms_rounds"][i]) == 2 and min(s["latency_ms_rounds"][i]) > 0 for s in snaps["sittings"])
        assert row["elapsed_s"] is not None and row["elapsed_s"] > 0  # from the run's report history
        assert row["estimated_ms"] > 0 and row["untuned_tasks"] >= 0  # the estimated view beside the measured one


def test_transferred_model_arm(tmp_path, monkeypatch):
    """COST_MODEL@VARIANT tunes with that kind's model transferred to this hardware (--cost-model-path); a
    variant with no model there is refused up front with the command that makes it."""
    import argparse

    import real_budget as rb

    from autotune.errors import UserError

    monkeypatch.setattr(rb, "TRANSFER_MODELS", str(tmp_path))
    cmd = rb.arm_command("ms-mlp@ckd10+lr+nhwc+first4", "m", 0, "wd", 32, 64, hardware="hw")
    assert cmd[cmd.index("--cost-model") + 1] == "mlp"  # the arm's old name, as the CLI's family
    assert cmd[cmd.index("--cost-model-path") + 1] == os.path.relpath(os.path.join(str(tmp_path), "ckd10", "hw", "ms-mlp"), rb.ROOT)
    assert "--cost-model-path" not in rb.arm_command("ms-mlp+lr", "m", 0, "wd", 32, 64, hardware="hw")
    assert rb.mlp_arm("ms-mlp@ckd10+lr+nhwc+first4") == "ms-mlp+lr+nhwc"  # compared with the untransferred MS-MLP
    args = argparse.Namespace(models="resnet50", seeds="0", arms="stock-ms,ms-mlp@ckd10+lr", hardware="hw")
    with pytest.raises(UserError, match="no transferred model at .*ckd10/hw/ms-mlp; make it with"):
        rb._check_args(args)
    os.makedirs(tmp_path / "ckd10" / "hw" / "ms-mlp")
    rb._check_args(args)
