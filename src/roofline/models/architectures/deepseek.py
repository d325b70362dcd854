"""DeepSeek-V2/V3 (transformers models/deepseek_v3): multi-head latent attention, routed and shared
experts, the first `first_k_dense_replace` layers dense."""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def deepseek(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    if f.integer("moe_layer_freq", 1) != 1:
        raise RooflineError(f"config {f.where}: only moe_layer_freq 1 is supported")
    kw["num_experts"] = f.integer("n_routed_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "n_routed_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["num_shared_experts"] = f.integer("n_shared_experts", 0, minimum=0)
    kw["first_dense_layers"] = f.at_most("first_k_dense_replace", f.integer("first_k_dense_replace", 0, minimum=0),
                                         "num_hidden_layers", kw["num_layers"])
    kw["router_bias"] = model_type in ("deepseek_v3", "kimi_k2")  # e_score_correction_bias (noaux_tc)
    kw["q_lora_rank"] = f.optional_int("q_lora_rank") or 0
    kw["kv_lora_rank"] = f.integer("kv_lora_rank")
    kw["qk_nope_head_dim"] = f.integer("qk_nope_head_dim")
    kw["qk_rope_head_dim"] = f.integer("qk_rope_head_dim")
    kw["v_head_dim"] = f.integer("v_head_dim")
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["num_kv_heads"] = kw["num_heads"]  # MLA: every head has its own (decompressed) K and V
    return ModelConfig(**kw)


# Kimi K2 (moonshotai, model_type kimi_k2) is DeepSeek-V3's architecture: its config names DeepseekV3ForCausalLM
PARSERS: dict[str, Parser] = {"deepseek_v3": deepseek, "deepseek_v2": deepseek, "kimi_k2": deepseek}
