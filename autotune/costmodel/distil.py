"""A committee's ranking at one network's prediction cost (kind ``distilled``): knowledge distillation.

The registered ``seq-lstm-cos-x2`` (two seeds of the LSTM, scores averaged) ranks the held-out programs better
than either seed alone (``experiments/costmodel/results/variants.md``, "cosx2 − cos62r") but predicts at half
the rate, and the search pays for every candidate it ranks. ``DistilledCostModel`` fits the ``teacher`` kind,
scores the training programs with it, and fits the ``student`` kind (a torch ranker) on the true labels with
the teacher's soft targets (Hinton et al. 2015's soft targets, in RankNet's pairwise form: the student learns to
order pairs of a task's programs as surely as the teacher does). Only the student is kept: prediction,
fine-tuning and the saved folder are the student's.

Two ways to hand the teacher's orders on (``mode``): ``pairs`` adds ``weight`` x the soft pairwise cross-entropy over
every pair of a task's programs to the ranking loss (``_torch_train.soft_pair_loss``); ``lambda`` (the default) keeps LambdaRank's own pairs and
weights (the order near the top weighs most) and makes each pair's target the teacher's odds instead of 1 (``weight``
in [0, 1]: the share of the teacher in the target). Measured on the main set, three seeds each, teacher the saved
``seq-lstm-cos-x2`` fits (``results/variants.md``): ``pairs`` lowered top-1 and top-5 against the student alone
(``distil``); ``lambda`` at weight 1 (``distil-lam1``) read the committee's top-1 at one network's cost.

The teacher's scores are put on the student's scale first: centred and divided by their mean within-task
standard deviation (``ensemble.within_task_scale``), then multiplied by ``scale`` (a single seq-lstm-cos fit's
raw scores spread ~2.3 within a task: the x2 members' ``norm`` on the main set, 2026-12-07).

``teacher_from`` (experiments only): a folder holding an already fitted teacher, ``{seed}`` replaced by this
model's seed (e.g. ``runs/seeds/seq-lstm-cos-x2/seed{seed}``, what ``train --save-seeds`` writes), used
instead of fitting one. Accepted only for an ensemble teacher whose stored member scales match the ones its
members give on these training programs: the scales are computed on the fit's programs, so a teacher fitted
on other programs (e.g. on the held-out models') is refused.
"""

from __future__ import annotations

import os

import numpy as np

from .base import CostModel, ModelFileError
from .ensemble import within_task_scale
from .inputs import ProgramBatch

STUDENT_DIR = "student"


class DistilledCostModel(CostModel):
    name = "distilled"

    def __init__(self, teacher: str = "seq-lstm-cos-x2", student: str = "seq-lstm-cos",
                 teacher_params: dict | None = None, student_params: dict | None = None, weight: float = 1.0,
                 scale: float = 2.0, mode: str = "lambda", teacher_from: str | None = None, seed: int = 0) -> None:
        from ._torch_train import check_distil

        check_distil(mode, weight, "distilled")
        if not (isinstance(scale, (int, float)) and np.isfinite(scale) and scale > 0):
            raise ValueError(f"distilled: scale must be a number > 0; got {scale!r}")
        self.teacher, self.student = teacher, student
        self.teacher_params, self.student_params = teacher_params, student_params
        self.weight, self.scale, self.mode = float(weight), float(scale), mode
        self.teacher_from = teacher_from
        self.seed = seed

    def _student(self):
        from . import create_seeded, model_class
        from ._torch_train import TorchRankerModel

        if not issubclass(model_class(self.student), TorchRankerModel):
            raise ValueError(f"distilled: the student must be a torch ranker kind (seq*, ms-mlp); got {self.student!r}")
        return self._threaded(create_seeded(self.student, self.seed, **(self.student_params or {})))

    def _threaded(self, model: CostModel) -> CostModel:
        """``model`` on this model's thread count, once ``set_threads`` set one."""
        return model.set_threads(self.threads_) if getattr(self, "threads_", None) else model

    @property
    def uses_traces(self) -> bool:  # type: ignore[override]
        from . import model_class

        return model_class(self.student).uses_traces

    def set_threads(self, n: int) -> CostModel:
        self.threads_ = int(n)
        if getattr(self, "student_", None) is not None:
            self.student_.set_threads(n)
        return self

    def fit_teacher(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> tuple[CostModel, np.ndarray]:
        """The fitted teacher — ``teacher_from``'s (checked against these programs) or a fresh fit — and its
        scores on them (a saved teacher's members predict them once: for the check and for the scores)."""
        from . import create_seeded, load
        from .ensemble import EnsembleCostModel

        if self.teacher_from:
            path = self.teacher_from.replace("{seed}", str(self.seed))
            model = self._threaded(load(path))
            if not isinstance(model, EnsembleCostModel):
                raise ModelFileError(f"{path}: teacher_from takes an ensemble teacher (its member scales tell which "
                                     f"programs it was fitted on); it holds {model.name!r}")
            raw = [m.predict(X) for m in model.members_]
            seen = [within_task_scale(r, groups) for r in raw]
            if not np.allclose(np.asarray(seen), np.asarray(model.norm_), rtol=1e-4, atol=1e-5):
                raise ModelFileError(f"{path}: this teacher was not fitted on these training programs (member scales "
                                     f"{np.round(model.norm_, 4).tolist()} stored, {np.round(seen, 4).tolist()} here)")
            return model, np.asarray(model.combine(model.common_scale(raw))[0], dtype=np.float64)
        model = self._threaded(create_seeded(self.teacher, self.seed, **(self.teacher_params or {})))
        model.fit(X, y, groups, latency=self.fit_latency_)
        return model, model.predict(X)

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        student = self._student()
        _, t = self.fit_teacher(X, y, groups)
        mu, sd = within_task_scale(t, groups)
        student.fit_with_teacher(X, y, groups, (t - mu) / sd * self.scale, self.weight, latency=self.fit_latency_,
                                 mode=self.mode)
        self.student_ = student

    @property
    def history_(self) -> dict | None:
        """The student's fit record (epochs, soup), as a torch model's own ``history_``."""
        student = getattr(self, "student_", None)
        return getattr(student, "history_", None)

    def _predict(self, X: ProgramBatch):
        return self.student_.predict_with_spread(X)

    def _fine_tune_from(self, base, X, y, groups, steps) -> None:
        self.student_ = base.student_.fine_tune(X, y, groups, steps=steps)

    def _state(self, path: str) -> dict:
        self.student_.save(os.path.join(path, STUDENT_DIR))
        return {"student": STUDENT_DIR}

    def _restore(self, path: str, state: dict) -> None:
        from . import load, registered_kind

        sub = state.get("student", STUDENT_DIR)
        if not isinstance(sub, str) or os.path.basename(sub) != sub:
            raise ModelFileError(f"{os.path.join(path, 'model.json')}: bad student folder name {sub!r}")
        self.student_ = load(os.path.join(path, sub))
        if registered_kind(self.student_) != self.student:
            raise ModelFileError(f"{path}: its student folder holds {registered_kind(self.student_)!r}, its "
                                 f"model.json names {self.student!r}")
