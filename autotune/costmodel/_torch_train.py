"""Shared torch plumbing for the neural cost models (``seq``, ``ms-mlp``).

``TorchRankerModel`` implements the CostModel hooks once: seeding, thread limits, a validation
split by task group, group batches, the LambdaRank loss, early stopping on pairwise accuracy,
batched inference and ``weights.pt`` save/load (a plain state_dict, loaded with
``weights_only=True``). A subclass supplies the network (``_build``), the statistics it
normalizes with (``_fit_stats``) and how a set of programs becomes tensors (``_inputs``).
"""

from __future__ import annotations

import copy
import logging
import os
import time
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .base import CostModel, ModelFileError
from .inputs import ProgramBatch
from .metrics import pairwise_accuracy, top_k_score

logger = logging.getLogger(__name__)

WEIGHTS_FILE = "weights.pt"
PREDICT_BATCH = 4096
MAX_VAL_GROUP = 1000  # validation looks at most at this many programs of one task
VAL_METRICS = ("pairwise", "topk")
LR_SCHEDULES = ("constant", "cosine")
TASK_WEIGHTS = ("uniform", "latency")
LOSSES = ("lambdarank", "listnet", "both")
DISTIL_MODES = ("pairs", "lambda")
COSINE_FLOOR = 0.05  # the cosine schedule ends at this share of ``lr``


def validation_score(metric: str, y: np.ndarray, score: np.ndarray, groups: np.ndarray) -> float:
    """Early stopping's score of a fit on validation programs (``y``: normalized throughput, higher is
    better): ``pairwise`` accuracy, or ``topk`` = mean of the top-1 and top-5 scores, every task weighing 1."""
    lat = 1.0 / np.maximum(y, 1e-12)  # latency relative to the task's best: orders as latency does
    if metric == "pairwise":
        return pairwise_accuracy(lat, score, groups)
    return 0.5 * (top_k_score(lat, score, groups, {}, 1) + top_k_score(lat, score, groups, {}, 5))


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Runs the body with ``torch.set_num_threads(n)``, restoring the previous count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def lambda_rank_loss(
    scores: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, sigma: float = 1.0, eps: float = 1e-10,
    gain_scale: float = 1.0, group_weight: torch.Tensor | None = None, teacher: torch.Tensor | None = None,
    soft: float = 0.0,
) -> torch.Tensor:
    """LambdaLoss (NDCG-weighted pairwise logistic loss), one row per task group.

    ``scores``, ``y``, ``mask``: [G, P]; padded entries have ``mask`` False. Pairs (i, j) of one
    row with y_i > y_j cost ``-|Δ(1/D)|·|ΔG|·log σ(sigma·(s_i - s_j))`` where positions come from
    the predicted order (as MetaSchedule's ``lambda_rank_loss``, batched over groups) and gains
    G = 2^(gain_scale·y) - 1: with y the normalized throughput in (0, 1], ``gain_scale`` > 1 puts the
    weight on the order among the fastest programs (what top-1 reads). Returns the mean over groups of
    the per-group sum, each group's sum times its ``group_weight`` [G] when given.

    ``teacher`` [G, P] with ``soft`` in (0, 1]: distillation with the same pairs and weights: the pair's target
    probability that i ranks above j is ``1 - soft + soft·σ(t_i - t_j)`` instead of 1, and the cost is the
    cross-entropy against it (``soft`` 0: LambdaRank as above).
    """
    n_groups, width = scores.shape
    y = y.masked_fill(~mask, 0.0)
    order = scores.detach().masked_fill(~mask, float("-inf")).argsort(dim=1, descending=True)
    s = scores.gather(1, order)
    t = y.gather(1, order)
    m = mask.gather(1, order)
    disc = torch.log2(torch.arange(2, width + 2, device=scores.device, dtype=scores.dtype))
    ideal = y.sort(dim=1, descending=True).values
    max_dcg = ((torch.pow(2.0, gain_scale * ideal) - 1.0) / disc).sum(1).clamp_min(eps)
    gain = (torch.pow(2.0, gain_scale * t) - 1.0) / max_dcg[:, None]
    inv = 1.0 / disc
    weight = (inv[:, None] - inv[None, :]).abs()[None] * (gain[:, :, None] - gain[:, None, :]).abs()
    pairs = m[:, :, None] & m[:, None, :] & (t[:, :, None] > t[:, None, :])
    diff = sigma * (s[:, :, None] - s[:, None, :])
    logp = F.logsigmoid(diff)
    if teacher is not None and soft > 0:
        tt = teacher.gather(1, order)
        p = 1.0 - soft + soft * torch.sigmoid(tt[:, :, None] - tt[:, None, :])
        logp = p * logp + (1.0 - p) * F.logsigmoid(-diff)
    if group_weight is not None:
        weight = weight * group_weight[:, None, None]
    return -(weight * logp)[pairs].sum() / max(n_groups, 1)


