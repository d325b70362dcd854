"""MiniMax-M3 (`minimax_m3`, MiniMaxAI/MiniMax-M3; transformers 5.24 models/minimax_m3_vl's text model,
MiniMaxM3VLTextConfig and MiniMaxM3VLForCausalLM; sglang and TensorRT-LLM minimax_m3.py). Never read as
MiniMax-M2: that would attend the whole context on the 57 layers that attend 16 blocks of 128 tokens, and
drop the index key each of them caches.

- Attention: GQA on every layer (no biases, no output gate: `attention_output_gate` true is refused), a
  Gemma RMSNorm over each head of q and k (`qk_norm_type` "per_head"; "per_layer" is M2's and refused here),
  partial RoPE over `rotary_dim` of head_dim. The layers whose `sparse_attention_config.sparse_attention_freq`
  is 1 are AttentionKind.SPARSE, block-sparse attention beside a lightning indexer
  (roofline.models.block_sparse: every sparse_* field and what it means); the others full attention.
- MLP by `moe_layer_freq` (0 a dense MLP of dense_intermediate_size, 1 MoE; `first_k_dense_replace` must
  agree): num_local_experts experts of intermediate_size, top num_experts_per_tok, a sigmoid router with
  e_score_correction_bias (use_routing_bias), one shared expert of shared_intermediate_size (transformers builds
  one MiniMaxM3VLDenseMLP of that width: a width other than the experts', or n_shared_experts other than 1,
  is refused). Every MLP "swigluoai": gpt-oss's clamped SwiGLU (swiglu_alpha, swiglu_limit), without biases.
- Multi-token prediction (`num_nextn_predict_layers`, `num_mtp_modules`): transformers loads no MTP weights
  (MiniMaxM3VLPreTrainedModel ignores mtp.*) and their layout is not pinned: named in a warning, not counted.

`minimax_m3_vl` (its multimodal export, nvidia/MiniMax-M3-NVFP4) nests this in text_config beside a CLIP-like
vision tower (transformers MiniMaxM3VLVisionModel and MiniMaxM3VLMultiModalProjector), counted in the
checkpoint's memory as part "vision" (`vision_params`), not in a text step: a Conv3d patch embedding
C·t·p·p·w (no bias; t the temporal patch, p the patch), pre_layrnorm 2w, per layer q, k, v, out 4·(w² + w), fc1
w·f + f, fc2 f·w + w and two LayerNorms 4w (3D RoPE: no position table); the projector linear_1 w·P + P,
linear_2 P·h + h, and over the m² patches merged merge_linear_1 m²·h·P + P, merge_linear_2 P·h + h (P
projector_hidden_size, m spatial_merge_size).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from roofline.models.architectures.common import Parser, common, layer_pattern
from roofline.models.architectures.minimax import rotary_dims
from roofline.models.block_sparse import BlockSparse
from roofline.models.fields import Fields
from roofline.models.transformer import AttentionKind, MlpKind, ModelConfig

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
_SPARSE_FIELDS = frozenset({"use_sparse_attention", "sparse_attention_freq", "sparse_disable_index_value",
                            "sparse_num_index_heads", "sparse_index_dim", "sparse_block_size", "sparse_topk_blocks",
                            "sparse_local_block", "sparse_init_block", "sparse_score_type"})


def _number(f: Fields, key: str, default: float) -> None:
    value = f.raw.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < float("inf"):
        raise f.bad(key, f"a positive number (MiniMax-M3: {default})", value)


def _sparse(f: Fields, layers: int, heads: int, kv_heads: int, rotary: int) -> tuple[list[bool], BlockSparse]:
    """sparse_attention_config: which layers are sparse, and the indexer's shape (roofline.models.block_sparse)."""
    raw = f.raw.get("sparse_attention_config")
    if not isinstance(raw, Mapping):
        raise f.bad("sparse_attention_config", "an object (MiniMax-M3's block-sparse attention)", raw)
    s = Fields(raw, f"{f.where} sparse_attention_config")
    unknown = sorted(set(raw) - _SPARSE_FIELDS)
    if unknown:
        raise s.refuse(unknown[0], "is not read: MiniMax-M3's block-sparse attention (transformers "
                                   "MiniMaxM3VLIndexer) has no such setting")
    if not s.flag("use_sparse_attention", True):
        raise s.refuse("use_sparse_attention", "false is not read: transformers builds the indexer on the "
                                               "sparse_attention_freq layers whatever it says")
    on = layer_pattern(s, "sparse_attention_freq", layers, (False, True))
    if on is None:
        raise s.refuse("sparse_attention_freq", "is missing: which layers are block-sparse is not pinned")
    no_value = layer_pattern(s, "sparse_disable_index_value", layers, (False, True))
    if no_value is not None and any(sp and not nv for sp, nv in zip(on, no_value, strict=True)):
        raise s.refuse("sparse_disable_index_value", "0 on a sparse layer (an index value and output path) is not "
                                                     "read: transformers' MiniMaxM3VLIndexer has none")
    if s.text("sparse_score_type", "max") != "max":
        raise s.refuse("sparse_score_type", f"{raw['sparse_score_type']!r} is not read: transformers max-pools each "
                                            f"block's scores (\"max\")")
    index_heads = s.integer("sparse_num_index_heads")
    if index_heads != kv_heads:  # MiniMaxM3VLIndexer.build_block_mask: one index head's selection per GQA group
        raise s.refuse("sparse_num_index_heads", f"({index_heads}) must equal num_key_value_heads ({kv_heads}): each "
                                                 f"index head picks one KV group's blocks")
    index_dim = s.integer("sparse_index_dim")
    if rotary > index_dim:
        raise s.refuse("sparse_index_dim", f"({index_dim}) is narrower than rotary_dim ({rotary}), which RoPE "
                                           f"rotates in each index head")
    topk, local = s.integer("sparse_topk_blocks"), s.integer("sparse_local_block", 1, minimum=0)
    init = s.integer("sparse_init_block", 0, minimum=0)
    if local < 1:
        raise s.refuse("sparse_local_block", "0 is not read: without the query's own block forced in, which blocks "
                                             "it attends (and how many keys) depends on the scores")
    if init + local > topk:
        raise s.refuse("sparse_init_block", f"+ sparse_local_block ({init} + {local}) exceeds sparse_topk_blocks "
                                            f"({topk}): more blocks forced in than are kept")
    dtype = f.text("torch_dtype", "bfloat16", "dtype")
    if dtype not in _DTYPE_BYTES:
        raise f.bad("torch_dtype", " or ".join(repr(d) for d in _DTYPE_BYTES), dtype)
    return on, BlockSparse(index_heads, index_dim, s.integer("sparse_block_size"), topk, rotary,
                           _DTYPE_BYTES[dtype], local, init)


