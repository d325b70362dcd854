"""DeepSeek Sparse Attention's lightning indexer: its shape, its cached key and its weights (the step
graph's ops are roofline.models.dsa's)."""

from __future__ import annotations

from roofline.frozen import frozen


@frozen
class SparseIndexer:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp, its inference/model.py
    Indexer; vLLM deepseek_v2.py): `heads` index heads of `head_dim` score every cached token with
    Σ_h w_h · ReLU(q_h · k), and MLA attends the `topk` best. Its key, one per token and layer, is
    cached in FP8 with one float32 scale a 128 values: head_dim + 4·⌈head_dim/128⌉ bytes.
    Weights: wq_b q_lora·heads·head_dim, wk h·head_dim, weights_proj h·heads, k_norm (a LayerNorm).
    `shared`: the layers that run no indexer of their own and reuse the previous indexer layer's top-k
    (GLM-5.2's indexer_types "shared"; transformers GlmMoeDsaAttention): no weights, key or scores there."""

    heads: int
    head_dim: int
    topk: int
    shared: tuple[int, ...] = ()
    # GLM-5.2's index_share_for_mtp_iteration: its MTP iterations reuse a top-k instead of running the indexer
    mtp_shares_index: bool = False

    @property
    def key_bytes(self) -> int:
        return self.head_dim + 4 * -(-self.head_dim // 128)

    def linear_params(self, hidden: int, q_lora: int) -> int:
        return q_lora * self.heads * self.head_dim + hidden * self.head_dim + hidden * self.heads


__all__ = ["SparseIndexer"]
