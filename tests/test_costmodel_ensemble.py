"""The ``ensemble`` cost model: members are the kinds' own models, one fixed scale each, a real spread. No TVM."""

import json
import os

import numpy as np
import pytest

from autotune.costmodel import ModelFileError, create, load, registered_kind
from autotune.costmodel.ensemble import within_task_scale
from autotune.costmodel.inputs import normalized_throughput
from autotune.testing.programs import synthetic

FAST = ["ms-xgb", "xgb-reg"]  # two XGBoost families: seconds to fit
PARAMS = {"ms-xgb": {"n_estimators": 60}, "xgb-reg": {"n_estimators": 40}}


@pytest.fixture(scope="module")
def data():
    batch, lat, groups = synthetic()
    return batch, lat, groups, normalized_throughput(lat, groups)


@pytest.fixture(scope="module")
def fitted(data):
    batch, _, groups, y = data
    return create("ensemble", members=FAST, member_params=PARAMS, seed=3).fit(batch, y, groups)


def test_within_task_scale_hand_computed():
    score = np.array([1.0, 3.0, 10.0, 14.0, 7.0])
    groups = np.array([0, 0, 1, 1, 2])  # task 2 has one program: no spread to count
    mean, sd = within_task_scale(score, groups)
    assert mean == pytest.approx(7.0) and sd == pytest.approx((1.0 + 2.0) / 2)
    assert within_task_scale(np.ones(3), np.array([0, 0, 1])) == (1.0, 1.0)  # no task spreads: sd 1


def test_members_are_the_kinds_own_models_on_one_fixed_scale(data, fitted):
    batch, _, groups, y = data
    scaled = []
    for kind, member, (mu, sd) in zip(FAST, fitted.members_, fitted.norm_):
        alone = create(kind, **PARAMS[kind], seed=3).fit(batch, y, groups)  # what the kind's own row trains
        np.testing.assert_allclose(member.predict(batch), alone.predict(batch), rtol=1e-6)
        assert (mu, sd) == pytest.approx(within_task_scale(alone.predict(batch), groups))
        scaled.append((alone.predict(batch) - mu) / sd)
    score, spread = fitted.predict_with_spread(batch)
    np.testing.assert_allclose(score, np.mean(scaled, 0), rtol=1e-6)
    np.testing.assert_allclose(spread, np.std(scaled, 0), rtol=1e-6, atol=1e-12)
    assert spread.max() > 0  # two families disagree somewhere: the spread the samplers read
    # the scale is fixed at fit time: a program's score does not depend on the rest of its batch
    some = np.arange(0, len(batch), 7)
    np.testing.assert_allclose(fitted.predict(batch.subset(some)), score[some], rtol=1e-6)


def test_saved_and_loaded_and_registered(data, fitted, tmp_path):
    batch = data[0]
    path = str(tmp_path / "ens")
    fitted.save(path)
    again = load(path)
    assert registered_kind(again) == "ensemble" and again.members == FAST
    assert sorted(os.listdir(path)) == ["member0", "member1", "model.json"]
    np.testing.assert_allclose(again.predict(batch), fitted.predict(batch), rtol=1e-6)
    assert not again.uses_traces  # XGBoost members only: the search may skip the traces
    assert create("ensemble", members=["ms-xgb", "seq-lstm"]).uses_traces
    # a member folder that is not what model.json names is refused, naming the folder
    meta = json.load(open(os.path.join(path, "model.json")))
    meta["params"]["members"] = ["xgb-reg", "ms-xgb"]
    json.dump(meta, open(os.path.join(path, "model.json"), "w"))
    with pytest.raises(ModelFileError, match=str(tmp_path)):
        load(path)


def test_threads_reach_every_member(data, fitted):
    batch, _, groups, y = data
    assert all(m.nthread == 2 for m in fitted.members_)
    one = create("ensemble", members=FAST, member_params=PARAMS).set_threads(1).fit(batch, y, groups)
    assert [m.nthread for m in one.members_] == [1, 1]


@pytest.mark.parametrize("members", [["ms-xgb"], ["ms-xgb", "nope"], ["ms-xgb", "ensemble"],
                                     ["ms-xgb", "seq-lstm-x3"]])
def test_bad_members_are_named(data, members):
    batch, _, groups, y = data
    with pytest.raises(ValueError, match="members must be 2 or more kinds"):
        create("ensemble", members=members).fit(batch, y, groups)


def test_member_seeds_by_hand():
    assert create("ensemble", members=["xgb", "ms-mlp"], seed=4).member_seeds() == [4, 4]
    # copies of a kind: seeds s*n .. s*n+n-1, so ensembles of different seeds share no member
    assert create("seq-lstm-x3", seed=0).member_seeds() == [0, 1, 2]
    assert create("seq-lstm-x3", seed=2).member_seeds() == [6, 7, 8]
    assert create("ensemble", members=["xgb", "ms-mlp", "xgb"], seed=1).member_seeds() == [2, 1, 3]


