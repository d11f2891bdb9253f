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
from .base import HardwareAware
from .inputs import N_STORE_FEATS, ProgramBatch


class SegmentSumMLP(nn.Module):
    def __init__(self, hidden_dim: int, in_dim: int = N_STORE_FEATS) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim), nn.ReLU()
        )
        self.layer0 = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.layer1 = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.decoder = nn.Linear(hidden_dim, 1)
        self.register_buffer("feat_scale", torch.ones(in_dim))  # 1 / column max (training rows)

    def forward(self, rows: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
        encoded = self.encoder(rows * self.feat_scale)
        out = encoded.new_zeros(n, encoded.shape[1]).index_add_(0, segment, encoded)
        out = self.layer0(out) + out
        out = self.layer1(out) + out
        return self.decoder(out)  # [n, 1]


class TensetMLPCostModel(HardwareAware, TorchRankerModel):
    """Segment-sum MLP over per-store features (MetaSchedule's ``mlp`` cost model); spread is 0."""

    name = "ms-mlp"
    uses_traces = False

    def __init__(
        self,
        *,
        hidden_dim: int = 256,
        hardware_features: bool = False,
        hardware: list | None = None,
        **training,
    ) -> None:
        """``training``: TorchRankerModel's keywords; MetaSchedule's MLP trains longer, slower and with
        less weight decay than its defaults (epochs 50, lr 7e-4, weight_decay 1e-6, grad_clip 0.5).
        ``hardware_features``: every store row also carries how it meets its program's CPU
        (``autotune.hardware.interaction_features``) and that CPU's descriptor, injected per store before the
        segment sum (where TenSet puts its target id), so one model learns from several CPUs; the CPU is the
        batch's (``ProgramBatch.hw``) or else ``hardware`` (``set_hardware``: the machine it predicts for)."""
        super().__init__(**{"epochs": 50, "lr": 7e-4, "weight_decay": 1e-6, "grad_clip": 0.5, **training})
        self._store_params(locals())

    def _build(self) -> SegmentSumMLP:
        from autotune.hardware import DESCRIPTOR_FIELDS, INTERACTION_FIELDS

        extra = len(INTERACTION_FIELDS) + len(DESCRIPTOR_FIELDS) if self.hardware_features else 0
        return SegmentSumMLP(self.hidden_dim, N_STORE_FEATS + extra)

    def _rows(self, X: ProgramBatch, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, segment = X.store_rows(idx)
        if not self.hardware_features:
            return rows, segment
        from autotune.hardware import interaction_features

        desc = self.program_hardware(X)[idx][segment]
        return np.concatenate([rows, interaction_features(rows, desc), desc], axis=1).astype(np.float32), segment

    def _fit_stats(self, net: SegmentSumMLP, X: ProgramBatch, idx: np.ndarray) -> None:
        rows = self._rows(X, idx)[0]
        if len(rows):
            top = np.abs(rows).max(0)
            with torch.no_grad():
                net.feat_scale.copy_(torch.as_tensor(1.0 / np.where(top > 0, top, 1.0)))

    def _inputs(self, X: ProgramBatch, idx: np.ndarray, device: torch.device) -> tuple:
        rows, segment = self._rows(X, idx)
        return torch.as_tensor(rows, device=device), torch.as_tensor(segment, device=device), len(idx)
