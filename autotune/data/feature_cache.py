"""The per-store feature cache of a dataset (TVM-free: reading and writing; the TVM side that
computes features is ``autotune.collection.features``).

``DATASET/features/per_store.npz``: ``feats`` float32 [n_stores, 164], ``offsets`` int64 [n_rows + 1]
and a ``fingerprint`` of the rows it was computed for (task keys + trace hashes), so a cache that no
longer matches the dataset is detected, never silently used. Rows keep the order of ``read_records``.
"""

from __future__ import annotations

import hashlib
import os
import zipfile

import numpy as np

from .store import DatasetError

FEATURE_VERSION = 1
CACHE = os.path.join("features", "per_store.npz")
N_FEATURES = 164


class StaleFeatureCache(ValueError):
    """The dataset has rows the cache does not cover (or the cache is for other rows)."""


def fingerprint(keys, traces) -> str:
    h = hashlib.sha256()
    for k, t in zip(keys, traces):
        h.update(k.encode())
        h.update(hashlib.sha1(t.encode()).digest())
    return f"v{FEATURE_VERSION}:" + h.hexdigest()


def load_cached(root: str):
    """(feats, offsets, fingerprint) for the first n rows of the dataset, or None."""
    path = os.path.join(root, CACHE)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:  # an object array (a pickle) is refused, not loaded
            return data["feats"], data["offsets"], str(data["fingerprint"])
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as err:
        raise DatasetError(
            f"{path}: unreadable feature cache ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
            f"delete it and run python -m autotune.collection.features {root}"
        ) from None


def save_cache(root: str, feats: np.ndarray, offsets: np.ndarray, fp: str) -> None:
    os.makedirs(os.path.join(root, "features"), exist_ok=True)
    tmp = os.path.join(root, CACHE + ".tmp.npz")
    np.savez_compressed(tmp, feats=feats.astype(np.float32), offsets=np.asarray(offsets, dtype=np.int64),
                        fingerprint=np.asarray(fp))
    os.replace(tmp, os.path.join(root, CACHE))


def valid_prefix(root: str, keys, traces):
    """(feats, offsets, n_rows) of the cached rows that still match the dataset's first rows; n_rows is 0
    when there is no usable cache."""
    cached = load_cached(root)
    if cached is None:
        return np.zeros((0, N_FEATURES), np.float32), np.zeros(1, np.int64), 0
    feats, offs, fp = cached
    n = len(offs) - 1
    if n <= len(keys) and fp == fingerprint(keys[:n], traces[:n]):
        return feats, offs, n
    return np.zeros((0, N_FEATURES), np.float32), np.zeros(1, np.int64), 0


def read_features(root: str, keys, traces):
    """(feats, offsets) covering every row, or StaleFeatureCache naming the command that refreshes it."""
    feats, offs, n = valid_prefix(root, keys, traces)
    if n != len(keys):
        raise StaleFeatureCache(
            f"{root}: feature cache covers {n} of {len(keys)} rows; run "
            f"python -m autotune.collection.features {root}"
        )
    return feats, offs
