"""BERT-base, GPT-2 small and ViT-B/16 with explicit (matmul + softmax) attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .calibrate import init_transformer


class SelfAttention(nn.Module):
    """Multi-head self-attention; fused or separate q/k/v projections, optional causal mask."""

    def __init__(self, dim: int, heads: int, fused_qkv: bool, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.head_dim, self.causal, self.fused = heads, dim // heads, causal, fused_qkv
        if fused_qkv:
            self.qkv = nn.Linear(dim, 3 * dim)
        else:
            self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        if self.fused:
            q, k, v = self.qkv(x).split(c, dim=-1)
        else:
            q, k, v = self.query(x), self.key(x), self.value(x)
        q, k, v = self._split(q), self._split(k), self._split(v)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        if self.causal:
            idx = torch.arange(n, device=x.device)
            scores = scores.masked_fill(idx[None, :] > idx[:, None], -1e9)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, n, c)
        return self.proj(out)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, gelu_approx: str = "none") -> None:
        super().__init__()
        self.fc1, self.fc2, self.approx = nn.Linear(dim, hidden), nn.Linear(hidden, dim), gelu_approx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approx))


class PostLNBlock(nn.Module):
    """BERT layer: x = LN(x + attn(x)); x = LN(x + mlp(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.attn, self.ln1 = SelfAttention(dim, heads, fused_qkv=False), nn.LayerNorm(dim, eps=eps)
        self.mlp, self.ln2 = MLP(dim, hidden), nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class PreLNBlock(nn.Module):
    """GPT-2 / ViT layer: x = x + attn(LN(x)); x = x + mlp(LN(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float, causal: bool, gelu_approx: str) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim, eps=eps), SelfAttention(dim, heads, fused_qkv=True, causal=causal)
        self.ln2, self.mlp = nn.LayerNorm(dim, eps=eps), MLP(dim, hidden, gelu_approx)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class BertEncoder(nn.Module):
    """BERT encoder (no pooler); returns last hidden states (batch, seq, dim)."""

    def __init__(self, vocab: int = 30522, max_len: int = 512, dim: int = 768, layers: int = 12,
                 heads: int = 12, hidden: int = 3072, type_vocab: int = 2, eps: float = 1e-12) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        self.token_type = nn.Embedding(type_vocab, dim)
        self.ln = nn.LayerNorm(dim, eps=eps)
        self.layers = nn.ModuleList(PostLNBlock(dim, heads, hidden, eps) for _ in range(layers))
        init_transformer(self)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word(input_ids) + self.position(pos)[None] + self.token_type(torch.zeros_like(input_ids))
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        return x


class GPT2(nn.Module):
    """GPT-2 transformer (no LM head); returns last hidden states after ``ln_f`` (batch, seq, dim)."""

    def __init__(self, vocab: int = 50257, max_len: int = 1024, dim: int = 768, layers: int = 12,
                 heads: int = 12, eps: float = 1e-5) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(
            PreLNBlock(dim, heads, 4 * dim, eps, causal=True, gelu_approx="tanh") for _ in range(layers)
        )
        self.ln_f = nn.LayerNorm(dim, eps=eps)
        init_transformer(self)
        for block in self.blocks:  # GPT-2: scale residual projections by 1/sqrt(2 * layers)
            nn.init.normal_(block.attn.proj.weight, std=0.02 / math.sqrt(2 * layers))
            nn.init.normal_(block.mlp.fc2.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)[None]
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


class ViT(nn.Module):
    """ViT-B/16: 16x16 patch conv, class token, pre-LN encoder, linear head on the class token."""

    def __init__(self, image_hw: tuple[int, int] = (224, 224), patch: int = 16, dim: int = 768, layers: int = 12,
                 heads: int = 12, hidden: int = 3072, num_classes: int = 1000, eps: float = 1e-6) -> None:
        super().__init__()
        num_patches = (image_hw[0] // patch) * (image_hw[1] // patch)
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        self.blocks = nn.ModuleList(
            PreLNBlock(dim, heads, hidden, eps, causal=False, gelu_approx="none") for _ in range(layers)
        )
        self.ln = nn.LayerNorm(dim, eps=eps)
        self.head = nn.Linear(dim, num_classes)
        init_transformer(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])


def bert_base(input_shape: tuple[int, ...]) -> nn.Module:
    return BertEncoder()


def gpt2(input_shape: tuple[int, ...]) -> nn.Module:
    return GPT2()


def vit_b16(input_shape: tuple[int, ...]) -> nn.Module:
    return ViT(image_hw=(input_shape[1], input_shape[2]))
