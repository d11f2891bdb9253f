"""Train / validation / test splits as first-class operations (TenSet/TLP protocol). TVM-free.

Networks are of three kinds. ``TEST_MODELS`` are read once, at the end (the comparison of ``make
train-costmodel``, the tuning tables): no choice may depend on them. ``VALIDATION_MODELS`` are training networks
set aside, one per family, never fitted on while a choice is made: every selection (variants, hyperparameter
studies, committees, rules, defaults) reads their scores only. The rest are fitted on.

The rule is structural: selection code runs inside ``selection()`` and gets its data from ``selection_split``,
which drops the test networks' tasks and never returns them; inside ``selection()`` the test split itself
(``split_by_model``, so ``costmodel.data.load_split``) raises ``TestSplitForbidden``, and
``tests/test_splits_guard.py`` fails when a selection module names the test split at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import numpy as np

TEST_MODELS = ("resnet50", "mobilenet_v2", "bert_base")
HELD_OUT_MODELS = TEST_MODELS  # the name the final evaluation has always used
# one per family among the training networks (a CNN, a mobile CNN, a transformer); what ensemble_select.py chose
# committees on before the split was enforced
VALIDATION_MODELS = ("resnet18", "mobilenet_v3_small", "gpt2")


class TestSplitForbidden(RuntimeError):
    """Selection code asked for the test networks' tasks."""


_selecting = 0


@contextlib.contextmanager
def selection():
    """Everything inside is selection: asking for the test split raises ``TestSplitForbidden``."""
    global _selecting
    _selecting += 1
    try:
        yield
    finally:
        _selecting -= 1


def selecting() -> bool:
    return _selecting > 0


def selection_split(tasks: dict[str, dict], test_models: Iterable[str], val_models: Iterable[str]):
    """For selection: the tasks of no test network, split into fit keys and validation network -> its tasks.

    ``test_models`` names what is dropped (the dataset's test networks; ``TEST_MODELS`` for the shipped sets);
    their tasks, and any task another network shares with them, are not returned in any form. A validation
    network that is a test network is a ``ValueError``."""
    test, val = tuple(test_models), tuple(val_models)
    if set(test) & set(val):
        raise ValueError(f"{sorted(set(test) & set(val))} are held-out models (test networks); pick training models")
    kept = {k: t for k, t in tasks.items() if not set(t["models"]) & set(test)}
    return _partition(kept, val) if val else (sorted(kept), {})
# the zoo models of the shipped datasets and their input shapes (without batch); see collection.taskpool
ZOO_DATASET_MODELS = (
    "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "vgg16", "densenet121",
    "inception_like", "vit_b16", "bert_base", "gpt2",
)
# zoo networks in no dataset: never trained or selected on; protocol v2 tunes them as networks new to every model
UNSEEN_MODELS = ("convnext_nano_like",)
# model -> input shape used for the dataset. Held-out models keep their real shapes (their tasks
# are the evaluation set); the heaviest training-only CNNs use 112x112, which keeps random
# programs of their convolutions cheap to measure and adds shape variety.
ZOO_SHAPES = {"bert_base": (128,), "gpt2": (128,), "vgg16": (3, 112, 112), "densenet121": (3, 112, 112),
              "inception_like": (3, 112, 112)}


def split_by_model(tasks: dict[str, dict], held_out: Iterable[str] = HELD_OUT_MODELS):
    """Tasks of any held-out model go to test (even if another model shares them); the rest train.

    Returns (train_keys, test_keys_by_model) where test_keys_by_model maps a held-out model to its tasks.
    The final evaluation's split: inside ``selection()`` it raises (selection code uses ``selection_split``).
    """
    if selecting():
        raise TestSplitForbidden(f"the test split ({', '.join(held_out)}) was asked for during a selection; "
                                 "selection reads validation networks only (splits.selection_split)")
    return _partition(tasks, tuple(held_out))


def _partition(tasks: dict[str, dict], held: tuple[str, ...]):
    """(keys of tasks of no model in ``held``, model in ``held`` -> its task keys)."""
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
