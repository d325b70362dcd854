"""Xiaomi MiMo-V2-Flash (`mimo_v2_flash`; transformers 5.24 models/mimo_v2_flash, MiMoV2FlashConfig,
MiMoV2FlashAttention, MiMoV2FlashTopkRouter, MiMoV2FlashMoE).

- Layer kinds (roofline.models.attention_shape). Sliding-window layers: num_attention_heads queries
  of head_dim 192 against 2 · num_key_value_heads K/V heads (transformers doubles them on the SWA
  layers: 64/8), values v_head_dim 128 wide, a learned sink logit per head. Full layers: the same
  queries against num_key_value_heads (64/4), values 128, no sinks. Both rotate
  int(partial_rotary_factor · 192) = 64 dims of each q/k head. No q/k norms, no biases on o_proj.
- Which layer is which: `layer_types`, or the published config's `hybrid_layer_pattern` (1 sliding,
  0 full), or transformers' default (full at layer 0 and every sixth); given both, they must agree.
- The window: `sliding_window_size` + 1 where given (MiMoV2FlashConfig.__post_init__: the window
  counts the token itself), else `sliding_window`.
- MLPs: `mlp_layer_types`, or the published `moe_layer_freq` (0 dense, 1 MoE), or dense layer 0 then
  MoE. The MoE is DeepSeek-V3's router without shared experts: sigmoid scores plus the
  e_score_correction_bias (noaux_tc), top num_experts_per_tok of n_routed_experts SwiGLU experts.
- Read and not counted: attention_value_scale (V × 0.707, one multiply a value), the router's float32
  weights (counted in the checkpoint's dtype, as DeepSeek's are), swa_rope_theta (positions only).
- Not read, said: `attention_chunk_size` (transformers does not read it: its SWA layers slide).
- Multi-token prediction: the checkpoint's model.mtp.* modules (transformers drops them on load) are
  not counted: the config gives no count of them (no num_nextn_predict_layers), said in a warning.

Refused by name: the SWA fields where they disagree with what transformers builds
(swa_num_key_value_heads ≠ 2 · num_key_value_heads, swa_num_attention_heads, swa_head_dim,
swa_v_head_dim), sink flags unlike the reference's (sinks on the SWA layers only), shared experts.
"""

from __future__ import annotations

from collections.abc import Mapping

from roofline.models.architectures.common import Parser, common, layer_types
from roofline.models.architectures.common import layer_pattern as _pattern
from roofline.models.attention_shape import AttentionShape
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, MlpKind, ModelConfig

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL


def _rotary(f: Fields, head_dim: int) -> int:
    """int(partial_rotary_factor · head_dim) (MiMoV2FlashRotaryEmbedding), the same for both kinds."""
    rope = f.raw.get("rope_parameters")
    factors = set()
    if isinstance(rope, Mapping):
        for kind in ("full_attention", "sliding_attention"):
            p = rope.get(kind)
            factors.add(p.get("partial_rotary_factor", 0.334) if isinstance(p, Mapping) else 0.334)
    else:
        factors.add(f.raw.get("partial_rotary_factor", 0.334))
    if len(factors) != 1:
        raise f.refuse("rope_parameters", "gives the two layer kinds different rotary shares: not read")
    factor = factors.pop()
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1 \
            or int(head_dim * factor) % 2:
        raise f.bad("partial_rotary_factor", f"a number in (0, 1] turning an even number of head_dim {head_dim}'s "
                                             f"dims", factor)
    rotated = int(head_dim * factor)
    return 0 if rotated == head_dim else rotated


def mimo_v2_flash(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = common(f, name, model_type, False)
    layers, heads, kv, d = kw["num_layers"], kw["num_heads"], kw["num_kv_heads"], kw["head_dim"]
    dv = f.integer("v_head_dim", 128)
    for key, want in (("swa_num_attention_heads", heads), ("swa_num_key_value_heads", 2 * kv),
                      ("swa_head_dim", d), ("swa_v_head_dim", dv)):
        if key in f.raw and f.integer(key) != want:
            raise f.refuse(key, f"({f.raw[key]}) is not what transformers' MiMoV2FlashAttention builds ({want}: the "
                                f"sliding layers run num_attention_heads of head_dim, v_head_dim values and twice "
                                f"num_key_value_heads)")
    if not f.flag("add_swa_attention_sink_bias", True) or f.flag("add_full_attention_sink_bias", False):
        raise f.refuse("add_full_attention_sink_bias", "with add_swa_attention_sink_bias: transformers puts the "
                                                       "sinks on the sliding layers only; other placements not read")
    if f.flag("attention_bias", False):
        kw["qkv_bias"] = True  # on q, k, v; MiMoV2FlashAttention's o_proj has none
    types = layer_types(f, layers)
    pattern = _pattern(f, "hybrid_layer_pattern", layers, (GLOBAL, LOCAL))
    if types is not None and pattern is not None and list(types) != pattern:
        raise f.refuse("hybrid_layer_pattern", "disagrees with layer_types: not read")
    default = tuple(GLOBAL if i == 0 or (i + 1) % 6 == 0 else LOCAL for i in range(layers))
    kw["layer_attention"] = types or (tuple(pattern) if pattern is not None else default)
    size = f.optional_int("sliding_window_size")
    kw["sliding_window"] = size + 1 if size is not None else f.integer("sliding_window", 129)
    rotary = _rotary(f, d)
    kw.update(num_kv_heads=2 * kv, v_head_dim=dv, rotary_dims=rotary, attention_sinks=True,
              global_attention=AttentionShape(heads, kv, d, dv, rotary_dims=rotary))
    mlp = f.raw.get("mlp_layer_types")
    if mlp is not None:
        if not isinstance(mlp, list) or len(mlp) != layers or not all(m in ("dense", "sparse") for m in mlp):
            raise f.bad("mlp_layer_types", f"a list of {layers} 'dense' or 'sparse'", mlp)
        kinds = [MlpKind.MOE if m == "sparse" else MlpKind.DENSE for m in mlp]
    else:
        kinds = _pattern(f, "moe_layer_freq", layers, (MlpKind.DENSE, MlpKind.MOE)) \
            or [MlpKind.DENSE] + [MlpKind.MOE] * (layers - 1)
    kw["layer_mlp"] = tuple(kinds)
    if MlpKind.MOE in kinds:
        experts = kw["num_experts"] = f.integer("n_routed_experts", 256, "num_local_experts")
        kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok", 8),
                                            "n_routed_experts", experts)
        kw["moe_intermediate_size"] = f.integer("moe_intermediate_size", 2048)
        kw["router_bias"] = True  # e_score_correction_bias, added to the sigmoid scores to pick experts
        if f.integer("n_shared_experts", 0, minimum=0):
            raise f.refuse("n_shared_experts", "is not read: MiMoV2FlashMoE runs no shared expert")
        groups = f.optional_int("n_group") or 1
        if groups > 1:
            kw["routing_node_limit"] = f.at_most("topk_group", f.integer("topk_group"), "n_group", groups)
    notes = []
    if "attention_chunk_size" in f.raw:
        notes.append(f"config {f.where}: attention_chunk_size is not read (transformers' MiMoV2FlashAttention does "
                     f"not read it): the sliding layers slide over their window")
    notes.append(f"config {f.where}: the checkpoint's multi-token-prediction modules (model.mtp.*) are not counted: "
                 f"the config gives no count of them")
    kw["load_warnings"] = tuple(notes)
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"mimo_v2_flash": mimo_v2_flash}
