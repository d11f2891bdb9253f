"""A Mamba-style selective state-space cost model over the schedule trace (after TCL, 2026).

Each program's trace is a token sequence (instruction kind + numeric decision features, see
``ProgramBatch``). Tokens pass through a few Mamba blocks (RMSNorm, in_proj to (x, z), causal
depthwise conv + SiLU, input-dependent dt/B/C, diagonal A = -exp(A_log), D skip, y·SiLU(z),
out_proj, residual); the last valid step and the masked mean are pooled. A small MLP reads the
pack-summed per-store features; a head fuses both into a higher-is-better score. Trained with a
LambdaRank loss within task groups (``_torch_train``).

The selective scan is plain torch (runs on CPU and GPU): a loop over time steps, vectorized over
the batch; padded steps get dt = 0, which leaves the state unchanged (exp(0·A) = 1, no input).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._torch_train import TorchRankerModel
from .inputs import N_STORE_FEATS, NUM_DIM, VOCAB_SIZE, ProgramBatch

STATS_SAMPLE = 20000  # programs used to fit the normalization statistics
INFER_ROWS = 128  # CPU inference runs the network on row slices this big (activations stay in cache)
INFER_WORKERS = True  # CPU inference spreads the slices over one worker thread per torch thread


def selective_scan(
    x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor
) -> torch.Tensor:
    """y_t = C_t · h_t with h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t.

    x, dt: [b, l, d]; A: [d, n]; B, C: [b, l, n] -> y [b, l, d]. Steps with dt = 0 keep h.
    The state is kept as [b, n, d] (d innermost: twice as fast on CPU as [b, d, n]); without
    autograd the updates are in place. (A variant computing every step's decay and input in two large
    ops and reading out with one matmul was 1.45x faster with 2-thread ops on slices of 256, and 0.72x
    as fast on the worker threads that inference uses now: its [l, b, n, d] tensors leave the cache.)
    """
    grad = torch.is_grad_enabled()
    At = A.t().contiguous()  # [n, d]
    h = x.new_zeros(x.shape[0], A.shape[1], x.shape[2])  # [b, n, d]
    dt4, dtx = dt.unsqueeze(2), (dt * x).unsqueeze(2)  # [b, l, 1, d]
    B4, C4 = B.unsqueeze(-1), C.unsqueeze(-1)  # [b, l, n, 1]
    ys = []
    for t in range(x.shape[1]):
        if grad:
            h = torch.exp(dt4[:, t] * At) * h + B4[:, t] * dtx[:, t]
        else:
            h = torch.mul(dt4[:, t], At).exp_().mul_(h).addcmul_(B4[:, t], dtx[:, t])
        ys.append((h * C4[:, t]).sum(1))  # [b, d]
    return torch.stack(ys, dim=1)


def causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Depthwise causal conv along time of x [b, l, d] with weight [d, k], as k shifted products."""
    k, length = weight.shape[1], x.shape[1]
    padded = F.pad(x, (0, 0, k - 1, 0))
    out = bias + padded[:, :length] * weight[:, 0]
    for j in range(1, k):
        out = out + padded[:, j : j + length] * weight[:, j]
    return out


