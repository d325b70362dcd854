"""Gemma 2 and 3 (transformers models/gemma2, gemma3): sandwich norms, tied embeddings, local
(sliding-window) and global layers from `layer_types` or the family's pattern."""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common, layer_types
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, ModelConfig

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL


def gemma(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, True)
    kw["sandwich_norm"] = True
    kw["qk_norm"] = model_type.startswith("gemma3")
    window = f.optional_int("sliding_window")
    kw["sliding_window"] = window
    layers = kw["num_layers"]
    types = layer_types(f, layers)
    if types is not None:
        kw["layer_attention"] = types
    elif model_type == "gemma2":
        kw["layer_attention"] = tuple(LOCAL if i % 2 == 0 else GLOBAL for i in range(layers))  # even layers slide
    else:  # Gemma 3: sliding_window_pattern 6 = five local layers, then one global
        pattern = f.integer("sliding_window_pattern", 6)
        kw["layer_attention"] = tuple(GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(layers))
    if window is None:
        kw["layer_attention"] = tuple(GLOBAL for _ in range(layers))
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"gemma2": gemma, "gemma3_text": gemma, "gemma3": gemma}
