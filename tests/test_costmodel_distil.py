"""Knowledge distillation (kind ``seq-lstm-distil``): a student fitted beside a teacher's scores keeps only the
student; a saved teacher is reused only for the programs it was fitted on. No TVM."""

import json
import os

import numpy as np
import pytest

from autotune.costmodel import ModelFileError, create, load, registered_kind
from autotune.costmodel.inputs import normalized_throughput
from autotune.testing.programs import synthetic

QUICK_TEACHER = {"member_params": {"seq-lstm-cos": {"epochs": 3}}}
QUICK_STUDENT = {"epochs": 3, "soup": 10}


@pytest.fixture(scope="module")
def data():
    batch, lat, groups = synthetic(n_tasks=8, per_task=30)
    return batch, normalized_throughput(lat, groups), groups


@pytest.fixture(scope="module")
def teacher_dir(data, tmp_path_factory):
    """A quick seq-lstm-cos-x2 fitted with seed 1 on the first 6 tasks, saved as train --save-seeds would."""
    batch, y, groups = data
    part = groups < 6
    root = tmp_path_factory.mktemp("teachers")
    teacher = create("seq-lstm-cos-x2", **QUICK_TEACHER, seed=1).set_threads(1)
    teacher.fit(batch.subset(part), y[part], groups[part]).save(str(root / "seed1"))
    return str(root / "seed{seed}")


def test_a_saved_teacher_is_reused_only_on_its_own_programs(data, teacher_dir, tmp_path):
    batch, y, groups = data
    part = groups < 6
    model = create("seq-lstm-distil", teacher_from=teacher_dir, student_params=QUICK_STUDENT, seed=1).set_threads(1)
    model.fit(batch.subset(part), y[part], groups[part])
    assert registered_kind(model) == "seq-lstm-distil"  # teacher_from and the quick budget do not change the kind
    assert registered_kind(model.student_) == "seq-lstm-cos" and model.student_.soup == 10
    model.save(str(tmp_path / "m"))
    assert sorted(os.listdir(tmp_path / "m")) == ["model.json", "student"]  # the teacher is not kept
    again = load(str(tmp_path / "m"))
    np.testing.assert_allclose(again.predict(batch), model.predict(batch), rtol=1e-6)
    np.testing.assert_allclose(again.predict(batch), again.student_.predict(batch), rtol=1e-6)  # the student's scores
    teacher, scores = model.fit_teacher(batch.subset(part), y[part], groups[part])  # members predict once
    np.testing.assert_allclose(scores, load(teacher_dir.format(seed=1)).predict(batch.subset(part)), rtol=1e-6)
    other = groups >= 2  # overlaps the teacher's programs, is not them
    with pytest.raises(ModelFileError, match="not fitted on these training programs"):
        create("seq-lstm-distil", teacher_from=teacher_dir, student_params=QUICK_STUDENT, seed=1).fit(
            batch.subset(other), y[other], groups[other])
    with pytest.raises(ModelFileError, match="seed0"):  # another seed's teacher is not there
        create("seq-lstm-distil", teacher_from=teacher_dir, student_params=QUICK_STUDENT, seed=0).fit(
            batch.subset(part), y[part], groups[part])


def test_a_single_model_teacher_folder_is_refused(data, tmp_path):
    batch, y, groups = data
    create("seq-lstm-cos", epochs=1).set_threads(1).fit(batch, y, groups).save(str(tmp_path / "seed0"))
    with pytest.raises(ModelFileError, match="ensemble teacher"):
        create("seq-lstm-distil", teacher_from=str(tmp_path / "seed{seed}"), student_params=QUICK_STUDENT).fit(
            batch, y, groups)


def test_bad_settings_and_a_mismatched_folder_are_named(data, teacher_dir, tmp_path):
    batch, y, groups = data
    with pytest.raises(ValueError, match="weight"):
        create("seq-lstm-distil", weight=-1)
    with pytest.raises(ValueError, match="scale"):
        create("seq-lstm-distil", scale=0)
    with pytest.raises(ValueError, match="mode"):
        create("seq-lstm-distil", mode="kl")
    with pytest.raises(ValueError, match="at most 1"):
        create("seq-lstm-distil", mode="lambda", weight=1.5)
    with pytest.raises(ValueError, match="torch ranker"):
        create("seq-lstm-distil", student="xgb").fit(batch, y, groups)
    part = groups < 6
    model = create("seq-lstm-distil", teacher_from=teacher_dir, student_params=QUICK_STUDENT, seed=1).set_threads(1)
    model.fit(batch.subset(part), y[part], groups[part]).save(str(tmp_path / "m"))
    card = json.load(open(tmp_path / "m" / "model.json"))
    card["params"]["student"] = "seq-lstm-rows"
    json.dump(card, open(tmp_path / "m" / "model.json", "w"))
    with pytest.raises(ModelFileError, match="student folder holds 'seq-lstm-cos'"):
        load(str(tmp_path / "m"))


def test_make_train_costmodel_trains_the_teacher_as_its_own_row_does():
    from autotune.costmodel.train import is_sequence_model, params_for

    quick = params_for("seq-lstm-distil", quick=True)
    assert quick["teacher_params"] == params_for("seq-lstm-cos-x2", quick=True)
    assert quick["student_params"] == {"soup": 10, **params_for("seq-lstm-cos", quick=True)}
    assert is_sequence_model("seq-lstm-distil")
    model = create("seq-lstm-distil", **quick, seed=2)
    assert registered_kind(model) == "seq-lstm-distil"
    assert model._student().seed == 2 and model._student().epochs == 2