class MambaBlock(nn.Module):
    def __init__(self, d_model: int, d_inner: int, d_state: int, d_conv: int) -> None:
        super().__init__()
        self.dt_rank = math.ceil(d_model / 16)
        self.d_state = d_state
        self.norm = nn.RMSNorm(d_model)
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv_weight = nn.Parameter(torch.empty(d_inner, d_conv).uniform_(-(d_conv**-0.5), d_conv**-0.5))
        self.conv_bias = nn.Parameter(torch.empty(d_inner).uniform_(-(d_conv**-0.5), d_conv**-0.5))
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        self.A_log = nn.Parameter(
            torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_inner, 1)
        )
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        # Mamba's dt initialization: softplus(bias) log-uniform in [1e-3, 1e-1]
        nn.init.uniform_(self.dt_proj.weight, -(self.dt_rank**-0.5), self.dt_rank**-0.5)
        dt = torch.exp(torch.rand(d_inner) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x, z = self.in_proj(self.norm(u)).chunk(2, dim=-1)
        x = F.silu(causal_conv(x, self.conv_weight, self.conv_bias))
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(self.dt_proj(dt)) * mask.unsqueeze(-1)
        y = selective_scan(x, dt, -torch.exp(self.A_log), B, C) + x * self.D
        return u + self.out_proj(y * F.silu(z))


class LSTMBlock(nn.Module):
    """The same residual slot with an LSTM as the sequence mixer (causal, like the scan: padding after a
    program's last step does not reach its valid steps)."""

    def __init__(self, d_model: int, d_inner: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d_model)
        self.lstm = nn.LSTM(d_model, d_inner, batch_first=True)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return u + self.out_proj(self.lstm(self.norm(u))[0])


class AttentionBlock(nn.Module):
    """A pre-norm transformer encoder layer (TLP's choice of mixer): self-attention over the program's
    steps (padding masked out), then a 2x feed-forward; positions are added once, before the blocks."""

    def __init__(self, d_model: int, d_inner: int, n_heads: int = 4) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d_model, 2 * d_inner), nn.GELU(), nn.Linear(2 * d_inner, d_model))

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.norm1(u)
        u = u + self.attn(h, h, h, key_padding_mask=mask == 0, need_weights=False)[0]
        return u + self.ff(self.norm2(u))


