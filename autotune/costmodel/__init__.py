"""Learned cost models (TVM-free): one contract (base.CostModel), several models.

    from autotune.costmodel import create, load
    model = create("xgb", n_estimators=200).fit(batch, y, groups)
"""

from __future__ import annotations

import importlib

from .base import CostModel, ModelFileError, NotFittedError, read_model_meta
from .inputs import FEATURE_VERSION, ProgramBatch

# kind -> (module, class, default keyword overrides)
REGISTRY: dict[str, tuple[str, str, dict]] = {
    "xgb": ("autotune.costmodel.xgb", "XGBCostModel", {}),
    "xgb-reg": ("autotune.costmodel.xgb", "XGBCostModel", {"objective": "reg:squarederror"}),
    "ms-xgb": ("autotune.costmodel.xgb", "MSXGBCostModel", {}),
    "ms-mlp": ("autotune.costmodel.mlp", "TensetMLPCostModel", {}),
    "seq": ("autotune.costmodel.seq", "SeqCostModel", {}),
    "seq-lstm": ("autotune.costmodel.seq", "SeqCostModel", {"mixer": "lstm"}),
    # seq-lstm trained 1.5x longer with the learning rate on a cosine decay (the constant-rate fit's best epoch
    # was its 28th of 30 on the 41k-program main set: still improving when it stopped)
    "seq-lstm-cos": ("autotune.costmodel.seq", "SeqCostModel", {"mixer": "lstm", "epochs": 45, "lr_schedule": "cosine"}),
    # seq-lstm-cos reading each store's feature row as a sequence beside the pack-summed features (TLP's
    # per-statement rows): held-out top-1 +0.028 +- 0.015 over seq-lstm-cos, ahead on 3/3 seeds
    # (experiments/costmodel/results/variants.md, "rows"), same fit time and prediction rate
    "seq-lstm-rows": ("autotune.costmodel.seq", "SeqCostModel",
                      {"mixer": "lstm", "epochs": 45, "lr_schedule": "cosine", "store_mode": "rows"}),
    "seq-rows": ("autotune.costmodel.seq", "SeqCostModel", {"store_mode": "rows"}),
    # seq trained for the top of the order: LambdaRank gains 2^(4y) - 1 instead of 2^y - 1
    "seq-top": ("autotune.costmodel.seq", "SeqCostModel", {"gain_scale": 4.0}),
    "random": ("autotune.costmodel.random_model", "RandomCostModel", {}),
    # a committee of model families (members chosen on validation networks: experiments/costmodel/ensemble_select.py),
    # each on the scale of its own training scores, averaged; spread = their disagreement
    "ensemble": ("autotune.costmodel.ensemble", "EnsembleCostModel", {}),
    # a seed ensemble: seq-lstm fitted with three seeds, scores averaged (spread = the seeds' disagreement)
    "seq-lstm-x3": ("autotune.costmodel.ensemble", "EnsembleCostModel", {"members": ["seq-lstm"] * 3, "risk": 0.0}),
    # seq-lstm-cos fitted with two seeds (each keeping the average of its 10 best epochs' weights when validation
    # says so), scores averaged: held-out top-1 and top-5 above either LSTM alone (experiments/costmodel/results/
    # variants.md, "cosx2"); predicts at half seq-lstm-cos's rate; spread = the two seeds' disagreement
    "seq-lstm-cos-x2": ("autotune.costmodel.ensemble", "EnsembleCostModel",
                        {"members": ["seq-lstm-cos"] * 2, "member_params": {"seq-lstm-cos": {"soup": 10}}}),
    # seq-lstm-cos fitted with seq-lstm-cos-x2 as its teacher (knowledge distillation: LambdaRank's pairs take the
    # committee's odds as their targets): held-out top-1 level with the committee's, at one network's prediction cost
    # (experiments/costmodel/results/variants.md, "distil-lam1")
    "seq-lstm-distil": ("autotune.costmodel.distil", "DistilledCostModel",
                        {"teacher": "seq-lstm-cos-x2", "student": "seq-lstm-cos", "student_params": {"soup": 10},
                         "mode": "lambda", "weight": 1.0}),
}


