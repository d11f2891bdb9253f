"""The cost-model contract (TVM-free, in the spirit of scikit-learn estimators).

Every model: hyperparameters are explicit ``__init__`` keywords stored unchanged; learned state
ends in ``_``; ``fit(X, y, groups)`` returns self; ``predict(X)`` returns higher-is-better scores;
``predict_with_spread(X)`` returns (score, spread) where spread is an uncertainty estimate
(0 when the model has none); ``save(path)`` / ``load(path)`` use no pickles.

``X`` is a ``ProgramBatch`` (see ``autotune.costmodel.inputs``): every model takes the same
batch and reads the view it needs (pack-summed features, per-store rows, token sequences).
``y`` are normalized throughputs in (0, 1] (best program of its task = 1). ``groups`` are task
ids (ranking objectives compare programs only within a task).
"""

from __future__ import annotations

import inspect
import json
import os
from abc import ABC, abstractmethod

import numpy as np

from .inputs import FEATURE_VERSION, ProgramBatch


class NotFittedError(RuntimeError):
    """predict/save before fit."""


class ModelFileError(ValueError):
    """A model file that is missing, corrupt, or from another model/feature version."""


class CostModel(ABC):
    """Base class; subclasses implement ``_fit``, ``_predict``, ``_state`` and ``_restore``."""

    name: str = "base"
    uses_traces: bool = True  # False: predict reads only the per-store features (callers may skip traces)

    @classmethod
    def _param_names(cls) -> list[str]:
        """The named keywords of ``__init__`` along the class chain (a subclass may take its own and
        pass ``**rest`` on to its parent's ``__init__``, as the torch models pass training keywords)."""
        names: list[str] = []
        for klass in cls.__mro__[: cls.__mro__.index(CostModel)]:
            if "__init__" in vars(klass):
                params = inspect.signature(vars(klass)["__init__"]).parameters.values()
                names += [p.name for p in params if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                          and p.name not in names]
        return names

    def _store_params(self, values: dict) -> None:
        """Stores the keywords of the calling ``__init__`` unchanged: it calls ``self._store_params(locals())``."""
        for name in self._param_names():
            if name in values:
                setattr(self, name, values[name])

    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in self._param_names()}

    def set_threads(self, n: int) -> CostModel:
        """Threads for later fits and predictions (a loaded model keeps the count it was saved with,
        e.g. 2 for the search; an experiment running jobs side by side wants 1)."""
        for name in ("num_threads", "nthread"):
            if name in self._param_names():
                setattr(self, name, int(n))
        return self

    @property
    def is_fitted(self) -> bool:
        return getattr(self, "fitted_", False)

    def fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray, latency: np.ndarray | None = None) -> CostModel:
        """``y``: each program's score to rank by within its task group (normalized throughput); ``latency``
        (optional): its measured seconds, which a model may read for what ``y`` drops — how heavy each task
        is (``task_weight`` of the torch rankers); models that do not need it ignore it."""
        y = np.asarray(y, dtype=np.float64)
        groups = np.asarray(groups)
        _check_batch(X)
        if y.shape != (len(X),) or groups.shape != (len(X),):
            raise ValueError(
                f"fit: y and groups must have shape ({len(X)},) to match X; got {y.shape} and {groups.shape}"
            )
        if len(X) == 0:
            raise ValueError("fit: X is empty")
        if not np.all(np.isfinite(y)):
            raise ValueError("fit: y has NaN/inf; filter failed programs before fitting")
        if latency is not None:
            latency = np.asarray(latency, dtype=np.float64)
            if latency.shape != (len(X),) or not np.all(np.isfinite(latency) & (latency > 0)):
                raise ValueError(f"fit: latency must be {len(X)} positive finite seconds, one per program")
        self.fit_latency_ = latency  # read by _fit where the model uses it; dropped after
        try:
            self._fit(X, y, groups)
        finally:
            del self.fit_latency_
        self.fitted_ = True
        return self

    def predict(self, X: ProgramBatch) -> np.ndarray:
        return self.predict_with_spread(X)[0]

    def fine_tune(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray, steps: int = 20) -> CostModel:
        """A copy of this fitted model trained ``steps`` more (boosting rounds / optimizer steps) on new data.

        ``self`` is unchanged (the tuner keeps the pretrained model and fine-tunes a copy per task).
        """
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted; fine_tune needs a trained model")
        _check_batch(X)
        y = np.asarray(y, dtype=np.float64)
        groups = np.asarray(groups)
        if y.shape != (len(X),) or groups.shape != (len(X),) or len(X) == 0:
            raise ValueError(f"fine_tune: need a non-empty X with y and groups of shape ({len(X)},)")
        clone = type(self)(**self.get_params())
        clone._fine_tune_from(self, X, y, groups, int(steps))
        clone.fitted_ = True
        return clone

    def _fine_tune_from(self, base: CostModel, X: ProgramBatch, y: np.ndarray, groups: np.ndarray,
                        steps: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be fine-tuned")

    def predict_with_spread(self, X: ProgramBatch) -> tuple[np.ndarray, np.ndarray]:
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() or load() first")
        _check_batch(X)
        if len(X) == 0:
            return np.zeros(0), np.zeros(0)
        score, spread = self._predict(X)
        return np.asarray(score, dtype=np.float64), np.asarray(spread, dtype=np.float64)

    def save(self, path: str) -> None:
        """Writes ``path`` (a folder): ``model.json`` (kind, params, feature version) + weights."""
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted; nothing to save")
        os.makedirs(path, exist_ok=True)
        meta = {"kind": self.name, "params": self.get_params(), "feature_version": FEATURE_VERSION}
        meta["state"] = self._state(path)
        with open(os.path.join(path, "model.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)

    @classmethod
    def load(cls, path: str) -> CostModel:
        meta = read_model_meta(path)
        if meta["kind"] != cls.name:
            raise ModelFileError(f"{path}: holds a {meta['kind']!r} model, not {cls.name!r}")
        model = cls(**meta["params"])
        try:
            model._restore(path, meta.get("state") or {})
        except ModelFileError:
            raise
        except Exception as err:  # corrupt weights: name the folder
            raise ModelFileError(f"{path}: cannot load model weights ({type(err).__name__}: {err})") from None
        model.fitted_ = True
        return model

    @abstractmethod
    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None: ...

    @abstractmethod
    def _predict(self, X: ProgramBatch) -> tuple[np.ndarray, np.ndarray]: ...

    @abstractmethod
    def _state(self, path: str) -> dict: ...

    @abstractmethod
    def _restore(self, path: str, state: dict) -> None: ...


class HardwareAware:
    """For models with the ``hardware_features`` / ``hardware`` keywords: which CPU each program is ranked for."""

    def set_hardware(self, desc):
        """The CPU to predict for when a batch does not say (the search's own batches never do)."""
        self.hardware = None if desc is None else [float(v) for v in np.asarray(desc).ravel()]
        return self

    def program_hardware(self, X: ProgramBatch) -> np.ndarray:
        """[programs, descriptor length]: the batch's CPU per program (``ProgramBatch.hw``), else the one set."""
        if X.hw is not None:
            return X.hw
        if self.hardware is None:
            raise ValueError(f"{self.name} with hardware_features: the batch carries no CPU descriptor and the model "
                             "has none set (set_hardware)")
        return np.broadcast_to(np.asarray(self.hardware, np.float32), (len(X), len(self.hardware)))


def read_model_meta(path: str) -> dict:
    meta_path = os.path.join(path, "model.json")
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise ModelFileError(f"{meta_path}: not found (is {path} a saved cost model?)") from None
    except ValueError as err:
        raise ModelFileError(f"{meta_path}: corrupt model card ({err})") from None
    if meta.get("feature_version") != FEATURE_VERSION:
        raise ModelFileError(
            f"{meta_path}: made for feature version {meta.get('feature_version')}, this autotune uses "
            f"{FEATURE_VERSION}; retrain it (make train-costmodel)"
        )
    return meta


def _check_batch(X) -> None:
    if not isinstance(X, ProgramBatch):
        raise TypeError(f"X must be a ProgramBatch (autotune.costmodel.inputs), got {type(X).__name__}")
