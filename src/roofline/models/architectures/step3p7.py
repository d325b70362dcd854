"""StepFun Step 3.7 Flash (`step3p7`; transformers 5.24 models/step3p7, Step3p7Config, Step3p7TextConfig,
Step3p7Attention): read as far as its attention, then refused naming the field it cannot pin.

What the reference runs: `layer_types` full and sliding layers (3 sliding to 1 full, `sliding_window`),
K/V of num_key_value_heads × head_dim on both, but the sliding layers' own query heads
(`num_sliding_attention_heads`, from the hub config's `attention_other_setting`; Step 3.x: 96 beside the
full layers' 64) and a head-wise sigmoid gate on every layer (g_proj: h -> H, one gate per head,
Step3p7TextConfig.gating); q/k norms; per-layer rotary shares (`partial_rotary_factors`); the first
`first_k_dense_replace` layers dense, then num_experts sigmoid-routed experts with a router bias and a
shared expert of share_expert_dim; clamped SwiGLU on the layers `swiglu_limits` names; MTP layers.

Refused:
- `attention_other_setting` (or num_sliding_attention_heads) absent: the sliding layers' query heads
  cannot be pinned. transformers would default them to num_attention_heads (and, reading a config without
  `text_config`, builds its language model from defaults: every layer full attention), which the
  published model does not run; a guess would miscount the sliding layers' q/o weights and FLOPs by half.
- Given them, the head-wise output gate (g_proj, h -> H per layer, the gate broadcast over head_dim) is
  not a gate this tool models (its output gate is q_proj's H·d half, Qwen3-Next's): refused naming
  `use_head_wise_attn_gate`, rather than charged at H·d columns, 128× its weights.
"""

from __future__ import annotations

from collections.abc import Mapping

from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def step3p7(f: Fields, name: str, model_type: str) -> ModelConfig:
    text = f.raw.get("text_config")
    t = Fields(text, f"{f.where} text_config") if isinstance(text, Mapping) else f
    if "attention_other_setting" not in t.raw and "num_sliding_attention_heads" not in t.raw:
        raise t.refuse("attention_other_setting", "is missing: the sliding layers' own query heads (Step 3.x: 96 "
                                                  "beside the full layers' 64) cannot be pinned from this config, "
                                                  "and transformers' default (num_attention_heads) is not what the "
                                                  "published model runs")
    raise t.refuse("use_head_wise_attn_gate", "(Step3p7Attention's g_proj: one sigmoid gate per head, h -> H) is "
                                              "not modelled: the output gate read here is q_proj's H·d half")


PARSERS: dict[str, Parser] = {"step3p7": step3p7}
