"""The transfer methods: zero-shot, scratch, finetune, mtl (TLP-style), ckd (TCL-style).

Torch models (``seq``, ``ms-mlp``) train through ``_torch.train_streams``; XGBoost through warm-started
boosting (``_xgb``). Every method starts from the source model's kind and hyperparameters.
"""

from __future__ import annotations

import copy
import os
import tempfile

import numpy as np
import torch

from .. import load
from .._torch_train import TorchRankerModel
from ..base import CostModel
from ..xgb import XGBCostModel
from . import _xgb
from ._torch import HEAD_MODULE, TwoHeadNet, distill_stream, new_like, rank_stream, train_streams
from .base import Programs, TransferError, TransferInputs, TransferMethod, sample_fraction


def _is_torch(model) -> bool:
    cls = model if isinstance(model, type) else type(model)
    return issubclass(cls, TorchRankerModel)


def _seeded(model: CostModel, seed: int) -> dict:
    return {"seed": seed} if "seed" in model.get_params() else {}


class ZeroShot(TransferMethod):
    """The source model as it is (a copy: save + load)."""

    name = "zero-shot"

    def __init__(self) -> None:
        pass

    def _transfer(self, source_model, inputs):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model")
            source_model.save(path)
            return load(path)


class Scratch(TransferMethod):
    """A fresh model of the source's kind and hyperparameters trained on the target programs only.

    ``params`` override hyperparameters (e.g. fewer epochs); ``kind`` names the model when there is no
    source model."""

    name = "scratch"
    needs_source_model = False

    def __init__(self, seed: int = 0, params: dict | None = None, kind: str | None = None) -> None:
        self.seed = seed
        self.params = params
        self.kind = kind

    def _transfer(self, source_model, inputs):
        from .. import create

        if source_model is None:
            if not self.kind:
                raise TransferError("scratch: give a source model or kind=")
            probe = create(self.kind)
            model = create(self.kind, **_seeded(probe, self.seed), **(self.params or {}))
        else:
            model = type(source_model)(**{**source_model.get_params(), **_seeded(source_model, self.seed),
                                          **(self.params or {})})
        t = inputs.target
        return model.fit(t.batch, t.y, t.groups)


class _Trained(TransferMethod):
    """Shared keywords of the methods that keep training the source model."""

    def __init__(self, steps: int = 300, lr_scale: float = 0.5, seed: int = 0, num_threads: int = 1) -> None:
        self.steps = steps  # torch: optimizer steps
        self.lr_scale = lr_scale  # torch: learning rate = lr_scale * the source model's lr
        self.seed = seed
        self.num_threads = num_threads

    def _copy_net(self, source_model: TorchRankerModel):
        with torch.random.fork_rng(devices=[]):
            return copy.deepcopy(source_model.net_)


class _WithReplay(_Trained):
    """Methods that also read source replay: at most ``replay`` source programs (whole tasks, random);
    each step reads ``aux_groups`` tasks of at most ``aux_group_size`` programs of each extra pool."""

    def __init__(self, steps: int = 300, lr_scale: float = 0.5, replay: int = 4000, aux_groups: int = 4,
                 aux_group_size: int = 32, seed: int = 0, num_threads: int = 1) -> None:
        super().__init__(steps=steps, lr_scale=lr_scale, seed=seed, num_threads=num_threads)
        self.replay = replay
        self.aux_groups = aux_groups
        self.aux_group_size = aux_group_size


