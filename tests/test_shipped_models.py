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


@pytest.mark.parametrize("card_path", CARDS, ids=lambda p: os.path.relpath(os.path.dirname(p), ROOT))
def test_card_names_the_current_dataset_it_was_trained_on(card_path):
    from autotune.costmodel.data import manifest_sha256

    with open(card_path, encoding="utf-8") as f:
        card = json.load(f)
    dataset = card.get("dataset")
    assert dataset and not os.path.isabs(dataset), f"{card_path}: dataset {dataset!r} is not a path in the repository"
    manifest = os.path.join(ROOT, dataset, "manifest.json")
    assert os.path.exists(manifest), f"{card_path}: names {dataset}, which has no manifest"
    with open(manifest, encoding="utf-8") as f:
        current = manifest_sha256(json.load(f))
    assert card.get("dataset_manifest_sha256") == current, (
        f"{card_path}: trained on {dataset} at manifest {str(card.get('dataset_manifest_sha256'))[:12]}, the dataset "
        f"is now {current[:12]}: retrain (make train-costmodel MODELS=<kind>) or stop shipping it")
