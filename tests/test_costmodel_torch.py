"""The torch cost models (seq, ms-mlp) on synthetic programs: they learn a hidden latency function,
round-trip through save/load, and refuse bad input. No TVM."""

import json
import os
import re

import numpy as np
import pytest
import torch

from autotune.costmodel._torch_train import COSINE_FLOOR, lambda_rank_loss, listnet_loss
from autotune.costmodel.base import ModelFileError, NotFittedError
from autotune.costmodel.inputs import N_STORE_FEATS, ProgramBatch, normalized_throughput
from autotune.costmodel.metrics import pairwise_accuracy
from autotune.costmodel.mlp import TensetMLPCostModel
from autotune.costmodel.seq import SeqCostModel, selective_scan

torch.set_num_threads(1)

FAST = dict(epochs=12, num_threads=1, seed=0)


def fake_trace(rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """A MetaSchedule-like trace JSON with two tiling decisions and an unroll choice, padded by a
    variable number of GetLoops steps; returns it with its decision values (log2 tiles, unroll)."""
    a, c, k = int(rng.integers(0, 7)), int(rng.integers(0, 6)), int(rng.integers(0, 4))
    insts = [["GetSBlock", [], ["C", "main"], ["b0"]]]
    insts += [["GetLoops", ["b0"], [], ["l1", "l2"]] for _ in range(int(rng.integers(0, 40)))]
    base = len(insts)
    insts += [
        ["SamplePerfectTile", ["l1"], [2, 64], ["v3", "v4"]],
        ["Split", ["l1", ["v3", "v4"]], [], ["l5", "l6"]],
        ["SamplePerfectTile", ["l2"], [2, 32], ["v7", "v8"]],
        ["Split", ["l2", ["v7", "v8"]], [], ["l9", "l10"]],
        ["Reorder", ["l5", "l9", "l6", "l10"], [], []],
        ["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v11"]],
        ["Annotate", ["b0", "v11"], ["meta_schedule.unroll_explicit"], []],
    ]
    decisions = [[base, [2**a, 2 ** (6 - a)]], [base + 2, [2**c, 2 ** (5 - c)]], [base + 5, k]]
    return json.dumps([insts, decisions]), np.array([a, c, k], float)