class FineTune(_Trained):
    """The source model trained further on the target programs (torch: ``steps`` at ``lr_scale`` x its
    learning rate; XGBoost and other boosters: ``rounds`` more boosting rounds on the target)."""

    name = "finetune"

    def __init__(self, steps: int = 300, lr_scale: float = 0.5, rounds: int = 100, seed: int = 0,
                 num_threads: int = 1) -> None:
        super().__init__(steps=steps, lr_scale=lr_scale, seed=seed, num_threads=num_threads)
        self.rounds = rounds  # XGBoost: boosting rounds added to the source booster

    def supports(self, model):
        cls = model if isinstance(model, type) else type(model)
        if _is_torch(cls) or cls._fine_tune_from is not CostModel._fine_tune_from:
            return None
        return "the model cannot be trained further (no fine_tune)"

    def _transfer(self, source_model, inputs):
        t = inputs.target
        if not _is_torch(source_model):
            clone = type(source_model)(**{**source_model.get_params(), **_seeded(source_model, self.seed)})
            clone._fine_tune_from(source_model, t.batch, t.y, t.groups, self.rounds)
            return clone
        net = self._copy_net(source_model)
        heads = slice(None)
        history = train_streams(source_model, net, [rank_stream(t, heads, batch_groups=source_model.batch_groups)],
                                steps=self.steps, lr=source_model.lr * self.lr_scale, seed=self.seed,
                                num_threads=self.num_threads)
        return new_like(source_model, net, {"transfer": self.name, **history})


class MTL(_WithReplay):
    """TLP-style multi-task learning: one shared trunk, one output head per hardware, trained on source
    replay (source head, source measurements) and target programs (target head) together. The returned
    model is the trunk with the target head (a plain model of the source's kind).

    ``from_source`` starts trunk and both heads from the source model (cheap); False trains a fresh
    network of the same hyperparameters (TLP's setting; needs many more ``steps``). ``replay``: at most
    this many source programs (whole tasks, random); each step reads ``aux_groups`` source tasks of at most
    ``aux_group_size`` programs."""

    name = "mtl"

    def __init__(self, steps: int = 300, lr_scale: float = 0.5, source_weight: float = 1.0, replay: int = 4000,
                 from_source: bool = True, aux_groups: int = 4, aux_group_size: int = 32, seed: int = 0,
                 num_threads: int = 1) -> None:
        super().__init__(steps=steps, lr_scale=lr_scale, replay=replay, aux_groups=aux_groups,
                         aux_group_size=aux_group_size, seed=seed, num_threads=num_threads)
        self.source_weight = source_weight
        self.from_source = from_source

    def supports(self, model):
        cls = model if isinstance(model, type) else type(model)
        if _is_torch(cls) and cls.name in HEAD_MODULE:
            return None
        return "needs a torch model with a separable output head (one of: " + ", ".join(HEAD_MODULE) + ")"

    def _transfer(self, source_model, inputs):
        if inputs.source is None:
            raise TransferError("mtl: needs source programs with their measurements (TransferInputs.source)")
        rng = np.random.default_rng(self.seed)
        replay = _cap(inputs.source, self.replay, rng)
        if self.from_source:
            lr = source_model.lr * self.lr_scale
            net = self._copy_net(source_model)
        else:
            lr = source_model.lr
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                net = source_model._build()
            source_model._fit_stats(net, replay.batch, np.arange(len(replay)))
        two = TwoHeadNet(net, HEAD_MODULE[source_model.name])
        h = source_model.n_heads if hasattr(source_model, "n_heads") else 1
        bg = source_model.batch_groups
        streams = [rank_stream(inputs.target, slice(h, 2 * h), batch_groups=bg),
                   rank_stream(replay, slice(0, h), self.source_weight, self.aux_groups, self.aux_group_size)]
        history = train_streams(source_model, two, streams, steps=self.steps, lr=lr, seed=self.seed,
                                num_threads=self.num_threads)
        return new_like(source_model, two.target_net(), {"transfer": self.name, **history})


