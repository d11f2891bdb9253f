"""Layout rewrite (--layout-rewrite): tuned programs choose their weights' layout, packed at compile time;
with convolutions in NHWC (--conv-layout nhwc, tests/test_conv_layout.py for the conversion itself).

Real TVM, the CLI users run, on the tiny zoo model; stock TVM's own pipeline and the API apply the database too."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.tvm


def test_layout_rewrite_tunes_packs_and_stock_tvm_applies_it(cli, tmp_path):
    wd = str(tmp_path / "wd")
    res = cli("autotune.tune", "--model", "tiny", "--trials", "8", "--work-dir", wd, "--bench-rounds", "1",
              "--skip-untuned", "--layout-rewrite", "on", "--conv-layout", "nhwc")
    assert res.returncode == 0, res.stderr[-3000:]
    with open(os.path.join(wd, "report.json")) as f:
        report = json.load(f)
    assert report["layout_rewrite"] is True and report["conv_layout"] == "nhwc"
    assert report["numerics"]["max_rel_error"] < 1e-4
    # a resumed run on the other setting would tune tasks its database does not hold: refused, nothing lost
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        before = f.read()
    res = cli("autotune.tune", "--model", "tiny", "--trials", "24", "--work-dir", wd, "--layout-rewrite", "off")
    assert res.returncode == 2 and "--layout-rewrite off" in res.stderr and "Traceback" not in res.stderr
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        assert f.read() == before
    res = cli("autotune.tune", "--model", "tiny", "--trials", "24", "--work-dir", wd, "--conv-layout", "nchw")
    assert res.returncode == 2 and "--conv-layout nchw" in res.stderr and "Traceback" not in res.stderr
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        assert f.read() == before
    check = (
        "import numpy as np\n"
        "from autotune.tvmrt.startup import fast_start; fast_start()\n"
        "import tvm; from tvm import relax; from tvm.s_tir import meta_schedule as ms\n"
        "from autotune.frontend import relax as fe; from autotune.frontend.models import load_model\n"
        "from autotune.tvmrt.target import parse_target\n"
        f"db = ms.database.JSONDatabase(work_dir={wd!r}); t = parse_target('llvm')\n"
        "recs = db.get_all_tuning_records()\n"
        "marked = sum(fe.LAYOUT_FREE_ATTR in r.workload.mod['main'].attrs for r in recs)\n"
        "def rewritten(r):\n"
        "    s = tvm.s_tir.Schedule(r.workload.mod); r.trace.apply_to_schedule(s, remove_postproc=False)\n"
        "    return 'layout_rewrite_preproc' in s.mod.script()\n"
        "m = load_model('tiny'); mod, p = fe.import_exported(m.exported)\n"
        "mod = fe.convert_conv_layout(fe.bind_and_simplify(mod, p), 'nhwc')\n"
        "conv_tuned = all(db.has_workload(k.mod) for k in fe.extract_tasks(mod, t, True) if 'conv' in k.name)\n"
        "from autotune.api import compile_torch  # reads layout rewrite and conv layout off the database\n"
        "api = compile_torch(m.module, m.inputs, database_dir=" + repr(wd) + ")(*m.inputs).numpy()\n"
        "with t, db, tvm.transform.PassContext(opt_level=3):\n"
        "    packed = fe.prepack(mod, t)\n"
        "names = [g.name_hint for g in packed.get_global_vars()]\n"
        "ref = m.module(*m.inputs).detach().numpy()\n"
        "stock = relax.pipeline.static_shape_tuning_pipeline(0, t, work_dir=" + repr(wd) + ", cpu_weight_prepack=True)(mod)\n"
        "err_stock = float(np.abs(fe.VMRunner(tvm.compile(stock, target=t))(*m.inputs)[0] - ref).max())\n"
        "err_api = float(np.abs(api - ref).max())\n"
        "print(fe.tuned_conv_layout(db), conv_tuned, err_api)\n"
        "print(len(recs), marked, sum(map(rewritten, recs)), sum(n.endswith('_prepacked') for n in names),\n"
        "      sum(n.endswith('_weight_prepack') for n in names), err_stock)\n"
    )
    res = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    layout, conv_tuned, err_api, n, marked, rewritten, prepacked, left, err_stock = res.stdout.split()[-9:]
    assert layout == "nhwc" and conv_tuned == "True"  # the convolutions were tuned in NHWC
    assert float(err_api) < 1e-4  # the API found both settings in the database
    assert int(n) == 8 and int(marked) == 8  # every workload carries the layout-free mark
    assert int(rewritten) > 0  # MetaSchedule's RewriteLayout acted on the marked weights
    assert int(prepacked) > 0 and int(left) == 0  # packed programs in the model, the packing folded away
    assert float(err_stock) < 1e-4  # stock TVM's cpu_weight_prepack pipeline applies our database


def test_layout_rewrite_flag_checked():
    from autotune.errors import UserError
    from autotune.tuning.config import LAYOUT_REWRITE_DEFAULT, TuneConfig, resolve_layout_rewrite

    with pytest.raises(UserError, match="--layout-rewrite"):
        TuneConfig(layout_rewrite="yes")
    assert resolve_layout_rewrite("auto", "llvm", True, "wd") is True  # a work dir keeps its way
    assert resolve_layout_rewrite("auto", "llvm", False, "wd") is False
    assert resolve_layout_rewrite("on", "llvm", None, "wd") is True
    assert resolve_layout_rewrite("off", "llvm", None, "wd") is False
    assert resolve_layout_rewrite("auto", "llvm", None, "wd") is LAYOUT_REWRITE_DEFAULT["llvm"]  # a new work dir
    assert resolve_layout_rewrite("auto", "cuda", None, "wd") is False  # RewriteLayout is not in the cuda space
    with pytest.raises(UserError, match="tuned with layout rewrite off"):
        resolve_layout_rewrite("on", "llvm", False, "wd")


def test_contradicting_layout_flag_is_refused_before_tvm_starts(tmp_path):
    """A work dir tuned one way and a flag asking the other: refused at once (exit 2, one line), without the ~10 s
    of TVM and model start-up, and the work dir's files are left as they were."""
    wd = tmp_path / "wd"
    wd.mkdir()
    meta = {"model": "tiny", "target": {"kind": "llvm"}, "layout_rewrite": True, "conv_layout": "nhwc"}
    (wd / "autotune_workdir.json").write_text(json.dumps(meta))
    code = ("import sys\nfrom autotune.tune import main\nrc = main(sys.argv[1:])\n"
            "print(rc, 'tvm' in sys.modules, 'tvm_ffi' in sys.modules)\n")
    for flag, expect in ((["--layout-rewrite", "off"], "--layout-rewrite off"), (["--conv-layout", "nchw"], "--conv-layout nchw")):
        res = subprocess.run([sys.executable, "-c", code, "--model", "tiny", "--work-dir", str(wd), *flag], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert res.stdout.split() == ["2", "False", "False"], (res.stdout, res.stderr[-2000:])
        assert expect in res.stderr and "Traceback" not in res.stderr
    assert sorted(p.name for p in wd.iterdir()) == ["autotune_workdir.json"]
    assert json.loads((wd / "autotune_workdir.json").read_text()) == meta
