"""Nemotron-H and Nemotron 3 (`nemotron_h`; Nemotron-H, arXiv 2504.03624; transformers and vLLM
models/nemotron_h, mlx-lm nemotron_h): a stack of blocks, each one RMSNorm and one mixer, named by
`hybrid_override_pattern` (M Mamba2, * attention, - MLP, E MoE) or `layers_block_type` ("mamba",
"attention", "mlp", "moe"). Mamba2 (roofline.models.mamba): mamba_num_heads of mamba_head_dim, n_groups
groups of B and C of ssm_state_size, a conv1d of conv_kernel taps. Attention: GQA without positional
encoding (NemotronHAttention applies no RoPE). MLP: up, ReLU², down (no gate). MoE: a sigmoid router
with its e_score_correction_bias, n_routed_experts ReLU² experts of moe_intermediate_size, and one
shared ReLU² MLP of moe_shared_expert_intermediate_size.

LatentMoE (`moe_latent_size`, Nemotron 3 Super/Ultra; transformers NemotronHMoE): the routed experts
run in a latent of moe_latent_size, between fc1_latent_proj (h -> ℓ) and fc2_latent_proj (ℓ -> h);
the router and the shared MLP stay in h (roofline.models.latent).

Refused by name: fp32 residuals, biases whose reference differs (`use_bias`/`mamba_proj_bias`,
`mlp_bias`), a sliding window.
"""

from __future__ import annotations

from typing import Any

from roofline.models.architectures.common import Parser, state_bytes
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, Mamba2, MlpKind, ModelConfig

_SYMBOLS = {"M": (AttentionKind.MAMBA, MlpKind.NONE), "*": (AttentionKind.GLOBAL, MlpKind.NONE),
            "-": (AttentionKind.NONE, MlpKind.DENSE), "E": (AttentionKind.NONE, MlpKind.MOE)}
_NAMES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _pattern(f: Fields) -> str:
    """The blocks as M/*/-/E: hybrid_override_pattern, or layers_block_type spelled out."""
    pattern = f.raw.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern or set(pattern) - set(_SYMBOLS):
            raise f.bad("hybrid_override_pattern", "a string of M (Mamba2), * (attention), - (MLP), E (MoE)",
                        pattern)
        return pattern
    names = f.raw.get("layers_block_type")
    if not isinstance(names, list) or not names or not all(n in _NAMES for n in names):
        raise f.bad("layers_block_type", f"a list of {', '.join(repr(n) for n in _NAMES)} "
                                         f"(or give hybrid_override_pattern)", names)
    return "".join(_NAMES[n] for n in names)


def _mamba(f: Fields) -> Mamba2:
    if f.text("mamba_hidden_act", "silu") != "silu":
        raise f.refuse("mamba_hidden_act", f"{f.raw['mamba_hidden_act']!r} is not read: the reference's conv "
                                           f"activation is SiLU")
    state = state_bytes(f, "mamba_ssm_cache_dtype")
    heads, groups = f.integer("mamba_num_heads"), f.integer("n_groups")
    if heads % groups:
        raise f.refuse("n_groups", f"({groups}) must divide mamba_num_heads ({heads}): each group of B and C "
                                   f"serves a whole set of heads")
    return Mamba2(heads, f.integer("mamba_head_dim"), groups, f.integer("ssm_state_size"), f.integer("conv_kernel"),
                  f.integer("chunk_size", 128), conv_bias=f.flag("use_conv_bias", True),
                  state_bytes=state)


def nemotron_h(f: Fields, name: str, model_type: str) -> ModelConfig:
    for key in ("use_bias", "mamba_proj_bias", "mlp_bias", "residual_in_fp32"):
        if f.flag(key, False):  # transformers biases in/out_proj on use_bias, mlx-lm on mamba_proj_bias
            raise f.refuse(key, "true is not read: analysed only without it (every published Nemotron-H "
                                "config has it false)")
    if f.raw.get("sliding_window") is not None:
        raise f.refuse("sliding_window", "is not read: Nemotron-H's attention layers attend the whole context")
    pattern = _pattern(f)
    layers = f.integer("num_hidden_layers", len(pattern))
    if layers != len(pattern):
        raise f.refuse("hybrid_override_pattern", f"gives {len(pattern)} blocks, num_hidden_layers {layers}")
    if f.text("mlp_hidden_act", "relu2") != "relu2":
        raise f.refuse("mlp_hidden_act", f"{f.raw['mlp_hidden_act']!r} is not read: Nemotron-H's MLP is ReLU²")
    hidden, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    kw: dict[str, Any] = {
        "name": name, "architecture": model_type, "hidden_size": hidden, "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": f.at_most("num_key_value_heads", f.integer("num_key_value_heads", heads),
                                  "num_attention_heads", heads),
        "head_dim": f.integer("head_dim", hidden // heads, "attention_head_dim"),
        "intermediate_size": f.integer("intermediate_size") if "-" in pattern else 0,
        "vocab_size": f.integer("vocab_size"), "max_position_embeddings": f.integer("max_position_embeddings"),
        "tie_word_embeddings": f.flag("tie_word_embeddings", False), "activation": "relu2", "nope": True,
        "layer_attention": tuple(_SYMBOLS[s][0] for s in pattern),
        "layer_mlp": tuple(_SYMBOLS[s][1] for s in pattern),
    }
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)
    if "M" in pattern:
        kw["mamba"] = _mamba(f)
    if "E" in pattern:
        experts = kw["num_experts"] = f.integer("n_routed_experts")
        kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                            "n_routed_experts", experts)
        moe = kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
        if f.integer("n_shared_experts", 1, minimum=0) != 1:
            raise f.refuse("n_shared_experts", "other than 1 is not read: the shared MLP is one of "
                                               "moe_shared_expert_intermediate_size")
        shared = f.integer("moe_shared_expert_intermediate_size", 0, minimum=0)
        if shared % moe:
            raise f.refuse("moe_shared_expert_intermediate_size", f"({shared}) must be a multiple of "
                                                                  f"moe_intermediate_size ({moe})")
        kw["num_shared_experts"] = shared // moe
        kw["router_bias"] = True  # NemotronHTopkRouter's e_score_correction_bias
        latent = f.optional_int("moe_latent_size")
        if latent is not None:
            kw["moe_latent_size"] = f.at_most("moe_latent_size", latent, "hidden_size", hidden)
    mtp = f.integer("num_nextn_predict_layers", 0, minimum=0)
    if mtp:
        kw["load_warnings"] = (f"config {f.where}: {mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) "
                               f"are not counted: not in the step, and left out of the checkpoint's memory",)
    if "mamba_ssm_cache_dtype" not in f.raw and "M" in pattern:
        kw["load_warnings"] = (*kw.get("load_warnings", ()),
                               f"config {f.where}: no mamba_ssm_cache_dtype: the SSM state is counted in float32 "
                               f"(as Nemotron 3's configs give it)")
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"nemotron_h": nemotron_h}