class CKD(_WithReplay):
    """Continual knowledge distillation (after TCL): the student starts as the source model (the teacher)
    and learns the target measurements while keeping the teacher's per-task rankings where it has no
    target labels, so it keeps what it knew about the source hardware.

    torch loss per step: LambdaRank(student, target y) + ``distill_weight`` x KL(teacher ‖ student) on
    groups of source replay programs + ``unlabeled_weight`` x KL on groups of unlabeled target programs,
    each KL between the softmax of within-task z-scored scores at temperature ``tau``
    (``_torch.listwise_distill_loss``). XGBoost: ``rounds`` boosting rounds from the source booster on the
    target groups plus pseudo-labelled groups (the teacher's rank within each replay / unlabeled task),
    weighted like the KL terms. ``replay`` / ``unlabeled_max`` cap how many programs of each pool are used
    (whole tasks, random); each step reads ``aux_groups`` tasks of at most ``aux_group_size`` programs of
    each pool.

    The two distillation terms do different jobs: on source replay the teacher is right (it keeps the
    source from being forgotten); on unlabeled target programs it is right only as far as the hardware
    agree (it regularizes the student where no target label exists), hence separate weights."""

    name = "ckd"

    def __init__(self, steps: int = 300, lr_scale: float = 0.5, distill_weight: float = 1.0,
                 unlabeled_weight: float = 0.5, tau: float = 0.5, replay: int = 4000, unlabeled_max: int = 4000,
                 aux_groups: int = 4, aux_group_size: int = 32, rounds: int = 100, seed: int = 0,
                 num_threads: int = 1) -> None:
        super().__init__(steps=steps, lr_scale=lr_scale, replay=replay, aux_groups=aux_groups,
                         aux_group_size=aux_group_size, seed=seed, num_threads=num_threads)
        self.rounds = rounds
        self.distill_weight = distill_weight
        self.unlabeled_weight = unlabeled_weight
        self.tau = tau
        self.unlabeled_max = unlabeled_max

    def supports(self, model):
        cls = model if isinstance(model, type) else type(model)
        if _is_torch(cls):
            return None
        if issubclass(cls, XGBCostModel):
            if isinstance(model, type) or model.objective.startswith("rank:"):
                return None
            return "XGBoost distillation uses rank pseudo-labels: needs a rank: objective"
        return "only torch models and ranking XGBoost"

    def _pools(self, inputs: TransferInputs, rng) -> list[tuple[Programs, float]]:
        """(programs, distillation weight) of each pool to distill on."""
        pools = []
        if inputs.source is not None and self.replay > 0 and self.distill_weight > 0:
            pools.append((_cap(inputs.source, self.replay, rng), self.distill_weight))
        if inputs.unlabeled is not None and self.unlabeled_max > 0 and self.unlabeled_weight > 0:
            pools.append((_cap(inputs.unlabeled, self.unlabeled_max, rng), self.unlabeled_weight))
        pools = [(p, w) for p, w in pools if len(p)]
        if not pools:
            raise TransferError("ckd: needs source replay or unlabeled target programs to distill on "
                                "(TransferInputs.source / .unlabeled, with a weight > 0)")
        return pools

    def _transfer(self, source_model, inputs):
        rng = np.random.default_rng(self.seed)
        pools = self._pools(inputs, rng)
        teacher = [source_model.predict(p.batch) for p, _ in pools]
        if not _is_torch(source_model):
            booster = _xgb.distill_boost(source_model, inputs.target, pools, teacher, self.rounds, self.seed)
            model = type(source_model)(**{**source_model.get_params(), "seed": self.seed})
            model.booster_ = booster
            return model
        net = self._copy_net(source_model)
        heads = slice(None)
        streams = [rank_stream(inputs.target, heads, batch_groups=source_model.batch_groups)]
        streams += [distill_stream(p, s, heads, w, self.tau, self.aux_groups, self.aux_group_size)
                    for (p, w), s in zip(pools, teacher)]
        history = train_streams(source_model, net, streams, steps=self.steps, lr=source_model.lr * self.lr_scale,
                                seed=self.seed, num_threads=self.num_threads)
        return new_like(source_model, net, {"transfer": self.name, **history})


def _cap(programs: Programs, n: int, rng) -> Programs:
    """At most ``n`` programs, in whole task batches (``sample_fraction``)."""
    if len(programs) <= n:
        return programs
    return programs.subset(sample_fraction(programs.groups, n / len(programs), rng))
