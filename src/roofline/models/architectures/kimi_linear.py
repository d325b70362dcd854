"""Kimi Linear (`kimi_linear`; moonshotai/Kimi-Linear-48B-A3B-Instruct, arXiv 2510.26692; transformers
models/kimi_linear, vLLM kimi_linear.py): a layerwise hybrid of KDA (Kimi Delta Attention, the layer kind
roofline.models.recurrent.KimiDelta) and MLA, with DeepSeek-V3's experts.

- `linear_attn_config`: the KDA shape (num_heads, head_dim, short_conv_kernel_size) and which layers run KDA
  (`kda_layers`) and which MLA (`full_attn_layers`), both 1-indexed (transformers: "types are 1-indexed in the
  checkpoint"); together they must name every layer once.
- `use_full_rank_gate` (K3): KDA's output gate one g_proj h -> H·d, not g_a and g_b; `gate_lower_bound` (K3): the
  safe gate, lower_bound·sigmoid(exp(A_log)·(f + dt_bias)) (roofline.models.recurrent.KimiDelta).
- MLA as DeepSeek-V3's (q_lora_rank null: a plain q_proj), without RoPE when `mla_use_nope` (the rope part
  of the key is still the shared one, never rotated); its cache the 576-wide latent on the MLA layers only.
- MoE: num_experts routed experts of moe_intermediate_size, num_experts_per_token of them a token, sigmoid
  scores with the e_score_correction_bias (noaux_tc), num_shared_experts shared experts, the first
  first_k_dense_replace layers dense.

Kimi K3's fields (its text_config; TensorRT-LLM@000a860 tensorrt_llm/_torch/models/modeling_kimi_linear.py and
modules/kimi_k3_*, the runtime's port of the checkpoint's modeling_kimi.py):
- `attn_res_block_size`: attention residuals before each norm and the head, a snapshot of the residual stream
  every attn_res_block_size layers (roofline.models.attn_res); a positive whole number, at most the layers.
- `hidden_act` "situ" with `activation_situ_beta`, `activation_situ_linear_beta` (SituAndMul; `_situ`).
- `mla_use_output_gate`: MLA's g_proj h -> H·d_v, a sigmoid gate on its output (KimiK3MLAAttention).
- `routed_expert_hidden_size`, `latent_moe_use_norm`: the routed experts in a latent between two projections,
  their sum RMS-normed before the second (KimiK3MoERuntime; roofline.models.latent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser, common, state_bytes
from roofline.models.architectures.kimi import moonvit3d_params
from roofline.models.attn_res import AttentionResiduals
from roofline.models.fields import Fields, is_int
from roofline.models.recurrent import KimiDelta
from roofline.models.transformer import AttentionKind, ModelConfig

_LINEAR_KEYS = ("num_heads", "head_dim", "short_conv_kernel_size", "kda_layers", "full_attn_layers",
                "use_full_rank_gate", "gate_lower_bound")


def _layer_list(f: Fields, key: str, layers: int) -> list[int]:
    value = f.raw.get(key)
    if not isinstance(value, list) or not all(is_int(i) and 1 <= i <= layers for i in value) \
            or len(set(value)) != len(value):
        raise f.bad(key, f"a list of distinct layer numbers from 1 to {layers} (num_hidden_layers; 1-indexed)",
                    value)
    return value


def _kda(f: Fields, layers: int) -> tuple[tuple[AttentionKind, ...], KimiDelta]:
    """Each layer's kind and the KDA shape, from linear_attn_config."""
    raw = f.raw.get("linear_attn_config")
    if not isinstance(raw, Mapping):
        raise f.bad("linear_attn_config", "an object (KDA's shape and the layers that run it)", raw)
    inner = Fields(raw, f"{f.where} linear_attn_config")
    for key in raw:
        if key not in _LINEAR_KEYS:
            raise inner.refuse(str(key), f"is not read (read: {', '.join(_LINEAR_KEYS)})")
    kda, full = _layer_list(inner, "kda_layers", layers), _layer_list(inner, "full_attn_layers", layers)
    if set(kda) & set(full) or len(kda) + len(full) != layers:
        raise inner.refuse("full_attn_layers", f"and kda_layers must together name each of the {layers} layers "
                                               f"once (1-indexed)")
    kinds = tuple(AttentionKind.LINEAR if i + 1 in set(kda) else AttentionKind.GLOBAL for i in range(layers))
    heads, dim = inner.integer("num_heads"), inner.integer("head_dim")
    bound = raw.get("gate_lower_bound")
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int | float) or not bound < 0):
        raise inner.bad("gate_lower_bound", "a negative number or null (the log-decay's lower bound)", bound)
    shape = KimiDelta(heads, heads, dim, dim, inner.integer("short_conv_kernel_size"),
                      state_bytes(f, "mamba_ssm_dtype"), full_rank_gate=inner.flag("use_full_rank_gate", False),
                      safe_gate=bound is not None)
    return kinds, shape


def _situ(f: Fields) -> str:
    """Kimi K3's SiTU (TensorRT-LLM kimi_k3_moe/_mlp.py SituAndMul): β·tanh(gate/β)·sigmoid(gate) times
    β_l·tanh(up/β_l), β = activation_situ_beta (1 where null), β_l = activation_situ_linear_beta (null: up
    as it is). Only their presence changes the count; each must be a positive number or null."""
    for key in ("activation_situ_beta", "activation_situ_linear_beta"):
        value = f.raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value > 0):
            raise f.bad(key, "a positive number or null", value)
    return "situ" if f.raw.get("activation_situ_linear_beta") is not None else "situ_gate"


