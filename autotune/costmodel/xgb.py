"""XGBoost cost models on MetaSchedule per-store features.

- ``XGBCostModel`` (kind "xgb"): per-store features pack-summed per program (TenSet), trained
  with a ranking objective grouped by task (``objective="rank:pairwise"``), or as a regression
  on normalized throughput (``objective="reg:squarederror"``) for comparison.
- ``MSXGBCostModel`` (kind "ms-xgb"): MetaSchedule's own XGBModel setup, re-implemented on
  ProgramBatch: every store row is scored and a program's score is the sum over its rows
  (PackSum), trained with MetaSchedule's throughput-weighted square error, same XGBConfig.
"""

from __future__ import annotations

import os

import numpy as np
import xgboost as xgb

from .base import CostModel, HardwareAware
from .inputs import ProgramBatch


def _sorted_by_group(groups: np.ndarray):
    order = np.argsort(groups, kind="stable")
    _, counts = np.unique(groups[order], return_counts=True)
    return order, counts


class _XGBBase(CostModel):
    uses_traces = False

    def _state(self, path: str) -> dict:
        self.booster_.save_model(os.path.join(path, "model.ubj"))
        return {"weights": "model.ubj"}

    def set_threads(self, n: int) -> CostModel:
        super().set_threads(n)
        if getattr(self, "booster_", None) is not None:
            self.booster_.set_param({"nthread": self.nthread})
        return self

    def _restore(self, path: str, state: dict) -> None:
        booster = xgb.Booster()
        booster.load_model(os.path.join(path, state.get("weights", "model.ubj")))
        booster.set_param({"nthread": self.nthread})
        self.booster_ = booster


class XGBCostModel(HardwareAware, _XGBBase):
    name = "xgb"

    def __init__(self, objective: str = "rank:pairwise", n_estimators: int = 300, max_depth: int = 8,
                 learning_rate: float = 0.1, min_child_weight: float = 1.0, subsample: float = 0.9,
                 colsample_bytree: float = 0.9, reg_lambda: float = 1.0, nthread: int = 2, seed: int = 0,
                 hardware_features: bool = False, hardware: list | None = None):
        """``hardware_features``: read, besides the pack-summed store rows, how each program meets its CPU
        (``autotune.hardware.program_features``: roofline terms, vector and parallel extents against lanes and
        cores, working set against caches, the CPU's descriptor), so one model can learn from several CPUs and
        rank for one it has not seen. The CPU is the batch's (``ProgramBatch.hw``) or else ``hardware``: the
        descriptor of the machine the model predicts for (``set_hardware``)."""
        self._store_params(locals())

    def features(self, X: ProgramBatch) -> np.ndarray:
        """What the trees read: [n, 164] pack-sums, plus the hardware columns with ``hardware_features``."""
        feats = X.packsum()
        if not self.hardware_features:
            return feats
        from autotune.hardware import program_features

        return np.concatenate([feats, program_features(X.store_feats, X.offsets, self.program_hardware(X))], axis=1)

    def _params(self) -> dict:
        params = {
            "objective": self.objective, "max_depth": self.max_depth, "eta": self.learning_rate,
            "min_child_weight": self.min_child_weight, "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree, "lambda": self.reg_lambda,
            "nthread": self.nthread, "seed": self.seed, "tree_method": "hist", "verbosity": 0,
        }
        if self.objective.startswith("rank:"):
            params["eval_metric"] = "ndcg@5"
        return params

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        self.booster_ = xgb.train(self._params(), self._dmatrix(X, y, groups), num_boost_round=self.n_estimators)

    def _dmatrix(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> xgb.DMatrix:
        feats = self.features(X)
        if not self.objective.startswith("rank:"):
            return xgb.DMatrix(feats, label=y)
        order, counts = _sorted_by_group(groups)
        dtrain = xgb.DMatrix(feats[order], label=y[order])
        dtrain.set_group(counts)
        return dtrain

    def _fine_tune_from(self, base, X, y, groups, steps, **overrides) -> None:
        # seed_per_iteration: a continued booster does not reseed XGBoost's sampler (same seed, other trees)
        params = {**self._params(), "seed_per_iteration": True, **overrides}
        self.booster_ = xgb.train(params, self._dmatrix(X, y, groups), num_boost_round=steps,
                                  xgb_model=base.booster_.copy())

    def boost_more(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray, rounds: int, max_depth: int,
                   learning_rate: float) -> XGBCostModel:
        """A copy with ``rounds`` more trees fitted on new programs, shallower and faster-learning than the base's
        own (a residual on top of the base's scores, TenSet's ``plus_mix_task`` as boosting): the base's trees
        are kept as they are. ``self`` is unchanged."""
        clone = type(self)(**self.get_params())
        clone._fine_tune_from(self, X, np.asarray(y, np.float64), np.asarray(groups), int(rounds),
                              max_depth=int(max_depth), eta=float(learning_rate))
        clone.fitted_ = True
        return clone

    def _predict(self, X: ProgramBatch):
        # inplace_predict reads the array as is (no DMatrix copy); the same scores, bit for bit
        score = self.booster_.inplace_predict(self.features(X))
        return score, np.zeros_like(score)


class MSXGBCostModel(_XGBBase):
    """MetaSchedule's XGBModel objective and defaults (XGBConfig), on the same data."""

    name = "ms-xgb"

    def __init__(self, n_estimators: int = 300, max_depth: int = 10, gamma: float = 0.001,
                 min_child_weight: float = 0.0, eta: float = 0.2, nthread: int = 2, seed: int = 43):
        self._store_params(locals())

    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray, rounds: int | None = None,
             base=None) -> None:
        ids = np.repeat(np.arange(len(X)), np.diff(X.offsets))
        labels = y[ids]
        dtrain = xgb.DMatrix(X.store_feats, label=labels)
        dtrain.set_weight(labels)

        def obj_square_error(preds, _dmatrix):
            summed = np.bincount(ids, weights=preds, minlength=len(X))[ids]
            grad = summed - labels
            return grad * labels, np.ones_like(grad) * labels

        params = {"max_depth": self.max_depth, "gamma": self.gamma, "min_child_weight": self.min_child_weight,
                  "eta": self.eta, "seed": self.seed, "nthread": self.nthread, "verbosity": 0,
                  "tree_method": "hist", "disable_default_eval_metric": 1}
        self.booster_ = xgb.train(params, dtrain, num_boost_round=rounds or self.n_estimators, obj=obj_square_error,
                                  xgb_model=base)

    def _fine_tune_from(self, base, X, y, groups, steps) -> None:
        self._fit(X, y, groups, rounds=steps, base=base.booster_.copy())

    def _predict(self, X: ProgramBatch):
        ids = np.repeat(np.arange(len(X)), np.diff(X.offsets))
        # no DMatrix copy of the store rows: 1.8-2.6x the programs per second of predict(DMatrix) (one thread)
        row_scores = self.booster_.inplace_predict(X.store_feats)
        score = np.bincount(ids, weights=row_scores, minlength=len(X))
        return score, np.zeros_like(score)
