"""The TenSet-MLP cost model as MetaSchedule builds it (``cost_model/mlp_model.py``).

Each per-store feature row (divided by the column maxima of the training rows) goes through an
MLP encoder (164 -> 256 -> 256); the rows of one program are segment-summed, then two residual
layers and a linear decoder give a higher-is-better score. Trained with LambdaRank within task
groups (``_torch_train``). Differences from MetaSchedule: AdamW without the StepLR schedule, and
batches hold whole task groups (MetaSchedule mixes tasks in a batch of 128 programs).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._torch_train import TorchRankerModel
from .inputs import N_STORE_FEATS, ProgramBatch


class SegmentSumMLP(nn.Module):
    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(N_STORE_FEATS, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim), nn.ReLU()
        )
        self.layer0 = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.layer1 = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.decoder = nn.Linear(hidden_dim, 1)
        self.register_buffer("feat_scale", torch.ones(N_STORE_FEATS))  # 1 / column max (training rows)

    def forward(self, rows: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
        encoded = self.encoder(rows * self.feat_scale)
        out = encoded.new_zeros(n, encoded.shape[1]).index_add_(0, segment, encoded)
        out = self.layer0(out) + out
        out = self.layer1(out) + out
        return self.decoder(out)  # [n, 1]


class TensetMLPCostModel(TorchRankerModel):
    """Segment-sum MLP over per-store features (MetaSchedule's ``mlp`` cost model); spread is 0."""

    name = "ms-mlp"
    uses_traces = False

    def __init__(
        self,
        *,
        hidden_dim: int = 256,
        **training,
    ) -> None:
        """``training``: TorchRankerModel's keywords; MetaSchedule's MLP trains longer, slower and with
        less weight decay than its defaults (epochs 50, lr 7e-4, weight_decay 1e-6, grad_clip 0.5)."""
        super().__init__(**{"epochs": 50, "lr": 7e-4, "weight_decay": 1e-6, "grad_clip": 0.5, **training})
        self._store_params(locals())

    def _build(self) -> SegmentSumMLP:
        return SegmentSumMLP(self.hidden_dim)

    def _fit_stats(self, net: SegmentSumMLP, X: ProgramBatch, idx: np.ndarray) -> None:
        rows = X.store_rows(idx)[0]
        if len(rows):
            top = np.abs(rows).max(0)
            with torch.no_grad():
                net.feat_scale.copy_(torch.as_tensor(1.0 / np.where(top > 0, top, 1.0)))

    def _inputs(self, X: ProgramBatch, idx: np.ndarray, device: torch.device) -> tuple:
        rows, segment = X.store_rows(idx)
        return torch.as_tensor(rows, device=device), torch.as_tensor(segment, device=device), len(idx)