def listnet_loss(scores: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, temperature: float = 0.1,
                 group_weight: torch.Tensor | None = None) -> torch.Tensor:
    """ListNet's top-one cross-entropy (Cao et al. 2007), one row per task group: the predicted distribution
    softmax(s) against the target softmax(y / ``temperature``) over the row's valid entries. With y the
    normalized throughput in (0, 1] (the best program 1) and a small temperature the target puts most of its
    mass on the fastest programs: the loss asks for the top of the order, which top-1 reads, where LambdaRank
    weighs every misordered pair. ``scores``, ``y``, ``mask``: [G, P]; returns the mean over groups (each
    times ``group_weight`` [G] when given)."""
    neg = torch.finfo(scores.dtype).min
    target = torch.softmax((y / temperature).masked_fill(~mask, neg), dim=1)
    logp = torch.log_softmax(scores.masked_fill(~mask, neg), dim=1)
    per_group = -(target * logp).masked_fill(~mask, 0.0).sum(1)
    if group_weight is not None:
        per_group = per_group * group_weight
    return per_group.sum() / max(len(per_group), 1)


def check_distil(mode: str, weight: float, who: str) -> None:
    """A distillation setting's one check (``fit_with_teacher`` and the ``distilled`` kind): ``mode`` one of
    DISTIL_MODES, ``weight`` a number >= 0, at most 1 in mode ``lambda`` (the teacher's share of each target)."""
    if mode not in DISTIL_MODES:
        raise ValueError(f"{who}: mode must be one of {', '.join(DISTIL_MODES)}; got {mode!r}")
    if not (isinstance(weight, (int, float)) and np.isfinite(weight) and weight >= 0
            and (mode == "pairs" or weight <= 1)):
        raise ValueError(f"{who}: weight must be a number >= 0 (0: no teacher term; at most 1 in mode 'lambda'); "
                         f"got {weight!r}")


