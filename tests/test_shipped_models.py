"""Shipped models are trained on the current data, and their cards say on which (issue 47).

Every ``models/<hardware id>/<kind>/card.json`` names the dataset it was trained on (a path inside the
repository) and that dataset's manifest hash; the hash must be the dataset's as committed now. A dataset that
grew (a collection) fails this until ``make train-costmodel`` retrains what ships."""

import json
import os

import pytest

from tests.conftest import ROOT

CARDS = sorted(os.path.join(dp, "card.json") for dp, _, files in os.walk(os.path.join(ROOT, "models"))
               if "card.json" in files)


def test_there_are_shipped_models():
    assert CARDS, "models/ ships no model card"


def _trained_on(card: dict, card_path: str) -> list[tuple[str, str | None]]:
    """(dataset path, manifest hash) pairs a card names: one for a per-hardware model, every CPU set for the pooled
    model (``models/pooled/<kind>``, ``autotune.costmodel.pooled``)."""
    if "datasets" in card:
        assert card["datasets"], f"{card_path}: a pooled model's card names no dataset"
        return [(d.get("dataset"), d.get("dataset_manifest_sha256")) for d in card["datasets"]]
    return [(card.get("dataset"), card.get("dataset_manifest_sha256"))]


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: os.path.relpath(os.path.dirname(p), ROOT))
def test_card_names_the_current_dataset_it_was_trained_on(card_path):
    from autotune.costmodel.data import manifest_sha256

    with open(card_path, encoding="utf-8") as f:
        card = json.load(f)
    for dataset, recorded in _trained_on(card, card_path):
        assert dataset and not os.path.isabs(dataset), f"{card_path}: dataset {dataset!r} is not a path in the repository"
        manifest = os.path.join(ROOT, dataset, "manifest.json")
        assert os.path.exists(manifest), f"{card_path}: names {dataset}, which has no manifest"
        with open(manifest, encoding="utf-8") as f:
            current = manifest_sha256(json.load(f))
        assert recorded == current, (
            f"{card_path}: trained on {dataset} at manifest {str(recorded)[:12]}, the dataset is now {current[:12]}: "
            "retrain (make train-costmodel MODELS=<kind>, python -m autotune.costmodel.pooled) or stop shipping it")


def test_models_folder_stays_small():
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, files in os.walk(os.path.join(ROOT, "models"))
                for f in files)
    assert total < 60e6, f"models/ is {total / 1e6:.1f} MB; the limit is 60 MB"
