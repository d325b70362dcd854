"""Kimi K2.5 (`kimi_k25`; moonshotai's KimiK25ForConditionalGeneration, transformers models/kimi_k25): a
DeepSeek-V3 language model in `text_config` (model_type kimi_k2 or deepseek_v3) beside a MoonViT vision
tower in `vision_config`. The language model is analysed; the tower's weights are counted in the
checkpoint's memory as part "vision" (a text token never runs them).

The tower, read from the checkpoint's own field names (vt_*, init_pos_emb_*, the names its remote code
reads; transformers' Kimi_K25VisionModel builds the same modules under other names):
- patch embedding: a Conv2d 3 -> w over patch_size² pixels, with a bias: 3·p²·w + w;
- learned spatial positions init_pos_emb_height × init_pos_emb_width × w (pos_emb_type "divided_fixed":
  the temporal term is a fixed sinusoid, a buffer, no weights);
- vt_num_hidden_layers blocks: two LayerNorms 2·2w, q, k, v and proj with biases 4(w² + w), a GELU MLP
  w·I + I + I·w + w;
- a final LayerNorm 2w;
- the projector (mm_projector_type "patchmerger"): a LayerNorm over mm_hidden_size, then over the m² =
  merge_kernel_size patches merged: in_proj (m²w)² + m²w, out_proj m²w·text_hidden_size + text_hidden_size.

moonshotai's INT4 checkpoint puts its quantization_config (compressed-tensors) inside text_config: it covers
the language model only, so the tower stays in 16 bits (roofline.models.architectures.config_from_dict).
"""

from __future__ import annotations

from collections.abc import Mapping

from roofline.models.architectures.common import Parser, text_config
from roofline.models.architectures.deepseek import mla_moe
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def moonvit_params(f: Fields, text_hidden: int) -> tuple[int, int]:
    """(the tower, its projector): MoonViT's parameters from vision_config (see the module docstring)."""
    for key, want in (("pos_emb_type", "divided_fixed"), ("mm_projector_type", "patchmerger")):
        value = f.text(key, want)
        if value != want:
            raise f.refuse(key, f"{value!r} is not read (read: {want!r})")
    w, inter = f.integer("vt_hidden_size"), f.integer("vt_intermediate_size")
    heads = f.integer("vt_num_attention_heads")
    if w % heads:
        raise f.refuse("vt_num_attention_heads", f"({heads}) must divide vt_hidden_size ({w})")
    merge = f.raw.get("merge_kernel_size")
    if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(m, int) and not isinstance(m, bool)
                                                               and 1 <= m <= 64 for m in merge)):
        raise f.bad("merge_kernel_size", "two positive integers like [2, 2]", merge)
    mm = f.integer("mm_hidden_size", w)
    if mm != w:
        raise f.refuse("mm_hidden_size", f"({mm}) differs from vt_hidden_size ({w}): the projector's LayerNorm "
                                         f"runs over the tower's output")
    if f.integer("text_hidden_size", text_hidden) != text_hidden:
        raise f.refuse("text_hidden_size", f"differs from text_config's hidden_size ({text_hidden})")
    p = f.integer("patch_size")
    patch = 3 * p * p * w + w
    positions = f.integer("init_pos_emb_height") * f.integer("init_pos_emb_width") * w
    block = 4 * w + 4 * (w * w + w) + 2 * w * inter + inter + w
    tower = patch + positions + f.integer("vt_num_hidden_layers") * block + 2 * w
    wide = merge[0] * merge[1] * w
    projector = 2 * mm + wide * wide + wide + wide * text_hidden + text_hidden
    return tower, projector


def moonvit3d_params(f: Fields, text_hidden: int) -> int:
    """Kimi K3's MoonViT3d tower and PatchMergerMLPV2 projector (mm_projector_type "patchmergerv2"), from the
    checkpoint's modeling_kimi_k3.py as ROCm/ATOM's port names its parameters (vision_tower.*, mm_projector.*):
    a patch Conv2d 3·p²·w (+ w with patch_embed_proj_bias), learned positions H0·W0·w (the temporal term a fixed
    sinusoid); per block two RMSNorms 2·w, wqkv w·3q and wo q·w (q = qkv_hidden_size; + 3q + w with attn_bias),
    the MLP2 fc0 w·I and fc1 I·w (+ I + w with linear_bias); a final RMSNorm w; the projector (m²w)² and m²w·h
    (no biases) and its post-norm RMSNorm h. K3: 401,214,464 + 46,144,512 = 447,358,976 ("~0.45B" in the port)."""
    for key, want in (("pos_emb_type", "divided_fixed"), ("merge_type", "sd2_tpool"), ("mlp_type", "mlp2"),
                      ("norm_type", "rmsnorm")):
        value = f.text(key, want)
        if value != want:
            raise f.refuse(key, f"{value!r} is not read (read: {want!r})")
    w, inter, q = f.integer("vt_hidden_size"), f.integer("vt_intermediate_size"), f.integer("qkv_hidden_size")
    if q % f.integer("vt_num_attention_heads"):
        raise f.refuse("vt_num_attention_heads", f"must divide qkv_hidden_size ({q})")
    merge = f.raw.get("merge_kernel_size")
    if not (isinstance(merge, list) and len(merge) == 2 and all(isinstance(m, int) and not isinstance(m, bool)
                                                               and 1 <= m <= 64 for m in merge)):
        raise f.bad("merge_kernel_size", "two positive integers like [2, 2]", merge)
    if f.integer("mm_hidden_size", w) != w:
        raise f.refuse("mm_hidden_size", f"differs from vt_hidden_size ({w}): the projector reads the tower's output")
    if f.integer("text_hidden_size", text_hidden) != text_hidden:
        raise f.refuse("text_hidden_size", f"differs from text_config's hidden_size ({text_hidden})")
    p = f.integer("patch_size")
    attn_bias, linear_bias = f.flag("attn_bias", False), f.flag("linear_bias", False)
    block = (2 * w + w * 3 * q + q * w + (3 * q + w if attn_bias else 0) + 2 * w * inter
             + (inter + w if linear_bias else 0))
    tower = (3 * p * p * w + (w if f.flag("patch_embed_proj_bias", False) else 0)
             + f.integer("init_pos_emb_height") * f.integer("init_pos_emb_width") * w
             + f.integer("vt_num_hidden_layers") * block + w)
    wide = merge[0] * merge[1] * w
    return tower + wide * wide + wide * text_hidden + text_hidden


def kimi_k25(f: Fields, name: str, model_type: str) -> ModelConfig:
    text, vision = text_config(f, "kimi_k2", "deepseek_v3"), f.raw.get("vision_config")
    inner = Fields(text, f"{f.where} text_config")
    kw = mla_moe(inner, name, model_type)
    kw["router_bias"] = True  # noaux_tc, as Kimi K2
    if not isinstance(vision, Mapping):
        raise f.bad("vision_config", "an object (the MoonViT tower's config)", vision)
    tower, projector = moonvit_params(Fields(vision, f"{f.where} vision_config"), kw["hidden_size"])
    kw["vision_params"] = tower + projector
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"kimi_k25": kimi_k25}

