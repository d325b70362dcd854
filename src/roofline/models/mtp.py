"""Multi-token prediction layers (DeepSeek-V3 technical report, arXiv 2412.19437 §2.2; the checkpoint's
layout in its README_WEIGHTS.md; transformers' MtpLayer in modeling_layers.py): `num_nextn_predict_layers`
modules after the main stack (model.layers.L, L+1, ...). Each one

    h'  = eh_proj([enorm(embed(t_next)); hnorm(h)])     eh_proj: 2h -> h, enorm and hnorm RMSNorms over h
    h'' = one transformer layer, as the main stack's last (MLA and its indexer, the MoE)
    logits = head(shared_head.norm(h''))                one more RMSNorm over h; the head is the model's

In the checkpoint's memory, never in the main step: the main forward runs without them (its step, FLOPs
and active parameters leave them out). Used as the draft of speculative decoding
(roofline.serving.speculative): k drafts run the module k times, one token each.

Parts (ModelConfig.param_counts): "mtp" the linear weights (attention, indexer, router, shared experts,
eh_proj), "mtp_experts" the routed experts (divided by ep like the main ones), "mtp_norms" the norm gains
and the router's correction bias, "mtp_tables" the embedding and head copies a checkpoint stores beside
the module (DeepSeek-V3's model.layers.61.embed_tokens and shared_head.head: its hub page's 685B is 671B
main + 14B MTP with them; GLM-5 stores none; Qwen3-Next and Qwen3.5, whose `mtp.*` module vLLM's
qwen3_next_mtp.py loads with the main model's embed_tokens and lm_head, store none either).

Qwen3-Next/3.5 (`mtp_num_hidden_layers`): mtp.fc 2h -> h, pre_fc_norm_embedding and pre_fc_norm_hidden,
full-attention decoder layers as the main stack's (gated attention, q/k norms, the MoE with its shared
expert and gate, or the dense MLP), a final norm; the draft's step idx picks layer idx mod their count.

MiMo-7B (`num_nextn_predict_layers`; vLLM mimo_mtp.py MiMoMultiTokenPredictorLayer): token_layernorm and
hidden_layernorm, input_proj 2h -> h (eh_proj here), one Qwen2 decoder layer (q/k/v biases, the dense MLP),
final_layernorm; the main model's embedding and head.
"""

from __future__ import annotations

from typing import Protocol

from roofline.models.sparse import SparseIndexer


class ModelConfig(Protocol):
    """The shape fields an MTP layer reads (roofline.models.transformer.ModelConfig's; named here, not
    imported: the config imports this module)."""

    @property
    def hidden_size(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def q_lora_rank(self) -> int: ...
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def num_shared_experts(self) -> int: ...
    @property
    def moe_intermediate_size(self) -> int: ...
    @property
    def router_bias(self) -> bool: ...
    @property
    def shared_expert_gate(self) -> bool: ...
    @property
    def intermediate_size(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def qkv_bias(self) -> bool: ...
    @property
    def qk_norm(self) -> bool: ...
    @property
    def is_mla(self) -> bool: ...
    @property
    def mtp_layers(self) -> int: ...
    @property
    def mtp_tables(self) -> bool: ...
    @property
    def indexer(self) -> SparseIndexer | None: ...
    @property
    def is_moe(self) -> bool: ...


MTP_PARTS = ("mtp", "mtp_experts", "mtp_norms", "mtp_tables", "mtp_mhc")  # mtp_mhc: DeepSeek-V4's (compressed)


def mtp_components(c: ModelConfig, attention: int) -> dict[str, int]:
    """One MTP module's linear weights by component, within part "mtp": `attention` is one layer's
    attention parameters (as the main stack counts them). eh_proj is Qwen3-Next's mtp.fc alike."""
    h = c.hidden_size
    out = {"attention": attention, "eh_proj": 2 * h * h}
    if c.indexer is not None:
        out["indexer"] = c.indexer.linear_params(h, c.q_lora_rank)
    if c.is_moe:
        out["router"] = h * (c.num_experts + (1 if c.shared_expert_gate else 0))
        out["shared_experts"] = c.num_shared_experts * 3 * h * c.moe_intermediate_size
    else:
        out["mlp"] = 3 * h * c.intermediate_size
    return out


def mtp_parts(c: ModelConfig, attention: int) -> dict[str, int]:
    """All `mtp_layers` modules' parameters by part (zero parts left out)."""
    if not c.mtp_layers:
        return {}
    h, n = c.hidden_size, c.mtp_layers
    # enorm, hnorm (Qwen: pre_fc_norm_embedding, pre_fc_norm_hidden), shared_head.norm (Qwen: norm), the
    # block's two; MLA's q_a and kv_a norms, or the q and k RMSNorms over head_dim
    norms = 5 * h + (c.q_lora_rank + c.kv_lora_rank if c.is_mla else 2 * c.head_dim if c.qk_norm else 0)
    if c.indexer is not None:
        norms += 2 * c.indexer.head_dim  # the indexer's k_norm, a LayerNorm
    if c.router_bias:
        norms += c.num_experts  # e_score_correction_bias: added, not multiplied
    if c.qkv_bias and not c.is_mla:  # MiMo-7B's Qwen2 block: biases on q, k and v, added, not multiplied
        norms += (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
    out = {"mtp": n * sum(mtp_components(c, attention).values()),
           "mtp_experts": n * c.num_experts * 3 * h * c.moe_intermediate_size if c.is_moe else 0,
           "mtp_norms": n * norms,
           "mtp_tables": n * 2 * c.vocab_size * h if c.mtp_tables else 0}
    return {k: v for k, v in out.items() if v}


__all__ = ["MTP_PARTS", "mtp_components", "mtp_parts"]
