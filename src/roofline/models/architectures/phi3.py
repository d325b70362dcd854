"""Phi-3 and Phi-4 (`phi3`; transformers models/phi3, vLLM phi3.py): Llama's shape with q, k, v in one
`qkv_proj` and gate and up in one `gate_up_proj` (the same weights, fused), no biases (Phi3Attention's
qkv_proj and o_proj have none: `attention_bias` true is refused), RoPE over `partial_rotary_factor`
of head_dim (Phi-4-mini: 0.75), and, when `sliding_window` is set (Phi-3-mini: 2047), every layer
attending within that window, as Phi3Attention passes it to every layer's attention. `rope_scaling`
(longrope, su) rescales the rotary frequencies: the same FLOPs and bytes.
"""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def phi3(f: Fields, name: str, model_type: str) -> ModelConfig:
    if f.flag("attention_bias", False):
        raise f.refuse("attention_bias", "true is not read: Phi3Attention's qkv_proj and o_proj have no bias")
    kw = common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    factor = f.raw.get("partial_rotary_factor", 1.0)
    d = kw["head_dim"]
    if not isinstance(factor, int | float) or isinstance(factor, bool) or not 0 < factor <= 1 or (factor * d) % 2:
        raise f.bad("partial_rotary_factor", f"a number in (0, 1] giving an even share of head_dim {d}", factor)
    if factor != 1:
        kw["rotary_dims"] = int(factor * d)
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"phi3": phi3}