def synthetic(n_groups: int = 30, per_group: int = 40, seed: int = 0, informative_stores: bool = True):
    """Programs in task groups; latency is a hidden linear function of the per-store features
    (which encode the decisions), or, with ``informative_stores=False``, of the decisions alone
    (seen only in the trace: the store features are then all zero)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_STORE_FEATS) * (rng.random(N_STORE_FEATS) < 0.1)
    traces, rows, offsets, latency, groups = [], [], [0], [], []
    for g in range(n_groups):
        shift = rng.normal(size=N_STORE_FEATS) * 0.3
        for _ in range(per_group):
            trace, dec = fake_trace(rng)
            n_stores = int(rng.integers(1, 4))
            feats = rng.random((n_stores, N_STORE_FEATS)) + shift
            if informative_stores:
                feats[:, :3] = [abs(dec[0] - 3), abs(dec[1] - 2), dec[2]]
                log_lat = float((feats @ w).sum() + 2.0 * feats[:, :3].sum())
            else:
                feats[:] = 0.0
                log_lat = abs(dec[0] - 3) + 0.7 * abs(dec[1] - 2) + 0.5 * dec[2]
            traces.append(trace)
            rows.append(feats.astype(np.float32))
            offsets.append(offsets[-1] + n_stores)
            latency.append(np.exp(0.3 * log_lat))
            groups.append(g)
    X = ProgramBatch.from_traces(traces, np.concatenate(rows), np.array(offsets))
    groups = np.array(groups)
    y = normalized_throughput(np.array(latency), groups)
    test = rng.random(len(groups)) < 0.25
    return X, y, groups, test


@pytest.fixture(scope="module")
def data():
    return synthetic()


def models():
    return [SeqCostModel(**FAST), TensetMLPCostModel(hidden_dim=64, **FAST)]


@pytest.fixture(scope="module", params=["seq", "ms-mlp"])
def fitted(request, data):
    X, y, groups, test = data
    model = next(m for m in models() if m.name == request.param)
    return model.fit(X.subset(~test), y[~test], groups[~test])


def test_learns_hidden_ranking(fitted, data):
    X, y, groups, test = data
    acc = pairwise_accuracy(-y[test], fitted.predict(X.subset(test)), groups[test])
    assert acc > 0.7, f"{fitted.name}: held-out pairwise accuracy {acc:.3f}"


def test_seq_learns_from_the_trace_alone():
    X, y, groups, test = synthetic(n_groups=24, seed=1, informative_stores=False)
    model = SeqCostModel(**FAST).fit(X.subset(~test), y[~test], groups[~test])
    acc = pairwise_accuracy(-y[test], model.predict(X.subset(test)), groups[test])
    assert acc > 0.7, f"seq on trace-only signal: held-out pairwise accuracy {acc:.3f}"


def test_save_load_identical(fitted, data, tmp_path):
    X, _, _, test = data
    fitted.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["model.json", "weights.pt"]
    loaded = type(fitted).load(str(tmp_path))
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(loaded.predict(X.subset(test)), fitted.predict(X.subset(test)))


def test_corrupt_weights_named(fitted, tmp_path):
    fitted.save(str(tmp_path))
    weights = tmp_path / "weights.pt"
    weights.write_bytes(b"not a torch file")
    with pytest.raises(ModelFileError, match=re.escape(str(weights))):
        type(fitted).load(str(tmp_path))
    weights.unlink()
    with pytest.raises(ModelFileError, match=re.escape(str(weights))):
        type(fitted).load(str(tmp_path))


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_contract_errors(model, data):
    X, y, groups, _ = data
    with pytest.raises(NotFittedError):
        model.predict(X)
    with pytest.raises(TypeError, match="ProgramBatch"):
        model.fit(X.packsum(), y, groups)


def test_wrong_input_type_after_fit(fitted, data):
    X = data[0]
    with pytest.raises(TypeError, match="ProgramBatch"):
        fitted.predict(X.packsum())


def test_deterministic_with_seed(data):
    X, y, groups, test = data
    part = np.nonzero(~test)[0][:400]
    kw = dict(FAST, epochs=2)
    a = SeqCostModel(**kw).fit(X.subset(part), y[part], groups[part]).predict(X.subset(test))
    b = SeqCostModel(**kw).fit(X.subset(part), y[part], groups[part]).predict(X.subset(test))
    np.testing.assert_array_equal(a, b)


def test_threads_restored(fitted, data):
    before = torch.get_num_threads()
    fitted.predict(data[0])
    assert torch.get_num_threads() == before


def test_seq_size_and_spread(data):
    assert SeqCostModel().num_parameters() < 1_000_000
    X, y, groups, test = data
    part = np.nonzero(~test)[0][:300]
    model = SeqCostModel(**dict(FAST, epochs=1, n_heads=3)).fit(X.subset(part), y[part], groups[part])
    score, spread = model.predict_with_spread(X.subset(test))
    assert score.shape == spread.shape == (int(test.sum()),)
    assert np.all(spread >= 0) and np.any(spread > 0)


def test_lambda_rank_loss_prefers_right_order():
    y = torch.tensor([[1.0, 0.5, 0.2, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    right = lambda_rank_loss(torch.tensor([[3.0, 2.0, 1.0, 9.0]]), y, mask)
    wrong = lambda_rank_loss(torch.tensor([[1.0, 2.0, 3.0, -9.0]]), y, mask)
    assert 0 < right < wrong  # the padded entry's score does not matter
    assert lambda_rank_loss(torch.tensor([[1.0, 2.0, 3.0, 0.0]]), y, mask) == pytest.approx(wrong.item())


def test_listnet_loss_is_the_top_one_cross_entropy():
    """Hand-computed: y = (1, 0.9, 0) at temperature 0.1 -> target softmax(10, 9, 0); the padded entry counts for
    nothing; per-group weights scale the groups' terms; the right order costs less than the reversed one."""
    y = torch.tensor([[1.0, 0.9, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    s = torch.tensor([[2.0, 1.0, 0.0, 50.0]])
    e = np.exp([10.0, 9.0, 0.0])
    target = e / e.sum()
    logp = np.array([2.0, 1.0, 0.0]) - np.log(np.exp([2.0, 1.0, 0.0]).sum())
    assert listnet_loss(s, y, mask, 0.1).item() == pytest.approx(-(target * logp).sum(), rel=1e-5)
    reversed_ = torch.tensor([[0.0, 1.0, 2.0, -50.0]])
    assert listnet_loss(reversed_, y, mask, 0.1) > listnet_loss(s, y, mask, 0.1)
    two = listnet_loss(s.repeat(2, 1), y.repeat(2, 1), mask.repeat(2, 1), 0.1, torch.tensor([1.0, 3.0]))
    assert two.item() == pytest.approx(2 * listnet_loss(s, y, mask, 0.1).item(), rel=1e-5)  # (1 + 3) / 2 groups
    with pytest.raises(ValueError, match="loss"):
        SeqCostModel(loss="pairwise")
    with pytest.raises(ValueError, match="list_temperature"):
        SeqCostModel(loss="listnet", list_temperature=0.0)


def test_listnet_training_learns_the_ranking(data):
    X, y, groups, test = data
    model = SeqCostModel(**{**FAST, "epochs": 4}, loss="both").fit(X.subset(~test), y[~test], groups[~test])
    assert pairwise_accuracy(-y[test], model.predict(X.subset(test)), groups[test]) > 0.7  # measured 0.82


def test_gain_scale_weighs_the_top_of_the_order():
    """A sharper gain makes a swap among the fastest programs cost more than a swap among the slow ones,
    relative to the plain gain (what top-1 reads is the order at the top)."""
    y = torch.tensor([[1.0, 0.9, 0.3, 0.2]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    top_swapped = torch.tensor([[3.0, 4.0, 2.0, 1.0]])
    low_swapped = torch.tensor([[4.0, 3.0, 1.0, 2.0]])

    def ratio(scale):
        return (lambda_rank_loss(top_swapped, y, mask, gain_scale=scale)
                / lambda_rank_loss(low_swapped, y, mask, gain_scale=scale)).item()

    assert ratio(8.0) > 1.3 * ratio(1.0) > 1.3  # measured: 1.25 at scale 1, 1.82 at scale 8
    with pytest.raises(ValueError, match="val_metric"):
        SeqCostModel(val_metric="top3")


def test_topk_early_stopping_fits_and_records_its_score(data):
    X, y, groups, test = data
    model = SeqCostModel(**{**FAST, "epochs": 4}, val_metric="topk", gain_scale=4.0)
    model.fit(X.subset(~test), y[~test], groups[~test])
    best = model.history_["val_topk"]
    assert 0 < best <= 1  # the mean of two top-k scores, each in (0, 1]
    assert "val_pairwise_accuracy" not in model.history_


def epoch_lr(lr: float, epoch: int, epochs: int) -> float:
    """The cosine schedule's documented rate for ``epoch`` (0-based) of ``epochs``."""
    return lr * (COSINE_FLOOR + (1.0 - COSINE_FLOOR) * 0.5 * (1.0 + np.cos(np.pi * epoch / epochs)))


def test_cosine_schedule_decays_the_rate_and_still_learns(data, monkeypatch):
    rates = [epoch_lr(2e-3, e, 10) for e in range(10)]
    assert rates[0] == pytest.approx(2e-3) and all(a > b for a, b in zip(rates, rates[1:]))
    assert rates[-1] == pytest.approx(2e-3 * (COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + np.cos(0.9 * np.pi))))
    with pytest.raises(ValueError, match="lr_schedule"):
        SeqCostModel(lr_schedule="step")
    seen = []
    real_step = torch.optim.AdamW.step

    def step(self, *args, **kwargs):  # records the rate every optimizer step runs at
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    X, y, groups, test = data
    model = SeqCostModel(**{**FAST, "epochs": 6, "patience": 100}, lr_schedule="cosine", mixer="lstm")
    model.fit(X.subset(~test), y[~test], groups[~test])
    assert sorted(set(seen), reverse=True) == pytest.approx([epoch_lr(2e-3, e, 6) for e in range(6)])
    acc = pairwise_accuracy(-y[test], model.predict(X.subset(test)), groups[test])
    assert acc > 0.7, f"seq-lstm with the cosine schedule: held-out pairwise accuracy {acc:.3f}"
    assert model.get_params()["lr_schedule"] == "cosine"


def test_selective_scan_matches_the_recurrence():
    g = torch.Generator().manual_seed(0)
    b, length, d, n = 3, 7, 5, 4
    x, dt = torch.randn(b, length, d, generator=g), torch.rand(b, length, d, generator=g)
    A, B, C = (
        -torch.rand(d, n, generator=g),
        torch.randn(b, length, n, generator=g),
        torch.randn(b, length, n, generator=g),
    )
    dt[1, 4:] = 0.0  # padding: the state must carry over unchanged
    h, want = torch.zeros(b, d, n), torch.zeros(b, length, d)
    for t in range(length):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * x[:, t])[:, :, None] * B[:, t, None, :]
        want[:, t] = (h * C[:, t, None, :]).sum(-1)
    torch.testing.assert_close(selective_scan(x, dt, A, B, C), want)
    with torch.inference_mode():  # the in-place path
        torch.testing.assert_close(selective_scan(x, dt, A, B, C), want)


def test_seq_padding_does_not_change_scores(data):
    X, y, groups, test = data
    model = SeqCostModel(**dict(FAST, epochs=1)).fit(X.subset(~test), y[~test], groups[~test])
    short, long = int(np.argmin(X.lengths)), int(np.argmax(X.lengths))
    assert X.lengths[long] > X.lengths[short] + 10
    alone = model.predict(X.subset([short]))[0]  # trimmed to its own length
    together = model.predict(X.subset([short, long]))[0]  # padded to the longest trace
    np.testing.assert_allclose(alone, together, rtol=1e-5, atol=1e-6)


def test_attention_mixer_builds_trains_and_round_trips(tmp_path):
    """``mixer="attention"`` (not registered yet: on the contract's synthetic tasks its fine-tuning gained
    < 0.01 pairwise, see the issue notes) still builds, learns and saves/loads like the others."""
    from autotune.costmodel import load
    from autotune.testing.programs import synthetic

    batch, lat, groups = synthetic()
    model = SeqCostModel(mixer="attention", epochs=15).fit(batch, normalized_throughput(lat, groups), groups)
    assert pairwise_accuracy(lat, model.predict(batch), groups) > 0.75
    model.save(str(tmp_path / "m"))
    again = load(str(tmp_path / "m"))
    assert again.mixer == "attention"
    np.testing.assert_allclose(again.predict(batch), model.predict(batch), rtol=1e-5)
    with pytest.raises(ValueError, match="mixer: unknown 'gru'"):
        SeqCostModel(mixer="gru")


def test_store_rows_see_what_the_pack_sum_adds_away(tmp_path):
    """``store_mode="rows"`` encodes each per-store row before pooling. Latency here is Σ_stores a·b of two
    features of the same store, with the stores' a and b shuffled between programs so that the pack-sum
    (Σa, Σb) cannot tell which a went with which b: the rows model must rank clearly better, and it round-trips."""
    from autotune.costmodel import load

    rng = np.random.default_rng(3)
    traces, rows, offsets, latency, groups = [], [], [0], [], []
    for g in range(24):
        for _ in range(32):
            trace, _ = fake_trace(rng)
            a, b = rng.random(3), rng.random(3)
            feats = np.zeros((3, N_STORE_FEATS), np.float32)
            feats[:, 0], feats[:, 1] = a, rng.permutation(b)
            traces.append(trace)
            rows.append(feats)
            offsets.append(offsets[-1] + 3)
            latency.append(float(np.exp(2.0 * (feats[:, 0] * feats[:, 1]).sum())))
            groups.append(g)
    X = ProgramBatch.from_traces(traces, np.concatenate(rows), np.array(offsets))
    groups, latency = np.array(groups), np.array(latency)
    y, test = normalized_throughput(latency, groups), groups >= 16
    acc = {}
    for mode in ("packsum", "rows"):
        model = SeqCostModel(**dict(FAST, epochs=15), store_mode=mode).fit(X.subset(~test), y[~test], groups[~test])
        acc[mode] = pairwise_accuracy(latency[test], model.predict(X.subset(test)), groups[test])
    assert acc["rows"] > 0.8 and acc["rows"] > acc["packsum"] + 0.05, acc
    model.save(str(tmp_path / "m"))
    again = load(str(tmp_path / "m"))
    assert again.store_mode == "rows"
    np.testing.assert_array_equal(again.predict(X.subset(test)), model.predict(X.subset(test)))
    with pytest.raises(ValueError, match="store_mode: unknown 'mean'"):
        SeqCostModel(store_mode="mean")


def test_seq_inference_on_worker_threads_matches_and_restores_threads(data, monkeypatch):
    """With 2 threads, search-time inference runs row slices on worker threads (each op on one core): the
    scores are those of the one-thread loop, and the process's thread count is what it was."""
    from autotune.costmodel import seq

    X, y, groups, test = data
    part = np.nonzero(~test)[0][:300]
    model = SeqCostModel(**dict(FAST, epochs=1)).fit(X.subset(part), y[part], groups[part])
    assert len(X) > 3 * seq.INFER_ROWS  # several slices
    model.num_threads = 2
    before = torch.get_num_threads()
    pooled = model.predict(X)
    assert torch.get_num_threads() == before
    torch.set_num_threads(2)
    try:  # a caller's own no-grad context (not inference mode) around the network, as transfer code has
        with torch.no_grad():
            direct = model.net_(*model._inputs(X, np.arange(len(X)), torch.device("cpu")))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(seq, "INFER_WORKERS", False)
    np.testing.assert_allclose(pooled, model.predict(X), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        one = model.net_(*model._inputs(X, np.arange(len(X)), torch.device("cpu")))
    np.testing.assert_allclose(direct.numpy(), one.numpy(), rtol=1e-5, atol=1e-6)


def test_subset_keeps_each_programs_store_rows_in_the_order_asked():
    """ProgramBatch.subset (index array with repeats, boolean mask, empty) gathers each program's own
    per-store rows, including programs without any, and its pack-sum matches the whole batch's."""
    rng = np.random.default_rng(0)
    progs = [rng.random((int(rng.integers(0, 5)), N_STORE_FEATS)).astype(np.float32) for _ in range(40)]
    batch = ProgramBatch.from_programs(progs)
    for idx in (np.array([3, 1, 7, 7, 0]), rng.random(40) < 0.3, np.array([], np.int64)):
        part = batch.subset(idx)
        picked = np.nonzero(idx)[0] if idx.dtype == bool else idx
        assert len(part) == len(picked)
        for j, i in enumerate(picked):
            np.testing.assert_array_equal(part.store_feats[part.offsets[j]:part.offsets[j + 1]], progs[i])
        np.testing.assert_allclose(part.packsum(), batch.packsum()[picked], rtol=1e-6)


def test_soup_averages_the_best_epochs_and_keeps_the_average_only_when_it_validates(data, monkeypatch):
    X, y, groups, test = data
    with pytest.raises(ValueError, match="soup"):
        SeqCostModel(soup=-1)
    seen = {}
    real_soup = SeqCostModel._soup

    def soup(self, net, top, best_acc, *args):  # records the candidates the fit hands over
        seen.update(top=top, best_acc=best_acc, args=args)
        return real_soup(self, net, top, best_acc, *args)

    monkeypatch.setattr(SeqCostModel, "_soup", soup)
    model = SeqCostModel(**{**FAST, "epochs": 6, "patience": 100}, mixer="lstm", soup=3)
    model.fit(X.subset(~test), y[~test], groups[~test])
    top, hist = seen["top"], model.history_
    assert [t[0] for t in top] == sorted((t[0] for t in top), reverse=True) and len({t[1] for t in top}) == 3
    assert hist["best_epoch"] in hist["soup"]["epochs"] and hist["soup"]["epochs"] == sorted(t[1] for t in top)
    assert top[0][0] == pytest.approx(seen["best_acc"])  # the best epoch heads the candidates
    mean = {k: torch.stack([t[2][k] for t in top]).mean(0) for k in top[0][2]}
    chosen = mean if hist["soup"]["kept"] else top[0][2]
    assert hist["soup"]["kept"] == (hist["soup"]["val"] >= seen["best_acc"])
    for k, v in model.net_.state_dict().items():
        torch.testing.assert_close(v, chosen[k])
    # soup_of: any number of the candidates averaged, whatever validation says; the fitted model is unchanged
    one, three = model.soup_of(1), model.soup_of(3)
    for k in top[0][2]:
        torch.testing.assert_close(one.net_.state_dict()[k], top[0][2][k])
        torch.testing.assert_close(three.net_.state_dict()[k], mean[k])
        torch.testing.assert_close(model.net_.state_dict()[k], chosen[k])
    assert three.history_["soup"]["epochs"] == hist["soup"]["epochs"]
    assert not np.allclose(one.predict(X.subset(test)), three.predict(X.subset(test)))
    with pytest.raises(ValueError, match="soup_of"):
        model.soup_of(4)
    # by hand on the fitted net: a bar the average cannot reach keeps the weights, one it clears takes the average
    before = {k: v.clone() for k, v in model.net_.state_dict().items()}
    assert real_soup(model, model.net_, top, 2.0, *seen["args"])["kept"] is False
    for k, v in model.net_.state_dict().items():
        torch.testing.assert_close(v, before[k])
    assert real_soup(model, model.net_, top, -1.0, *seen["args"])["kept"] is True
    for k, v in model.net_.state_dict().items():
        torch.testing.assert_close(v, mean[k])
    acc = pairwise_accuracy(-y[test], model.predict(X.subset(test)), groups[test])
    assert acc > 0.7, f"seq-lstm, soup of 3 epochs: held-out pairwise accuracy {acc:.3f}"


def test_task_weights_scale_each_groups_loss_by_its_latency(data):
    """``task_weight="latency"``: a group's ranking loss counts ∝ its best latency ** power, mean 1 over the
    training groups (hand-computed), and a fit without latencies says what it needs."""
    y = torch.tensor([[1.0, 0.5, 0.2], [1.0, 0.3, 0.1]])
    mask = torch.ones(2, 3, dtype=torch.bool)
    s = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.1, 0.9]])
    alone = [lambda_rank_loss(s[i : i + 1], y[i : i + 1], mask[i : i + 1]).item() for i in range(2)]
    both = lambda_rank_loss(s, y, mask, group_weight=torch.tensor([3.0, 0.0])).item()
    assert both == pytest.approx(3.0 * alone[0] / 2)  # the mean over groups of each group's weighted sum
    assert lambda_rank_loss(s, y, mask, group_weight=torch.ones(2)).item() == pytest.approx(sum(alone) / 2)

    groups = np.array([0, 0, 1, 1, 2, 2, 5])
    latency = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 17.0, 64.0]) * 1e-3
    model = SeqCostModel(task_weight="latency")
    model.fit_latency_ = latency
    w = model._group_weights(groups, np.arange(6))  # group 5 is not a training group: it keeps 1
    # best 1, 4, 16 ms; median 4: (0.25, 1, 4) ** 0.5 = (0.5, 1, 2), mean 7/6
    np.testing.assert_allclose(w, [3 / 7, 6 / 7, 12 / 7, 1, 1, 1])
    with pytest.raises(ValueError, match="task_weight"):
        SeqCostModel(task_weight="flops")
    X, y, groups, test = data
    with pytest.raises(ValueError, match="latency"):
        SeqCostModel(**{**FAST, "epochs": 1}, task_weight="latency").fit(X, y, groups)
    with pytest.raises(ValueError, match="latency"):
        SeqCostModel(**{**FAST, "epochs": 1}).fit(X, y, groups, latency=np.zeros(len(y)))
    lat = 1.0 / np.maximum(y, 1e-3) * (1.0 + groups)  # heavier groups later
    model = SeqCostModel(**{**FAST, "epochs": 3}, task_weight="latency").fit(X, y, groups, latency=lat)
    assert model.is_fitted and not hasattr(model, "fit_latency_")  # the latencies are not kept on the model


