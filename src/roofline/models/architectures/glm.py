"""GLM-5 (`glm_moe_dsa`; transformers models/glm_moe_dsa, GlmMoeDsaConfig and GlmMoeDsaAttention): DeepSeek-V3.2's
layout at its own widths: MLA (qk 192 + 64, v 256), DeepSeek Sparse Attention's lightning indexer, 256
routed experts and one shared, `first_k_dense_replace` dense layers (or `mlp_layer_types`), one
multi-token-prediction layer (`num_nextn_predict_layers`).

What GLM adds, read from the config as transformers reads it:
- `indexer_types` ("full" runs the layer's indexer, "shared" reuses the previous full layer's top-k: no
  indexer weights, index key or scores there; arXiv 2603.12201), else derived from `index_topk_pattern`
  ("F"/"S" per layer) or from `index_topk_freq` and `index_skip_topk_offset` (layer i full when
  max(i − offset + 1, 0) is a multiple of freq; freq 1 and offset 2 where absent: every layer full).
- `head_dim` is not read: transformers overwrites it with qk_rope_head_dim (GLM-5.2 writes 192);
  `qk_head_dim`, where given, must be qk_nope_head_dim + qk_rope_head_dim.
- `index_share_for_mtp_iteration` (GLM-5.2): the MTP iterations reuse a top-k rather than run the indexer;
  which top-k is not pinned by a reference implementation here, so `serve --mtp` runs the draft's indexer
  every time and says so (an upper bound on the draft step).
- The MTP layer holds no copy of the embedding or the head: GLM-5-FP8's modules_to_not_convert names each
  16-bit tensor of model.layers.78 (eh_proj, enorm, hnorm, shared_head.norm, its norms, router and
  indexer weights_proj) and no embed_tokens or shared_head.head.
"""

from __future__ import annotations

from dataclasses import replace

from roofline.models.architectures.common import Parser, common, rotary_dims
from roofline.models.architectures.deepseek import deepseek_experts, indexer, mla_moe
from roofline.models.fields import Fields
from roofline.models.transformer import MlpKind, ModelConfig

_INDEXER = ("full", "shared")
_MLP = {"dense": MlpKind.DENSE, "sparse": MlpKind.MOE}
_ATTENTION = ("indexed_attention", "deepseek_sparse_attention")  # transformers' name, GLM-5.2's own


def _per_layer(f: Fields, key: str, allowed: tuple[str, ...], layers: int) -> list[str] | None:
    value = f.raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != layers or not all(v in allowed for v in value):
        raise f.bad(key, f"a list of {layers} (num_hidden_layers) of {' or '.join(repr(a) for a in allowed)}", value)
    return value


def shared_indexer_layers(f: Fields, layers: int) -> tuple[int, ...]:
    """The layers that reuse the previous full layer's top-k (GlmMoeDsaConfig.__post_init__'s schedule)."""
    types = _per_layer(f, "indexer_types", _INDEXER, layers)
    if types is None and (pattern := f.raw.get("index_topk_pattern")) is not None:
        letters = {"F": "full", "S": "shared"}
        if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set(letters):
            raise f.bad("index_topk_pattern", f"a string of {layers} (num_hidden_layers) letters F or S", pattern)
        types = [letters[c] for c in pattern]
    if types is None:
        freq = f.integer("index_topk_freq", 1)
        offset = f.integer("index_skip_topk_offset", 2, minimum=0)
        types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    if types[0] == "shared":
        raise f.refuse("indexer_types", "starts with a 'shared' layer: there is no earlier top-k for it to reuse")
    return tuple(i for i, t in enumerate(types) if t == "shared")


def glm_moe_dsa(f: Fields, name: str, model_type: str) -> ModelConfig:
    kw = mla_moe(f, name, model_type)
    layers = kw["num_layers"]
    if "num_experts" in f.raw and f.integer("num_experts") != kw["num_experts"]:
        raise f.refuse("num_experts", f"({f.raw['num_experts']}) differs from n_routed_experts "
                                      f"({kw['num_experts']}): transformers reads it in its place")
    qk = f.raw.get("qk_head_dim")
    if qk is not None and qk != kw["head_dim"]:
        raise f.refuse("qk_head_dim", f"({qk}) must be qk_nope_head_dim + qk_rope_head_dim ({kw['head_dim']})")
    for key in ("attention_bias", "mlp_bias"):
        if f.flag(key, False):
            raise f.refuse(key, "is true: GLM-5's projections carry no biases, and biased ones are not read")
    _per_layer(f, "layer_types", _ATTENTION, layers)  # every layer DSA; another kind would be refused here
    mlp = _per_layer(f, "mlp_layer_types", tuple(_MLP), layers)
    if mlp is not None:
        kw["layer_mlp"] = tuple(_MLP[m] for m in mlp)
    kw["indexer"] = replace(indexer(f, shared_indexer_layers(f, layers)),
                            mtp_shares_index=f.flag("index_share_for_mtp_iteration", False))
    kw["mtp_tables"] = False
    return ModelConfig(**kw)


def glm4_moe(f: Fields, name: str, model_type: str) -> ModelConfig:
    """GLM-4.5, 4.6 and 4.7 (`glm4_moe`; transformers models/glm4_moe, Glm4MoeAttention and Glm4MoeMoE):
    grouped-query attention with biases on q, k and v (attention_bias) and none on o_proj, RMSNorm over each
    q and k head where use_qk_norm, RoPE on partial_rotary_factor of each head (0.5 where absent, as
    Glm4MoeConfig sets it), then DeepSeek-V3's experts: n_routed_experts with the sigmoid router's
    e_score_correction_bias (a buffer the checkpoint holds), n_shared_experts beside them, the first
    first_k_dense_replace layers dense. num_nextn_predict_layers MTP layers follow the stack, each with its
    own embed_tokens and shared_head (vLLM's glm4_moe_mtp.py, Glm4MoeMultiTokenPredictor), as DeepSeek-V3's."""
    kw = common(f, name, model_type, False)
    deepseek_experts(f, kw)
    kw["router_bias"] = True
    kw["qkv_bias"] = f.flag("attention_bias", False)
    kw["qk_norm"] = f.flag("use_qk_norm", False)
    kw["rotary_dims"] = rotary_dims(f, kw["head_dim"], default=0.5)
    kw["mtp_layers"] = f.integer("num_nextn_predict_layers", 0, minimum=0)
    kw["mtp_tables"] = True
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"glm_moe_dsa": glm_moe_dsa, "glm4_moe": glm4_moe}
