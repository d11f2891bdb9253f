"""A dataset as cost-model training data: ProgramBatch + latency + task groups (TVM-free: features
come from the dataset's cache, which ``python -m autotune.collection.features`` makes)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass

import numpy as np

from autotune.data.feature_cache import read_features
from autotune.data.store import mean_latency, read_manifest, read_records, read_tasks, task_weight

from .inputs import ProgramBatch, normalized_throughput

logger = logging.getLogger("autotune.costmodel.data")


@dataclass
class TrainingData:
    batch: ProgramBatch
    latency: np.ndarray  # mean seconds per program
    groups: np.ndarray  # int task index per program
    task_keys: list[str]  # group id -> task key
    tasks: dict[str, dict]
    manifest: dict
    sampler: np.ndarray | None = None  # per program: "random" (uniform sample) or "evolutionary" (search)
    copies: np.ndarray | None = None  # per program: how many measured rows of the same trace it merges

    def __len__(self) -> int:
        return len(self.latency)

    @property
    def y(self) -> np.ndarray:
        return normalized_throughput(self.latency, self.groups)

    def select_tasks(self, keys) -> TrainingData:
        wanted = {self.task_keys.index(k) for k in keys if k in self.task_keys}
        mask = np.isin(self.groups, sorted(wanted))
        return self.subset(mask)

    def subset(self, mask) -> TrainingData:
        idx = np.nonzero(mask)[0] if np.asarray(mask).dtype == bool else np.asarray(mask)
        return TrainingData(self.batch.subset(idx), self.latency[idx], self.groups[idx], self.task_keys,
                            self.tasks, self.manifest, None if self.sampler is None else self.sampler[idx],
                            None if self.copies is None else self.copies[idx])

    def weights_for(self, model: str) -> dict[int, float]:
        """group id -> how often the task occurs in ``model`` itself (for the top-k score): a task shared
        by two models carries each model's own count."""
        return {gid: float(task_weight(self.tasks[key], model)) for gid, key in enumerate(self.task_keys)
                if model in self.tasks[key]["models"]}


def load_split(root: str, held_out) -> tuple[TrainingData, list[str], dict[str, list[str]]]:
    """The dataset and its split by model (``splits.split_by_model``): (data, training task keys, held-out
    model -> its task keys). A dataset that cannot be read or is not featurized, or a held-out model it does
    not have, is a ``UserError`` naming ``--dataset`` / ``--held-out`` (one line, exit 2 in the CLIs)."""
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.splits import split_by_model
    from autotune.data.store import DatasetError
    from autotune.errors import UserError

    try:
        data = load_training_data(root)
    except (DatasetError, StaleFeatureCache) as err:
        raise UserError(str(err)) from None
    try:
        train_keys, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held_out)
    except ValueError as err:
        raise UserError(f"--held-out: {err}") from None
    return data, train_keys, test_keys


def load_selection_split(root: str, test_models, val_models) -> tuple[TrainingData, list[str], dict[str, list[str]]]:
    """For selection code (inside ``splits.selection()``): (data, fit task keys, validation network -> its task
    keys), the test networks' tasks dropped (``splits.selection_split``; ``test_models`` None: ``TEST_MODELS``). With no ``val_models`` the fit keys are
    every training task (a study that splits them by task itself). Bad input: a ``UserError`` naming the flag."""
    from autotune.data.feature_cache import StaleFeatureCache
    from autotune.data.splits import TEST_MODELS, selection_split
    from autotune.data.store import DatasetError
    from autotune.errors import UserError

    test_models = list(test_models or TEST_MODELS)  # selection code need not (and may not) name them
    try:
        data = load_training_data(root)
    except (DatasetError, StaleFeatureCache) as err:
        raise UserError(str(err)) from None
    have = {m for k in data.task_keys for m in data.tasks[k]["models"]}
    missing = [m for m in test_models if m not in have]
    if missing:
        raise UserError(f"--held-out: {missing} have no tasks in this dataset (the test networks to leave out)")
    try:
        fit_keys, val_by_model = selection_split({k: data.tasks[k] for k in data.task_keys}, test_models, val_models)
    except ValueError as err:
        raise UserError(f"--validation-models: {err}") from None
    return data, fit_keys, val_by_model


