"""Gemma 4 (`gemma4`, the language model in `text_config`, `gemma4_text`; transformers 5.24 models/gemma4,
Gemma4TextConfig, Gemma4TextAttention, Gemma4TextDecoderLayer, Gemma4TextRouter).

- `layer_types`: sliding_attention layers (a `sliding_window` of 1024) and full_attention ones, five to
  one when absent; transformers forces the last layer to full attention, and so does this parser (said).
- Two attention shapes (roofline.models.attention_shape). The sliding layers: num_attention_heads
  queries of head_dim against num_key_value_heads (31B: 32/16 × 256). The full layers:
  num_attention_heads queries of `global_head_dim` (512 when absent, as transformers defaults it) against
  num_global_key_value_heads where `attention_k_eq_v` (K=V: no v_proj, V is the k_proj output; 31B:
  32/4 × 512), else num_key_value_heads (transformers reads num_global_key_value_heads only under K=V).
  K and V are both cached: K k_norm'd and rotated, V v_norm'd (an RMSNorm without a gain).
- RoPE per layer kind from `rope_parameters`: the full layers' "proportional" RoPE turns
  2·⌊partial_rotary_factor·d/2⌋ dims (0.25 · 512 = 128); transformers multiplies the other 384 by
  cos 0 = 1, which rotates nothing, so they are not counted.
- q_norm and k_norm per head, v_norm without a gain; sandwich norms; the embedding scaled by √h;
  GeGLU (`hidden_activation` gelu_pytorch_tanh); tied embeddings.
- `enable_moe_block` (26B-A4B): each layer runs the dense MLP of intermediate_size and, beside it,
  top_k_experts of num_experts experts of moe_intermediate_size, the outputs summed. The dense MLP is
  read as intermediate_size / moe_intermediate_size shared experts (2112 = 3 × 704), ungated, as the
  reference runs it on every token; each MoE layer's extra gains (post_feedforward_layernorm_1,
  pre_feedforward_layernorm_2, post_feedforward_layernorm_2: 3·h; the router's scale h and
  per_expert_scale E) are counted as norms.
- The vision tower (`vision_config`, Gemma4VisionModel) and its projector (embed_vision) are counted in
  memory, part "vision" (`vision_tower_params`).
- final_logit_softcapping (a tanh over the logits) is a few FLOPs per vocabulary entry beside the head's
  2·h: not counted.

Refused by name: per-layer inputs and KV-shared layers (Gemma 3n's; 0 in every published Gemma 4 but
E2B/E4B), the double-wide MLP, bidirectional attention over all tokens (`use_bidirectional_attention`
"all"), an audio tower (`audio_config`, E2B/E4B's), a dense width not a whole number of experts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from roofline.models.architectures.common import Parser, common, layer_types, text_config
from roofline.models.attention_shape import AttentionShape
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, ModelConfig

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL


def _rotary(t: Fields, kind: str, head_dim: int, default: float) -> int:
    """Dims RoPE turns on `kind` layers: 2·⌊factor·d/2⌋ (transformers' rope_angles), 0 for all of them."""
    rope = t.raw.get("rope_parameters")
    if rope is None:
        factor: Any = default
    else:
        params = rope.get(kind, {}) if isinstance(rope, Mapping) else None
        if not isinstance(params, Mapping):
            raise t.bad("rope_parameters", "an object of sliding_attention and full_attention parameters", rope)
        factor = params.get("partial_rotary_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise t.bad(f"rope_parameters.{kind}.partial_rotary_factor", "a number in (0, 1]", factor)
    rotated = 2 * int(factor * head_dim // 2)
    return 0 if rotated == head_dim else rotated


def vision_tower_params(v: Fields, text_hidden: int) -> int:
    """Gemma4VisionModel and the projector embed_vision (Gemma4MultimodalEmbedder), from vision_config:
    w = hidden_size, I = intermediate_size, H·d queries, G·d keys and values, p = patch_size.

    patch embedder 3·p²·w (no bias) + the 2-D position table 2·position_embedding_size·w; per encoder
    layer q, k, v, o w·(2·H·d + 2·G·d) (no biases), q_norm and k_norm d each (v_norm has no gain), the
    gated MLP 3·w·I, four RMSNorms 4·w; the projector w·text hidden (its norm has no gain). Its
    clipping bounds and standardisation (std_bias, std_scale) are buffers, not parameters. 31B's:
    575,741,232, equal to transformers' (the model card: ~550M)."""
    if v.flag("attention_bias", False):
        raise v.refuse("attention_bias", "true is not read: Gemma4VisionAttention's projections have no bias")
    w, inter, layers = v.integer("hidden_size"), v.integer("intermediate_size"), v.integer("num_hidden_layers")
    heads = v.integer("num_attention_heads")
    kv = v.integer("num_key_value_heads", heads)
    d = v.integer("head_dim", w // heads)
    patch, table = v.integer("patch_size"), v.integer("position_embedding_size")
    layer = w * (2 * heads * d + 2 * kv * d) + 2 * d + 3 * w * inter + 4 * w
    return 3 * patch * patch * w + 2 * table * w + layers * layer + w * text_hidden


def _text(t: Fields, name: str, outer_tie: bool) -> ModelConfig:
    for key in ("hidden_size_per_layer_input", "num_kv_shared_layers"):
        if t.integer(key, 0, minimum=0):
            raise t.refuse(key, "is not read: Gemma 3n's per-layer inputs and KV-shared layers are not modelled")
    if t.flag("use_double_wide_mlp", False):
        raise t.refuse("use_double_wide_mlp", "true is not read")
    if t.raw.get("use_bidirectional_attention") == "all":
        raise t.refuse("use_bidirectional_attention", "'all' (every token attends both ways, the window halved) "
                                                      "is not read: text tokens attend causally here")
    kw = common(Fields({"tie_word_embeddings": outer_tie, **t.raw}, t.where), name, "gemma4_text", True)
    kw.update(sandwich_norm=True, qk_norm=True, v_norm=True)
    bias = t.flag("attention_bias", False)
    kw.update(qkv_bias=bias, o_bias=bias)
    layers, d = kw["num_layers"], kw["head_dim"]
    kw["sliding_window"] = t.integer("sliding_window", 512)
    types = layer_types(t, layers) or tuple(LOCAL if (i + 1) % 6 else GLOBAL for i in range(layers))
    warnings: tuple[str, ...] = ()
    if types[-1] != GLOBAL:  # Gemma4TextConfig.__post_init__ does the same, with a warning
        types = (*types[:-1], GLOBAL)
        warnings = (f"config {t.where}: layer_types ends in a sliding layer; transformers forces the last layer to "
                    f"full attention, and so is it read",)
    kw["layer_attention"] = types
    kw["rotary_dims"] = _rotary(t, "sliding_attention", d, 1.0)
    k_eq_v = t.flag("attention_k_eq_v", False)
    global_d = t.integer("global_head_dim", 512)
    # transformers reads num_global_key_value_heads only under K=V (Gemma4TextConfig's per_layer_config)
    global_kv = t.integer("num_global_key_value_heads", kw["num_kv_heads"]) if k_eq_v else kw["num_kv_heads"]
    heads = kw["num_heads"]
    if heads % global_kv:
        raise t.refuse("num_global_key_value_heads", f"({global_kv}) must divide num_attention_heads ({heads})")
    kw["global_attention"] = AttentionShape(heads, global_kv, global_d, global_d, k_eq_v,
                                            _rotary(t, "full_attention", global_d, 0.25))
    if t.flag("enable_moe_block", False):
        experts = kw["num_experts"] = t.integer("num_experts")
        kw["experts_per_token"] = t.at_most("top_k_experts", t.integer("top_k_experts"), "num_experts", experts)
        fe = kw["moe_intermediate_size"] = t.integer("moe_intermediate_size")
        dense = kw["intermediate_size"]
        if dense % fe:
            raise t.refuse("intermediate_size", f"({dense}) beside experts of moe_intermediate_size {fe}: the dense "
                                                f"MLP is read as whole shared experts, so it must be a multiple")
        kw["num_shared_experts"] = dense // fe  # the dense MLP beside the experts, on every token, ungated
        kw["intermediate_size"] = 0
        kw["moe_gains"] = 3 * kw["hidden_size"] + kw["hidden_size"] + experts  # 3 norms, router scale, expert scale
    kw["load_warnings"] = warnings
    return ModelConfig(**kw)


def gemma4(f: Fields, name: str, model_type: str) -> ModelConfig:
    """The multimodal Gemma 4 config: text_config analysed, vision_config counted; gemma4_text alone."""
    if model_type == "gemma4_text":
        return _text(f, name, f.flag("tie_word_embeddings", True))
    text = text_config(f, "gemma4_text", default="gemma4_text")
    if f.raw.get("audio_config") is not None:
        raise f.refuse("audio_config", "is not read: Gemma 4's audio tower (E2B/E4B) is not counted")
    cfg = _text(Fields(text, f"{f.where} text_config"), name, f.flag("tie_word_embeddings", True))
    vision = f.raw.get("vision_config")
    if vision is None:
        return cfg
    if not isinstance(vision, Mapping):
        raise f.bad("vision_config", "an object", vision)
    return replace(cfg, vision_params=vision_tower_params(Fields(vision, f"{f.where} vision_config"),
                                                          cfg.hidden_size))


PARSERS: dict[str, Parser] = {"gemma4": gemma4, "gemma4_text": gemma4}
