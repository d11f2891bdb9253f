"""The CPU descriptor and program-meets-CPU features (autotune.hardware), and XGBoost reading them.

Real parts: LLVM's own feature lists for the ISA table, the committed two-CPU slices (experiments/transfer/data:
the same tasks measured on Zen 3 and as x86-64-v2 on one core) for the model."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from autotune import hardware as hw
from autotune.costmodel.inputs import N_STORE_FEATS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLICES = [os.path.join(ROOT, "experiments", "transfer", "data", d) for d in ("cpu-znver3-2c", "cpu-x86-64-v2-1c")]
LLVM_NAME = {"sse4_2": "sse4.2", "amx": "amx-tile"}


@pytest.mark.parametrize("mcpu", ["x86-64-v2", "znver3", "znver4", "rocketlake", "skylake-avx512", "sapphirerapids"])
def test_isa_table_matches_llvm(mcpu):
    """What the descriptor says a target may use is what LLVM says it enables for that -mcpu."""
    from autotune.tuning.costmodels import ISA_FEATURES, isa_features

    llvm = isa_features({"kind": "llvm", "mcpu": mcpu})
    ours = {LLVM_NAME.get(f, f) for f in hw.MCPU_ISA[mcpu]}
    assert ours & set(ISA_FEATURES) == set(llvm)


def _manifest(name: str) -> dict:
    with open(os.path.join(ROOT, "datasets", name, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)["hardware"]


def test_describe_shipped_datasets():
    v2, zen3, zen4, intel = (hw.describe(_manifest(n)) for n in
                             ("cpu-x86-64-v2-1c", "cpu-znver3-2c", "cpu-znver4-2c", "cpu-rocketlake-2c"))
    # the x86-64-v2 set was measured on the Zen 3 host: the target, not the host, sets the ISA and cores
    assert (v2["f32_lanes"], v2["cores"], v2["avx2"], v2["fma"]) == (4.0, 1.0, 0.0, 0.0)
    assert (zen3["f32_lanes"], zen3["cores"], zen3["fma"]) == (8.0, 2.0, 1.0)
    assert zen4["f32_lanes"] == intel["f32_lanes"] == 16.0 and intel["avx512vnni"] == 1.0
    assert v2["log2_l2_kib"] == zen3["log2_l2_kib"] == 9.0  # same host, same caches
    assert intel["log2_l2_kib"] == 11.0  # an AMX host: Sapphire Rapids-class 2 MiB L2 whatever LLVM names it
    assert {d["caches_source"] for d in (v2, zen3, zen4, intel)} == {"family table"}
    assert len(hw.descriptor(_manifest("cpu-znver3-2c"))) == len(hw.DESCRIPTOR_FIELDS)


def test_recorded_caches_win_and_unknown_mcpu_uses_host_flags():
    record = {"target": {"kind": "llvm", "mcpu": "some-future-cpu", "num-cores": 4},
              "host": {"mcpu": "znver3", "flags": ["sse4_2", "avx", "avx2", "fma", "avx512f"],
                       "caches": {"l1d_kib": 48, "l2_kib": 1024, "l3_kib": 65536}}}
    d = hw.describe(record)
    assert d["isa_source"] == "host flags" and d["vector_bits"] == 512.0 and d["cores"] == 4.0
    assert d["caches_source"] == "recorded" and d["log2_l1d_kib"] == np.log2(48)


def test_host_caches_reads_sysfs(tmp_path):
    for idx, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                               (3, "Unified", "105M")]):
        d = tmp_path / f"index{idx}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("coherency_line_size", 64)):
            (d / name).write_text(f"{value}\n")
    assert hw.host_caches(str(tmp_path)) == {"l1d_kib": 48, "l2_kib": 2048, "l3_kib": 105 * 1024, "line_bytes": 64}
    assert hw.host_caches(str(tmp_path / "missing")) is None


def _row(flops: float = 0.0, vec: float = 0.0, par: float = 0.0, unique_bytes: float = 0.0) -> np.ndarray:
    row = np.zeros(N_STORE_FEATS, np.float32)
    row[0] = np.log2(1 + flops)  # float mad count
    row[18] = np.log2(1 + vec)  # innermost vectorized length
    row[39] = np.log2(1 + par)  # parallel product
    row[57 + 4] = np.log2(1 + unique_bytes)  # first buffer's unique bytes
    return row


def test_interaction_features_follow_lanes_and_cores():
    zen3 = hw.descriptor(_manifest("cpu-znver3-2c"))
    v2 = hw.descriptor(_manifest("cpu-x86-64-v2-1c"))
    col = {n: i for i, n in enumerate(hw.INTERACTION_FIELDS)}
    rows = np.stack([_row(1e9, vec=8, par=64), _row(1e9, vec=0, par=64), _row(1e9, vec=8, par=1)])
    z, v = hw.interaction_features(rows, zen3), hw.interaction_features(rows, v2)
    secs = np.exp2(z[:, col["log2_compute_s"]])
    assert secs[1] / secs[0] == pytest.approx(8, rel=1e-3)  # unvectorized: 8x the time on 8 lanes
    assert secs[2] / secs[0] == pytest.approx(2, rel=1e-3)  # not parallel: one of two cores
    # one SSE core: 4 lanes without FMA, one core; the 8-wide loop uses 4 lanes
    assert np.exp2(v[0, col["log2_compute_s"]]) / secs[0] == pytest.approx(2 * 2 * 2, rel=1e-3)
    assert z[0, col["vec_under_lanes"]] == 0 and hw.interaction_features(rows[:1], hw.descriptor(
        _manifest("cpu-znver4-2c")))[0, col["vec_under_lanes"]] == 1  # 8 < 16 lanes
    big = hw.interaction_features(_row(1.0, unique_bytes=64 << 20)[None], zen3)[0]
    assert big[col["ws_over_l3"]] > 0 > hw.interaction_features(_row(1.0, unique_bytes=16 << 10)[None], zen3)[0, col["ws_over_l1"]]
    assert not np.isnan(hw.interaction_features(np.zeros((3, N_STORE_FEATS), np.float32), zen3)).any()


@pytest.fixture(scope="module")
def slices():
    from autotune.costmodel.data import load_training_data

    return [load_training_data(p) for p in SLICES]


def test_loaded_programs_carry_their_cpu(slices):
    zen3, v2 = slices
    assert zen3.batch.hw is not None and zen3.batch.hw.shape == (len(zen3), len(hw.DESCRIPTOR_FIELDS))
    lanes = hw.DESCRIPTOR_FIELDS.index("f32_lanes")
    assert set(zen3.batch.hw[:, lanes]) == {8.0} and set(v2.batch.hw[:, lanes]) == {4.0}
    assert zen3.subset(np.arange(5)).batch.hw.shape[0] == 5


def test_xgb_with_hardware_features_pools_cpus_and_round_trips(slices, tmp_path):
    from autotune.costmodel.online import concat_batches
    from autotune.costmodel.xgb import XGBCostModel

    zen3, v2 = slices
    both = concat_batches([zen3.batch, v2.batch])
    assert both.hw.shape[0] == len(zen3) + len(v2)
    y = np.concatenate([zen3.y, v2.y])
    groups = np.concatenate([zen3.groups, v2.groups + len(zen3.task_keys)])
    model = XGBCostModel(n_estimators=20, max_depth=4, nthread=1, hardware_features=True).fit(both, y, groups)
    plain = v2.batch.subset(np.arange(50))
    bare = type(plain)(plain.kinds, plain.numeric, plain.lengths, plain.store_feats, plain.offsets)  # the search's
    with pytest.raises(ValueError, match="no CPU descriptor"):
        model.predict(bare)
    model.set_hardware(v2.batch.hw[0])
    assert np.allclose(model.predict(bare), model.predict(plain))
    # the same programs scored for the other CPU rank differently only through the hardware columns
    assert not np.allclose(model.predict(plain), model.predict(plain.with_hardware(zen3.batch.hw[0])))
    model.save(str(tmp_path / "m"))
    loaded = XGBCostModel.load(str(tmp_path / "m"))
    assert np.allclose(loaded.predict(bare), model.predict(bare))
    # calibration's residual: shallow trees added on top, the base's trees and scores untouched
    before = model.predict(plain)
    more = model.boost_more(plain, v2.y[:50], v2.groups[:50], rounds=5, max_depth=2, learning_rate=0.1)
    assert more.booster_.num_boosted_rounds() == model.booster_.num_boosted_rounds() + 5
    assert np.allclose(model.predict(plain), before) and not np.allclose(more.predict(plain), before)
    # a batch with one part unmarked carries no CPU at all rather than a wrong one
    assert concat_batches([zen3.batch.subset(np.arange(3)), bare]).hw is None


def test_mlp_with_hardware_features_injects_the_cpu_per_store(slices, tmp_path):
    from autotune.costmodel.mlp import TensetMLPCostModel
    from autotune.costmodel.online import concat_batches

    zen3, v2 = slices
    both = concat_batches([zen3.batch, v2.batch])
    y = np.concatenate([zen3.y, v2.y])
    groups = np.concatenate([zen3.groups, v2.groups + len(zen3.task_keys)])
    model = TensetMLPCostModel(hidden_dim=32, epochs=2, num_threads=1, hardware_features=True).fit(both, y, groups)
    plain = v2.batch.subset(np.arange(40))
    bare = type(plain)(plain.kinds, plain.numeric, plain.lengths, plain.store_feats, plain.offsets)
    with pytest.raises(ValueError, match="no CPU descriptor"):
        model.predict(bare)
    model.set_hardware(v2.batch.hw[0])
    assert np.allclose(model.predict(bare), model.predict(plain), atol=1e-5)
    assert not np.allclose(model.predict(plain), model.predict(plain.with_hardware(zen3.batch.hw[0])))
    model.save(str(tmp_path / "mlp"))
    loaded = TensetMLPCostModel.load(str(tmp_path / "mlp"))
    assert np.allclose(loaded.predict(bare), model.predict(bare), atol=1e-5)


@pytest.mark.tvm
@pytest.mark.slow
def test_pooled_model_card_names_every_dataset_and_auto_can_take_it(tmp_path, monkeypatch):
    from autotune.costmodel import load
    from autotune.costmodel.data import manifest_sha256
    from autotune.costmodel.pooled import train_pooled

    out = str(tmp_path / "pooled" / "xgb")
    assert train_pooled(SLICES, "xgb", out) == 0
    card = json.load(open(os.path.join(out, "card.json"), encoding="utf-8"))
    for entry, path in zip(card["datasets"], SLICES):
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
            assert entry["dataset_manifest_sha256"] == manifest_sha256(json.load(f))
    assert {e["hardware_id"] for e in card["datasets"]} == {"cpu-znver3-2c", "cpu-x86-64-v2-1c"}
    assert load(out).hardware_features
    # auto on a CPU without its own model, with the pooled model switched on: told this target's descriptor
    from autotune.tuning import costmodels
    from autotune.tvmrt.target import parse_target

    monkeypatch.setattr(costmodels, "AUTO_POOLED_KIND", "xgb")
    target = parse_target('{"kind": "llvm", "mcpu": "x86-64-v2", "num-cores": 1}')
    resolved = costmodels.resolve("auto", target, models_dir=str(tmp_path))
    assert "one model over cpu-znver3-2c, cpu-x86-64-v2-1c" in resolved.used and resolved.fallback
    lanes = hw.DESCRIPTOR_FIELDS.index("f32_lanes")
    assert resolved.model.pretrained.hardware[lanes] == 4.0  # SSE: what the target may use, not the host
    monkeypatch.setattr(costmodels, "AUTO_POOLED_KIND", None)
    assert "one model over" not in costmodels.resolve("auto", target, models_dir=str(tmp_path)).used