@dataclass
class ValidationSplit:
    """Training networks set aside as validation networks (``validation_split``): ``fit`` = the other training
    tasks, ``val`` = the set-aside networks' tasks, ``masks`` = network -> its programs among ``val``."""

    fit: TrainingData
    fit_tasks: int
    val: TrainingData
    masks: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        self.parts = {m: self.val.subset(mask) for m, mask in self.masks.items()}  # scored many times

    def score(self, z: np.ndarray) -> dict:
        """TenSet's weighted top-1 / top-5 of scores ``z`` over ``val``: mean over the networks, and per network."""
        from .evaluate import score_part

        per = {m: score_part(self.parts[m], z[mask], m) for m, mask in self.masks.items()}
        return {"top1": float(np.mean([v["top1"] for v in per.values()])),
                "top5": float(np.mean([v["top5"] for v in per.values()])),
                "per_model_top1": {m: v["top1"] for m, v in per.items()}}

    def fit_key(self, kind: str, params: dict, seed: int) -> str:
        """What one validation fit depends on, as a digest for an experiment's per-fit cache: the kind, its
        settings, the seed, the dataset (its manifest) and this split (programs and tasks on each side). A
        cached fit whose key differs (other hyperparameters, a grown dataset) is fitted again."""
        import hashlib
        import json

        ident = {"kind": kind, "params": params, "seed": seed, "manifest": self.fit.manifest,
                 "fit": [len(self.fit), self.fit_tasks], "val": {m: int(k.sum()) for m, k in self.masks.items()}}
        return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def cached_fit(self, path: str, key: str, summarize_only: bool = False) -> dict | None:
        """An experiment's cached validation fit (``.npz`` at ``path``, saved with its ``fit_key`` as ``key``) as
        name -> array, or None when it is to be fitted (again): missing, or made with another key. With
        ``summarize_only`` (no fits wanted) a fit of another key is taken if it scores this ``val``, with a warning."""
        if not os.path.exists(path):
            return None
        with np.load(path, allow_pickle=False) as z:
            got = {name: z[name] for name in z.files}
        if "key" in got and str(got["key"]) == key:
            return got
        if summarize_only and len(got["val"]) == len(self.val):
            logger.warning("%s was made with other settings or data (or before fits were keyed)", path)
            return got
        logger.info("%s: made with other settings or data%s", path, "" if summarize_only else "; fitting again")
        return None


def validation_parts(data: TrainingData, fit_keys: list[str], val_by_model: dict[str, list[str]]) -> ValidationSplit:
    """The ``ValidationSplit`` of ``load_selection_split``'s keys."""
    val = data.select_tasks(sorted(set().union(*val_by_model.values())))
    masks = {m: np.isin(val.groups, [data.task_keys.index(k) for k in keys]) for m, keys in val_by_model.items()}
    return ValidationSplit(data.select_tasks(fit_keys), len(fit_keys), val, masks)


def validation_split(data: TrainingData, train_keys: list[str], held_out, val_models) -> ValidationSplit:
    """Sets ``val_models`` (training models) aside from ``train_keys`` as validation networks, the way the
    experiments choose a committee or a rule without the held-out models (``experiments/costmodel/
    ensemble_select.py``, ``risk_select.py``). A held-out or unknown model is a ``UserError`` naming
    ``--validation-models``."""
    from autotune.data.splits import split_by_model
    from autotune.errors import UserError

    overlap = set(val_models) & set(held_out)
    if overlap:
        raise UserError(f"--validation-models: {sorted(overlap)} are held-out models; pick training models")
    try:
        fit_keys, val_by_model = split_by_model({k: data.tasks[k] for k in train_keys}, val_models)
    except ValueError as err:
        raise UserError(f"--validation-models: {err}") from None
    return validation_parts(data, fit_keys, val_by_model)


