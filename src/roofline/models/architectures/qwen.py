"""Qwen2, Qwen3 and Qwen3-MoE (transformers models/qwen2, qwen3, qwen3_moe)."""

from __future__ import annotations

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, ModelConfig


def qwen2(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["qkv_bias"] = True  # Qwen2 has biases on q, k and v, none elsewhere
    if f.flag("use_sliding_window", False):
        kw["sliding_window"] = f.optional_int("sliding_window")
        first_full = f.integer("max_window_layers", kw["num_layers"], minimum=0)
        kw["layer_attention"] = tuple(AttentionKind.GLOBAL if i < first_full else AttentionKind.LOCAL
                                      for i in range(kw["num_layers"]))
    return ModelConfig(**kw)


def qwen3(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    return ModelConfig(**kw)


def qwen3_moe(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    if f.integer("decoder_sparse_step", 1) != 1 or f.raw.get("mlp_only_layers"):
        raise RooflineError(f"config {f.where}: only decoder_sparse_step 1 with no mlp_only_layers is supported")
    kw["num_experts"] = f.integer("num_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["intermediate_size"] = 0  # the dense width in the file is unused when every layer is MoE
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"qwen2": qwen2, "qwen3": qwen3, "qwen3_moe": qwen3_moe}
