"""Llama 4 Scout and Maverick (`llama4`, the language model in `text_config`, `llama4_text`;
transformers models/llama4, vLLM llama4.py): GQA with RoPE on three layers of four and none on the
fourth (`no_rope_layers`: 1 RoPE, 0 NoPE; by default every `no_rope_layer_interval` = 4th layer is
NoPE), the RoPE layers attending in chunks of `attention_chunk_size` tokens (each token within its
chunk; their cache capped at the chunk, as a sliding window's) and the NoPE layers the whole context.
MoE on every `interleave_moe_layer_step`-th layer (layers step − 1, 2·step − 1, ...): num_local_experts
SwiGLU experts of intermediate_size, top num_experts_per_tok, and one shared SwiGLU expert of the same
width; the other layers a dense SwiGLU MLP of intermediate_size_mlp (Maverick).

Not counted: `use_qk_norm`'s L2 norm of q and k on the RoPE layers (no weights; about 6·(H + G)·d
FLOPs per token and layer, under 0.01% of a step) and the NoPE layers' attention temperature (one
multiply per query element). A `vision_config` beside the text is counted in the checkpoint's
memory as part "vision" (`vision_tower_params`), not in a text step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline.models.architectures.common import Parser, common, text_config
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, MlpKind, ModelConfig


def _flags(f: Fields, key: str, layers: int) -> list[int] | None:
    value = f.raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != layers or any(v not in (0, 1) or isinstance(v, float)
                                                                  for v in value):
        raise f.bad(key, f"a list of {layers} (num_hidden_layers) of 0 or 1", value)
    return [int(v) for v in value]


def _text(f: Fields, name: str, model_type: str, vision: Mapping[str, Any] | None) -> ModelConfig:
    kw: dict[str, Any] = common(f, name, model_type, False)
    layers = kw["num_layers"]
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)
    rope = _flags(f, "no_rope_layers", layers)
    if rope is None:  # Llama4TextConfig's default: every no_rope_layer_interval-th layer is NoPE
        every = f.integer("no_rope_layer_interval", 4)
        rope = [int((i + 1) % every != 0) for i in range(layers)]
    chunk = f.optional_int("attention_chunk_size")
    if chunk is not None:
        kw["sliding_window"], kw["attention_chunked"] = chunk, True
    local = AttentionKind.LOCAL if chunk is not None else AttentionKind.GLOBAL
    kw["layer_attention"] = tuple(local if r else AttentionKind.GLOBAL for r in rope)
    if chunk is not None and all(rope):
        kw["layer_attention"] = ()  # every layer chunked
    kw["rope_global"] = chunk is None and all(rope)
    if chunk is None and not all(rope):
        raise f.refuse("no_rope_layers", "with no attention_chunk_size is not read: NoPE layers beside full RoPE "
                                         "layers need one kind per layer")
    step = f.integer("interleave_moe_layer_step", 1)
    moe = [i % step == step - 1 for i in range(layers)]
    given = f.raw.get("moe_layers")
    if given is not None and given != [i for i in range(layers) if moe[i]]:
        raise f.refuse("moe_layers", "disagrees with interleave_moe_layer_step: not read")
    experts = kw["num_experts"] = f.integer("num_local_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_local_experts", experts)
    kw["moe_intermediate_size"] = kw["intermediate_size"]
    kw["num_shared_experts"] = 1  # Llama4TextMoe's shared_expert, of intermediate_size
    kw["intermediate_size"] = f.integer("intermediate_size_mlp") if not all(moe) else 0
    kw["layer_mlp"] = tuple(MlpKind.MOE if m else MlpKind.DENSE for m in moe)
    if vision is not None:
        kw["vision_params"] = vision_tower_params(Fields(vision, f"{f.where} vision_config"), kw["hidden_size"])
    return ModelConfig(**kw)


def vision_tower_params(f: Fields, text_hidden: int) -> int:
    """Llama 4's vision encoder and projector (transformers Llama4VisionModel and
    Llama4MultiModalProjector), from its vision_config: w = hidden_size, I = intermediate_size.

    class embedding w; positions ((image_size/patch_size)² + 1)·w; the unfold patch embedding
    num_channels·patch_size²·w (no bias); layernorm_pre and _post 2·2w; per encoder layer q, k, v, o
    4·(w² + w), fc1 w·I + I, fc2 I·w + w, two LayerNorms 2·2w; the pixel-shuffle adapter fc1
    I·projector_input_dim and fc2 projector_output_dim² (no biases); the projector
    vision_output_dim·text hidden (no bias). Scout's: 109,676,279,296 − its text model's parameters
    (the checkpoint's own table; see tests)."""
    w, inter = f.integer("hidden_size"), f.integer("intermediate_size")
    image, patch = f.integer("image_size"), f.integer("patch_size")
    if image % patch:
        raise f.refuse("image_size", f"({image}) must be a multiple of patch_size ({patch})")
    if f.flag("multi_modal_projector_bias", False):
        raise f.refuse("multi_modal_projector_bias", "true is not read: the reference projector has no bias")
    layer = 4 * (w * w + w) + 2 * w * inter + inter + w + 4 * w
    return (w + ((image // patch) ** 2 + 1) * w + f.integer("num_channels", 3) * patch * patch * w + 4 * w
            + f.integer("num_hidden_layers") * layer + inter * f.integer("projector_input_dim")
            + f.integer("projector_output_dim") ** 2 + f.integer("vision_output_dim") * text_hidden)


def llama4_text(f: Fields, name: str, model_type: str) -> ModelConfig:
    return _text(f, name, model_type, None)


def llama4(f: Fields, name: str, model_type: str) -> ModelConfig:
    """The multimodal Llama 4 config: text_config analysed, vision_config counted."""
    text = text_config(f, "llama4_text", default="llama4_text")
    vision = f.raw.get("vision_config")
    if vision is not None and not isinstance(vision, Mapping):
        raise f.bad("vision_config", "an object", vision)
    inner = Fields({"tie_word_embeddings": f.flag("tie_word_embeddings", False), **text}, f"{f.where} text_config")
    return _text(inner, name, model_type, vision)


PARSERS: dict[str, Parser] = {"llama4": llama4, "llama4_text": llama4_text}
