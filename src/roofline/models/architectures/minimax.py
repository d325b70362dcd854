"""MiniMax-M2, M2.5 and M2.7 (`minimax_m2`; transformers models/minimax_m2, vLLM minimax_m2.py).

Every layer is full softmax attention (`attn_type_list` all 1; MiniMax-01's 0, lightning linear
attention, is refused naming the field: M2 has none) and a mixture of experts. Attention: GQA,
no biases, partial RoPE over `rotary_dim` of head_dim (transformers reads it as
partial_rotary_factor = rotary_dim / head_dim), and `qk_norm_type` "per_layer": one RMSNorm over the
whole of q (H·d gains) and one over the whole of k (G·d), as MiniMaxM2Attention's q_norm / k_norm.
MoE: num_local_experts SwiGLU experts of intermediate_size, top num_experts_per_tok, a sigmoid
router (h -> E, no bias) plus `e_score_correction_bias` (use_routing_bias) added to pick the
experts; no shared expert (shared_intermediate_size 0; a shared width is refused: the reference
has none). The multi-token-prediction modules (use_mtp, num_mtp_modules of mtp_transformer_layers)
are named in a warning: not in the step, nor in the checkpoint's memory here.

No block-sparse attention is in M2's config: MiniMax-M3's (`minimax_m3`, `sparse_attention_config`:
index heads scoring 128-token blocks, top-k blocks attended) is another model_type, refused by name.
"""

from __future__ import annotations

from roofline.models.architectures.common import Parser, common
from roofline.models.fields import Fields
from roofline.models.transformer import ModelConfig


def rotary_dims(f: Fields, head_dim: int) -> int:
    """`rotary_dim`: the even number of each head's dims RoPE rotates, at most head_dim (all of it where absent);
    NVIDIA's exports also write partial_rotary_factor, which must agree (transformers reads that one)."""
    rotary = f.integer("rotary_dim", head_dim)
    if rotary > head_dim or rotary % 2:
        raise f.bad("rotary_dim", f"an even number of dims at most head_dim ({head_dim})", rotary)
    factor = f.raw.get("partial_rotary_factor")
    if factor is not None and factor != rotary / head_dim:
        raise f.refuse("partial_rotary_factor", f"({factor!r}) disagrees with rotary_dim / head_dim = "
                                                f"{rotary}/{head_dim}")
    return rotary


def minimax_m2(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    layers, d = kw["num_layers"], kw["head_dim"]
    attn = f.raw.get("attn_type_list")
    if attn is not None and (not isinstance(attn, list) or len(attn) != layers
                             or any(a != 1 or isinstance(a, bool) for a in attn)):
        raise f.refuse("attn_type_list", f"must give 1 (full softmax attention) for each of the {layers} layers; "
                                         f"0 (MiniMax-01's lightning attention) is not read, got {attn!r:.80}")
    if f.text("qk_norm_type", "per_layer") != "per_layer" or not f.flag("use_qk_norm", True):
        raise f.refuse("qk_norm_type", "other than per_layer (with use_qk_norm true) is not read: MiniMaxM2Attention "
                                       "norms all of q and all of k")
    rotary = rotary_dims(f, d)
    if f.integer("shared_intermediate_size", 0, minimum=0):
        raise f.refuse("shared_intermediate_size", "is not read: MiniMax-M2's reference has no shared expert")
    if f.text("scoring_func", "sigmoid") not in ("sigmoid", "softmax"):
        raise f.bad("scoring_func", "'sigmoid' or 'softmax'", f.raw.get("scoring_func"))
    if f.raw.get("sliding_window") is not None:
        raise f.refuse("sliding_window", "is not read: MiniMax-M2 attends the whole context (no sliding window)")
    kw["rotary_dims"] = rotary
    kw["qk_norm"] = kw["qk_norm_per_layer"] = True
    kw["num_experts"] = f.integer("num_local_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_local_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = kw["intermediate_size"]  # each expert's width
    kw["intermediate_size"] = 0
    kw["router_bias"] = f.flag("use_routing_bias", True)  # e_score_correction_bias
    if f.flag("use_mtp", False):
        modules = f.integer("num_mtp_modules", 1)
        kw["load_warnings"] = (f"config {f.where}: {modules} multi-token-prediction module(s) (num_mtp_modules) are "
                               f"not counted: not in the step, and left out of the checkpoint's memory",)
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"minimax_m2": minimax_m2}
