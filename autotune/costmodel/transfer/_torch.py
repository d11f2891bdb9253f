"""Torch side of transfer: one training loop over several streams of task groups, for the models
built on ``TorchRankerModel`` (``seq``, ``ms-mlp``).

A ``Stream`` is a set of programs cut into task groups each step, a per-program target (measured
throughput, or a teacher's scores), the output columns it trains and its loss. Every optimizer step
takes one batch of groups from every stream and sums ``weight * loss``; the target stream sets the
pace (``min_batches`` per pass over it), the other streams are cycled through.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._torch_train import (
    TorchRankerModel,
    epoch_batches,
    group_chunks,
    lambda_rank_loss,
    pad_groups,
    torch_threads,
)
from .base import Programs

# the output head of each torch model (the rest of the network is the shared trunk)
HEAD_MODULE = {"seq": "heads", "ms-mlp": "decoder"}
_FILL = -1e4  # masked logits (finite: -inf would turn the masked KL terms into NaN gradients)


def listwise_distill_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
                          tau: float = 0.5) -> torch.Tensor:
    """KL(teacher ‖ student) between per-group softmax distributions of within-group z-scored scores.

    ``student``, ``teacher``, ``mask``: [G, P]. Scores are standardized within their group first, so the
    loss depends only on how each model orders and spaces a task's programs (a LambdaRank model's raw
    scale is arbitrary), and it is 0 when the student equals the teacher. ``tau`` < 1 puts the weight
    on the teacher's top programs (the ones that matter for top-k). Mean over groups of >= 2 programs.
    """
    valid = mask.sum(1) >= 2
    log_p = torch.log_softmax((_zscore(teacher, mask) / tau).masked_fill(~mask, _FILL), dim=1)
    log_q = torch.log_softmax((_zscore(student, mask) / tau).masked_fill(~mask, _FILL), dim=1)
    kl = (log_p.exp() * (log_p - log_q)).masked_fill(~mask, 0.0).sum(1)
    return kl[valid].sum() / max(int(valid.sum()), 1)


def _zscore(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype)
    n = m.sum(1, keepdim=True).clamp_min(1.0)
    mean = (x * m).sum(1, keepdim=True) / n
    var = (((x - mean) * m) ** 2).sum(1, keepdim=True) / n
    return (x - mean) / torch.sqrt(var + 1e-6) * m


@dataclass
class Stream:
    programs: Programs
    target: np.ndarray  # per program: measured y (ranking) or teacher scores (distillation)
    loss: Callable  # (scores [G, P], target [G, P], mask [G, P]) -> scalar
    columns: slice  # output columns (heads) this stream trains; the loss is summed over them
    weight: float = 1.0
    batch_groups: int = 8  # task groups per step
    group_cap: int | None = None  # programs per group and step (None: the model's max_group_size)

    def rankable(self) -> np.ndarray:
        """Indices of programs in groups of >= 2 (a lone program has no pair to order)."""
        counts = dict(zip(*np.unique(self.programs.groups, return_counts=True)))
        return np.nonzero([counts[g] >= 2 for g in self.programs.groups])[0]


def _batches(stream: Stream, model: TorchRankerModel, min_batches: int, rng) -> Iterator[list]:
    idx = stream.rankable()
    if len(idx) == 0:
        raise ValueError("a training stream has no task with two programs")
    while True:
        chunks = group_chunks(idx, stream.programs.groups, stream.group_cap or model.max_group_size, rng)
        yield from epoch_batches(chunks, stream.batch_groups, min_batches)


def _stream_loss(model: TorchRankerModel, net: nn.Module, stream: Stream, batch: list, device) -> torch.Tensor:
    idx = np.concatenate(batch)
    out = net(*model._inputs(stream.programs.batch, idx, device))[:, stream.columns]
    target = torch.as_tensor(stream.target[idx], dtype=torch.float32, device=device)
    pad_s, pad_t, mask = pad_groups(batch, out, target)
    return sum(stream.loss(pad_s[..., h], pad_t, mask) for h in range(out.shape[1]))


def train_streams(model: TorchRankerModel, net: nn.Module, streams: list[Stream], *, steps: int, lr: float,
                  seed: int, num_threads: int) -> dict:
    """``steps`` AdamW steps of ``net`` (in place) on the summed stream losses; the first stream paces
    the epochs. Returns a history dict (steps, seconds, mean loss of the last 20 steps)."""
    device = next(net.parameters()).device
    rng = np.random.default_rng(seed)
    start, losses = time.perf_counter(), []
    with torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        feeds = [_batches(s, model, model.min_batches if i == 0 else 1, rng) for i, s in enumerate(streams)]
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=model.weight_decay)
        net.train()
        for _ in range(int(steps)):
            loss = sum(s.weight * _stream_loss(model, net, s, next(f), device) for s, f in zip(streams, feeds))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), model.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
        net.eval()
    return {"steps": int(steps), "seconds": time.perf_counter() - start,
            "final_loss": float(np.mean(losses[-20:])) if losses else None}


class TwoHeadNet(nn.Module):
    """A network with a second copy of its output head, both reading the same trunk features: output
    columns [:h] are the original (source) head's scores, [h:] the new (target) head's."""

    def __init__(self, net: nn.Module, head_name: str) -> None:
        super().__init__()
        self.net = net
        self.head_name = head_name
        self.target_head = copy.deepcopy(getattr(net, head_name))
        self._features: torch.Tensor | None = None
        self._hook = _first(getattr(net, head_name)).register_forward_pre_hook(self._grab)

    def _grab(self, _module, args) -> None:
        self._features = args[0]

    def forward(self, *inputs) -> torch.Tensor:
        source = self.net(*inputs)
        return torch.cat([source, _apply(self.target_head, self._features)], dim=-1)

    def target_net(self) -> nn.Module:
        """The original network with the target head in place of its own (same state_dict keys)."""
        self._hook.remove()
        out = copy.deepcopy(self.net)
        setattr(out, self.head_name, copy.deepcopy(self.target_head))
        return out.eval()


def _first(head: nn.Module) -> nn.Module:
    return head[0] if isinstance(head, nn.ModuleList) else head


def _apply(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(head, nn.ModuleList):
        return torch.cat([h(x) for h in head], dim=-1)
    return head(x)


def new_like(source: TorchRankerModel, net: nn.Module, history: dict, **params) -> TorchRankerModel:
    """A fitted model of the source's kind and hyperparameters (``params`` override) holding ``net``."""
    model = type(source)(**{**source.get_params(), **params})
    model.net_ = net.eval()
    model.history_ = history
    return model


def rank_stream(programs: Programs, columns: slice, weight: float = 1.0, batch_groups: int = 8,
                group_cap: int | None = None) -> Stream:
    return Stream(programs, np.asarray(programs.y, np.float64), lambda_rank_loss, columns, weight, batch_groups,
                  group_cap)


def distill_stream(programs: Programs, teacher_scores: np.ndarray, columns: slice, weight: float, tau: float,
                   batch_groups: int, group_cap: int | None = None) -> Stream:
    return Stream(programs, np.asarray(teacher_scores, np.float64),
                  lambda s, t, m: listwise_distill_loss(s, t, m, tau), columns, weight, batch_groups, group_cap)
