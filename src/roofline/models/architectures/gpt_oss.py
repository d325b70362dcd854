"""gpt-oss (OpenAI; transformers models/gpt_oss, vLLM model_executor/models/gpt_oss.py).

Every layer is a mixture of experts; attention alternates by `layer_types` between a 128-token
sliding window and full causal attention, GQA with biases on q, k, v and o and one learned sink
logit per head (added to each softmax's denominator). The router is a biased linear layer; each
expert is a clamped SwiGLU (gate and up clamped at `swiglu_limit`, gate·sigmoid(1.702·gate)·(up + 1))
with biases on its gate_up and down projections, `intermediate_size` wide. The checkpoint stores
the experts in MXFP4 and everything else in BF16.
"""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common, layer_types
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def gpt_oss(f: Fields, name: str, model_type: str) -> ModelConfig:
    if f.text("hidden_act", "silu") != "silu":  # the config says silu; the experts run the clamped form
        raise f.refuse("hidden_act", f"{f.raw['hidden_act']!r} is not gpt-oss's (silu, clamped as swiglu_limit says)")
    limit = f.raw.get("swiglu_limit", 7.0)
    if not isinstance(limit, int | float) or isinstance(limit, bool) or not 0 < limit < float("inf"):
        raise f.bad("swiglu_limit", "a positive number (gpt-oss: 7.0)", limit)
    kw = common(f, name, model_type, False)
    layers = kw["num_layers"]
    types = layer_types(f, layers)
    if types is None:
        raise f.refuse("layer_types", "is missing: gpt-oss names each layer sliding_attention or full_attention")
    kw["layer_attention"] = types
    kw["sliding_window"] = f.integer("sliding_window")
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", True)
    kw["attention_sinks"] = True
    kw["num_experts"] = f.integer("num_local_experts")
    k = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"), "num_local_experts", kw["num_experts"])
    if f.integer("experts_per_token", k) != k:
        raise f.refuse("experts_per_token", f"({f.raw['experts_per_token']}) disagrees with num_experts_per_tok ({k})")
    kw["experts_per_token"] = k
    kw["moe_intermediate_size"] = kw["intermediate_size"]  # each expert's width
    kw["intermediate_size"] = 0
    kw["router_bias"] = kw["expert_bias"] = True
    kw["activation"] = "swiglu_clamped"
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"gpt_oss": gpt_oss}