def _text(f: Fields, name: str, model_type: str) -> ModelConfig:
    if f.text("hidden_act", "swigluoai") != "swigluoai":
        raise f.refuse("hidden_act", f"{f.raw['hidden_act']!r} is not read: every MiniMax-M3 MLP is swigluoai "
                                     f"(clamped SwiGLU)")
    _number(f, "swiglu_limit", 7.0)
    _number(f, "swiglu_alpha", 1.702)
    kw: dict[str, Any] = common(Fields({**f.raw, "hidden_act": "silu"}, f.where), name, model_type, False)
    layers, d, G = kw["num_layers"], kw["head_dim"], kw["num_kv_heads"]
    if f.flag("attention_output_gate", False):
        raise f.refuse("attention_output_gate", "true is not read: MiniMaxM3VLAttention has no output gate")
    if f.text("qk_norm_type", "per_head") != "per_head" or not f.flag("use_qk_norm", True):
        raise f.refuse("qk_norm_type", "other than per_head (with use_qk_norm true) is not read: MiniMaxM3VLAttention "
                                       "norms each head of q and k")
    rotary = rotary_dims(f, d)
    if f.raw.get("sliding_window") is not None:
        raise f.refuse("sliding_window", "is not read: MiniMax-M3's full layers attend the whole context")
    on, block = _sparse(f, layers, kw["num_heads"], G, rotary)
    mlp = layer_pattern(f, "moe_layer_freq", layers, (MlpKind.DENSE, MlpKind.MOE))
    if mlp is None:
        raise f.refuse("moe_layer_freq", "is missing: which layers are MoE is not pinned")
    dense = mlp.index(MlpKind.MOE) if MlpKind.MOE in mlp else layers
    if f.integer("first_k_dense_replace", dense, minimum=0) != dense or MlpKind.DENSE in mlp[dense:]:
        raise f.refuse("first_k_dense_replace", f"disagrees with moe_layer_freq (its first {dense} layers dense, "
                                                f"then MoE)")
    width = f.integer("intermediate_size")  # each expert's, as MiniMaxM3VLExperts reads it
    if f.integer("moe_intermediate_size", width) != width:
        raise f.refuse("moe_intermediate_size", f"disagrees with intermediate_size ({width}), the experts' width "
                                                f"transformers reads")
    if f.integer("shared_intermediate_size", width) != width or f.integer("n_shared_experts", 1) != 1:
        raise f.refuse("shared_intermediate_size", f"other than one shared expert of the experts' width ({width}) "
                                                   f"is not read")
    if f.text("scoring_func", "sigmoid") != "sigmoid":
        raise f.refuse("scoring_func", "other than sigmoid is not read: MiniMaxM3VLTopKRouter scores by sigmoid")
    experts = f.integer("num_local_experts")
    kw.update(rotary_dims=rotary, qk_norm=True, activation="swiglu_clamped", num_experts=experts,
              experts_per_token=f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                          "num_local_experts", experts),
              moe_intermediate_size=width, intermediate_size=f.integer("dense_intermediate_size"),
              num_shared_experts=1, router_bias=f.flag("use_routing_bias", True), layer_mlp=tuple(mlp),
              first_dense_layers=dense, block_sparse=block,
              layer_attention=tuple(AttentionKind.SPARSE if s else AttentionKind.GLOBAL for s in on))
    mtp = f.integer("num_nextn_predict_layers", 0, minimum=0), f.integer("num_mtp_modules", 0, minimum=0)
    if any(mtp):
        kw["load_warnings"] = (f"config {f.where}: the multi-token-prediction modules (num_nextn_predict_layers "
                               f"{mtp[0]}, num_mtp_modules {mtp[1]}) are not counted: not in the step, and left out "
                               f"of the checkpoint's memory (transformers loads none; their layout is not pinned)",)
    return ModelConfig(**kw)


