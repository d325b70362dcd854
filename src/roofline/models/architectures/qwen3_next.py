"""Qwen3-Next and Qwen3.5 (transformers models/qwen3_next, qwen3_5, qwen3_5_moe; vLLM qwen3_next.py):
hybrid layers named by `layer_types` (or every `full_attention_interval`-th layer full): Gated
DeltaNet linear attention (`linear_*` fields; its state per sequence, roofline.models.deltanet) and
gated full attention (q_proj twice as wide: the query and a sigmoid gate on the output; q/k RMSNorm
over head_dim). MoE layers carry one shared expert with its own sigmoid gate (h -> 1).

Qwen3.5 nests the language model in `text_config` beside a `vision_config`: the language model is
analysed; the vision tower's weights (Qwen3_5VisionModel: a Conv3d patch embedding, learned
positions, `depth` pre-LayerNorm blocks with a biased qkv/proj attention and a biased GELU MLP, and a
2x2 patch merger) are counted in the checkpoint's memory as part "vision".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser, common, rotary_dims, state_bytes
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, LinearAttention, ModelConfig

_TYPES = {"linear_attention": AttentionKind.LINEAR, "full_attention": AttentionKind.GLOBAL}


def _kinds(f: Fields, layers: int) -> tuple[AttentionKind, ...]:
    types = f.raw.get("layer_types")
    if types is None:  # Qwen3-Next's config: every full_attention_interval-th layer is full attention
        every = f.integer("full_attention_interval")
        return tuple(AttentionKind.GLOBAL if (i + 1) % every == 0 else AttentionKind.LINEAR for i in range(layers))
    if not isinstance(types, list) or len(types) != layers or not all(t in _TYPES for t in types):
        raise f.bad("layer_types", f"a list of {layers} (num_hidden_layers) of "
                                   f"{' or '.join(repr(t) for t in _TYPES)}", types)
    return tuple(_TYPES[t] for t in types)


def _linear(f: Fields) -> LinearAttention:
    keys, values = f.integer("linear_num_key_heads"), f.integer("linear_num_value_heads")
    if values % keys:
        raise f.refuse("linear_num_value_heads", f"({values}) must be a multiple of linear_num_key_heads ({keys}): "
                                                 f"each key head serves a whole group of value heads")
    return LinearAttention(keys, values, f.integer("linear_key_head_dim"), f.integer("linear_value_head_dim"),
                           f.integer("linear_conv_kernel_dim"), state_bytes(f, "mamba_ssm_dtype"))


def vision_tower_params(f: Fields) -> int:
    """Qwen3.5's vision tower (transformers Qwen3_5VisionModel), from its vision_config.

    patch embedding in·t·p²·w + w; positions P·w; per block two LayerNorms 2·2w, qkv 3w² + 3w, proj
    w² + w, MLP w·I + I + I·w + w; the merger over m² = spatial_merge_size² patches: LayerNorm 2w,
    fc1 (m²w)² + m²w, fc2 m²w·out + out; each deepstack merger the same with its LayerNorm over m²w."""
    w, inter = f.integer("hidden_size"), f.integer("intermediate_size")
    patch = f.integer("in_channels") * f.integer("temporal_patch_size") * f.integer("patch_size") ** 2 * w + w
    block = 4 * w + 3 * w * w + 3 * w + w * w + w + 2 * w * inter + inter + w
    wide, out = f.integer("spatial_merge_size") ** 2 * w, f.integer("out_hidden_size")
    merger = wide * wide + wide + wide * out + out
    deep = f.raw.get("deepstack_visual_indexes", [])
    if not isinstance(deep, list):
        raise f.bad("deepstack_visual_indexes", "a list of layer indexes", deep)
    return (patch + f.integer("num_position_embeddings") * w + f.integer("depth") * block
            + merger + 2 * w + len(deep) * (merger + 2 * wide))


def _text(f: Fields, name: str, model_type: str, tie: bool, vision: int) -> ModelConfig:
    if "num_experts" in f.raw and f.raw.get("intermediate_size") is None:  # every layer MoE: no dense width
        f = Fields({**f.raw, "intermediate_size": 1}, f.where)
    kw: dict[str, Any] = common(f, name, model_type, tie)
    layers = kw["num_layers"]
    kw["layer_attention"] = _kinds(f, layers)
    kw["linear_attention"] = _linear(f)
    kw["qk_norm"] = True
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)
    # Qwen3-Next's attention is always gated; Qwen3.5 says so in attn_output_gate
    kw["attn_output_gate"] = f.flag("attn_output_gate", True)
    # Qwen3.6's output_gate_type "swish": the activation of the Gated DeltaNet's gated RMSNorm, SiLU (= swish) in
    # transformers' Qwen3_5RMSNormGated (its qwen4_exp reads the field as that activation); the attention output
    # gate is a sigmoid whatever it says (Qwen3_5Attention: attn_output · sigmoid(gate))
    gate = f.text("output_gate_type", "silu")
    if gate not in ("silu", "swish"):
        raise f.refuse("output_gate_type", f"{gate!r} is not read: the Gated DeltaNet's output gate is SiLU (swish) "
                                           f"as transformers' Qwen3.5 runs it")
    kw["vision_params"] = vision
    kw["rotary_dims"] = rotary_dims(f, kw["head_dim"])
    if "num_experts" in f.raw:
        if f.integer("decoder_sparse_step", 1) != 1 or f.raw.get("mlp_only_layers"):
            raise f.refuse("mlp_only_layers", "(or decoder_sparse_step other than 1) is not read: every layer is "
                                              "analysed as a mixture of experts")
        kw["num_experts"] = f.integer("num_experts")
        kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                            "num_experts", kw["num_experts"])
        moe = kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
        shared = f.integer("shared_expert_intermediate_size", 0, minimum=0)
        if shared % moe:
            raise f.refuse("shared_expert_intermediate_size", f"({shared}) must be a multiple of "
                                                              f"moe_intermediate_size ({moe})")
        kw["num_shared_experts"] = shared // moe
        kw["shared_expert_gate"] = shared > 0
        kw["intermediate_size"] = 0
    # multi-token prediction (roofline.models.mtp): in memory, not in the step; vLLM's qwen3_next_mtp.py
    # shares the main model's embed_tokens and lm_head, as mtp_use_dedicated_embeddings false says
    kw["mtp_layers"] = f.integer("mtp_num_hidden_layers", 0, "num_nextn_predict_layers", minimum=0)
    if kw["mtp_layers"] and f.flag("mtp_use_dedicated_embeddings", False):
        raise f.refuse("mtp_use_dedicated_embeddings", "is true: the MTP layers' own embedding is not read")
    return ModelConfig(**kw)


def qwen3_next(f: Fields, name: str, model_type: str) -> ModelConfig:
    return _text(f, name, model_type, False, 0)


def qwen3_5(f: Fields, name: str, model_type: str) -> ModelConfig:
    """The multimodal Qwen3.5 config: text_config analysed, vision_config counted."""
    text, vision = f.raw.get("text_config"), f.raw.get("vision_config")
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    vis = 0
    if vision is not None:
        if not isinstance(vision, Mapping):
            raise f.bad("vision_config", "an object", vision)
        vis = vision_tower_params(Fields(vision, f"{f.where} vision_config"))
    tie = f.flag("tie_word_embeddings", False)
    inner = Fields(text, f"{f.where} text_config")
    if "tie_word_embeddings" in text:
        tie = inner.flag("tie_word_embeddings", tie)
    if not str(text.get("model_type", "")).startswith(model_type):
        raise RooflineError(f"config {f.where}: text_config's model_type {text.get('model_type')!r} is not "
                            f"{model_type}'s language model")
    return _text(inner, name, model_type, tie, vis)


PARSERS: dict[str, Parser] = {"qwen3_next": qwen3_next, "qwen3_5": qwen3_5, "qwen3_5_moe": qwen3_5,
                              # the language model alone (transformers' Qwen3_5TextConfig, a text-only export)
                              "qwen3_5_text": qwen3_next, "qwen3_5_moe_text": qwen3_next}
