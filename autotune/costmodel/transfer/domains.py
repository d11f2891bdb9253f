"""A dataset as one side of a transfer (TVM-free): training tasks, held-out models, the measured share.

Shared by ``python -m autotune.costmodel.transfer`` and ``experiments/transfer/run.py`` so both split,
sample and score the same way.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from ..data import TrainingData, load_training_data
from .base import Programs, sample_fraction


@dataclass
class Domain:
    """One hardware's dataset: ``train`` holds the programs of every task no held-out model uses;
    ``test_keys`` maps each held-out model to its tasks."""

    path: str
    data: TrainingData
    train: TrainingData
    test_keys: dict[str, list[str]]

    @property
    def hardware_id(self) -> str:
        return self.data.manifest["hardware"]["hardware_id"]

    @property
    def manifest_sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.data.manifest, sort_keys=True).encode()).hexdigest()

    @property
    def content_sha256(self) -> str:
        """What the scores depend on: the shards' sha256 and every task's per-model weights (the manifest
        also holds timestamps and counts that change without the data changing)."""
        shards = sorted(v["sha256"] for v in self.data.manifest.get("shards", {}).values())
        weights = {k: self.data.tasks[k].get("model_weights") for k in self.data.task_keys}
        return hashlib.sha256(json.dumps([shards, weights, len(self.data)], sort_keys=True).encode()).hexdigest()

    def programs(self, part: TrainingData | None = None, labeled: bool = True) -> Programs:
        part = self.train if part is None else part
        return Programs(part.batch, part.groups, part.y if labeled else None)

    def measured_share(self, fraction: float, seed: int) -> tuple[Programs, Programs | None, np.ndarray]:
        """(measured programs, the other training programs unlabeled or None, indices into ``train``):
        ``fraction`` of the training programs in whole task batches (``sample_fraction``), drawn from
        ``seed``. The same (fraction, seed) picks the same programs for every method."""
        rng = np.random.default_rng(np.random.SeedSequence([seed, int(round(fraction * 1e6))]))
        return self.share(sample_fraction(self.train.groups, fraction, rng))

    def share(self, idx: np.ndarray) -> tuple[Programs, Programs | None, np.ndarray]:
        """``measured_share`` for programs ``idx`` of ``train`` chosen by someone else (a sampler)."""
        idx = np.sort(np.asarray(idx, np.int64))
        rest = np.setdiff1d(np.arange(len(self.train)), idx)
        measured = self.train.subset(idx)
        measured = Programs(measured.batch, measured.groups, measured.y)  # y normalized within the share
        unlabeled = self.programs(self.train.subset(rest), labeled=False) if len(rest) else None
        return measured, unlabeled, idx


def load_domain(path: str, held_out: list[str]) -> Domain:
    """Raises DatasetError / StaleFeatureCache (bad or unfeaturized dataset) and ValueError (a held-out
    model without tasks) for the caller to turn into one line."""
    from autotune.data.splits import split_by_model

    data = load_training_data(path)
    train_keys, test_keys = split_by_model({k: data.tasks[k] for k in data.task_keys}, held_out)
    return Domain(path, data, data.select_tasks(train_keys), test_keys)


def held_out_scores(model, domain: Domain) -> dict:
    """Top-1 / top-5 / pairwise per held-out model and their mean (``costmodel.train.evaluate``)."""
    from ..train import evaluate

    return evaluate(model, domain.data, domain.test_keys)