def merge_duplicates(keys: list[str], traces: list[str], latency: np.ndarray, ok: np.ndarray,
                     sampler: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One row per program: valid rows of the same task and trace (a schedule measured more than once)
    become their first row, whose latency is the median of the copies' mean latencies and whose sampler is
    ``evolutionary`` if any copy came from the search. Returns (ok, latency, sampler, copies), the merged
    copies no longer ``ok``.

    Why: MetaSchedule's ReplayTrace draws with replacement, and until commit ccd6d80 the tuner measured
    every copy it drew, so the main set (collected before) re-measured small design spaces many times
    (5,310 of its 25,301 valid rows repeat a program; tasks whose design space holds one schedule, e.g. a
    reshape, have 17-46 copies of it). As separate programs they make a held-out task look like a choice
    between programs that differ only by measurement noise, so every model "loses" top-1 on them, and give
    the ranking losses pairs of equal inputs with unequal labels."""
    ok = ok.copy()
    latency = latency.astype(np.float64, copy=True)
    sampler = sampler.copy()
    copies = np.ones(len(latency), dtype=np.int64)
    first: dict[tuple[str, str], int] = {}
    merged: dict[int, list[float]] = {}
    for i in np.nonzero(ok)[0]:
        j = first.setdefault((keys[i], traces[i]), int(i))
        if j != i:
            ok[i] = False
            merged.setdefault(j, [float(latency[j])]).append(float(latency[i]))
            if sampler[i] == "evolutionary":
                sampler[j] = "evolutionary"
    for j, lats in merged.items():
        latency[j] = float(np.median(lats))
        copies[j] = len(lats)
    return ok, latency, sampler, copies


def load_training_data(root: str, min_programs: int = 2, merge: bool = True) -> TrainingData:
    """Valid rows only (failed/NaN rows are kept on disk and dropped here), one per program: copies of a
    schedule measured more than once are merged (``merge_duplicates``; ``merge=False`` keeps every row).
    A task counts when it has ``min_programs`` distinct programs. Reads the feature cache
    (``StaleFeatureCache`` when rows are missing: ``python -m autotune.collection.features`` refreshes it)."""
    manifest = read_manifest(root)
    tasks = read_tasks(root)
    table = read_records(root)
    traces = table.column("trace").to_pylist()
    feats, offsets = read_features(root, table.column("task_key").to_pylist(), traces)
    latency = mean_latency(table)
    keys = table.column("task_key").to_pylist()
    sampler = np.asarray(table.column("sampler").to_pylist(), dtype=object)
    ok = np.isfinite(latency) & (latency > 0)
    copies = np.ones(len(latency), dtype=np.int64)
    if merge:
        ok, latency, sampler, copies = merge_duplicates(keys, traces, latency, ok, sampler)
    task_keys = sorted(set(k for k, good in zip(keys, ok) if good))
    index = {k: i for i, k in enumerate(task_keys)}
    groups = np.array([index.get(k, -1) for k in keys])
    counts = np.bincount(groups[ok], minlength=len(task_keys))
    ok &= counts[np.maximum(groups, 0)] >= min_programs
    full = ProgramBatch.from_traces(traces, feats, offsets)
    if manifest.get("hardware", {}).get("target", {}).get("kind") == "llvm":
        from autotune.hardware import descriptor

        full = full.with_hardware(descriptor(manifest["hardware"]))  # the CPU every label was measured on
    idx = np.nonzero(ok)[0]
    return TrainingData(full.subset(idx), latency[idx], groups[idx], task_keys, tasks, manifest, sampler[idx],
                        copies[idx])


def manifest_sha256(manifest: dict) -> str:
    """The dataset identity results and cards record: sha256 of its manifest as sorted JSON."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