def test_soft_pair_loss_is_the_pairwise_cross_entropy_against_the_teachers_odds():
    """Hand-computed on one group of two valid programs and a padded one: pairs (0, 1) and (1, 0), each the
    binary cross-entropy of sigmoid(s_i - s_j) against sigmoid(t_i - t_j); the padded entry counts for nothing;
    the teacher's own scores cost least (its entropy), the reversed order more."""
    from autotune.costmodel._torch_train import soft_pair_loss

    s = torch.tensor([[1.0, 0.0, 40.0]])
    t = torch.tensor([[2.0, 0.0, -40.0]])
    mask = torch.tensor([[True, True, False]])

    def bce(logit, p):
        q = 1 / (1 + np.exp(-logit))
        return -(p * np.log(q) + (1 - p) * np.log(1 - q))

    p = 1 / (1 + np.exp(-2.0))
    want = (bce(1.0, p) + bce(-1.0, 1 - p)) / 2
    assert soft_pair_loss(s, t, mask).item() == pytest.approx(want, rel=1e-5)
    at_teacher = soft_pair_loss(t, t, mask).item()
    assert at_teacher < soft_pair_loss(s, t, mask).item() < soft_pair_loss(-s, t, mask).item()
    two = soft_pair_loss(s.repeat(2, 1), t.repeat(2, 1), mask.repeat(2, 1), torch.tensor([1.0, 3.0]))
    assert two.item() == pytest.approx(2 * want, rel=1e-5)  # (1 + 3) / 2 groups


