"""Gemma 4 (`gemma4`, the language model in `text_config`, `gemma4_text`; transformers models/gemma4):
read as far as this tool can model it, then refused naming the first field it cannot.

What the config carries (Gemma4TextAttention, Gemma4TextDecoderLayer, Gemma4TextRouter in transformers
5.24): `layer_types` five sliding_attention layers (a `sliding_window` of 1024) to one full_attention
layer; the sliding layers' GQA of num_key_value_heads × head_dim (8 × 256), the full layers' own shape
of num_global_key_value_heads × global_head_dim (2 × 512 for 26B-A4B, 4 × 512 for 31B), with
`attention_k_eq_v` on the full layers (no v_proj: V is the k_proj output, v_norm'd; K and V are both
cached) and RoPE over partial_rotary_factor 0.25 of them; q_norm and k_norm per head, a scale-free
v_norm; sandwich norms; `enable_moe_block` (26B-A4B): a dense SwiGLU MLP of intermediate_size beside
num_experts experts of moe_intermediate_size (top_k_experts), each with its own pre/post norms, their
outputs summed, and a router with a scale per hidden unit and one per expert; tied embeddings,
final_logit_softcapping; hidden_size_per_layer_input and num_kv_shared_layers (Gemma 3n's per-layer
inputs and shared KV) 0 in every published Gemma 4.

Refused: a full-attention shape unlike the sliding one (`global_head_dim`, `num_global_key_value_heads`,
`attention_k_eq_v`): the step models one attention shape for every layer, and charging the full
layers at the sliding layers' shape would miscount their KV cache (26B-A4B: 2·2·512 = 2,048 values a
token and full layer, not the sliding layers' 2·8·256 = 4,096), their weights (no v_proj) and their
FLOPs (queries 512 wide, not 256). Then the MoE beside a dense MLP (`enable_moe_block`) is refused:
the step runs one MLP kind a layer. Also refused by name: per-layer inputs, KV-shared layers and the
double-wide MLP, where they are on.
"""

from __future__ import annotations

from collections.abc import Mapping

from roofline.errors import RooflineError
from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def gemma4(f: Fields, name: str, model_type: str) -> ModelConfig:
    """The multimodal Gemma 4 config: its text_config read; refused at the first field not modelled."""
    text = f.raw.get("text_config") if model_type == "gemma4" else f.raw
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    if model_type == "gemma4" and text.get("model_type", "gemma4_text") != "gemma4_text":
        raise RooflineError(f"config {f.where}: text_config's model_type {text.get('model_type')!r} is not "
                            f"gemma4_text")
    t = Fields(text, f"{f.where} text_config" if model_type == "gemma4" else f.where)
    for key in ("hidden_size_per_layer_input", "num_kv_shared_layers"):
        if t.integer(key, 0, minimum=0):
            raise t.refuse(key, "is not read: Gemma 3n's per-layer inputs and KV-shared layers are not modelled")
    if t.flag("use_double_wide_mlp", False):
        raise t.refuse("use_double_wide_mlp", "true is not read")
    d, heads = t.integer("head_dim"), t.integer("num_key_value_heads")
    global_d = t.integer("global_head_dim", d)
    global_heads = t.integer("num_global_key_value_heads", heads)
    if global_d != d or global_heads != heads or t.flag("attention_k_eq_v", False):
        raise t.refuse("global_head_dim", f"({global_d}, with num_global_key_value_heads {global_heads} and "
                                          f"attention_k_eq_v) gives the full-attention layers a shape of their own "
                                          f"beside the sliding layers' {heads} × {d}: one attention shape per layer "
                                          f"kind is not modelled yet")
    if t.flag("enable_moe_block", False):
        raise t.refuse("enable_moe_block", "true (experts beside a dense MLP in every layer) is not modelled yet")
    raise t.refuse("model_type", "gemma4 with one attention shape and no MoE is not published; not read")


PARSERS: dict[str, Parser] = {"gemma4": gemma4, "gemma4_text": gemma4}
