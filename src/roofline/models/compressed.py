"""DeepSeek-V4's compressed attention and its mHC residual streams: the shape, what it caches and keeps,
and its weights (the step graph's ops are roofline.models.compressed_ops').

Read from transformers 5.24's models/deepseek_v4 (DeepseekV4Attention, DeepseekV4HCACompressor,
DeepseekV4CSACompressor, DeepseekV4Indexer, DeepseekV4HyperConnection, DeepseekV4HCACache and
DeepseekV4CSACache) and the DeepSeek-V4 paper's §2.2-2.3 as that code cites it. Every layer is
shared-KV multi-query attention: one head of d = head_dim values that is both the key and the value
(K = V), H query heads, a learned sink per head, over

- the last W = sliding_window tokens (every layer; the cache keeps W rows), and
- per `compress_ratios[i]` m: nothing (0, the window only), CSA (m = 4): one compressed entry per m
  tokens, pooled over 2m tokens (two series of d, the window and the one before it) and the lightning
  indexer's top-k = index_topk of them attended; HCA (m = 128): one entry per m tokens, every one attended.

Cache per token of context (uncapped; the window caps at W): d per layer, d/m per compressed layer, and
per CSA layer the indexer's compressed key d_I/m (index_head_dim; transformers keeps it in the model's
dtype: here the KV dtype's bytes). State per sequence, at most, in the activation dtype: each compressor's
buffer of the m − 1 tokens of the open window (its kv and gate, 2·w each, w = 2d for CSA, d for HCA) and
for CSA the last window's first series (overlap_kv and overlap_gate: 2·m·d), the indexer's alike at d_I.

Weights per layer: q_a h·q_lora, q_b q_lora·H·d, kv h·d, the grouped output projection o_a (o_groups
groups of H·d/g -> o_lora_rank: H·d·o_lora) and o_b (g·o_lora -> h), sinks H, norms q_lora + d; a
compressor kv_proj and gate_proj h·w each, position_bias m·w, kv_norm d; CSA's indexer kv and gate
h·2d_I each, position_bias m·2d_I, kv_norm d_I, q_b q_lora·H_I·d_I, weights_proj h·H_I. mHC (hc_mult n
streams of h): per layer two hyper-connections, each fn (2 + n)·n × n·h, base (2 + n)·n and scale 3;
the head's hc_head n × n·h, base n, scale 1.
"""

from __future__ import annotations

from typing import Any

from roofline.frozen import frozen
from roofline.models.formulas import Num, minimum

CSA, HCA = "CSA", "HCA"


def entries(tokens: Num, ratio: int) -> Num:
    """Compressed entries `tokens` tokens close: one per whole window of `ratio` (the open one is state)."""
    return tokens // ratio


def compressed_pairs(queries: Num, ratio: int, topk: int | None = None) -> Num:
    """Σ_{i=1..N} min(⌊i/m⌋, k): the compressed entries each prompt token attends (query i sees the
    entries whose window closed at or before it: transformers' causal_threshold (i + 1) // m, 0-based).
    Σ ⌊i/m⌋ = m·q(q − 1)/2 + q·(r + 1) with N = q·m + r; with a top-k, ⌊i/m⌋ ≥ k from i = k·m on:
    F(min(N, k·m)) + k·(N − k·m)⁺."""
    def whole(n: Num) -> Num:
        q, r = n // ratio, n % ratio
        return ratio * q * (q - 1) // 2 + q * (r + 1)
    if topk is None:
        return whole(queries)
    cap = topk * ratio
    n = minimum(queries, cap)
    return whole(n) + topk * (queries - n)


