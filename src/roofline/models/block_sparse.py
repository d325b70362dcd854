"""MiniMax-M3's block-sparse attention (MiniMax Sparse Attention, MSA): the layer kind's shape, what it
caches, the keys it attends and its weights (the step graph's ops are roofline.models.msa's).

Read from transformers 5.24's models/minimax_m3_vl (MiniMaxM3VLIndexer, MiniMaxM3VLAttention,
MiniMaxM3VLSparseCacheLayer), with sglang's and TensorRT-LLM's minimax_m3.py for tensor parallelism and
`sparse_init_block`. A sparse layer (`sparse_attention_freq` 1; the config's AttentionKind.SPARSE) runs the
model's GQA attention, every head's queries against only the key blocks a lightning indexer picks:

- the indexer: q_proj h -> H_I·d_I (`sparse_num_index_heads`, `sparse_index_dim`), k_proj h -> d_I (one key a
  token, shared by the index heads), a Gemma RMSNorm over each d_I head of q and k, RoPE on their first
  rotary_dim values; no value path (`sparse_disable_index_value` 1 on every sparse layer);
- every causal (query, key) pair scored q_h·k (2·d_I per index head: it is O(L) a decode token), the scores
  max-pooled over blocks of b = `sparse_block_size` keys (`sparse_score_type` "max"), and per index head (one
  per KV head: each picks its own GQA group's blocks) the k = `sparse_topk_blocks` best blocks kept, the
  query's own block and the `sparse_local_block` − 1 before it forced in (and the first `sparse_init_block`
  blocks: sglang's sparse_topk_select gives them the top score too; transformers has none);
- attention then reads at most k blocks: a query at position L (1-based) attends every key while its block
  ⌈L/b⌉ ≤ k, else its own partial block ((L − 1) mod b + 1 keys) and k − 1 whole ones:
  keys(L) = min(L, (k − 1)·b + (L − 1) mod b + 1).

Cache per token and sparse layer: K and V as any GQA layer, plus the index key, d_I values kept in the
model's dtype (MiniMaxM3VLSparseCacheLayer.idx_keys; whatever the KV cache's), never capped: the indexer
scores the whole context. No state per sequence: the block scores are recomputed from the keys each step.
Weights per sparse layer: h·(H_I + 1)·d_I (index q and k), q_norm and k_norm d_I each.
Tensor parallelism (sglang MiniMaxM3Attention): the index heads split with the query heads, max(1, H_I/tp) a
device (tp dividing H_I or a multiple of it), the one index key computed and cached whole on every device.
"""

from __future__ import annotations

from dataclasses import replace

from roofline.frozen import frozen
from roofline.models.formulas import Num, minimum, windowed_pairs


@frozen
class BlockSparse:
    """The SPARSE layers' indexer and block selection (see the module docstring)."""

    index_heads: int  # sparse_num_index_heads H_I (one per KV head)
    index_dim: int  # sparse_index_dim d_I
    block: int  # sparse_block_size b
    topk: int  # sparse_topk_blocks k
    rotary_dims: int  # of each index head, RoPE's (the model's rotary_dim)
    key_value_bytes: int = 2  # the index key's dtype, the model's (torch_dtype)
    local: int = 1  # sparse_local_block
    init: int = 0  # sparse_init_block

    @property
    def key_bytes(self) -> int:
        """Bytes of one token's index key in one layer: d_I values in the model's dtype."""
        return self.index_dim * self.key_value_bytes

    @property
    def span(self) -> int:
        """k·b: the context up to which a query attends every key."""
        return self.topk * self.block

    def keys(self, context: Num) -> Num:
        """Keys a query at position `context` (1-based) attends: min(L, (k − 1)·b + (L − 1) mod b + 1)."""
        return minimum(context, (self.topk - 1) * self.block + (context - 1) % self.block + 1)

    def pairs(self, queries: Num) -> Num:
        """Σ_{i=1..N} keys(i), the (query, key) pairs a prompt of N tokens attends: with m = min(N, k·b),
        m(m + 1)/2 (every key) + (N − m)·(k − 1)·b (the whole blocks) + the partial blocks' Σ ((j mod b) + 1)
        over the N − m later queries, q·b(b + 1)/2 + r(r + 1)/2 for N − m = q·b + r (the chunked count of
        roofline.models.formulas.windowed_pairs)."""
        m = minimum(queries, self.span)
        rest = queries - m
        return windowed_pairs(m, None) + rest * (self.topk - 1) * self.block + windowed_pairs(rest, self.block, True)

    def blocks(self, context: Num) -> Num:
        """Key blocks a query at position L ranks: ⌈L/b⌉."""
        return -(-context // self.block)

    def block_sum(self, queries: Num) -> Num:
        """Σ_{i=1..N} ⌈i/b⌉, the block scores a prompt ranks: b·q(q + 1)/2 + r·(q + 1) for N = q·b + r."""
        q, r = queries // self.block, queries % self.block
        return self.block * q * (q + 1) // 2 + r * (q + 1)

    def linear_params(self, hidden: int) -> int:
        """One sparse layer's index q_proj and k_proj: h·(H_I + 1)·d_I."""
        return hidden * (self.index_heads + 1) * self.index_dim

    @property
    def name(self) -> str:
        """The layer kind, as `roofline models` lists it."""
        return f"block-sparse attention (top {self.topk} of {self.block}-token blocks)"

    def sharded(self, tp: int) -> BlockSparse:
        """One device's index heads under tensor parallelism: max(1, H_I/tp)."""
        return replace(self, index_heads=max(1, self.index_heads // tp))


__all__ = ["BlockSparse"]
