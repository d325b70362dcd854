"""The shape one softmax-attention layer kind runs at: its heads, widths and what it caches.

A model's layers need not share one attention shape. Gemma 4's full-attention layers run
num_attention_heads queries of global_head_dim (512) against num_global_key_value_heads K/V heads,
with `attention_k_eq_v` (no v_proj: V is the k_proj output, normed without a gain), where its sliding
layers run the same queries at head_dim (256) against num_key_value_heads (transformers 5.24
Gemma4TextAttention: `layer_config = config.per_layer_config[layer_idx]`). Each layer kind carries its
shape (`ModelConfig.attention_shape(kind)`), and everything counted per layer (weights, KV cache,
FLOPs, the split) reads it from there.

K=V: both K and V are still cached (K is k_norm'd and rotated, V v_norm'd and not: two tensors, as
transformers' cache.update(key_states, value_states) keeps them); only the projection is shared, so
the weights and the qkv GEMM lose G·d columns while the cache does not.
"""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.frozen import frozen


@frozen
class AttentionShape:
    """H query heads of `head_dim`, G K/V heads; values `v_head_dim` wide (MLA decompressed: 128 beside
    the keys' 192); `k_eq_v`: one projection gives K and V (Gemma 4's full layers); `rotary_dims`: dims of
    each q/k head RoPE rotates (0: all of head_dim); `output_gate`: q_proj also gives a sigmoid gate of
    H·d_v on the attention output (Qwen3-Next); `sinks`: a learned logit per query head (H parameters)."""

    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    k_eq_v: bool = False
    rotary_dims: int = 0
    output_gate: bool = False
    sinks: bool = False  # one learned sink logit per query head in every softmax's sum (gpt-oss; MiMo's SWA layers)

    def __post_init__(self) -> None:
        for label in ("heads", "kv_heads", "head_dim", "v_head_dim"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RooflineError(f"attention shape: {label} must be a positive whole number, got {value!r}")
        if self.heads % self.kv_heads:
            raise RooflineError(f"attention shape: {self.heads} query heads are not a multiple of {self.kv_heads} "
                                f"key/value heads")
        if self.k_eq_v and self.v_head_dim != self.head_dim:
            raise RooflineError(f"attention shape: K=V needs values as wide as keys ({self.head_dim}), got "
                                f"{self.v_head_dim}")
        if not 0 <= self.rotary_dims <= self.head_dim:
            raise RooflineError(f"attention shape: rotary_dims {self.rotary_dims} is not in 0..{self.head_dim}")

    @property
    def rotated(self) -> int:
        """Dims of each q/k head RoPE rotates."""
        return self.rotary_dims or self.head_dim

    @property
    def query_width(self) -> int:
        """q_proj's output: H·d, twice that with an output gate (query and gate)."""
        return (2 if self.output_gate else 1) * self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """k_proj + v_proj outputs: G·(d + d_v), or G·d when one projection gives K and V."""
        return self.kv_heads * (self.head_dim if self.k_eq_v else self.head_dim + self.v_head_dim)

    @property
    def qkv_width(self) -> int:
        """The fused q/k/v GEMM's output width."""
        return self.query_width + self.kv_width

    @property
    def out_width(self) -> int:
        """The attention output o_proj reads: H·d_v."""
        return self.heads * self.v_head_dim

    @property
    def kv_elements(self) -> int:
        """Values one token adds to this layer's cache: G·(d + d_v) (K and V are both cached under K=V)."""
        return self.kv_heads * (self.head_dim + self.v_head_dim)

    @property
    def flop_per_pair(self) -> float:
        """FLOPs per (query, key) pair: 2·H·(d + d_v) for q·kᵀ and p·v."""
        return 2.0 * self.heads * (self.head_dim + self.v_head_dim)

    def linear_params(self, hidden: int) -> int:
        """q, k, v and o projections: h·(qkv_width) + H·d_v·h."""
        return hidden * self.qkv_width + self.out_width * hidden

    def sharded(self, tp: int) -> AttentionShape:
        """One of `tp` devices' share: H/tp query heads, G/tp K/V heads (one, replicated, when tp > G)."""
        return AttentionShape(self.heads // tp, max(1, self.kv_heads // tp), self.head_dim, self.v_head_dim,
                              self.k_eq_v, self.rotary_dims, self.output_gate, self.sinks)

    def describe(self) -> str:
        """'GQA 32/4 × 512, K=V' (query heads / K-V heads × head dim)."""
        h, g = self.heads, self.kv_heads
        kind = f"MHA {h}" if g == h else f"MQA {h}/1" if g == 1 else f"GQA {h}/{g}"
        return f"{kind} × {self.head_dim}" + (", K=V" if self.k_eq_v else "")


__all__ = ["AttentionShape"]