@frozen
class CompressedAttention:
    """DeepSeek-V4's attention shape (see the module docstring). `ratios`: per layer 0, `csa` or `hca`."""

    ratios: tuple[int, ...]
    window: int
    head_dim: int
    q_lora: int
    o_groups: int
    o_lora: int
    index_heads: int
    index_dim: int
    topk: int
    hc_mult: int
    csa: int = 4
    hca: int = 128
    sinkhorn_iters: int = 20  # hc_sinkhorn_iters: Sinkhorn-Knopp's normalisations of mHC's n×n mix
    mtp_ratios: tuple[int, ...] = ()  # compress_ratios' entries past the last layer: one per MTP layer

    def layers(self, ratio: int) -> int:
        return sum(1 for r in self.ratios if r == ratio)

    def kind(self, ratio: int) -> str:
        return CSA if ratio == self.csa else HCA

    def layer_name(self, ratio: int) -> str:
        """A layer's kind by its ratio, as `roofline models` lists it."""
        if ratio == 0:
            return f"window {self.window} (K = V)"
        if ratio == self.csa:
            return f"window {self.window} + CSA 1/{ratio} top-{self.topk}"
        return f"window {self.window} + HCA 1/{ratio}"

    @property
    def kinds(self) -> tuple[int, ...]:
        """The compressed layers' ratios present, CSA first."""
        return tuple(r for r in (self.csa, self.hca) if self.layers(r))

    def cache_elements_per_token(self, bytes_per_element: float) -> float:
        """Bytes a token of context adds, uncapped, all layers: d per layer (the window's K = V row), d/m
        per compressed layer, d_I/4 per CSA layer (the indexer's compressed key)."""
        d, n = self.head_dim, len(self.ratios)
        per = (n * d + sum(self.layers(m) * d / m for m in self.kinds)
               + self.layers(self.csa) * self.index_dim / self.csa)
        return per * bytes_per_element

    def cache_bytes(self, context: Num, bytes_per_element: float) -> Num:
        """One sequence's cache at `context`: min(L, W)·d per layer, ⌊L/m⌋·d per compressed layer and
        ⌊L/4⌋·d_I per CSA layer."""
        d = self.head_dim
        rows = len(self.ratios) * minimum(context, self.window) * d
        for m in self.kinds:
            rows = rows + self.layers(m) * entries(context, m) * (d + (self.index_dim if m == self.csa else 0))
        return rows * bytes_per_element

    def state_bytes_per_sequence(self, bytes_per_element: float) -> float:
        """Each compressor's open window at its fullest (m − 1 tokens of kv and gate, 2·w each) and
        CSA's overlap (the last window's first series, kv and gate: 2·m·width), the indexer's alike."""
        def one(m: int, width: int, overlap: bool) -> int:
            series = 2 * width if overlap else width
            return (m - 1) * 2 * series + (2 * m * width if overlap else 0)
        d, di = self.head_dim, self.index_dim
        per = self.layers(self.hca) * one(self.hca, d, False) + self.layers(self.csa) * (
            one(self.csa, d, True) + one(self.csa, di, True))
        return per * bytes_per_element

    def read_entries(self, ratio: int, context: Num) -> Num:
        """Compressed entries one decode query attends: ⌊L/m⌋, capped at top-k for CSA."""
        n = entries(context, ratio)
        return minimum(n, self.topk) if ratio == self.csa else n

    def explain(self, bpe: float, dtype: str, length: int | None) -> list[str]:
        """The cache and state derivation, for --explain."""
        d, di, n = self.head_dim, self.index_dim, len(self.ratios)
        csa, hca = self.layers(self.csa), self.layers(self.hca)
        per = self.cache_elements_per_token(bpe)
        out = [f"    DeepSeek-V4: one K = V row of d = {d} per layer ({n} layers), + d/{self.csa} for the {csa} CSA "
               f"layers and d/{self.hca} for the {hca} HCA layers (one compressed entry per {self.csa} or "
               f"{self.hca} tokens), + index_head_dim/{self.csa} = {di}/{self.csa} for the CSA layers' index keys:",
               f"    ({n}·{d} + {csa}·{d}/{self.csa} + {hca}·{d}/{self.hca} + {csa}·{di}/{self.csa}) × {bpe:g} B "
               f"({dtype}) = {per:,.6g} B a token, uncapped",
               f"    sliding window {self.window}: every layer keeps only the last {self.window} rows; the compressed "
               f"entries and index keys grow with the context"]
        if length:
            at = self.cache_bytes(length, bpe)
            out.append(f"    at {length:,} tokens: {n}·min(L, W)·{d} + {csa}·⌊L/{self.csa}⌋·({d} + {di}) + "
                       f"{hca}·⌊L/{self.hca}⌋·{d} values × {bpe:g} B = {at:,.6g} B a sequence, {at / length:,.6g} B "
                       f"a token")
        st = self.state_bytes_per_sequence(bpe)
        out.append(f"state per sequence (the compressors' open windows at their fullest, CSA's overlap; "
                   f"transformers' DeepseekV4CSACache/HCACache): {hca}·({self.hca} − 1)·2·{d} + {csa}·[({self.csa} − 1)"
                   f"·2·2·({d} + {di}) + 2·{self.csa}·({d} + {di})] values × {bpe:g} B = {st:,.6g} B")
        return out

    # --- weights ----------------------------------------------------------------------------------
    def attention_params(self, hidden: int, heads: int) -> int:
        """One layer's attention linear weights: q_a, q_b, kv, o_a, o_b."""
        d = self.head_dim
        return (hidden * self.q_lora + self.q_lora * heads * d + hidden * d + heads * d * self.o_lora
                + self.o_groups * self.o_lora * hidden)

    def compressor_params(self, hidden: int, ratio: int) -> int:
        """One layer's compressor (and CSA's indexer) kv, gate and weights_proj projections: the ones the
        FP8 checkpoints ship in BF16 (transformers' DeepseekV4PreTrainedModel._keep_in_fp32_modules)."""
        w = 2 * self.head_dim if ratio == self.csa else self.head_dim
        out = 2 * hidden * w
        if ratio == self.csa:
            out += 2 * hidden * 2 * self.index_dim + hidden * self.index_heads
        return out

    @property
    def index_query_params(self) -> int:
        """One CSA layer's indexer q_b_proj (q_lora -> H_I·d_I), FP8 in the checkpoints."""
        return self.q_lora * self.index_heads * self.index_dim

    def compressor_other(self, ratio: int) -> int:
        """Its position_bias and kv_norm gains (added or scaled by, not multiplied as a matmul)."""
        w = 2 * self.head_dim if ratio == self.csa else self.head_dim
        out = ratio * w + self.head_dim
        if ratio == self.csa:
            out += ratio * 2 * self.index_dim + self.index_dim
        return out

    def mhc_params(self, hidden: int) -> tuple[int, int]:
        """(matmul weights, the rest) of mHC: two hyper-connections a layer, and the head's."""
        n = self.hc_mult
        mix = (2 + n) * n
        layers = len(self.ratios)
        return 2 * layers * mix * n * hidden + n * n * hidden, 2 * layers * (mix + 3) + n + 1