def test_a_seed_ensemble_is_its_kind_at_each_seed(data, tmp_path):
    from autotune.costmodel.train import is_sequence_model, params_for

    batch, _, groups, y = data
    params = {"xgb-reg": {"n_estimators": 30, "subsample": 0.7}}  # subsampling: the seed matters
    seeds = create("ensemble", members=["xgb-reg"] * 3, member_params=params, seed=1).fit(batch, y, groups)
    alone = [create("xgb-reg", **params["xgb-reg"], seed=s).fit(batch, y, groups) for s in (3, 4, 5)]
    for member, model in zip(seeds.members_, alone):
        np.testing.assert_allclose(member.predict(batch), model.predict(batch), rtol=1e-6)
    assert not np.allclose(alone[0].predict(batch), alone[1].predict(batch))  # different seeds, different fits
    assert seeds.predict_with_spread(batch)[1].max() > 0  # the seeds' disagreement is the spread
    path = str(tmp_path / "seeds")
    seeds.save(path)
    assert load(path).members == ["xgb-reg"] * 3
    np.testing.assert_allclose(load(path).predict(batch), seeds.predict(batch), rtol=1e-6)
    # the registered seed ensemble: named as such when loaded, a sequence model for the done-when checks,
    # each seq-lstm member trained with what the seq-lstm row gets
    assert registered_kind(create("seq-lstm-x3")) == "seq-lstm-x3"
    assert registered_kind(create("ensemble")) == "ensemble"
    assert is_sequence_model("seq-lstm-x3") and not is_sequence_model("ensemble")
    assert params_for("seq-lstm-x3", quick=True)["member_params"] == {"seq-lstm": params_for("seq-lstm", quick=True)}
    # seq-lstm-cos-x2: what the seq-lstm-cos row trains with, plus the soup the registry sets for its members
    assert is_sequence_model("seq-lstm-cos-x2")
    assert params_for("seq-lstm-cos-x2", quick=True)["member_params"] == {
        "seq-lstm-cos": {"soup": 10, **params_for("seq-lstm-cos", quick=True)}}
    assert create("seq-lstm-cos-x2", seed=2).member_seeds() == [4, 5]


def test_an_ensemble_of_fits_already_made_is_the_one_fit_would_make(data):
    from autotune.costmodel.base import NotFittedError
    from autotune.costmodel.ensemble import EnsembleCostModel

    batch, _, groups, y = data
    params = {"n_estimators": 30, "subsample": 0.7}
    fitted = create("ensemble", members=["xgb-reg"] * 2, member_params={"xgb-reg": params}, seed=1).fit(batch, y, groups)
    alone = [create("xgb-reg", **params, seed=s).fit(batch, y, groups) for s in fitted.member_seeds()]  # seeds 2, 3
    made = EnsembleCostModel.from_fitted(alone, batch, groups, seed=1)
    assert made.members == ["xgb-reg", "xgb-reg"]
    np.testing.assert_allclose(made.norm_, fitted.norm_, rtol=1e-6)
    np.testing.assert_allclose(made.predict_with_spread(batch), fitted.predict_with_spread(batch), rtol=1e-6)
    with pytest.raises(NotFittedError, match="every member must be fitted"):
        EnsembleCostModel.from_fitted([alone[0], create("xgb-reg")], batch, groups)
    with pytest.raises(ValueError, match="members must be 2 or more kinds"):
        EnsembleCostModel.from_fitted(alone[:1], batch, groups)


def test_train_gives_each_member_its_own_row_settings(tmp_path):
    from autotune.costmodel.train import params_for

    hp = tmp_path / "hp"
    hp.mkdir()
    (hp / "xgb.json").write_text(json.dumps({"params": {"max_depth": 5}}))
    params = params_for("ensemble", quick=True, hparams_dir=str(hp))
    members = create("ensemble").members
    assert list(params["member_params"]) == members
    for kind in members:
        assert params["member_params"][kind] == params_for(kind, quick=True, hparams_dir=str(hp))
    if "xgb" in members:
        assert params["member_params"]["xgb"] == {"max_depth": 5, "n_estimators": 40}


def test_risk_scores_a_lower_confidence_bound(data, fitted, tmp_path):
    """risk k: score = the members' mean - k x their spread (the spread itself unchanged); saved with the model;
    a risk that is not a number >= 0 is refused, naming the keyword."""
    batch, _, groups, y = data
    members = fitted.member_scores(batch)
    bound = create("ensemble", members=FAST, member_params=PARAMS, seed=3, risk=1.5).fit(batch, y, groups)
    score, spread = bound.predict_with_spread(batch)
    np.testing.assert_allclose(score, members.mean(0) - 1.5 * members.std(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(spread, members.std(0), rtol=1e-6, atol=1e-12)
    assert not np.allclose(score, fitted.predict(batch))
    bound.save(str(tmp_path / "lcb"))
    again = load(str(tmp_path / "lcb"))
    assert again.risk == 1.5
    np.testing.assert_allclose(again.predict(batch), score, rtol=1e-6, atol=1e-9)
    for bad in (-1, float("nan"), "high"):
        with pytest.raises(ValueError, match="risk must be a number >= 0"):
            create("ensemble", members=FAST, risk=bad)