def soft_pair_loss(scores: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
                   group_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Distillation's ranking term (RankNet with soft targets, as in ranking distillation): every ordered pair
    (i, j) of a row's valid entries costs the cross-entropy of σ(s_i - s_j) against the teacher's
    σ(t_i - t_j), so the student learns how sure the teacher is of each order, not only the order.
    ``scores``, ``teacher``, ``mask``: [G, P]; returns the mean over groups of the mean over pairs (each group
    times ``group_weight`` [G] when given)."""
    pairs = mask[:, :, None] & mask[:, None, :]
    pairs = pairs & ~torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)[None]
    logit = scores[:, :, None] - scores[:, None, :]
    target = torch.sigmoid(teacher[:, :, None] - teacher[:, None, :])
    cost = F.binary_cross_entropy_with_logits(logit, target, reduction="none").masked_fill(~pairs, 0.0)
    per_group = cost.sum((1, 2)) / pairs.sum((1, 2)).clamp_min(1)
    if group_weight is not None:
        per_group = per_group * group_weight
    return per_group.sum() / max(len(per_group), 1)


def average_states(states: list[dict]) -> dict:
    """The uniform average of state_dicts' floating-point tensors; other entries (counters) from the first."""
    return {k: (torch.stack([st[k] for st in states]).mean(0) if v.is_floating_point() else v)
            for k, v in states[0].items()}


def split_groups(
    groups: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Program indices (train, validation); validation holds round(fraction * n_groups) whole groups."""
    uniq = np.unique(groups)
    n_val = int(round(fraction * len(uniq))) if len(uniq) >= 2 else 0
    n_val = min(n_val, len(uniq) - 1)
    val_groups = rng.choice(uniq, size=n_val, replace=False) if n_val else uniq[:0]
    is_val = np.isin(groups, val_groups)
    return np.nonzero(~is_val)[0], np.nonzero(is_val)[0]


def cap_groups(idx: np.ndarray, groups: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """``idx`` with each group cut down to at most ``cap`` random members (sorted)."""
    keep = [
        rng.choice(m, size=cap, replace=False) if len(m) > cap else m
        for m in (idx[groups[idx] == g] for g in np.unique(groups[idx]))
    ]
    return np.sort(np.concatenate(keep)) if keep else idx


def group_chunks(idx: np.ndarray, groups: np.ndarray, cap: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch's ranking units: each group's programs shuffled and cut into near-equal chunks of at
    most ``cap`` (every program is seen once per epoch), the chunks in random order."""
    chunks = []
    for g in np.unique(groups[idx]):
        members = rng.permutation(idx[groups[idx] == g])
        chunks.extend(np.array_split(members, -(-len(members) // cap)))
    return [chunks[i] for i in rng.permutation(len(chunks))]


def epoch_batches(chunks: list, batch_groups: int, min_batches: int) -> list[list]:
    """Chunks into batches of at most ``batch_groups``, and into at least ``min_batches`` batches
    while there are that many chunks (small data still gets several optimizer steps an epoch)."""
    n = max(-(-len(chunks) // batch_groups), min(min_batches, len(chunks)))
    bounds = np.linspace(0, len(chunks), n + 1).round().astype(int)
    return [chunks[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]


def pad_groups(batch: list[np.ndarray], *values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each of ``values`` (one row per program of ``np.concatenate(batch)``) laid out as
    [len(batch), longest chunk, ...], one chunk (task group) a row, zero-padded; then the mask of real
    entries. The layout ``lambda_rank_loss`` takes."""
    sizes = np.array([len(c) for c in batch])
    device = values[0].device
    slot = torch.as_tensor(np.repeat(np.arange(len(batch)), sizes), device=device)
    pos = torch.as_tensor(np.concatenate([np.arange(s) for s in sizes]), device=device)

    def pad(v: torch.Tensor) -> torch.Tensor:
        out = v.new_zeros((len(batch), int(sizes.max())) + tuple(v.shape[1:]))
        out[slot, pos] = v
        return out

    return (*[pad(v) for v in values], pad(torch.ones(len(slot), dtype=torch.bool, device=device)))


class TorchRankerModel(CostModel):
    """CostModel hooks shared by the torch ranking models; see the module docstring.

    The training keywords are this ``__init__``'s; a subclass's ``__init__`` takes its network's
    keywords and passes ``**training`` on (with its own defaults where they differ).
    """

    def __init__(self, *, epochs: int = 30, lr: float = 2e-3, weight_decay: float = 1e-2, batch_groups: int = 8,
                 min_batches: int = 16, max_group_size: int = 64, val_fraction: float = 0.1, patience: int = 10,
                 mse_weight: float = 0.0, grad_clip: float = 1.0, gain_scale: float = 1.0,
                 val_metric: str = "pairwise", lr_schedule: str = "constant", soup: int = 0,
                 task_weight: str = "uniform", task_weight_power: float = 0.5, loss: str = "lambdarank",
                 list_temperature: float = 0.1, seed: int = 0,
                 num_threads: int = 2, device: str = "cpu") -> None:
        """``gain_scale``: the LambdaRank gains' sharpness (``lambda_rank_loss``); ``val_metric``: what early
        stopping keeps the best epoch by, ``pairwise`` accuracy or ``topk`` (mean of the validation tasks'
        top-1 and top-5 scores, each task weighing 1). Measured on the contract's synthetic tasks (2026-12-05): with
        ~10 validation tasks ``topk`` saturates (0.985 after the second epoch) and stops training there, pairwise
        0.63 vs 0.90 with ``pairwise``; it needs far more validation tasks than the default split holds.
        ``lr_schedule``: ``constant`` (``lr`` every epoch) or ``cosine`` (torch's ``CosineAnnealingLR`` stepped once
        an epoch: epoch ``e`` of ``epochs`` at ``lr·(f + (1 - f)·(1 + cos(π·e/epochs))/2)``, f = COSINE_FLOOR; a
        fine-tune keeps its constant rate). ``soup`` > 1: the weights of the ``soup`` epochs with the best
        validation scores are averaged at the end of the fit (a uniform "model soup", Wortsman et al. 2022; epochs
        of one run lie in one basin, as in SWA), and the average is kept when it scores at least as well on
        validation as the best epoch alone (else the best epoch is): one network, so prediction costs the same.
        ``task_weight``: how much each training task's ranking loss counts — ``uniform`` (every task alike) or
        ``latency`` (∝ the task's best measured latency ** ``task_weight_power``, scaled to mean 1 over the
        training tasks; needs ``fit(..., latency=...)``): TenSet's top-k weighs a task by its latency, so a
        model fitted mostly on microsecond tasks is scored mostly on millisecond ones. ``loss``: ``lambdarank``
        (``lambda_rank_loss``), ``listnet`` (``listnet_loss`` at ``list_temperature``: the top of each list) or
        ``both`` (their sum)."""
        if val_metric not in VAL_METRICS:
            raise ValueError(f"val_metric: unknown {val_metric!r}; valid: {', '.join(VAL_METRICS)}")
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule: unknown {lr_schedule!r}; valid: {', '.join(LR_SCHEDULES)}")
        if task_weight not in TASK_WEIGHTS:
            raise ValueError(f"task_weight: unknown {task_weight!r}; valid: {', '.join(TASK_WEIGHTS)}")
        if loss not in LOSSES:
            raise ValueError(f"loss: unknown {loss!r}; valid: {', '.join(LOSSES)}")
        if not list_temperature > 0:
            raise ValueError(f"list_temperature: must be > 0; got {list_temperature!r}")
        if not (isinstance(soup, int) and soup >= 0):
            raise ValueError(f"soup: the number of best epochs to average must be an integer >= 0 (0 or 1: off); got {soup!r}")
        self._store_params(locals())

    @abstractmethod
    def _build(self) -> nn.Module:
        """A fresh network; ``forward(*self._inputs(...))`` returns scores [n, n_heads]."""

    @abstractmethod
    def _fit_stats(self, net: nn.Module, X: ProgramBatch, idx: np.ndarray) -> None:
        """Sets the network's normalization buffers from the training programs ``idx`` of ``X``."""

    @abstractmethod
    def _inputs(self, X: ProgramBatch, idx: np.ndarray, device: torch.device) -> tuple:
        """The network's inputs for programs ``idx`` of ``X``."""

    def _predict_order(self, X: ProgramBatch) -> np.ndarray:
        return np.arange(len(X))

    def num_parameters(self) -> int:
        """Trainable parameters of the network (as built from the hyperparameters if not fitted)."""
        if self.is_fitted:
            net = self.net_
        else:
            with torch.random.fork_rng(devices=[]):
                net = self._build()
        return sum(p.numel() for p in net.parameters())

    def fit_with_teacher(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray, teacher: np.ndarray,
                         weight: float = 1.0, latency: np.ndarray | None = None, mode: str = "lambda") -> TorchRankerModel:
        """``fit`` with a distillation term against ``teacher`` (another model's scores of the same programs, on the
        scale the student's scores should take). ``mode`` ``pairs``: besides the ranking loss on ``y``, each batch
        adds ``weight`` x ``soft_pair_loss`` (every pair of a task alike); ``lambda``: the LambdaRank loss itself
        takes the teacher's odds as soft targets of its pairs (``lambda_rank_loss``'s ``soft`` = ``weight``, in
        [0, 1]), so the pairs near the top weigh most, as in the ranking loss. Validation, early stopping and the
        soup read ``y`` alone, as in ``fit``."""
        teacher = np.asarray(teacher, dtype=np.float64)
        if teacher.shape != (len(X),) or not np.all(np.isfinite(teacher)):
            raise ValueError(f"fit_with_teacher: teacher must be {len(X)} finite scores, one per program")
        check_distil(mode, weight, "fit_with_teacher")
        if mode == "lambda" and self.loss != "lambdarank":
            raise ValueError(f"fit_with_teacher: mode 'lambda' needs loss 'lambdarank'; this model trains with {self.loss!r}")
        self.fit_teacher_ = (teacher, float(weight), mode)
        try:
            return self.fit(X, y, groups, latency=latency)
        finally:
            del self.fit_teacher_

    # -- CostModel hooks ------------------------------------------------------------------------
    def _fit(self, X: ProgramBatch, y: np.ndarray, groups: np.ndarray) -> None:
        device = torch.device(self.device)
        rng = np.random.default_rng(self.seed)
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch_threads(self.num_threads), torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.seed)
            train, val = split_groups(groups, self.val_fraction, rng)
            val = cap_groups(val, groups, MAX_VAL_GROUP, rng)  # pairwise accuracy is quadratic
            net = self._build()
            self._fit_stats(net, X, train)
            net.to(device)
            self.net_ = net
            self.history_ = self._train(net, X, y, groups, train, val, rng, device, schedule=self.lr_schedule,
                                        group_weight=self._group_weights(groups, train))
        self.net_.eval()

    def _group_weights(self, groups: np.ndarray, train: np.ndarray) -> np.ndarray | None:
        """Group id -> loss weight (``task_weight``); None when uniform."""
        if self.task_weight == "uniform":
            return None
        latency = getattr(self, "fit_latency_", None)
        if latency is None:
            raise ValueError(f"task_weight={self.task_weight!r} needs the programs' latencies: fit(X, y, groups, latency=...)")
        ids, inverse = np.unique(groups[train], return_inverse=True)
        best = np.full(len(ids), np.inf)
        np.minimum.at(best, inverse, latency[train])  # each training task's best latency
        w = (best / np.median(best)) ** self.task_weight_power
        out = np.ones(int(groups.max()) + 1)
        out[ids] = w / w.mean()
        return out

    def _rank_loss(self, scores, y, mask, group_weight, teacher=None, soft=0.0):
        """The ranking loss of one head over a batch of padded groups (``loss``; ``teacher``, ``soft``: see
        ``lambda_rank_loss``)."""
        total = 0.0
        if self.loss in ("lambdarank", "both"):
            total = lambda_rank_loss(scores, y, mask, gain_scale=self.gain_scale, group_weight=group_weight,
                                     teacher=teacher, soft=soft)
        if self.loss in ("listnet", "both"):
            total = total + listnet_loss(scores, y, mask, self.list_temperature, group_weight)
        return total

    def _fine_tune_from(self, base, X, y, groups, steps) -> None:
        """About ``steps`` optimizer steps (whole epochs of ``min_batches``) over the new programs at half
        the learning rate, no early stopping."""
        device = next(base.net_.parameters()).device
        rng = np.random.default_rng(self.seed)
        with torch_threads(self.num_threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            net = copy.deepcopy(base.net_)
            self.net_ = net
            self.history_ = self._train(net, X, y, groups, np.arange(len(X)), np.zeros(0, np.int64), rng, device,
                                        epochs=max(1, -(-steps // self.min_batches)), lr=self.lr * 0.5)
        self.net_.eval()

    def _train(self, net, X, y, groups, train, val, rng, device, epochs: int | None = None,
               lr: float | None = None, schedule: str = "constant", group_weight: np.ndarray | None = None) -> dict:
        base_lr, n_epochs = lr or self.lr, epochs or self.epochs
        opt = torch.optim.AdamW(net.parameters(), lr=base_lr, weight_decay=self.weight_decay)
        y_t = torch.as_tensor(y, dtype=torch.float32)
        teacher, distil, mode = getattr(self, "fit_teacher_", (None, 0.0, "pairs"))
        t_t = None if teacher is None or not distil else torch.as_tensor(teacher, dtype=torch.float32)
        best_acc, best_state, best_epoch, bad, epoch, seen, spent = -1.0, None, -1, 0, 0, 0, 0.0
        top: list[tuple[float, int, dict]] = []  # the soup's candidates: (validation score, epoch, weights)
        sched = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n_epochs, eta_min=COSINE_FLOOR * base_lr)
                 if schedule == "cosine" else None)
        for epoch in range(n_epochs):
            net.train()
            start, total = time.perf_counter(), 0.0
            chunks = group_chunks(train, groups, self.max_group_size, rng)
            for batch in epoch_batches(chunks, self.batch_groups, self.min_batches):
                idx = np.concatenate(batch)
                out = net(*self._inputs(X, idx, device))  # [n, heads]
                target = y_t[idx].to(device)
                pad_s, pad_y, mask = pad_groups(batch, out, target)
                gw = (None if group_weight is None else
                      torch.as_tensor(group_weight[[groups[c[0]] for c in batch]], dtype=torch.float32, device=device))
                pad_t = None if t_t is None else pad_groups(batch, t_t[idx].to(device))[0]
                soft = (pad_t, distil) if mode == "lambda" else (None, 0.0)
                loss = sum(self._rank_loss(pad_s[..., h], pad_y, mask, gw, *soft) for h in range(out.shape[1]))
                if pad_t is not None and mode == "pairs":
                    loss = loss + distil * sum(soft_pair_loss(pad_s[..., h], pad_t, mask, gw) for h in range(out.shape[1]))
                if self.mse_weight:
                    loss = loss + self.mse_weight * ((out - target[:, None]) ** 2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), self.grad_clip)
                opt.step()
                total += float(loss.detach()) * len(batch)
            spent += time.perf_counter() - start
            seen += len(train)
            if sched is not None:
                sched.step()
            msg = f"epoch {epoch}: loss {total / max(len(chunks), 1):.4f}"
            acc = (
                validation_score(self.val_metric, y[val], self._scores(net, X, val, device).mean(1), groups[val])
                if len(val)
                else float("nan")
            )
            if not np.isnan(acc):  # validation groups without any ordered pair cannot stop training
                msg += f", validation {self.val_metric} {acc:.4f}"
                if acc > best_acc:
                    best_acc, best_epoch, bad = acc, epoch, 0
                    best_state = copy.deepcopy(net.state_dict())
                else:
                    bad += 1
                if self.soup > 1 and (len(top) < self.soup or acc > top[-1][0]):
                    top = sorted(top + [(acc, epoch, copy.deepcopy(net.state_dict()))], key=lambda t: -t[0])[: self.soup]
            logger.debug(msg)
            if bad >= self.patience:
                break
        if best_state is not None:
            net.load_state_dict(best_state)
        self.soup_candidates_ = top  # in memory only (not saved): ``soup_of`` averages any number of them
        soup = self._soup(net, top, best_acc, X, y, groups, val, device) if len(top) > 1 else None
        return {
            "epochs_run": epoch + 1,
            "best_epoch": best_epoch if best_state is not None else epoch,
            f"val_{'pairwise_accuracy' if self.val_metric == 'pairwise' else self.val_metric}":
                best_acc if best_state is not None else None,
            "train_programs_per_s": seen / spent if spent else None,
            **({"soup": soup} if soup else {}),
        }

    def soup_of(self, k: int) -> TorchRankerModel:
        """A copy of this fitted model whose network holds the uniform average of the ``k`` best validation
        epochs' weights of its fit, whatever validation says of the average (``k`` = 1: the best epoch alone).
        The candidates exist only after a fit in this process with ``soup`` ≥ ``k``: experiments compare
        several averages of one fit without fitting again (``experiments/costmodel/variants.py --soups``)."""
        top = getattr(self, "soup_candidates_", None)
        if not top or not 1 <= k <= len(top):
            raise ValueError(f"soup_of({k}): this model holds {len(top or [])} soup candidates; fit it with soup >= {k} "
                             "in this process")
        out = copy.copy(self)
        out.net_ = copy.deepcopy(self.net_)
        out.net_.load_state_dict(average_states([t[2] for t in top[:k]]))
        out.net_.eval()
        out.history_ = {**(self.history_ or {}), "soup": {"epochs": sorted(t[1] for t in top[:k]), "kept": True,
                                                           "ungated": True}}
        return out

    def _soup(self, net, top, best_acc, X, y, groups, val, device) -> dict:
        """Loads the average of ``top``'s weights into ``net`` when it validates at least as well as the best
        epoch (``net`` holds the best epoch's on entry and keeps them otherwise); returns what was tried."""
        best = copy.deepcopy(net.state_dict())
        net.load_state_dict(average_states([t[2] for t in top]))
        acc = validation_score(self.val_metric, y[val], self._scores(net, X, val, device).mean(1), groups[val])
        kept = bool(acc >= best_acc)
        if not kept:
            net.load_state_dict(best)
        return {"epochs": sorted(t[1] for t in top), "val": float(acc), "kept": kept}

    def _scores(self, net: nn.Module, X: ProgramBatch, idx: np.ndarray, device: torch.device) -> np.ndarray:
        """Scores [len(idx), n_heads] in batches of PREDICT_BATCH, in eval mode without autograd."""
        net.eval()
        parts = []
        with torch.inference_mode():
            for b in range(0, len(idx), PREDICT_BATCH):
                parts.append(net(*self._inputs(X, idx[b : b + PREDICT_BATCH], device)).float().cpu().numpy())
        return np.concatenate(parts)

    def _predict(self, X: ProgramBatch) -> tuple[np.ndarray, np.ndarray]:
        order = self._predict_order(X)
        device = next(self.net_.parameters()).device
        with torch_threads(self.num_threads):
            raw = self._scores(self.net_, X, order, device)
        out = np.empty_like(raw)
        out[order] = raw
        return out.mean(1), (out.std(1) if out.shape[1] > 1 else np.zeros(len(X)))

    def _state(self, path: str) -> dict:
        state = {k: v.detach().cpu() for k, v in self.net_.state_dict().items()}
        torch.save(state, os.path.join(path, WEIGHTS_FILE))
        return {"weights": WEIGHTS_FILE, "history": self.history_}

    def _restore(self, path: str, state: dict) -> None:
        name = state.get("weights", WEIGHTS_FILE)
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise ModelFileError(f"{os.path.join(path, 'model.json')}: bad weights file name {name!r}")
        file = os.path.join(path, name)
        try:
            weights = torch.load(file, map_location="cpu", weights_only=True)
            with torch_threads(self.num_threads), torch.random.fork_rng(devices=[]):
                net = self._build()
            net.load_state_dict(weights, strict=True)
        except Exception as err:
            raise ModelFileError(
                f"{file}: cannot load {self.name!r} weights ({type(err).__name__}: {err})"
            ) from None
        self.net_ = net.to(torch.device(self.device)).eval()
        self.history_ = state.get("history")
