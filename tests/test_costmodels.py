"""``--cost-model`` resolution (autotune.tuning.costmodels): one table, nothing falls back silently.

Model folders are small XGBoost models fitted on synthetic programs, with cards naming their
hardware; targets are explicit, so the results do not depend on this host's CPU.
"""

import json
import re

import pytest

from autotune.errors import UserError

pytestmark = pytest.mark.tvm

ROCKETLAKE = {"kind": "llvm", "mcpu": "rocketlake", "num-cores": 2}  # AVX-512, hardware id cpu-rocketlake-2c
ZEN3 = {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}
V2 = {"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 1}


def _target(config):
    from autotune.tvmrt.target import parse_target

    return parse_target(dict(config))


def _save(models_dir, hw, folder, target, kind=None):
    """A fitted ``kind`` model (default: the folder's name) in models_dir/hw/folder with a card for ``hw``;
    torch kinds trained for one epoch."""
    from autotune.costmodel import create
    from autotune.costmodel.inputs import normalized_throughput
    from autotune.testing.programs import synthetic

    batch, lat, groups = synthetic(n_tasks=3, per_task=20)
    path = models_dir / hw / folder
    kind = kind or folder
    quick = {"epochs": 1} if kind in ("seq", "seq-lstm", "seq-top", "ms-mlp") else {"n_estimators": 5}
    if kind == "ensemble":
        quick = {"members": ["ms-xgb", "xgb-reg"], "member_params": {"ms-xgb": quick, "xgb-reg": quick}}
    create(kind, **quick).fit(batch, normalized_throughput(lat, groups), groups).save(str(path))
    card = {"kind": kind, "trained": "2026-01-01T00:00:00Z", "hardware": {"hardware_id": hw, "target": target}}
    (path / "card.json").write_text(json.dumps(card))
    return str(path)


@pytest.fixture
def models(tmp_path):
    root = tmp_path / "models"
    _save(root, "cpu-znver3-2c", "xgb", ZEN3)
    _save(root, "cpu-znver3-2c", "seq-lstm-cos", ZEN3, kind="seq")  # the seq family's folder (its shipped recipe)
    _save(root, "cpu-x86-64-v2-1c", "xgb", V2)
    _save(root, "cuda-sm_90", "xgb", {"kind": "cuda", "arch": "sm_90"})
    return root


def test_one_table_of_names_for_the_cli():
    from autotune.tune import build_parser
    from autotune.tuning.costmodels import AUTO_ORDER, COST_MODELS, check_name

    with pytest.raises(UserError, match="valid: auto, stock, xgb, mlp, seq, ensemble, random$"):
        check_name("magic")
    with pytest.raises(UserError, match="retired; use --cost-model mlp"):
        check_name("ms-mlp")
    assert set(AUTO_ORDER) <= set(COST_MODELS) and AUTO_ORDER[0] == "xgb"
    help_text = re.sub(r"-\s+", "-", build_parser().format_help())  # argparse wraps lines at hyphens too
    assert all(f"{name}:" in help_text.replace("\n", " ") for name in COST_MODELS)


def test_auto_takes_this_hardwares_model_xgb_first(models):
    from autotune.tuning.costmodels import resolve

    resolved = resolve("auto", _target(ZEN3), models_dir=str(models))
    assert resolved.card["path"] == str(models / "cpu-znver3-2c" / "xgb") and resolved.fallback is None
    report = resolved.report()["cost_model_resolved"]
    assert report["pretrained_kind"] == "xgb" and report["trained_for"] == "cpu-znver3-2c"
    assert report["online_update"] == "finetune"


def test_auto_without_a_model_for_this_hardware_takes_the_nearest(models, caplog):
    from autotune.tuning.costmodels import resolve

    with caplog.at_level("WARNING", logger="autotune.tuning.costmodels"):
        resolved = resolve("auto", _target(ROCKETLAKE), models_dir=str(models))
    # znver3 (AVX2, 2 cores) is nearer to an AVX-512 2-core CPU than x86-64-v2 (1 core, no AVX); cuda never;
    # on other hardware auto prefers its ms-mlp (AUTO_ORDER_OTHER_HARDWARE), if the fixture has one
    from autotune.tuning.costmodels import AUTO_ORDER_OTHER_HARDWARE, folder_of

    first = next(folder_of(k) for k in AUTO_ORDER_OTHER_HARDWARE
                 if (models / "cpu-znver3-2c" / folder_of(k) / "model.json").exists())
    assert resolved.card["path"] == str(models / "cpu-znver3-2c" / first)
    assert resolved.fallback == "no pretrained model for cpu-rocketlake-2c"
    assert "nearest hardware" in resolved.used and "cpu-znver3-2c" in resolved.used and "avx512f" in resolved.used
    assert resolved.model.learner.mode == "finetune"  # adapted online
    assert "cpu-znver3-2c" in caplog.text and "nearest" in caplog.text
    report = resolved.report()
    assert report["cost_model_resolved"]["trained_for"] == "cpu-znver3-2c"
    assert report["cost_model_used"] == resolved.used


def test_nearest_hardware_prefers_no_missing_isa_features(models):
    from autotune.tuning.costmodels import nearest_pretrained

    v2_2c = _target({"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 2})
    path, card, reason = nearest_pretrained(v2_2c, str(models))
    assert card["hardware_id"] == "cpu-x86-64-v2-1c", reason  # znver3 has AVX2/FMA this CPU lacks
    assert "1 cores, this target 2" in reason


def test_hardware_distance_rule():
    from autotune.tuning.costmodels import hardware_distance

    assert hardware_distance(ROCKETLAKE, {"kind": "cuda", "arch": "sm_90"}) is None
    zen3, v2 = hardware_distance(ROCKETLAKE, ZEN3), hardware_distance(ROCKETLAKE, V2)
    assert zen3[0] == v2[0] == 0  # neither has a feature rocketlake lacks
    assert zen3 < v2 and zen3[1] == 3  # avx512f, avx512bw, avx512vnni missing; v2 misses more (and 1 core)
    assert hardware_distance(V2, ZEN3)[0] == 3  # avx, avx2, fma that x86-64-v2 lacks


def test_auto_without_any_model_is_stock_and_says_so(tmp_path, caplog):
    from autotune.tuning.costmodels import resolve

    with caplog.at_level("WARNING", logger="autotune.tuning.costmodels"):
        resolved = resolve("auto", _target(ROCKETLAKE), models_dir=str(tmp_path / "none"))
    assert type(resolved.model).__name__ == "XGBModel" and resolved.card is None
    assert "no pretrained model" in resolved.fallback and "stock XGBModel" in caplog.text


def test_explicit_kind_without_a_model_takes_the_nearest_hardwares_of_that_kind(models, caplog):
    from autotune.tuning.costmodels import resolve

    with caplog.at_level("WARNING", logger="autotune.tuning.costmodels"):
        resolved = resolve("xgb", _target(ROCKETLAKE), models_dir=str(models))
    assert resolved.card["path"] == str(models / "cpu-znver3-2c" / "xgb")
    assert resolved.model.learner.mode == "finetune"  # adapted online
    assert resolved.fallback == "no pretrained xgb model for cpu-rocketlake-2c; nearest hardware's: cpu-znver3-2c"
    assert "nearest hardware's xgb" in resolved.used and "avx512f" in resolved.used
    assert "WARNING" in caplog.text and "nearest hardware's xgb" in caplog.text
    report = resolved.report()
    assert report["cost_model_used"] == resolved.used and report["cost_model"] == "xgb"
    assert report["cost_model_resolved"]["trained_for"] == "cpu-znver3-2c"
    assert report["cost_model_resolved"]["pretrained_kind"] == "xgb"
    assert report["cost_model_resolved"]["fallback"] == resolved.fallback


def test_explicit_kind_is_never_swapped_for_a_nearer_hardwares_other_kind(models):
    """x86-64-v2 2-core: auto takes the nearer x86-64-v2-1c xgb; seq exists only for znver3, so seq takes that."""
    from autotune.tuning.costmodels import resolve

    v2_2c = _target({"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 2})
    assert resolve("auto", v2_2c, models_dir=str(models)).card["hardware_id"] == "cpu-x86-64-v2-1c"
    resolved = resolve("seq", v2_2c, models_dir=str(models))
    assert resolved.card["path"] == str(models / "cpu-znver3-2c" / "seq-lstm-cos")
    assert "nearest hardware's seq" in resolved.used and resolved.model.learner.mode == "finetune"


def test_explicit_kind_no_hardware_has_is_online_only_and_says_so(models, caplog):
    from autotune.tuning.costmodels import resolve

    with caplog.at_level("WARNING", logger="autotune.tuning.costmodels"):
        resolved = resolve("mlp", _target(ROCKETLAKE), models_dir=str(models))
    assert resolved.model.pretrained is None and resolved.report()["cost_model_resolved"]["online_update"] == "online"
    text = caplog.text
    assert "no pretrained mlp model for cpu-rocketlake-2c or any llvm hardware" in text and "online-only" in text
    assert resolved.fallback and "online-only" in resolved.used


def test_saved_ms_xgb_folder_is_our_model_not_the_stock_one(tmp_path):
    from autotune.tuning.costmodels import resolve

    folder = _save(tmp_path / "models", "cpu-znver3-2c", "ms-xgb", ZEN3, kind="ms-xgb")
    target = _target(ZEN3)
    for name in ("xgb", "auto"):  # our re-implementation is a recipe of the xgb family
        resolved = resolve(name, target, path=folder)
        assert type(resolved.model.pretrained).__name__ == "MSXGBCostModel", name
        assert resolved.report()["cost_model_resolved"]["pretrained_kind"] == "ms-xgb"
    assert type(resolve("stock", target).model).__name__ == "XGBModel"  # stock is MetaSchedule's own
    with pytest.raises(UserError, match="holds a 'ms-xgb' model \\(family xgb\\); pass --cost-model auto or xgb"):
        resolve("mlp", target, path=folder)
    with pytest.raises(UserError, match="trained for cpu-znver3-2c, not cpu-rocketlake-2c"):
        resolve("xgb", _target(ROCKETLAKE), path=folder)


def test_a_search_without_a_cost_model_gets_none(models, caplog):
    from autotune.tuning.costmodels import resolve

    assert resolve("auto", _target(ZEN3), models_dir=str(models), uses_cost_model=False).model is None
    with caplog.at_level("WARNING", logger="autotune.tuning.costmodels"):
        resolved = resolve("xgb", _target(ZEN3), models_dir=str(models), uses_cost_model=False)
    assert resolved.model is None and "--cost-model xgb is not used" in caplog.text


def test_report_reads_the_model_object_not_the_label():
    """A resolver that fell back without saying so still cannot pass: the report's fields come from the object."""
    from autotune.tuning.costmodels import Resolved, resolve

    stock = resolve("stock", _target(ZEN3)).model
    report = Resolved(stock, "pretrained xgb (a label that lies)", requested="xgb").report()["cost_model_resolved"]
    assert report["class"] == "XGBModel" and report["pretrained_kind"] is None and report["online_update"] is None


def test_tune_needs_a_cost_model_for_a_search_that_uses_one(tmp_path):
    from autotune.tuning.config import SearchConfig
    from autotune.tuning.costmodels import Resolved
    from autotune.tuning.tuner import tune

    with pytest.raises(ValueError, match="evolutionary search needs a cost model"):
        tune([], _target(ZEN3), None, None, work_dir=str(tmp_path), max_trials=1,
             cost_model=Resolved(None, "none"), search=SearchConfig())


def test_auto_on_other_hardware_prefers_mlp_but_not_at_home(models):
    """AUTO_ORDER_OTHER_HARDWARE (mlp first, from the real-budget runs) only applies to another
    hardware's models; on its own hardware auto keeps AUTO_ORDER (xgb first)."""
    from autotune.tuning.costmodels import resolve

    _save(models, "cpu-znver3-2c", "ms-mlp", ZEN3)
    away = resolve("auto", _target(ROCKETLAKE), models_dir=str(models))
    assert away.card["path"] == str(models / "cpu-znver3-2c" / "ms-mlp") and "ms-mlp" in away.used
    home = resolve("auto", _target(ZEN3), models_dir=str(models))
    assert home.card["path"] == str(models / "cpu-znver3-2c" / "xgb")


def test_registered_kind_is_read_from_the_parameters():
    """A saved seq-lstm's model.json says kind "seq" (one class): the registry name comes from its parameters,
    the most specific entry that matches (TVM-free)."""
    from autotune.costmodel import REGISTRY, create, registered_kind

    for kind in ("xgb", "xgb-reg", "ms-xgb", "seq", "seq-lstm", "seq-lstm-cos", "seq-lstm-rows", "seq-top", "seq-rows", "ms-mlp",
                 "ensemble", "seq-lstm-x3", "seq-lstm-cos-x2", "seq-lstm-distil"):
        assert kind in REGISTRY and registered_kind(create(kind)) == kind
    assert registered_kind(create("seq-lstm-cos", epochs=2)) == "seq-lstm-cos"  # a shorter fit is the same kind
    # also a committee whose members train shorter; without the members' soup it is another committee
    quick = {"seq-lstm-cos": {"soup": 10, "epochs": 2}}
    assert registered_kind(create("seq-lstm-cos-x2", member_params=quick)) == "seq-lstm-cos-x2"
    assert registered_kind(create("ensemble", members=["seq-lstm-cos"] * 2)) == "ensemble"
    assert registered_kind(create("seq-lstm", epochs=45)) == "seq-lstm"
    assert registered_kind(create("seq", mixer="attention")) == "seq"  # no entry of its own: the class's name


def test_seq_recipes_load_as_the_seq_family_and_a_mismatched_folder_is_refused(models, tmp_path):
    """--cost-model names the family; a recipe's folder is reached with --cost-model-path and reported as that
    recipe; a family folder holding another family's model is refused, not run under the wrong name."""
    from autotune.tuning.costmodels import resolve

    lstm = _save(models, "cpu-znver3-2c", "seq-lstm", ZEN3)
    resolved = resolve("seq", _target(ZEN3), path=lstm)
    report = resolved.report()["cost_model_resolved"]
    assert report["pretrained_kind"] == "seq-lstm" and resolved.fallback is None and "pretrained seq-lstm from" in resolved.used
    assert resolve("seq", _target(ZEN3), models_dir=str(models)).report()["cost_model_resolved"]["pretrained_kind"] == "seq"
    with pytest.raises(UserError, match="holds a 'seq-lstm' model \\(family seq\\); pass --cost-model auto or seq"):
        resolve("xgb", _target(ZEN3), path=lstm)
    _save(models, "cpu-znver3-2c", "ms-mlp", ZEN3, kind="xgb")  # the mlp family's folder, holding an xgb
    with pytest.raises(UserError, match="holds a 'xgb' model"):
        resolve("mlp", _target(ZEN3), models_dir=str(models))
    with pytest.raises(UserError, match="retired; use --cost-model seq"):
        resolve("seq-lstm", _target(ZEN3), models_dir=str(models))


def test_ensemble_resolves_by_name_with_its_spread(models):
    """``--cost-model ensemble`` loads the committee (its own kind in the report), and on other hardware the
    nearest hardware's ensemble, said so."""
    from autotune.tuning.costmodels import resolve

    path = _save(models, "cpu-znver3-2c", "ensemble", ZEN3)
    resolved = resolve("ensemble", _target(ZEN3), models_dir=str(models))
    assert resolved.card["path"] == path and resolved.report()["cost_model_resolved"]["pretrained_kind"] == "ensemble"
    assert resolved.fallback is None and "pretrained ensemble from" in resolved.used
    away = resolve("ensemble", _target(ROCKETLAKE), models_dir=str(models))
    assert away.card["path"] == path and "nearest hardware's ensemble" in away.used
    with pytest.raises(UserError, match="holds a 'ensemble' model"):
        resolve("xgb", _target(ZEN3), path=path)
