"""Qwen3-VL, dense and MoE (`qwen3_vl`, `qwen3_vl_moe`; transformers models/qwen3_vl and qwen3_vl_moe,
vLLM qwen3_vl.py): the language model in `text_config` (`qwen3_vl_text` is Qwen3's decoder,
`qwen3_vl_moe_text` Qwen3-MoE's: GQA with RMSNorm over each head of q and k), the vision tower in
`vision_config` (Qwen3VLVisionModel, counted in the checkpoint's memory as part "vision", not in a
text step; its formula is roofline.models.architectures.qwen3_next.vision_tower_params, the tower
Qwen3.5 inherited).

What differs from Qwen3 in the text model is MRoPE (`rope_scaling.mrope_section`, e.g. [24, 20, 20]):
the head_dim/2 rotary frequencies are split between the temporal, height and width position ids
(interleaved when `mrope_interleaved`). Each q/k head is still rotated over all of head_dim, so the
FLOPs and bytes are RoPE's; only the positions differ. A section that does not cover head_dim/2 is
refused: it would leave dims unrotated, which the reference does not do. DeepStack adds the vision
mergers' outputs to the first len(deepstack_visual_indexes) decoder layers' hidden states on image
tokens only: nothing on a text token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from roofline.models.architectures.common import Parser, text_config
from roofline.models.architectures.qwen import qwen3, qwen3_moe
from roofline.models.architectures.qwen3_next import vision_tower_params
from roofline.models.fields import Fields, is_int
from roofline.models.transformer import ModelConfig

_TEXT = {"qwen3_vl": ("qwen3_vl_text", qwen3), "qwen3_vl_moe": ("qwen3_vl_moe_text", qwen3_moe)}


def _check_mrope(f: Fields, head_dim: int) -> None:
    rope = f.raw.get("rope_scaling") or f.raw.get("rope_parameters")
    if rope is None:
        return
    if not isinstance(rope, Mapping):
        raise f.bad("rope_scaling", "an object", rope)
    section = rope.get("mrope_section")
    if section is None:
        return
    if not isinstance(section, list) or not section or not all(is_int(s) and s > 0 for s in section) \
            or sum(section) != head_dim // 2:
        raise f.bad("rope_scaling.mrope_section", f"a list of positive integers summing to head_dim/2 = "
                                                  f"{head_dim // 2}", section)


def qwen3_vl(f: Fields, name: str, model_type: str) -> ModelConfig:
    """text_config analysed as Qwen3 (or Qwen3-MoE), vision_config counted."""
    inner_type, parse = _TEXT[model_type]
    text, vision = text_config(f, inner_type, default=inner_type), f.raw.get("vision_config")
    vis = 0
    if vision is not None:
        if not isinstance(vision, Mapping):
            raise f.bad("vision_config", "an object", vision)
        vis = vision_tower_params(Fields(vision, f"{f.where} vision_config"))
    inner = Fields({"tie_word_embeddings": f.flag("tie_word_embeddings", False), **text}, f"{f.where} text_config")
    cfg = parse(inner, name, model_type)
    _check_mrope(inner, cfg.head_dim)
    return replace(cfg, vision_params=vis) if vis else cfg


PARSERS: dict[str, Parser] = {"qwen3_vl": qwen3_vl, "qwen3_vl_moe": qwen3_vl}
