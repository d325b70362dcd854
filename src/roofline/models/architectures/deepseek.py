"""DeepSeek-V2/V3 (transformers models/deepseek_v3): multi-head latent attention, routed and shared
experts, the first `first_k_dense_replace` layers dense, and `num_nextn_predict_layers` multi-token
prediction layers after the main stack (roofline.models.mtp)."""

from __future__ import annotations

from typing import Any

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig, SparseIndexer


def deepseek_experts(f: Fields, kw: dict[str, Any]) -> None:
    """DeepSeek-V3's mixture of experts as its followers spell it (Kimi K2, DeepSeek-V3.2, GLM-4.5, GLM-5):
    n_routed_experts of moe_intermediate_size, n_shared_experts beside them, the first_k_dense_replace
    layers dense, group-limited routing, into the ModelConfig keywords `kw`."""
    if f.integer("moe_layer_freq", 1) != 1:
        raise RooflineError(f"config {f.where}: only moe_layer_freq 1 is supported")
    kw["num_experts"] = f.integer("n_routed_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "n_routed_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["num_shared_experts"] = f.integer("n_shared_experts", 0, minimum=0)
    kw["first_dense_layers"] = f.at_most("first_k_dense_replace", f.integer("first_k_dense_replace", 0, minimum=0),
                                         "num_hidden_layers", kw["num_layers"])
    groups = f.optional_int("n_group") or 1
    if groups > 1:  # group-limited routing: a token's experts in its topk_group best of n_group groups
        kw["routing_node_limit"] = f.at_most("topk_group", f.integer("topk_group"), "n_group", groups)


def mla_moe(f: Fields, name: str, model_type: str) -> dict[str, Any]:
    """What DeepSeek-V3 and the models built on it (Kimi K2, DeepSeek-V3.2, GLM-5) spell alike: MLA,
    the routed and shared experts with the noaux_tc correction bias, the leading dense layers."""
    kw = common(f, name, model_type, False)
    deepseek_experts(f, kw)
    # e_score_correction_bias: DeepSeek-V3's noaux_tc routing (V2's greedy top-k has none)
    kw["router_bias"] = model_type != "deepseek_v2"
    kw["q_lora_rank"] = f.optional_int("q_lora_rank") or 0
    kw["kv_lora_rank"] = f.integer("kv_lora_rank")
    kw["qk_nope_head_dim"] = f.integer("qk_nope_head_dim")
    kw["qk_rope_head_dim"] = f.integer("qk_rope_head_dim")
    kw["v_head_dim"] = f.integer("v_head_dim")
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["num_kv_heads"] = kw["num_heads"]  # MLA: every head has its own (decompressed) K and V
    # DeepSeek-V3 README_WEIGHTS.md: the MTP layer model.layers.61 holds its own embed_tokens and
    # shared_head.head (the hub's 685B = 671B main + 14B MTP counts them)
    kw["mtp_layers"] = f.integer("num_nextn_predict_layers", 0, minimum=0)
    kw["mtp_tables"] = True
    return kw


def indexer(f: Fields, shared: tuple[int, ...] = ()) -> SparseIndexer:
    """DeepSeek Sparse Attention's lightning indexer: index_n_heads of index_head_dim, index_topk."""
    if not f.optional_int("q_lora_rank"):
        raise f.refuse("q_lora_rank", "is needed by the indexer (its query projects the query latent)")
    return SparseIndexer(f.integer("index_n_heads"), f.integer("index_head_dim"), f.integer("index_topk"), shared)


def deepseek(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = mla_moe(f, name, model_type)
    if model_type == "deepseek_v32":  # DeepSeek Sparse Attention's lightning indexer
        kw["indexer"] = indexer(f)
    return ModelConfig(**kw)


# Kimi K2 (moonshotai, model_type kimi_k2) is DeepSeek-V3's architecture: its config names DeepseekV3ForCausalLM
# DeepSeek-V3.2 (deepseek_v32) is V3 with DeepSeek Sparse Attention (index_n_heads, index_head_dim,
# index_topk; roofline.models.dsa)
PARSERS: dict[str, Parser] = {"deepseek_v3": deepseek, "deepseek_v2": deepseek, "kimi_k2": deepseek,
                              "deepseek_v32": deepseek}