# The model families a user names (``--cost-model``) and the recipes (REGISTRY kinds) of each: the first recipe is
# the one ``make train-costmodel`` ships in the family's folder and ``--cost-model <family>`` loads. A recipe is a
# training choice (mixer, schedule, seeds averaged, distillation, per-store rows, ranking gains), recorded in the
# model's card, not a name to tune with. seq ships seq-lstm-cos: the other sequence recipes (rows, x2, distil) were
# preferred on the test networks before choices moved to validation networks, so none of them is the default
# until a validation run (experiments/costmodel/variants.py) picks it.
FAMILIES: dict[str, tuple[str, ...]] = {
    "xgb": ("xgb", "xgb-reg", "ms-xgb"),
    "mlp": ("ms-mlp",),
    "seq": ("seq-lstm-cos", "seq", "seq-lstm", "seq-lstm-rows", "seq-rows", "seq-top", "seq-lstm-x3",
            "seq-lstm-cos-x2", "seq-lstm-distil"),
    "ensemble": ("ensemble",),
    "random": ("random",),
}


def family_of(kind: str) -> str:
    """The family a REGISTRY kind (recipe) belongs to."""
    for family, kinds in FAMILIES.items():
        if kind in kinds:
            return family
    raise ValueError(f"unknown cost model {kind!r}; valid: {', '.join(REGISTRY)}")


def shipped_recipe(family: str) -> str:
    """The recipe (REGISTRY kind) shipped for ``family``: the folder ``models/<hardware id>/<recipe>``."""
    return FAMILIES[family][0]


def model_class(kind: str) -> type[CostModel]:
    if kind not in REGISTRY:
        raise ValueError(f"unknown cost model {kind!r}; valid: {', '.join(REGISTRY)}")
    module, cls, _ = REGISTRY[kind]
    return getattr(importlib.import_module(module), cls)


def create(kind: str, **params) -> CostModel:
    defaults = dict(REGISTRY[kind][2]) if kind in REGISTRY else {}
    return model_class(kind)(**{**defaults, **params})


def takes_seed(kind: str) -> bool:
    """Whether ``kind``'s fit is seeded (XGBoost and torch models are; ``random``'s seed is its only param)."""
    return "seed" in create(kind).get_params()


def create_seeded(kind: str, seed: int, **params) -> CostModel:
    """``create(kind, **params)`` with ``seed`` when the kind takes one (a seedless kind ignores it)."""
    return create(kind, **({**params, "seed": seed} if takes_seed(kind) else params))


# overrides that set how long a kind trains, not what it is: a quick CI fit of ``seq-lstm-cos`` (2 epochs) is still one
BUDGET_KEYS = frozenset({"epochs", "n_estimators"})


def _sans_budget(params: dict) -> dict:
    """``params`` without BUDGET_KEYS, at every depth: inside an ensemble's ``member_params`` (a quick fit of
    ``seq-lstm-cos-x2``, its members at 2 epochs, is still one) and a distilled model's teacher and student
    params alike."""
    return {k: (_sans_budget(v) if isinstance(v, dict) else v) for k, v in (params or {}).items()
            if k not in BUDGET_KEYS}


def registered_kind(model: CostModel) -> str:
    """The REGISTRY name a model object is: among its class's entries, those whose overrides its params all
    match (BUDGET_KEYS aside), the most specific (a SeqCostModel with mixer "lstm" is ``seq-lstm``, not ``seq``).
    Read from the object, so a report names what really ran; falls back to the class's ``name``."""
    params, best, best_n = _sans_budget(model.get_params()), None, -1
    for key, (module, cls, overrides) in REGISTRY.items():
        if (type(model).__module__, type(model).__name__) != (module, cls):
            continue
        identity = _sans_budget(overrides)
        if all(params.get(k) == v for k, v in identity.items()) and len(identity) > best_n:
            best, best_n = key, len(identity)
    return best or model.name


def load(path: str) -> CostModel:
    """Load any saved cost model (the kind is read from its model.json)."""
    kind = read_model_meta(path)["kind"]
    for key in REGISTRY:
        cls = model_class(key)
        if cls.name == kind:
            return cls.load(path)
    raise ModelFileError(f"{path}: unknown model kind {kind!r}; valid: {', '.join(REGISTRY)}")


__all__ = ["CostModel", "ProgramBatch", "FEATURE_VERSION", "NotFittedError", "ModelFileError", "create", "FAMILIES",
           "family_of", "shipped_recipe",
           "load", "model_class", "registered_kind", "takes_seed", "create_seeded", "REGISTRY"]
