"""DeepSeek-V4 (Flash, Pro; transformers 5.24 models/deepseek_v4, DeepseekV4Config; sgl-project's FP8 exports
name it `deepseek_ref`): every layer shared-KV MQA over a sliding window with its compressed branch
(`compress_ratios`: 0 the window only, 4 CSA with the lightning indexer, 128 HCA; roofline.models.compressed),
mHC's `hc_mult` residual streams, 256/384 routed experts and one shared, the first `num_hash_layers` MoE layers
hash-routed (tid2eid: no correction bias), clamped SwiGLU (`swiglu_limit`).

Read as transformers reads it:
- `compress_ratios` has one entry a layer, or one more per MTP layer (the hub's configs give 44 for 43
  layers; transformers keeps the first num_hidden_layers). `layer_types` (the three names) and
  `compress_rates` ({"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}) likewise.
- `mlp_layer_types` ("hash_moe" / "moe") or `num_hash_layers` (3 where absent). A hash layer's router still
  scores every expert (DeepseekV4HashRouter: its logits, then the tid2eid lookup picks the k): its FLOPs are
  the learned routers'; tid2eid (vocab × k token ids, a buffer) is not counted in memory (9.3 MB at int32).
- The checkpoint's weights (quantization_config quant_method fp8, 128x128 blocks with a UE8M0 scale): FP8
  blocks for the attention, the indexer's query and the shared experts; `expert_dtype` "fp4" experts in
  E2M1 with a UE8M0 scale per 32 (transformers' FP8Experts: MXFP4's 4.25 bits), "fp8" (or absent:
  sgl-project's requants) FP8 blocks; BF16 for the compressors' and indexer's kv/gate projections and
  weights_proj (DeepseekV4PreTrainedModel._keep_in_fp32_modules), the router (a Parameter, not a Linear)
  and lm_head (FineGrainedFP8 never converts the output embedding); FP32 for mHC
  (_keep_in_fp32_modules_strict).

The MTP layers (`num_nextn_predict_layers`, their compress ratios the entries of compress_ratios past the
last layer): each one more Block (DeepSeek's reference inference/model.py MTPBlock, as ROCm/ATOM@22da013
atom/models/deepseek_v4_mtp.py ports it; transformers skips `mtp.*` on load), counted in the checkpoint's memory
(roofline.models.compressed.compressed_mtp_parts: its attention, experts and mHC at the main layers' dtypes,
e_proj and h_proj in FP8) and run as the draft of `serve --mtp` (roofline.models.draft). Without their ratios
(layer_types, or one entry a layer) they are left out with a warning. NVIDIA's NVFP4 exports (quant_algo
MIXED_PRECISION over the FP8 blocks) are read as expert-only requants (`_expert_only_requant`); any other
MIXED_PRECISION is refused.
"""

from __future__ import annotations

from typing import Any

from roofline.dtypes import DTYPES
from roofline.errors import shown
from roofline.models.architectures.common import Parser
from roofline.models.compressed import CompressedAttention, compressed_mtp_parts
from roofline.models.fields import Fields
from roofline.models.quantization import _NEVER_QUANTIZED, checkpoint_weights
from roofline.models.transformer import AttentionKind, ModelConfig

_TYPES = {"sliding_attention": 0, "compressed_sparse_attention": "csa", "heavily_compressed_attention": "hca"}
_SCORING = ("sqrtsoftplus", "softmax", "sigmoid")


def _rates(f: Fields) -> tuple[int, int]:
    rates = f.raw.get("compress_rates")
    if rates is None:
        return 4, 128
    keys = ("compressed_sparse_attention", "heavily_compressed_attention")
    if (not isinstance(rates, dict) or set(rates) != set(keys)
            or not all(isinstance(rates[k], int) and not isinstance(rates[k], bool) and rates[k] > 1 for k in keys)
            or rates[keys[0]] == rates[keys[1]]):
        raise f.bad("compress_rates", f"two different rates above 1 for {' and '.join(repr(k) for k in keys)}",
                    rates)
    return rates[keys[0]], rates[keys[1]]