def compressed_mtp_parts(cp: CompressedAttention, cfg: Any) -> dict[str, int]:
    """The MTP layers' parameters by part (roofline.models.mtp's, and "mtp_mhc"). Each is one more Block at
    layer_id L + i (DeepSeek's reference inference/model.py MTPBlock, as ROCm/ATOM@22da013
    atom/models/deepseek_v4_mtp.py ports it; the checkpoint's 1,575 mtp.0.* tensors): its attention at
    compress_ratios[L + i], a MoE whose gate is learned (L + i is past num_hash_layers: its correction bias),
    the shared expert, two hyper-connections; e_proj and h_proj h -> h; enorm, hnorm and norm; its own hc_head
    (n × n·h, base n, scale 1). The embedding and the head are the main model's (no copies).

    "mtp": attention, compressor and indexer projections, router h·E, shared experts 3·h·f, e_proj and h_proj
    2·h²; "mtp_experts" E·3·h·f; "mtp_norms": five RMSNorms 5·h, q_a_norm and kv_norm, the sinks H, the bias E,
    the compressor's position_bias and kv_norm, mHC's bases and scales 2·((2 + n)·n + 3) + n + 1; "mtp_mhc":
    the hyper-connections' fn 2·(2 + n)·n·n·h + the head's n·n·h (FP32 in the checkpoint, as mHC's)."""
    hidden, heads, experts = cfg.hidden_size, cfg.num_heads, cfg.num_experts  # cfg: its ModelConfig
    shared, inter = cfg.num_shared_experts, cfg.moe_intermediate_size
    out = {"mtp": 0, "mtp_experts": 0, "mtp_norms": 0, "mtp_mhc": 0}
    n, mix = cp.hc_mult, (2 + cp.hc_mult) * cp.hc_mult
    for m in cp.mtp_ratios:
        out["mtp"] += cp.attention_params(hidden, heads) + hidden * experts + shared * 3 * hidden * inter \
            + 2 * hidden * hidden
        out["mtp_experts"] += experts * 3 * hidden * inter
        out["mtp_norms"] += 5 * hidden + cp.q_lora + cp.head_dim + heads + experts + 2 * (mix + 3) + n + 1
        out["mtp_mhc"] += 2 * mix * n * hidden + n * n * hidden
        if m:
            out["mtp"] += cp.compressor_params(hidden, m) + (cp.index_query_params if m == cp.csa else 0)
            out["mtp_norms"] += cp.compressor_other(m)
    return {k: v for k, v in out.items() if v}


def compressed_features(cp: CompressedAttention, prefill: bool, b: Any, s: Any) -> list[Any]:
    """The step model's columns (roofline.models.stepmodel) the compressed branch adds, per ratio m: the
    entries ⌊S/m⌋ (made in prefill, kept in decode) and the ones a query attends (the top-k's); prefill also
    the pairs Σ min(⌊i/m⌋, k) and Σ ⌊i/m⌋ (attention, index scores) and the score rows B·S·⌊S/m⌋."""
    cols: list[Any] = []
    for m in cp.kinds:
        topk = cp.topk if m == cp.csa else None
        n = s // m
        cols.append(b * n)
        if prefill:
            cols.extend([b * compressed_pairs(s, m, topk), b * s * n])
            if topk is not None:
                cols.append(b * compressed_pairs(s, m))
        elif topk is not None:
            cols.append(b * minimum(n, topk))
    return cols


__all__ = ["CSA", "HCA", "CompressedAttention", "compressed_features", "compressed_mtp_parts", "compressed_pairs",
           "entries"]