def minimax_m3(f: Fields, name: str, model_type: str) -> ModelConfig:
    return _text(f, name, model_type)


def vision_params(f: Fields, hidden: int) -> int:
    """The vision tower's and the projector's parameters (the module docstring), `f` the multimodal config."""
    raw = f.raw.get("vision_config")
    if not isinstance(raw, Mapping):
        raise f.bad("vision_config", "an object (the vision tower's config)", raw)
    v = Fields(raw, f"{f.where} vision_config")
    if v.text("position_embedding_type", "rope") != "rope":
        raise v.refuse("position_embedding_type", "other than rope (3D RoPE, no position table) is not read")
    if not f.flag("multimodal_projector_bias", True):
        raise f.refuse("multimodal_projector_bias", "false is not read: MiniMaxM3VLMultiModalProjector has biases")
    packed = raw.get("img_token_compression_config", f.raw.get("img_token_compression_config"))
    merge = Fields({**(packed if isinstance(packed, Mapping) else {}), **raw}, v.where)
    t, m = merge.integer("temporal_patch_size", 2), merge.integer("spatial_merge_size", 2)
    w, fw, layers = v.integer("hidden_size"), v.integer("intermediate_size"), v.integer("num_hidden_layers")
    p, c, proj = v.integer("patch_size"), v.integer("num_channels", 3), f.integer("projector_hidden_size", hidden)
    tower = c * t * p * p * w + 2 * w + layers * (4 * (w * w + w) + w * fw + fw + fw * w + w + 4 * w)
    return tower + (w * proj + proj) + 2 * (proj * hidden + hidden) + (m * m * hidden * proj + proj)


def minimax_m3_vl(f: Fields, name: str, model_type: str) -> ModelConfig:
    text = f.raw.get("text_config")
    if not isinstance(text, Mapping):
        raise f.bad("text_config", "an object (the language model's config)", text)
    inner = {"tie_word_embeddings": f.flag("tie_word_embeddings", False), "torch_dtype": f.raw.get("torch_dtype"),
             **text}
    cfg = _text(Fields(inner, f"{f.where} text_config"), name, model_type)
    if f.raw.get("vision_config") is None:
        return cfg
    return replace(cfg, vision_params=vision_params(f, cfg.hidden_size))


PARSERS: dict[str, Parser] = {"minimax_m3": minimax_m3, "minimax_m3_vl": minimax_m3_vl}