def positions(length: int, d_model: int, device) -> torch.Tensor:
    """Sinusoidal position codes [length, d_model] (no maximum trace length to fix in advance)."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, device=device, dtype=torch.float32) * (-math.log(1e4) / d_model))
    out = torch.zeros(length, d_model, device=device)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq)[:, : d_model // 2]
    return out


MIXERS = ("mamba", "lstm", "attention")
STORE_MODES = ("packsum", "rows")


def _block(mixer: str, d_model: int, d_inner: int, d_state: int, d_conv: int) -> nn.Module:
    if mixer == "mamba":
        return MambaBlock(d_model, d_inner, d_state, d_conv)
    if mixer == "lstm":
        return LSTMBlock(d_model, d_inner)
    if mixer == "attention":
        return AttentionBlock(d_model, d_inner)
    raise ValueError(f"mixer: unknown {mixer!r}; valid: {', '.join(MIXERS)}")


class SeqNet(nn.Module):
    """Trace tokens -> mixer blocks (Mamba by default) -> [last, mean] pool; log pack-sum -> MLP; fused heads."""

    def __init__(
        self,
        d_model: int,
        n_layers: int,
        d_inner: int,
        d_state: int,
        d_conv: int,
        store_hidden: int,
        n_heads: int,
        dropout: float,
        mixer: str = "mamba",
        store_mode: str = "packsum",
    ) -> None:
        super().__init__()
        self.mixer = mixer
        self.store_mode = store_mode
        self.embed = nn.Embedding(VOCAB_SIZE, d_model, padding_idx=0)
        self.numeric = nn.Linear(NUM_DIM, d_model)
        self.blocks = nn.ModuleList(_block(mixer, d_model, d_inner, d_state, d_conv) for _ in range(n_layers))
        self.norm = nn.RMSNorm(d_model)
        self.store = nn.Sequential(
            nn.Linear(N_STORE_FEATS, store_hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(store_hidden, store_hidden),
            nn.ReLU(),
        )
        width = 2 * d_model + store_hidden
        if store_mode == "rows":
            # every per-store row encoded on its own, then pooled per program (sum and max): which store
            # carries which features survives, where the pack-sum adds all stores into one row
            self.rows = nn.Sequential(nn.Linear(N_STORE_FEATS, store_hidden), nn.ReLU(),
                                      nn.Linear(store_hidden, store_hidden), nn.ReLU())
            self.register_buffer("row_mean", torch.zeros(N_STORE_FEATS))
            self.register_buffer("row_std", torch.ones(N_STORE_FEATS))
            width += 2 * store_hidden
        elif store_mode != "packsum":
            raise ValueError(f"store_mode: unknown {store_mode!r}; valid: {', '.join(STORE_MODES)}")
        self.drop = nn.Dropout(dropout)
        self.heads = nn.ModuleList(
            nn.Sequential(nn.Linear(width, d_model), nn.ReLU(), nn.Linear(d_model, 1)) for _ in range(n_heads)
        )
        # normalization statistics, fitted on the training programs (part of the state_dict)
        self.register_buffer("num_mean", torch.zeros(NUM_DIM))
        self.register_buffer("num_std", torch.ones(NUM_DIM))
        self.register_buffer("store_mean", torch.zeros(N_STORE_FEATS))
        self.register_buffer("store_std", torch.ones(N_STORE_FEATS))

    def forward(
        self, kinds: torch.Tensor, numeric: torch.Tensor, lengths: torch.Tensor, packsum: torch.Tensor,
        rows: torch.Tensor | None = None, segment: torch.Tensor | None = None,
    ) -> torch.Tensor:
        parts = [self.store((slog(packsum) - self.store_mean) / self.store_std)]
        if self.store_mode == "rows":
            enc = self.rows((slog(rows) - self.row_mean) / self.row_std)
            n = len(kinds)
            summed = enc.new_zeros(n, enc.shape[1]).index_add_(0, segment, enc)
            peak = enc.new_zeros(n, enc.shape[1]).scatter_reduce_(
                0, segment[:, None].expand_as(enc), enc, "amax", include_self=True)
            parts += [summed, peak]  # encodings are >= 0 (ReLU): 0 is max's neutral element
        fused = self.drop(torch.cat([self.sequence(kinds, numeric, lengths), *parts], dim=-1))
        return torch.cat([head(fused) for head in self.heads], dim=-1)

    def sequence(self, kinds: torch.Tensor, numeric: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The trace branch: [last valid step, masked mean] of the mixer blocks' output, [n, 2 d_model]."""
        if not torch.is_grad_enabled() and kinds.device.type == "cpu" and len(kinds) > INFER_ROWS:
            def part(i: int) -> torch.Tensor:
                rows = slice(i, i + INFER_ROWS)
                width = max(int(lengths[rows].max()), 1)
                with torch.inference_mode():  # grad mode is per thread: a worker starts with it on
                    return self.sequence(kinds[rows, :width], numeric[rows, :width], lengths[rows])

            starts, threads = range(0, len(kinds), INFER_ROWS), torch.get_num_threads()
            workers = min(threads, len(starts)) if INFER_WORKERS else 1
            if workers <= 1:
                return torch.cat([part(i) for i in starts])
            # whole slices on one worker thread per core, each op single-threaded (new threads take the
            # global count, 1 meanwhile): at these sizes an op split over cores costs more in wake-ups
            # than it gains, while slices are independent
            torch.set_num_threads(1)
            try:
                with ThreadPoolExecutor(workers) as pool:
                    return torch.cat(list(pool.map(part, starts)))
            finally:
                torch.set_num_threads(threads)
        length = kinds.shape[1]
        mask = (torch.arange(length, device=kinds.device)[None, :] < lengths[:, None]).to(numeric.dtype)
        h = self.embed(kinds) + self.numeric((numeric - self.num_mean) / self.num_std)
        if self.mixer == "attention":
            h = h + positions(length, h.shape[-1], h.device)
        for block in self.blocks:
            h = block(h, mask)
        h = self.norm(h)
        last = h[torch.arange(h.shape[0], device=h.device), (lengths - 1).clamp_min(0)]
        mean = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0)
        return torch.cat([last, mean], dim=-1)


def _set_stats(mean_buf: torch.Tensor, std_buf: torch.Tensor, rows: np.ndarray) -> None:
    if len(rows):
        std = rows.std(0)
        with torch.no_grad():
            mean_buf.copy_(torch.as_tensor(rows.mean(0)))
            std_buf.copy_(torch.as_tensor(np.where(std > 1e-6, std, 1.0)))


def slog(x: torch.Tensor) -> torch.Tensor:
    """sign(x)·log1p(|x|): log1p that tolerates negative feature sums."""
    return torch.sign(x) * torch.log1p(x.abs())


