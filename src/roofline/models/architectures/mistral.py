"""Mistral and Mixtral (transformers models/mistral, models/mixtral): Llama's shape with an optional
`sliding_window` on every layer; Mixtral's experts are full-width SwiGLU MLPs."""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def mistral(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    return ModelConfig(**kw)


def mixtral(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    kw["num_experts"] = f.integer("num_local_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_local_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = kw["intermediate_size"]  # every expert is a full-width SwiGLU MLP
    kw["intermediate_size"] = 0
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"mistral": mistral, "mixtral": mixtral}