def text_model(f: Fields, name: str, model_type: str) -> ModelConfig:
    """A kimi_linear config (top level, or Kimi K3's text_config) onto its layer kinds."""
    if "max_position_embeddings" not in f.raw and "model_max_length" in f.raw:  # transformers' attribute_map
        f = Fields({**f.raw, "max_position_embeddings": f.raw["model_max_length"]}, f.where)
    qk = f.integer("qk_nope_head_dim") + f.integer("qk_rope_head_dim")
    situ = f.raw.get("hidden_act") == "situ"
    shape = {"head_dim": qk, **f.raw, **({"hidden_act": "silu"} if situ else {})}  # MLA's heads; SiTU below
    kw: dict[str, Any] = common(Fields(shape, f.where), name, model_type, False)
    if situ:
        kw["activation"] = _situ(f)
    layers = kw["num_layers"]
    kw["layer_attention"], kw["linear_attention"] = _kda(f, layers)
    kw["attn_output_gate"] = f.flag("mla_use_output_gate", False)  # K3: g_proj h -> H·d_v, a sigmoid on MLA's output
    latent = f.optional_int("routed_expert_hidden_size")  # K3's latent experts (roofline.models.latent)
    if latent:
        kw["moe_latent_size"] = f.at_most("routed_expert_hidden_size", latent, "hidden_size", kw["hidden_size"])
        kw["moe_latent_norm"] = f.flag("latent_moe_use_norm", False)
    elif f.flag("latent_moe_use_norm", False):
        raise f.refuse("latent_moe_use_norm", "is true without routed_expert_hidden_size: no latent to norm")
    if f.raw.get("attn_res_block_size") is not None:
        kw["attn_res"] = AttentionResiduals(f.at_most("attn_res_block_size", f.integer("attn_res_block_size"),
                                                      "num_hidden_layers", layers), layers)
    kw["nope"] = f.flag("mla_use_nope", False)
    kw["q_lora_rank"] = f.optional_int("q_lora_rank") or 0
    kw["kv_lora_rank"] = f.integer("kv_lora_rank")
    kw["qk_nope_head_dim"], kw["qk_rope_head_dim"] = f.integer("qk_nope_head_dim"), f.integer("qk_rope_head_dim")
    kw["v_head_dim"] = f.integer("v_head_dim")
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["num_kv_heads"] = kw["num_heads"]  # MLA: every head its own decompressed K and V
    if f.integer("moe_layer_freq", 1) != 1:
        raise f.refuse("moe_layer_freq", "other than 1 is not read")
    router = f.text("moe_router_activation_func", "sigmoid")
    if router != "sigmoid":
        raise f.refuse("moe_router_activation_func", f"{router!r} is not read (read: 'sigmoid', transformers' "
                                                     f"KimiLinearTopkRouter)")
    kw["num_experts"] = f.integer("num_experts", None, "num_local_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_token", f.integer("num_experts_per_token", None,
                                                                           "num_experts_per_tok"),
                                        "num_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["num_shared_experts"] = f.integer("num_shared_experts", 0, "n_shared_experts", minimum=0)
    kw["first_dense_layers"] = f.at_most("first_k_dense_replace", f.integer("first_k_dense_replace", 1, minimum=0),
                                         "num_hidden_layers", layers)
    groups = f.integer("num_expert_group", 1, "n_group")
    if groups > 1:  # group-limited routing, as DeepSeek-V3's
        kw["routing_node_limit"] = f.at_most("topk_group", f.integer("topk_group"), "num_expert_group", groups)
    kw["router_bias"] = True  # e_score_correction_bias (noaux_tc)
    if f.integer("num_nextn_predict_layers", 0, minimum=0):
        raise f.refuse("num_nextn_predict_layers", "is not 0: Kimi Linear's multi-token-prediction layers are not "
                                                   "read")
    return ModelConfig(**kw)


def kimi_linear(f: Fields, name: str, model_type: str) -> ModelConfig:
    return text_model(f, name, model_type)


def kimi_k3(f: Fields, name: str, model_type: str) -> ModelConfig:
    """Kimi K3 (moonshotai/Kimi-K3; KimiK3ForConditionalGeneration): a kimi_linear text_config (the module
    docstring) beside a MoonViT3d vision_config, counted in memory as part "vision" (roofline.models.architectures
    .kimi.moonvit3d_params). Its quantization_config (compressed-tensors MXFP4, inside text_config) covers the
    routed experts only (config_from_dict: MXFP4 is read for experts only)."""
    text = f.raw.get("text_config")
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    if text.get("model_type") != "kimi_linear":
        raise RooflineError(f"config {f.where}: text_config's model_type {text.get('model_type')!r} is not read "
                            f"(read: 'kimi_linear')")
    inner = Fields(text, f"{f.where} text_config")
    cfg = text_model(inner, name, model_type)
    vision = f.raw.get("vision_config")
    if vision is None:
        return cfg
    if not isinstance(vision, Mapping):
        raise f.bad("vision_config", "an object (the MoonViT3d tower's config)", vision)
    tower = Fields(vision, f"{f.where} vision_config")
    projector = vision.get("mm_projector_type")
    if projector != "patchmergerv2":
        raise tower.refuse("mm_projector_type", f"{projector!r} is not read for Kimi K3 (read: 'patchmergerv2')")
    return replace(cfg, vision_params=moonvit3d_params(tower, cfg.hidden_size))


PARSERS: dict[str, Parser] = {"kimi_linear": kimi_linear, "kimi_k3": kimi_k3}
