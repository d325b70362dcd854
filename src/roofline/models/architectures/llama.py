"""Llama (transformers models/llama): GQA with RoPE, SwiGLU, `attention_bias` on q, k, v and o_proj."""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def llama(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"llama": llama}