class SeqCostModel(TorchRankerModel):
    """Selective state-space (Mamba-style) ranking model over schedule traces + pack-sum MLP.

    Defaults are sized for CPU inference at trace length ~60: d_model 32, expand 1 (d_inner =
    expand * d_model = 32), d_state 8, 2 blocks (~29k parameters); the scan's [d_state x d_inner]
    state per step dominates the cost, and d_model 64 with expand 2 predicts ~4x slower. ``n_heads`` > 1 trains an
    ensemble of heads on one trunk (differing by initialization); spread is then their standard
    deviation, else 0. With cores shared by other busy processes, ``num_threads`` > 1 can be far
    slower than 1 unless OMP_WAIT_POLICY=PASSIVE is set before torch is imported.
    """

    name = "seq"

    def __init__(self, *, d_model: int = 32, n_layers: int = 2, expand: int = 1, d_state: int = 8, d_conv: int = 4,
                 store_hidden: int = 32, n_heads: int = 1, dropout: float = 0.2, mixer: str = "mamba",
                 store_mode: str = "packsum", **training) -> None:
        """``mixer``: the sequence block, ``mamba`` (default), or for the comparison of issue 12 (TCL's claim
        T2) a same-width ``lstm`` or ``attention`` (transformer encoder) block in the same slot.
        ``store_mode``: ``packsum`` (default: the per-store feature rows summed, then an MLP) or ``rows``
        (registered as ``seq-rows``: besides that, every row encoded on its own and pooled by sum and max).
        ``training``: TorchRankerModel's keywords (epochs 30, lr 2e-3, weight_decay 1e-2, ...)."""
        if mixer not in MIXERS:
            raise ValueError(f"mixer: unknown {mixer!r}; valid: {', '.join(MIXERS)}")
        if store_mode not in STORE_MODES:
            raise ValueError(f"store_mode: unknown {store_mode!r}; valid: {', '.join(STORE_MODES)}")
        super().__init__(**training)
        self._store_params(locals())

    def _build(self) -> SeqNet:
        return SeqNet(
            self.d_model,
            self.n_layers,
            self.expand * self.d_model,
            self.d_state,
            self.d_conv,
            self.store_hidden,
            self.n_heads,
            self.dropout,
            self.mixer,
            self.store_mode,
        )

    def _fit_stats(self, net: SeqNet, X: ProgramBatch, idx: np.ndarray) -> None:
        rng = np.random.default_rng(self.seed)
        idx = np.sort(rng.choice(idx, size=min(len(idx), STATS_SAMPLE), replace=False))
        steps = np.arange(X.kinds.shape[1])[None, :] < X.lengths[idx, None]
        num = X.numeric[idx][steps].astype(np.float64)
        store = slog(torch.as_tensor(X.packsum()[idx], dtype=torch.float64)).numpy()
        _set_stats(net.num_mean, net.num_std, num)
        _set_stats(net.store_mean, net.store_std, store)
        if net.store_mode == "rows":
            rows = X.store_rows(idx)[0]
            _set_stats(net.row_mean, net.row_std, slog(torch.as_tensor(rows, dtype=torch.float64)).numpy())

    def _inputs(self, X: ProgramBatch, idx: np.ndarray, device: torch.device) -> tuple:
        lengths = X.lengths[idx]
        width = max(int(lengths.max()) if len(idx) else 1, 1)  # trailing padding is dropped
        out = (
            torch.as_tensor(X.kinds[idx, :width], device=device),
            torch.as_tensor(X.numeric[idx, :width], device=device),
            torch.as_tensor(lengths, device=device),
            torch.as_tensor(X.packsum()[idx], device=device),
        )
        if self.store_mode != "rows":
            return out
        rows, segment = X.store_rows(idx)
        return (*out, torch.as_tensor(rows, device=device), torch.as_tensor(segment, device=device))

    def _predict_order(self, X: ProgramBatch) -> np.ndarray:
        return np.argsort(X.lengths, kind="stable")  # batches of similar length scan fewer steps
