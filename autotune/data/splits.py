"""Train/test splits as first-class operations (TenSet/TLP protocol). TVM-free."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

HELD_OUT_MODELS = ("resnet50", "mobilenet_v2", "bert_base")
# the zoo models of the shipped datasets and their input shapes (without batch); see collection.taskpool
ZOO_DATASET_MODELS = (
    "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "vgg16", "densenet121",
    "inception_like", "vit_b16", "bert_base", "gpt2",
)
# model -> input shape used for the dataset. Held-out models keep their real shapes (their tasks
# are the evaluation set); the heaviest training-only CNNs use 112x112, which keeps random
# programs of their convolutions cheap to measure and adds shape variety.
ZOO_SHAPES = {"bert_base": (128,), "gpt2": (128,), "vgg16": (3, 112, 112), "densenet121": (3, 112, 112),
              "inception_like": (3, 112, 112)}


def split_by_model(tasks: dict[str, dict], held_out: Iterable[str] = HELD_OUT_MODELS):
    """Tasks of any held-out model go to test (even if another model shares them); the rest train.

    Returns (train_keys, test_keys_by_model) where test_keys_by_model maps a held-out model to its tasks.
    """
    held = tuple(held_out)
    unknown = [m for m in held if not any(m in t["models"] for t in tasks.values())]
    if unknown:
        raise ValueError(f"held-out models {unknown} have no tasks in this dataset")
    test = {m: sorted(k for k, t in tasks.items() if m in t["models"]) for m in held}
    test_all = set().union(*test.values())
    train = sorted(k for k in tasks if k not in test_all)
    return train, test


def split_by_task(keys: Iterable[str], test_fraction: float = 0.2, seed: int = 0):
    """A random split of task keys (reproducible from ``seed``)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    keys = sorted(keys)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(keys))
    n_test = max(1, int(round(len(keys) * test_fraction)))
    test = sorted(keys[i] for i in order[:n_test])
    train = sorted(keys[i] for i in order[n_test:])
    return train, test


def split_by_hardware(hardware_ids: np.ndarray, train_hw: Iterable[str], test_hw: Iterable[str]):
    """Row masks for records of the train and test hardware."""
    hw = np.asarray(hardware_ids)
    return np.isin(hw, list(train_hw)), np.isin(hw, list(test_hw))
