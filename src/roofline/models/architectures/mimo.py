"""Xiaomi MiMo-7B (`mimo`; vLLM mimo.py MiMoForCausalLM and mimo_mtp.py MiMoMTP): Qwen2's decoder (biases on
q, k and v; roofline.models.architectures.qwen.qwen2, its `use_sliding_window` read alike) with
`num_nextn_predict_layers` multi-token-prediction layers after it (model.mtp_layers.i: token_layernorm,
hidden_layernorm, input_proj 2h -> h, one Qwen2 decoder layer, final_layernorm; vLLM loads them with the
main model's embed_tokens and lm_head, so they keep no tables of their own). The MTP layers are in the
checkpoint's memory and out of the main step (roofline.models.mtp). transformers 5.24 has no `mimo`."""

from __future__ import annotations

from dataclasses import replace

from roofline.models.architectures.common import Parser
from roofline.models.architectures.qwen import qwen2
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def mimo(f: Fields, name: str, model_type: str) -> ModelConfig:
    if f.flag("use_mrope", False):
        raise f.refuse("use_mrope", "true is not read: MiMo-7B's text model rotates plain RoPE positions")
    if not f.flag("attention_bias", True):
        raise f.refuse("attention_bias", "false is not read: MiMo's Qwen2 layers have biases on q, k and v")
    cfg = qwen2(f, name, model_type)
    return replace(cfg, mtp_layers=f.integer("num_nextn_predict_layers", 0, minimum=0))


PARSERS: dict[str, Parser] = {"mimo": mimo}
