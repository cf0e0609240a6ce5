"""A small decoder-only transformer (GPT-style), random init, for the benchmark workloads.

Pre-norm blocks (LayerNorm, causal self-attention through ``scaled_dot_product_attention``,
a 4x GELU MLP), tied input/output embeddings. Sizes come from job.json ``model``.

FLOPs per token for MFU follow the PaLM paper's accounting (Chowdhery et al. 2022, appendix B):
6 N for the matmuls of the forward and backward pass over N non-embedding parameters, plus
12 L d T for attention over a context of T tokens; the tied output projection adds 6 d V.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

Cache = Tuple[torch.Tensor, torch.Tensor]  # one block's keys and values


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor, cache: Optional[Cache] = None) -> Tuple[torch.Tensor, Cache]:
        """``cache``: this block's keys and values of the tokens before ``x`` (generation)."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        # A query of one new token sees every cached key: causal masking only within x itself.
        att = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and t > 1)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), (k, v)


class Decoder(nn.Module):
    def __init__(self, vocab: int, d_model: int, layers: int, heads: int, seq_len: int) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"model.d_model {d_model} must be a multiple of model.heads {heads}")
        self.seq_len = seq_len
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.apply(_init)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.step(tokens, None)[0]

    def step(
        self, tokens: torch.Tensor, caches: Optional[List[Cache]], start: int = 0
    ) -> Tuple[torch.Tensor, List[Cache]]:
        """Logits of ``tokens`` at positions ``start``...; with the blocks' caches of the positions before."""
        t = tokens.shape[1]
        x = self.embed(tokens) + self.pos(torch.arange(start, start + t, device=tokens.device))
        new: List[Cache] = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, caches[i] if caches is not None else None)
            new.append(kv)
        return self.ln(x) @ self.embed.weight.t(), new  # tied output projection


def _init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def build(cfg: Dict[str, Any], seed: int = 1234) -> Decoder:
    torch.manual_seed(seed)
    return Decoder(
        int(cfg["vocab"]), int(cfg["d_model"]), int(cfg["layers"]), int(cfg["heads"]), int(cfg["seq_len"])
    )


def parameter_count(cfg: Dict[str, Any]) -> int:
    """Parameters of ``Decoder(cfg)``, without building it (the workstation sizes jobs with this too)."""
    d, layers, vocab, seq = int(cfg["d_model"]), int(cfg["layers"]), int(cfg["vocab"]), int(cfg["seq_len"])
    per_block = 12 * d * d + 13 * d  # qkv, proj, fc, out (+ biases) and two LayerNorms
    return vocab * d + seq * d + layers * per_block + 2 * d


def flops_per_token(cfg: Dict[str, Any]) -> float:
    """Training FLOPs per token (forward + backward), PaLM's accounting."""
    d, layers, vocab, seq = int(cfg["d_model"]), int(cfg["layers"]), int(cfg["vocab"]), int(cfg["seq_len"])
    non_embedding = layers * 12 * d * d
    return 6.0 * non_embedding + 12.0 * layers * d * seq + 6.0 * d * vocab
