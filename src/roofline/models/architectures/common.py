"""What most decoder-only configs spell alike: the shape fields and the gated activation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from roofline.errors import RooflineError
from roofline.models.fields import Fields, is_int
from roofline.models.transformer import AttentionKind, ModelConfig

Parser = Callable[[Fields, str, str], ModelConfig]  # (fields, name, model_type) -> the model's shape

_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu_pytorch_tanh": "geglu", "gelu": "geglu",
                "gelu_new": "geglu", "gelu_fast": "geglu"}


def text_config(f: Fields, *read: str, default: str | None = None) -> Mapping[str, Any]:
    """A multimodal wrapper's language model (Llama 4, Gemma 4, Kimi K2.5/K3, Qwen3-VL): its `text_config`
    object, whose model_type (`default` where absent) must be one of `read`; anything else is refused."""
    text = f.raw.get("text_config")
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    if text.get("model_type", default) not in read:
        raise RooflineError(f"config {f.where}: text_config's model_type {text.get('model_type')!r} is not read "
                            f"(read: {', '.join(repr(r) for r in read)})")
    return text


def rotary_dims(f: Fields, head_dim: int, default: float = 1.0) -> int:
    """partial_rotary_factor (top level in Qwen3-Next and GLM-4.5, in rope_parameters in Qwen3.5 and
    transformers 5's own configs; `default` where neither gives it) × head_dim: the dims RoPE rotates."""
    rope = f.raw.get("rope_parameters")
    factor = rope.get("partial_rotary_factor") if isinstance(rope, Mapping) else None
    factor = f.raw.get("partial_rotary_factor", default) if factor is None else factor
    if not isinstance(factor, int | float) or isinstance(factor, bool) or not 0 < factor <= 1 \
            or (factor * head_dim) % 2:
        raise f.bad("partial_rotary_factor", f"a number in (0, 1] giving an even share of head_dim {head_dim}",
                    factor)
    return int(factor * head_dim)


def gated_activation(f: Fields) -> str:
    act = f.text("hidden_act", "silu", "hidden_activation")
    if act not in _ACTIVATIONS:
        raise RooflineError(f"config {f.where}: hidden_act {act!r} is not supported; "
                            f"supported: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[act]


_STATE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def state_bytes(f: Fields, key: str) -> int:
    """Bytes a value of a recurrent mixer's state (Gated DeltaNet, Mamba2) is kept in: config field `key`,
    float32 where absent, as the reference implementations keep it."""
    dtype = f.text(key, "float32")
    if dtype not in _STATE_BYTES:
        raise f.bad(key, " or ".join(repr(k) for k in _STATE_BYTES), dtype)
    return _STATE_BYTES[dtype]


def common(f: Fields, name: str, model_type: str, tie_default: bool) -> dict[str, Any]:
    """The fields every Llama-shaped config gives, as ModelConfig keywords."""
    hidden = f.integer("hidden_size")
    heads = f.integer("num_attention_heads")
    if hidden % heads and "head_dim" not in f.raw:
        raise RooflineError(f"config {f.where}: hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {heads}; give head_dim")
    return {
        "name": name,
        "architecture": model_type,
        "hidden_size": hidden,
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": heads,
        "num_kv_heads": f.at_most("num_key_value_heads", f.integer("num_key_value_heads", heads),
                                  "num_attention_heads", heads),
        "head_dim": f.integer("head_dim", hidden // heads),
        "intermediate_size": f.integer("intermediate_size"),
        "vocab_size": f.integer("vocab_size"),
        "max_position_embeddings": f.integer("max_position_embeddings"),
        "tie_word_embeddings": f.flag("tie_word_embeddings", tie_default),
        "activation": gated_activation(f),
    }


def layer_pattern(f: Fields, key: str, layers: int, values: tuple[Any, Any]) -> list[Any] | None:
    """A list of 0/1 per layer under `key` (hybrid_layer_pattern, moe_layer_freq) as `values`; None if absent."""
    given = f.raw.get(key)
    if given is None:
        return None
    if not isinstance(given, list) or len(given) != layers or not all(is_int(v) and v in (0, 1) for v in given):
        raise f.bad(key, f"a list of {layers} (num_hidden_layers) zeros and ones", given)
    return [values[v] for v in given]


LAYER_TYPES = {"sliding_attention": AttentionKind.LOCAL, "full_attention": AttentionKind.GLOBAL}


def layer_types(f: Fields, layers: int) -> tuple[AttentionKind, ...] | None:
    """transformers' `layer_types`: each layer's attention by name; None when the config gives none."""
    types = f.raw.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != layers or not all(t in LAYER_TYPES for t in types):
        raise f.bad("layer_types", f"a list of {layers} (num_hidden_layers) of "
                                   f"{' or '.join(repr(t) for t in LAYER_TYPES)}", types)
    return tuple(LAYER_TYPES[t] for t in types)


__all__ = ["LAYER_TYPES", "Parser", "common", "gated_activation", "layer_pattern", "layer_types"]