def test_the_teacher_term_teaches_what_the_labels_do_not(data):
    """Labels that say nothing (every program of a task alike: the ranking loss has no pair to order) and a
    teacher that knows the true order: with the teacher term (mode ``pairs``: its own pairs, not the labels')
    the student ranks held-out programs by the truth (measured 0.94), without it the network stays as
    initialised (0.45)."""
    X, y, groups, test = data
    flat = np.ones_like(y)
    teacher = np.log(y) / np.log(y).std() * 2.0
    tr = ~test
    accs = {}
    for weight in (0.0, 1.0):
        model = SeqCostModel(**FAST).fit_with_teacher(X.subset(tr), flat[tr], groups[tr], teacher[tr], weight,
                                                      mode="pairs")
        accs[weight] = pairwise_accuracy(-y[test], model.predict(X.subset(test)), groups[test])
    assert accs[1.0] > 0.85 and accs[0.0] < 0.6, accs
    with pytest.raises(ValueError, match="teacher must be"):
        SeqCostModel(**FAST).fit_with_teacher(X, y, groups, teacher[:-1])
    with pytest.raises(ValueError, match="weight"):
        SeqCostModel(**FAST).fit_with_teacher(X, y, groups, teacher, weight=-1.0)


def test_lambda_rank_loss_with_soft_targets_from_a_teacher():
    """soft 0 is LambdaRank; soft 1 with a teacher unsure of the one labelled pair (equal scores: odds 1/2) costs
    that pair's weight x the cross-entropy against 1/2, minimal where the student is unsure too."""
    y = torch.tensor([[1.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False]])
    s = torch.tensor([[2.0, 0.0, 5.0]])
    unsure = torch.tensor([[0.3, 0.3, 0.0]])
    plain = lambda_rank_loss(s, y, mask)
    assert lambda_rank_loss(s, y, mask, teacher=unsure, soft=0.0).item() == pytest.approx(plain.item())
    # the one pair's weight: |1/log2(2) - 1/log2(3)| x |gain 1 - gain 0| / max DCG (= 1)
    w = (1.0 - 1.0 / np.log2(3.0))
    want = -w * (0.5 * np.log(1 / (1 + np.exp(-2.0))) + 0.5 * np.log(1 / (1 + np.exp(2.0))))
    assert lambda_rank_loss(s, y, mask, teacher=unsure, soft=1.0).item() == pytest.approx(want, rel=1e-5)
    assert lambda_rank_loss(torch.tensor([[0.0, 0.0, 5.0]]), y, mask, teacher=unsure, soft=1.0) < \
        lambda_rank_loss(s, y, mask, teacher=unsure, soft=1.0)
    sure = torch.tensor([[9.0, -9.0, 0.0]])  # a teacher sure of the labels' order gives LambdaRank back
    assert lambda_rank_loss(s, y, mask, teacher=sure, soft=1.0).item() == pytest.approx(plain.item(), rel=1e-4)
    X, yy, groups, _ = synthetic(n_groups=3, per_group=5)
    with pytest.raises(ValueError, match="mode"):
        SeqCostModel(**FAST).fit_with_teacher(X, yy, groups, yy, mode="kl")
    with pytest.raises(ValueError, match="at most 1"):
        SeqCostModel(**FAST).fit_with_teacher(X, yy, groups, yy, weight=2.0, mode="lambda")
    with pytest.raises(ValueError, match="lambdarank"):
        SeqCostModel(**FAST, loss="listnet").fit_with_teacher(X, yy, groups, yy, weight=0.5, mode="lambda")