def _ratios(f: Fields, layers: int, mtp: int, csa: int, hca: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(per layer 0 (the window only), csa or hca; per MTP layer alike): compress_ratios, else layer_types
    (which give the main layers only: the MTP layers' then are not stated)."""
    given = f.raw.get("compress_ratios")
    if given is not None:
        if (not isinstance(given, list) or len(given) not in (layers, layers + mtp)
                or not all(r in (0, csa, hca) and not isinstance(r, bool) for r in given)):
            raise f.bad("compress_ratios", f"a list of {layers} (num_hidden_layers, or one more per MTP layer) "
                                           f"of 0, {csa} or {hca}", given)
        return tuple(int(r) for r in given[:layers]), tuple(int(r) for r in given[layers:])
    types = f.raw.get("layer_types")
    if types is None:
        raise f.refuse("compress_ratios", "is missing (and layer_types with it): which layers compress is the "
                                          "config's to say, not a default's")
    if not isinstance(types, list) or len(types) != layers or not all(t in _TYPES for t in types):
        raise f.bad("layer_types", f"a list of {layers} (num_hidden_layers) of {', '.join(map(repr, _TYPES))}", types)
    pick = {0: 0, "csa": csa, "hca": hca}
    return tuple(pick[_TYPES[t]] for t in types), ()


def _hash_layers(f: Fields, layers: int) -> int:
    types = f.raw.get("mlp_layer_types")
    if types is None:
        return f.at_most("num_hash_layers", f.integer("num_hash_layers", 3, minimum=0), "num_hidden_layers", layers)
    if (not isinstance(types, list) or len(types) != layers or not all(t in ("hash_moe", "moe") for t in types)):
        raise f.bad("mlp_layer_types", f"a list of {layers} (num_hidden_layers) of 'hash_moe' or 'moe'", types)
    return types.count("hash_moe")


class _Shape:
    """The ModelConfig keywords compressed_mtp_parts reads, before the config is built."""

    def __init__(self, kw: dict[str, Any]) -> None:
        self.hidden_size, self.num_heads, self.num_experts = kw["hidden_size"], kw["num_heads"], kw["num_experts"]
        self.num_shared_experts, self.moe_intermediate_size = kw["num_shared_experts"], kw["moe_intermediate_size"]


_BASE = ("quant_method", "fmt", "scale_fmt", "weight_block_size", "activation_scheme")


def _expert_only_requant(f: Fields, q: dict[str, Any], layers: int) -> str:
    """NVIDIA's NVFP4 exports (producer dsv4-nvfp4-experts): quant_algo MIXED_PRECISION whose quantized_layers
    are every layer's ffn.experts in NVFP4, beside the base checkpoint's FP8-block description, which stays the
    non-expert weights' (aiconfigurator-core 0.12.0 reads it so: "expert-only requants retain the base
    checkpoint's non-expert lane in the mixed-precision header"). Anything else is refused."""
    listed = q.get("quantized_layers")
    want = {f"layers.{i}.ffn.experts" for i in range(layers)}
    if (not isinstance(listed, dict) or set(listed) != want or str(q.get("quant_method")).lower() != "fp8"
            or not q.get("weight_block_size")
            or any(not isinstance(v, dict) or v.get("quant_algo") != "NVFP4" or v.get("group_size", 16) != 16
                   for v in listed.values())):
        raise f.refuse("quantization_config", "gives quant_algo MIXED_PRECISION, read for DeepSeek-V4 only as "
                                              "NVIDIA's expert-only requant (every layer's ffn.experts NVFP4 of "
                                              "group 16 beside quant_method fp8 with weight_block_size): what "
                                              "else it leaves in which dtype is not pinned by the config")
    return "nvfp4"


def _weights(f: Fields, cfg: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's dtypes by part (see the module docstring); {} without a quantization_config."""
    q = f.raw.get("quantization_config")
    expert = f.raw.get("expert_dtype", q.get("expert_dtype") if isinstance(q, dict) else None)
    if q is None:
        if expert is not None:
            raise f.refuse("expert_dtype", f"({shown(expert)}) is given without a quantization_config: the "
                                           f"other weights' dtype is not stated")
        return {}
    raw = f.raw
    requant: tuple[str, ...] = ()
    if isinstance(q, dict) and q.get("quant_algo") == "MIXED_PRECISION":
        expert = _expert_only_requant(f, q, cfg["num_layers"])
        raw = {"quantization_config": {k: v for k, v in q.items() if k in _BASE}}
        if cfg["compressed"].mtp_ratios:
            requant = (f"{f.where}: quantized_layers names no MTP layer's experts: they are counted in NVFP4 as the "
                       f"main layers' (the export's header does not say)",)
    dtype, notes = checkpoint_weights(raw, f.where)
    if dtype is None or not isinstance(q, dict) or str(q.get("quant_method")).lower() != "fp8":
        method = q.get("quant_method") if isinstance(q, dict) else q
        raise f.refuse("quantization_config", f"quant_method {shown(method)} is not read for DeepSeek-V4 (read: "
                                              f"'fp8' with weight_block_size)")
    if expert not in (None, "fp8", "fp4", "nvfp4"):
        raise f.bad("expert_dtype", "'fp4' or 'fp8'", expert)
    kept = {p: 1.0 for p in _NEVER_QUANTIZED}
    kept.update({"router": 1.0, "lm_head": 1.0, "compressor": 1.0})
    mixed = [("mhc", DTYPES["fp32"], 1.0), ("mtp_mhc", DTYPES["fp32"], 1.0)]
    if expert in ("fp4", "nvfp4"):  # the MTP layer's experts as the main ones (its mtp.0.ffn.experts: FP4 too)
        mixed += [(p, DTYPES["mxfp4" if expert == "fp4" else "nvfp4"], 1.0) for p in ("experts", "mtp_experts")]
    cp = cfg["compressed"]
    if cp.mtp_ratios:  # the MTP layers' routers (a Parameter) and their compressors' projections stay BF16
        bf16 = sum(cfg["hidden_size"] * cfg["num_experts"] + (cp.compressor_params(cfg["hidden_size"], m) if m else 0)
                   for m in cp.mtp_ratios)
        kept["mtp"] = bf16 / compressed_mtp_parts(cp, _Shape(cfg))["mtp"]
    return {"weights_dtype": dtype, "unquantized": tuple(sorted(kept.items())), "mixed_weights": tuple(sorted(
        mixed, key=lambda m: m[0])), "load_warnings": (*cfg.get("load_warnings", ()), *notes, *requant)}


def deepseek_v4(f: Fields, name: str, model_type: str) -> ModelConfig:
    hidden, layers = f.integer("hidden_size"), f.integer("num_hidden_layers")
    heads, d = f.integer("num_attention_heads"), f.integer("head_dim")
    if f.integer("num_key_value_heads", 1) != 1:
        raise f.refuse("num_key_value_heads", f"({f.raw['num_key_value_heads']}) is not 1: DeepSeek-V4's attention "
                                              f"is one shared K = V head, and another count is not read")
    for key in ("attention_bias", "mlp_bias"):
        if f.flag(key, False):
            raise f.refuse(key, "is true: DeepSeek-V4's projections carry no biases, and biased ones are not read")
    for key in ("n_group", "topk_group", "kv_lora_rank", "intermediate_size"):
        if f.raw.get(key) is not None:
            raise f.refuse(key, "is given: DeepSeek-V4 (transformers' DeepseekV4Config) has no such field, so its "
                                "meaning here is not pinned")
    if f.text("topk_method", "noaux_tc") != "noaux_tc":
        raise f.bad("topk_method", "'noaux_tc' (the only routing DeepSeek-V4 runs)", f.raw["topk_method"])
    if f.text("scoring_func", "sqrtsoftplus") not in _SCORING:
        raise f.bad("scoring_func", " or ".join(map(repr, _SCORING)), f.raw["scoring_func"])
    if f.text("hidden_act", "silu") != "silu":
        raise f.bad("hidden_act", "'silu' (DeepSeek-V4's SwiGLU)", f.raw["hidden_act"])
    limit = f.raw.get("swiglu_limit", 10.0)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0):
        raise f.bad("swiglu_limit", "a positive number or null", limit)
    groups, o_lora = f.integer("o_groups"), f.integer("o_lora_rank")
    if heads % groups:
        raise f.refuse("o_groups", f"({groups}) does not divide num_attention_heads ({heads}): each group "
                                   f"projects whole heads")
    rope = f.at_most("qk_rope_head_dim", f.integer("qk_rope_head_dim", d // 8), "head_dim", d)
    mtp = f.integer("num_nextn_predict_layers", 0, minimum=0)
    csa, hca = _rates(f)
    experts = f.integer("n_routed_experts")
    ratios, mtp_ratios = _ratios(f, layers, mtp, csa, hca)
    cp = CompressedAttention(
        ratios=ratios, mtp_ratios=mtp_ratios, window=f.integer("sliding_window"), head_dim=d,
        q_lora=f.integer("q_lora_rank"), o_groups=groups, o_lora=o_lora,
        index_heads=f.integer("index_n_heads"), index_dim=f.at_most("index_head_dim", f.integer("index_head_dim"),
                                                                     "head_dim", d),
        topk=f.integer("index_topk"), hc_mult=f.integer("hc_mult"), csa=csa, hca=hca,
        sinkhorn_iters=f.integer("hc_sinkhorn_iters", 20))
    kw: dict[str, Any] = {
        "name": name, "architecture": model_type, "hidden_size": hidden, "num_layers": layers, "num_heads": heads,
        "num_kv_heads": 1, "head_dim": d, "intermediate_size": 0, "vocab_size": f.integer("vocab_size"),
        "max_position_embeddings": f.integer("max_position_embeddings"),
        "tie_word_embeddings": f.flag("tie_word_embeddings", False),
        "activation": "swiglu" if limit is None else "swiglu_limited", "sliding_window": cp.window,
        "layer_attention": tuple(AttentionKind.LOCAL for _ in range(layers)), "num_experts": experts,
        "experts_per_token": f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"), "n_routed_experts",
                                       experts),
        "moe_intermediate_size": f.integer("moe_intermediate_size"),
        "num_shared_experts": f.integer("n_shared_experts", 0, minimum=0), "router_bias": True,
        "attention_sinks": True, "q_lora_rank": cp.q_lora, "qk_rope_head_dim": rope, "rotary_dims": rope,
        "compressed": cp, "hash_layers": _hash_layers(f, layers),
    }
    kw["mtp_layers"] = len(mtp_ratios)  # each at its compress_ratios entry (roofline.models.compressed_mtp_parts)
    if mtp and not mtp_ratios:
        kw["load_warnings"] = (f"{f.where}: num_nextn_predict_layers {mtp}: the MTP layers' compress ratios are not "
                               f"given (compress_ratios holds one entry a layer, or layer_types the main layers "
                               f"only): they are not counted, the checkpoint's memory is short by them, and serve "
                               f"--mtp is not available",)
    kw.update(_weights(f, kw))
    return ModelConfig(**kw)


PARSERS: dict[str, Parser] = {"deepseek_v4": deepseek_v4, "deepseek_ref": deepseek_v4}
