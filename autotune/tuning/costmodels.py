"""``--cost-model``: one table of names and one resolver from a name to the model the search calls.

    resolved = resolve("auto", target, online="finetune")
    resolved.model   # what MetaSchedule's search calls (None when the search uses no cost model)
    resolved.used    # one line: which model, trained for which hardware, and why it was chosen
    resolved.card    # the pretrained model's card summary (None without one)

Names (``COST_MODELS``): model families, not training recipes. ``stock`` is MetaSchedule's own XGBModel
(online only, the baseline) and ``random`` its RandomModel; ``xgb`` / ``mlp`` / ``seq`` / ``ensemble`` are our
pretrained models from ``models/<hardware_id>/<recipe>/`` (the family's shipped recipe:
``autotune.costmodel.FAMILIES``) updated online (``--online-update``; ``online``: learned from this run only).
Names of earlier versions (``RETIRED``) get one line naming their new form. A saved model folder
(``--cost-model-path``) is loaded by the kind its model.json names (so a saved ``ms-xgb`` folder is our
re-implementation, never the stock model); ``--cost-model`` must then be ``auto`` or that kind's family.

``auto`` picks the first of ``AUTO_ORDER`` = xgb, seq, mlp that this hardware has a model for (xgb first: the
steadier and cheaper arm on the CNNs in the real-budget runs of experiments/tuning_efficiency/).

Hardware without its own model: the nearest hardware's model is used and adapted online, for
``auto`` (any family of AUTO_ORDER_OTHER_HARDWARE) and for an explicit ``xgb`` / ``seq`` / ``mlp`` (that family
only; when no hardware has it: online-only). Nearest (``hardware_distance``): the same target kind
(llvm / cuda) is required; then the fewest ISA features the model's hardware has and this one lacks
(its programs' costs assumed instructions that do not exist here), then the fewest this one has and
it lacks, then the closest core count (|log2 ratio|), then the hardware id (deterministic). For
``auto``, among that hardware's models AUTO_ORDER_OTHER_HARDWARE decides (mlp first: it transferred
best in the real-budget runs). ISA features are LLVM's for each target's
``mcpu`` (``ISA_FEATURES``).

Nothing falls back silently: every fallback is logged (WARNING) and named in ``used`` and
``fallback``; ``Resolved.report()`` is what report.json records, read from the model object itself.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass

from autotune.errors import UserError
from autotune.paths import DEFAULT_MODELS_DIR
from autotune.paths import shown as _shown

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CostModelName:
    name: str
    source: str  # auto | stock | pretrained
    help: str


COST_MODELS: dict[str, CostModelName] = {c.name: c for c in (
    CostModelName("auto", "auto", "our pretrained model for this hardware (xgb, else seq, else mlp); without one, the "
                  "nearest hardware's, adapted online; else stock (default; it says which)"),
    CostModelName("stock", "stock", "MetaSchedule's own XGBModel, learned online from this run only"),
    CostModelName("xgb", "pretrained", "our pretrained ranking XGBoost for this hardware (else the nearest "
                  "hardware's) + --online-update"),
    CostModelName("mlp", "pretrained", "the TenSet-MLP design pretrained for this hardware (else the nearest "
                  "hardware's) + --online-update"),
    CostModelName("seq", "pretrained", "our trace sequence model (the recipe shipped for it) pretrained for this "
                  "hardware (else the nearest hardware's) + --online-update"),
    CostModelName("ensemble", "pretrained", "a committee of model families (members chosen on validation "
                  "networks), averaged; pretrained for this hardware (else the nearest hardware's) + --online-update"),
    CostModelName("random", "stock", "MetaSchedule's RandomModel (random scores)"),
)}
# names of earlier versions: each gets one line naming its new form (exit 2)
RETIRED = {
    "ms-xgb": "--cost-model stock (MetaSchedule's own XGBModel)",
    "ms-mlp": "--cost-model mlp",
    "online-xgb": "--cost-model xgb --online-update online (our ranking XGBoost learned from this run only)",
    **{k: f"--cost-model seq (it loads the recipe shipped for the family), or --cost-model seq --cost-model-path "
          f"models/<hardware id>/{k} for that recipe's folder"
       for k in ("seq-lstm", "seq-lstm-cos", "seq-lstm-rows", "seq-lstm-cos-x2", "seq-lstm-distil", "seq-top")},
}
AUTO_ORDER = ("xgb", "seq", "mlp")
# On hardware without its own models, another hardware's models adapted online: mlp first, the family that
# transferred best in the real-budget runs on other CPUs (experiments/tuning_efficiency/results_real*/: the
# sequence recipes and the ensemble were no better there, one seed each, so they are not in this order).
AUTO_ORDER_OTHER_HARDWARE = ("mlp", "xgb", "seq")
# On a CPU without its own model, ``auto`` may take the CPU-spanning model (``models/pooled/<kind>``, trained on
# every CPU set with the hardware descriptor: ``autotune.costmodel.pooled``) told this CPU's descriptor, instead of
# the nearest hardware's. Off until the leave-one-hardware-out table (experiments/transfer/results/loho/) shows it
# ahead of the nearest model zero-shot on the validation networks.
AUTO_POOLED_KIND: str | None = None
POOLED_DIR = "pooled"
ISA_FEATURES = ("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avx512bf16", "amx-tile",
                "neon", "dotprod", "sve")


def check_name(name: str) -> None:
    if name in RETIRED:
        raise UserError(f"--cost-model {name}: this name is retired; use {RETIRED[name]}")
    if name not in COST_MODELS:
        raise UserError(f"--cost-model: unknown {name!r}; valid: {', '.join(COST_MODELS)}")


def folder_of(family: str) -> str:
    """The folder name under ``models/<hardware id>/`` that ``family`` loads: its shipped recipe."""
    from autotune.costmodel import shipped_recipe

    return shipped_recipe(family)


def help_text() -> str:
    return "; ".join(f"{c.name}: {c.help}" for c in COST_MODELS.values())


@dataclass(frozen=True)
class Resolved:
    """A cost model as resolved for a run: the object the search calls and what it is."""

    model: object | None  # a MetaSchedule CostModel; None: the search uses none
    used: str  # one line: which model, trained for which hardware, and why
    card: dict | None = None  # summary of the pretrained model's card.json
    requested: str = ""  # the name asked for
    fallback: str | None = None  # why this is not what was asked for (None: it is)

    @classmethod
    def given(cls, model, used: str) -> Resolved:
        """A MetaSchedule cost model the caller built itself (e.g. the dataset collector's)."""
        return cls(model, used, requested="given")

    def report(self) -> dict:
        """report.json's cost-model fields, read from the model object (not from the flag)."""
        learner = getattr(self.model, "learner", None)
        pretrained = getattr(learner, "pretrained", None)
        return {
            "cost_model": self.requested,
            "cost_model_used": self.used,
            "cost_model_card": self.card,
            "cost_model_resolved": {
                "requested": self.requested,
                "class": type(self.model).__name__ if self.model is not None else None,
                "pretrained_kind": _kind_of(pretrained) if pretrained is not None else None,
                "trained_for": (self.card or {}).get("hardware_id") if pretrained is not None else None,
                "online_update": learner.mode if learner is not None else None,
                "fallback": self.fallback,
            },
            "online_update": learner.mode if learner is not None else None,
        }


def resolve(name: str, target, *, path: str | None = None, online: str = "finetune",
            models_dir: str = DEFAULT_MODELS_DIR, uses_cost_model: bool = True) -> Resolved:
    """The cost model ``name`` stands for on ``target`` (see the module docstring). Logs what it chose."""
    check_name(name)
    if not uses_cost_model:
        resolved = _none(name, path)
    elif online == "online" and COST_MODELS[name].source in ("auto", "pretrained"):
        resolved = _online(name, target, models_dir, online)  # learned from this run only: no pretrained model read
    elif path is not None:
        resolved = _from_path(name, path, target, online)
    else:
        resolved = _BY_SOURCE[COST_MODELS[name].source](name, target, models_dir, online)
    (logger.warning if resolved.fallback else logger.info)("cost model: %s", resolved.used)
    return resolved


def _none(name: str, path: str | None) -> Resolved:
    if name != "auto" or path is not None:
        logger.warning("--cost-model %s is not used: the search strategy asks no cost model", name)
    return Resolved(None, "none (the search strategy uses no cost model)", requested=name)


def _stock(name: str, target, models_dir: str = DEFAULT_MODELS_DIR, online: str = "") -> Resolved:
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    from tvm.s_tir import meta_schedule as ms

    from autotune.tvmrt.target import target_cores

    if name == "random":
        return Resolved(ms.cost_model.RandomModel(), "MetaSchedule's RandomModel (asked for)", requested=name)
    model = ms.cost_model.XGBModel(num_tuning_cores=target_cores(target), tree_method="auto", num_warmup_samples=32)
    return Resolved(model, "MetaSchedule's stock XGBModel, online only (asked for)", requested=name)


def _online(name: str, target, models_dir: str, online: str) -> Resolved:
    return Resolved(_learned(None, online), "our ranking XGBoost, online only (--online-update online)",
                    requested=name)


def _learned(pretrained, online: str):
    from autotune.tuning.search_costmodel import LearnedCostModel

    return LearnedCostModel(pretrained=pretrained, online=online)


def _load(path: str):
    from autotune.costmodel import load
    from autotune.costmodel.base import ModelFileError

    try:
        return load(path)
    except ModelFileError as err:
        raise UserError(str(err)) from None


def _kind_of(model) -> str:
    from autotune.costmodel import registered_kind

    return registered_kind(model)


def _with_pretrained(name: str, path: str, card: dict, online: str, why: str, fallback: str | None = None) -> Resolved:
    """The model of ``path`` adapted online; refused (exit 2) when it is not the kind ``name`` asks for."""
    loaded = _load(path)
    kind = _kind_of(loaded)
    from autotune.costmodel import family_of

    if name not in ("auto", family_of(kind)):
        raise UserError(f"--cost-model {name}: {path} holds a {kind!r} model (family {family_of(kind)}); pass "
                        f"--cost-model auto or {family_of(kind)} (or retrain that folder with make train-costmodel)")
    model = _learned(loaded, online)
    calibrated = f"; calibrated on this CPU by autotune.calibrate: {card['calibrated']}" if card.get("calibrated") else ""
    used = (f"pretrained {kind} from {_shown(path)} (trained for {card.get('hardware_id') or 'unrecorded hardware'}; {why}"
            f"{calibrated}), updated online ({model.learner.mode})")
    return Resolved(model, used, card=card, requested=name, fallback=fallback)


def _from_path(name: str, path: str, target, online: str) -> Resolved:
    from autotune.tvmrt.target import hardware_id

    card, here = read_card(path), hardware_id(target)
    if card.get("hardware_id") and card["hardware_id"] != here:
        raise UserError(f"--cost-model-path {path} was trained for {card['hardware_id']}, not {here}; use a model "
                        "for this target, or --cost-model auto (nearest hardware's model) or stock")
    return _with_pretrained(name, path, card, online, "--cost-model-path")


def _pretrained(kind: str, target, models_dir: str, online: str) -> Resolved:
    from autotune.tvmrt.target import hardware_id

    here = hardware_id(target)
    path = find_pretrained(kind, here, models_dir)
    if path is not None:
        return _with_pretrained(kind, path, _own_card(path, here), online, "this hardware's model")
    nearest = nearest_pretrained(target, models_dir, kinds=(kind,))
    if nearest is not None:
        path, card, reason = nearest
        why = f"no {kind} model for {here}; the nearest hardware's {kind} ({reason})"
        fallback = f"no pretrained {kind} model for {here}; nearest hardware's: {card.get('hardware_id')}"
        return _with_pretrained(kind, path, card, online, why, fallback=fallback)
    others = sorted(d for d in _hardware_dirs(models_dir) if find_pretrained(kind, d, models_dir))
    why = (f"no pretrained {kind} model for {here} or any {target.kind.name} hardware in {models_dir}/ (found "
           f"for: {', '.join(others) or 'none'}); online-only (train one with make train-costmodel, or use "
           "--cost-model auto to start from the nearest hardware's model of another kind)")
    return Resolved(_learned(None, online), f"our ranking XGBoost, online only: {why}", requested=kind, fallback=why)


def _auto(name: str, target, models_dir: str, online: str) -> Resolved:
    from autotune.tvmrt.target import hardware_id

    here = hardware_id(target)
    for kind in AUTO_ORDER:
        path = find_pretrained(kind, here, models_dir)
        if path is not None:
            why = f"auto: the first of {', '.join(AUTO_ORDER)} this hardware has a model for"
            return _with_pretrained("auto", path, _own_card(path, here), online, why)
    pooled = _pooled(target, models_dir, online) if AUTO_POOLED_KIND else None
    if pooled is not None:
        return pooled
    nearest = nearest_pretrained(target, models_dir, kinds=AUTO_ORDER_OTHER_HARDWARE)
    if nearest is not None:
        path, card, reason = nearest
        why = (f"auto: no model for {here}; nearest hardware ({reason}); the first of "
               f"{', '.join(AUTO_ORDER_OTHER_HARDWARE)} it has (transfers best in the real-budget runs)")
        return _with_pretrained("auto", path, card, online, why, fallback=f"no pretrained model for {here}")
    why = f"no pretrained model in {models_dir}/ for {here} or any {target.kind.name} hardware"
    stock = _stock("stock", target)
    return Resolved(stock.model, f"MetaSchedule's stock XGBModel, online only ({why})", requested="auto",
                    fallback=why)


def _pooled(target, models_dir: str, online: str) -> Resolved | None:
    """``auto`` on a CPU without its own model: the CPU-spanning model with this CPU's descriptor, or None."""
    from autotune.hardware import descriptor
    from autotune.tvmrt.target import detect_host, hardware_id, target_json

    path = find_pretrained(AUTO_POOLED_KIND, POOLED_DIR, models_dir)
    if path is None or target.kind.name != "llvm":
        return None
    with open(os.path.join(path, "card.json"), encoding="utf-8") as f:
        card = json.load(f)
    loaded = _load(path)
    loaded.set_hardware(descriptor({"target": target_json(target), "host": detect_host().as_json()}))
    cpus = ", ".join(d["hardware_id"] for d in card.get("datasets", []))
    model = _learned(loaded, online)
    used = (f"pretrained {AUTO_POOLED_KIND} from {_shown(path)} (one model over {cpus}, told this CPU's descriptor; "
            f"auto: no model for {hardware_id(target)}), updated online ({model.learner.mode})")
    return Resolved(model, used, card=read_card(path), requested="auto",
                    fallback=f"no pretrained model for {hardware_id(target)}; the CPU-spanning model")


def _own_card(path: str, here: str) -> dict:
    card = read_card(path)
    if card["hardware_id"] not in (None, here):
        raise UserError(f"{path}/card.json says the model was trained for {card['hardware_id']}, not {here}: "
                        f"move it to the models folder of {card['hardware_id']}")
    return card


_BY_SOURCE = {"auto": _auto, "stock": _stock, "pretrained": _pretrained}


def find_pretrained(kind: str, hw_id: str, models_dir: str = DEFAULT_MODELS_DIR) -> str | None:
    """The folder of ``kind`` for ``hw_id`` when it holds a model: a family name (``mlp``) means its shipped
    recipe's folder (``ms-mlp``), any other name that folder itself."""
    from autotune.costmodel import FAMILIES

    path = os.path.join(models_dir, hw_id, folder_of(kind) if kind in FAMILIES else kind)
    return path if os.path.exists(os.path.join(path, "model.json")) else None


def _hardware_dirs(models_dir: str) -> list[str]:
    if not os.path.isdir(models_dir):
        return []
    return sorted(d for d in os.listdir(models_dir) if os.path.isdir(os.path.join(models_dir, d)))


def read_card(path: str) -> dict:
    """The card of a saved model, summarized for reports (results made with an older model are stale)."""
    card = {}
    card_path = os.path.join(path, "card.json")
    if os.path.exists(card_path):
        with open(card_path, encoding="utf-8") as f:
            card = json.load(f)
    hardware = card.get("hardware") or {}
    return {"path": path, "kind": card.get("kind"), "trained": card.get("trained"),
            "git_commit": card.get("git_commit"), "dataset_manifest_sha256": card.get("dataset_manifest_sha256"),
            "hardware_id": hardware.get("hardware_id"), "target": hardware.get("target"),
            "calibrated": (card.get("calibrated") or {}).get("how")}


def nearest_pretrained(target, models_dir: str = DEFAULT_MODELS_DIR,
                       kinds: tuple[str, ...] = AUTO_ORDER) -> tuple[str, dict, str] | None:
    """(path, card, reason) of the model of ``kinds`` (earlier first on a tie) from the nearest other
    hardware, or None."""
    from autotune.tvmrt.target import hardware_id, target_json

    ours = target_json(target)
    here = hardware_id(target)
    best = None
    for hw in _hardware_dirs(models_dir):
        for rank, kind in enumerate(kinds):
            path = find_pretrained(kind, hw, models_dir)
            if hw == here or path is None:
                continue
            card = read_card(path)
            distance = hardware_distance(ours, card.get("target") or {})
            if distance is not None and (best is None or (distance, rank, hw) < best[0]):
                best = ((distance, rank, hw), path, card)
    if best is None:
        return None
    (_, _, hw), path, card = best
    return path, card, f"{hw}: {describe_distance(ours, card['target'])}"


def isa_features(target: dict) -> frozenset[str]:
    """The ISA features (of ``ISA_FEATURES``) LLVM gives a target dict's ``mcpu``; a cuda target's arch."""
    if target.get("kind") == "cuda":
        return frozenset([str(target.get("arch", ""))])
    from autotune.tvmrt.startup import fast_start

    fast_start("llvm")
    import tvm
    from tvm.target import codegen

    try:
        features = codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": target.get("mcpu")}))
    except Exception:  # noqa: BLE001 - an mcpu this LLVM does not know: no features known
        return frozenset()
    return frozenset(f for f in ISA_FEATURES if f in features)


def hardware_distance(ours: dict, theirs: dict) -> tuple | None:
    """How far a model's hardware (its card's target) is from ours: smaller is nearer; None: other kind."""
    if ours.get("kind") != theirs.get("kind"):
        return None
    mine, other = isa_features(ours), isa_features(theirs)
    cores = abs(math.log2(max(int(theirs.get("num-cores", 1)), 1) / max(int(ours.get("num-cores", 1)), 1)))
    return len(other - mine), len(mine - other), round(cores, 6), ours.get("mcpu") != theirs.get("mcpu")


def describe_distance(ours: dict, theirs: dict) -> str:
    mine, other = isa_features(ours), isa_features(theirs)
    parts = [f"same target kind ({ours.get('kind')})"]
    if other - mine:
        parts.append(f"has {', '.join(sorted(other - mine))} that this target lacks")
    parts.append(f"lacks {', '.join(sorted(mine - other))}" if mine - other else "same ISA features")
    cores, here = theirs.get("num-cores", 1), ours.get("num-cores", 1)
    parts.append(f"{cores} cores like this target" if cores == here else f"{cores} cores, this target {here}")
    return "; ".join(parts)
