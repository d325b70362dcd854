"""Llama-Nemotron NAS models (`nemotron-nas`; nvidia/Llama-3_3-Nemotron-Super-49B-v1, its remote code
modeling_decilm.py DeciLMForCausalLM; vLLM nemotron_nas.py DeciLMDecoderLayer): a Llama whose layers are
blocks a neural architecture search chose, one `block_configs` entry a layer:

- attention: GQA with num_attention_heads / `n_heads_in_group` KV heads, or `no_op` (no attention and no
  input_layernorm: the layer is its FFN alone);
- ffn: a SwiGLU MLP of its own width, intermediate = ⌈int(2·ffn_mult·h/3)⌉ rounded up to a multiple of 256
  (DeciLM's _ffn_mult_to_intermediate_size), or `no_op` (no MLP and no post_attention_layernorm).

`replace_with_linear` (a block replaced by one h × h linear layer), sparsify, window_length and the sink
tokens are refused by name: no published config this parser reads sets them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields, is_int
from roofline.models.transformer import AttentionKind, MlpKind, ModelConfig

# block fields read only at these values (the published configs' own); any other value is refused by name
_INERT = {"attention": {"replace_with_linear": False, "sparsify": None, "window_length": None,
                        "num_sink_tokens": None, "unshifted_sink": False,
                        "use_prefill_window_in_sink_attention": False},
          "ffn": {"replace_with_linear": False, "sparsify": None}}
_READ = {"attention": ("no_op", "n_heads_in_group"), "ffn": ("no_op", "ffn_mult", "intermediate_size")}


def ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's FFN width: int(2·ffn_mult·h/3), rounded up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def _part(f: Fields, block: Mapping[str, Any], part: str) -> Fields:
    raw = block.get(part)
    if not isinstance(raw, Mapping):
        raise f.bad(part, "an object", raw)
    inner = Fields(raw, f"{f.where} {part}")
    for key, value in raw.items():
        if key in _INERT[part]:
            if value != _INERT[part][key]:
                raise inner.refuse(key, f"is {value!r}: only {_INERT[part][key]!r} is read")
        elif key not in _READ[part]:
            raise inner.refuse(str(key), f"is not read (read: {', '.join((*_READ[part], *_INERT[part]))})")
    return inner


def _block(f: Fields, block: Any, hidden: int) -> tuple[int | None, int]:
    """(KV-head group size or None for a no_op attention, the FFN width or 0 for a no_op FFN)."""
    if not isinstance(block, Mapping):
        raise f.bad("block_configs", "a list of objects, one per layer", block)
    attn, ffn = _part(f, block, "attention"), _part(f, block, "ffn")
    group = None if attn.flag("no_op", False) else attn.integer("n_heads_in_group")
    if ffn.flag("no_op", False):
        return group, 0
    if ffn.raw.get("intermediate_size") is not None:
        return group, ffn.integer("intermediate_size")
    mult = ffn.raw.get("ffn_mult")
    if not isinstance(mult, int | float) or isinstance(mult, bool) or not 0 < mult <= 64:
        raise ffn.bad("ffn_mult", "a number in (0, 64]", mult)
    return group, ffn_width(mult, hidden)


def nemotron_nas(f: Fields, name: str, model_type: str) -> ModelConfig:
    hidden, layers = f.integer("hidden_size"), f.integer("num_hidden_layers")
    blocks = f.raw.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise f.bad("block_configs", f"a list of {layers} (num_hidden_layers) blocks", blocks)
    read = [_block(Fields(f.raw, f"{f.where} block_configs[{i}]"), b, hidden) for i, b in enumerate(blocks)]
    groups = {g for g, _ in read if g is not None}
    if len(groups) > 1:
        raise f.refuse("block_configs", f"give n_heads_in_group {sorted(groups)} on different layers: one KV-head "
                                        f"count for all attention layers is read")
    widths = tuple(w for _, w in read)
    if f.flag("mlp_bias", False):
        raise f.refuse("mlp_bias", "is true: biases on the NAS MLPs are not read")
    # intermediate_size is null at the top level: every layer gives its own (ffn_widths)
    kw: dict[str, Any] = common(Fields({**f.raw, "intermediate_size": max(widths) or 1}, f.where), name,
                                model_type, False)
    heads = kw["num_heads"]
    group = groups.pop() if groups else 1
    if not is_int(group) or heads % group:
        raise f.refuse("block_configs", f"give n_heads_in_group {group}, which does not divide "
                                        f"num_attention_heads {heads}")
    kw["num_kv_heads"] = heads // group
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)
    kw["layer_attention"] = tuple(AttentionKind.NONE if g is None else AttentionKind.GLOBAL for g, _ in read)
    kw["layer_mlp"] = tuple(MlpKind.DENSE if w else MlpKind.NONE for w in widths)
    kw["ffn_widths"] = widths
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"nemotron-nas": nemotron_nas}
