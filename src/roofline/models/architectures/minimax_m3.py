"""MiniMax-M3 (`minimax_m3`, MiniMaxAI/MiniMax-M3; `minimax_m3_vl`, its multimodal export with the language
model in text_config, nvidia/MiniMax-M3-NVFP4): refused naming `sparse_attention_config`, its block-sparse
attention, which no layer kind here reads yet. Never read as MiniMax-M2: that would attend the whole context
on 57 layers that attend 16 blocks of 128 tokens, and drop the index key each of them caches.

What the reference pins (transformers 5.24 models/minimax_m3_vl, MiniMaxM3VLIndexer and MiniMaxM3VLAttention),
for whoever models it: the layers whose `sparse_attention_freq` is 1 (57 of 60; the first 3 attend in full)
run GQA (64 query heads, 4 KV heads of 128, per-head q/k RMSNorm, RoPE over `rotary_dim` 64) beside a
lightning indexer: q_proj h -> sparse_num_index_heads·sparse_index_dim (4·128), k_proj h -> 128 (one index
key a token, cached beside K and V: 128 values per token and sparse layer), q/k RMSNorm and RoPE; it scores
every causal (query, key) pair, 2·4·128 FLOPs each, max-pools the scores over blocks of `sparse_block_size`
128 keys (`sparse_score_type` "max"), and keeps per index head (one per KV head) the `sparse_topk_blocks` 16
best blocks, the `sparse_local_block` 1 block before the query forced in: attention then reads at most
16·128 = 2048 keys a query. `sparse_disable_index_value` 1 on every sparse layer: the indexer has no value
path. The MLP: 3 dense layers of dense_intermediate_size, then 57 of 128 experts (top 4, sigmoid +
e_score_correction_bias) with one shared expert of shared_intermediate_size, all "swigluoai" (gpt-oss's
clamped SwiGLU: swiglu_alpha 1.702, swiglu_limit 7) without biases. What it lacks here: attention that is
full on some GLOBAL layers and block-sparse on others, with the index key in the cache of the latter.
"""

from __future__ import annotations

from collections.abc import Mapping

from roofline.errors import shown
from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def _text(f: Fields) -> ModelConfig:
    sparse = f.raw.get("sparse_attention_config")
    if not isinstance(sparse, Mapping):
        raise f.bad("sparse_attention_config", "an object (MiniMax-M3's block-sparse attention)", sparse)
    freq = sparse.get("sparse_attention_freq")
    on = sum(1 for x in freq if x) if isinstance(freq, list) else 0
    block, topk = shown(sparse.get("sparse_block_size")), shown(sparse.get("sparse_topk_blocks"))
    raise f.refuse("sparse_attention_config", f"(block-sparse attention on {on} layers: index keys scoring blocks of "
                                              f"{block} tokens, the top {topk} blocks attended) is not read yet: no "
                                              f"layer kind here is full attention on some layers and block-sparse on "
                                              f"others")


def minimax_m3(f: Fields, name: str, model_type: str) -> ModelConfig:
    return _text(f)


def minimax_m3_vl(f: Fields, name: str, model_type: str) -> ModelConfig:
    text = f.raw.get("text_config")
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    return _text(Fields(text, f"{f.where} text_config"))


PARSERS: dict[str, Parser] = {"minimax_m3": minimax_m3, "minimax_m3_vl": minimax_m3_vl}
