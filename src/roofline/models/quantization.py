"""quantization_config: what a checkpoint stores its weights in, scales included.

FP8 with 128x128 block scales (DeepSeek-V3, Qwen3-FP8), GPTQ/AWQ int4 with FP16 group scales and
packed zero points, bitsandbytes NF4/FP4 and int8, compressed-tensors, MXFP4. A method it cannot read
is named in a warning (ModelConfig.load_warnings), never guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from roofline.dtypes import DTYPES, DType
from roofline.errors import RooflineError, shown
from roofline.models.fields import MAX_SIZE, is_int
from roofline.models.mtp import mtp_components
from roofline.models.recurrent import KimiDelta
from roofline.models.transformer import SOFTMAX_KINDS, AttentionKind, MlpKind, ModelConfig

_FP16_SCALE_BITS = 16  # GPTQ, AWQ and compressed-tensors store group scales in FP16/BF16
_FP32_SCALE_BITS = 32  # DeepSeek-V3's weight_scale_inv and bitsandbytes' absmax are FP32
_BNB_BLOCK = 64  # bitsandbytes 4-bit: one absmax per 64 weights (quantize_4bit's default blocksize)
_BNB_NESTED_BLOCK = 256  # double quantisation: the absmax in 8 bits, one FP32 per 256 of them


def _q_int(q: Mapping[str, Any], key: str, where: str, default: int | None, allowed: str,
           ok: Callable[[int], bool]) -> int:
    value = q.get(key, default)
    if not is_int(value) or not ok(value):
        raise RooflineError(f"config {where}: quantization_config {key!r} must be {allowed}, got {shown(value)}")
    return int(value)


def _int_weights(bits: int, group: int, zero: bool, how: str) -> DType:
    """Integer weights with one FP16 scale (and, with `zero`, one `bits`-bit zero point) per `group`
    weights: int4, group 128, zero point: 4 + (16 + 4)/128 = 4.156 bits. Group -1 (one scale per
    output channel) adds a few bits per thousands of weights, not counted."""
    peak = "int4" if bits <= 4 else "int8"
    if group == -1:
        base = DTYPES.get(f"int{bits}")
        return base or DType(f"int{bits}", bits, peak, description=f"{how}: {bits}-bit integer weights")
    extra = _FP16_SCALE_BITS + (bits if zero else 0)
    return DType(f"int{bits}_g{group}" + ("_zp" if zero else ""), bits, peak, scale_bits=extra, block_size=group,
                 description=f"{how}: {bits}-bit integer weights, one FP16 scale"
                             + (f" and one {bits}-bit zero point" if zero else "")
                             + f" per {group} weights ({bits} + {extra}/{group} bits)")


def _fp8_blocks(fmt: str, rows: int, cols: int, scale_bits: int, how: str) -> DType:
    """FP8 weights with one scale per rows x cols block: 8 + 32/(128·128) = 8.002 bits for DeepSeek-V3."""
    return DType(f"fp8_{fmt}_block{rows}x{cols}", 8, "fp8", scale_bits=scale_bits, block_size=rows * cols,
                 description=f"{how}: FP8 {fmt.upper()} weights, one {scale_bits}-bit scale per {rows}x{cols} "
                             f"block (8 + {scale_bits}/{rows * cols} bits)")


# torch's names (torch.float8_e4m3fn; "fn": finite, no infinities) and the short ones checkpoints write
_FP8_SPELLINGS = {"e4m3": "e4m3", "e4m3fn": "e4m3", "float8_e4m3fn": "e4m3", "float8_e4m3": "e4m3",
                  "e5m2": "e5m2", "float8_e5m2": "e5m2"}


def _fp8(q: Mapping[str, Any], where: str) -> DType:
    """`quant_method: fp8` (transformers' FineGrainedFP8: DeepSeek-V3, Qwen3-FP8): E4M3 weights with one
    FP32 scale (weight_scale_inv) per weight_block_size block, or one per tensor without it."""
    spelled = q.get("fmt", "e4m3")
    fmt = _FP8_SPELLINGS.get(spelled) if isinstance(spelled, str) else None
    if fmt is None:
        raise RooflineError(f"config {where}: quantization_config 'fmt' must be one of "
                            f"{', '.join(repr(k) for k in _FP8_SPELLINGS)}, got {shown(spelled)}")
    block = q.get("weight_block_size")
    if block is None:
        return DTYPES[f"fp8_{fmt}"]
    if (not isinstance(block, list) or len(block) != 2
            or not all(is_int(b) and 1 <= b <= MAX_SIZE for b in block)):
        raise RooflineError(f"config {where}: quantization_config 'weight_block_size' must be two positive "
                            f"integers like [128, 128], got {shown(block)}")
    scale = q.get("scale_fmt")  # DeepSeek-V4 writes "ue8m0": a power-of-two scale, one byte (E8M0)
    if scale not in (None, "float", "ue8m0"):
        raise RooflineError(f"config {where}: quantization_config 'scale_fmt' must be 'float' or 'ue8m0', got "
                            f"{shown(scale)}")
    return _fp8_blocks(fmt, block[0], block[1], 8 if scale == "ue8m0" else _FP32_SCALE_BITS, "quant_method fp8")


def _gptq_awq(q: Mapping[str, Any], method: str, where: str) -> DType:
    """GPTQ and AWQ pack `bits`-bit weights with one FP16 scale per group_size weights and a packed
    zero point per group (GPTQ stores qzeros even when symmetric; AWQ unless zero_point is false)."""
    bits = _q_int(q, "bits", where, 4, "2, 3, 4 or 8", lambda b: b in (2, 3, 4, 8))
    group = _q_int(q, "group_size", where, 128, "-1 or a positive integer",
                   lambda g: g == -1 or 1 <= g <= MAX_SIZE)
    zero = q.get("zero_point", True)
    if not isinstance(zero, bool):
        raise RooflineError(f"config {where}: quantization_config 'zero_point' must be true or false, "
                            f"got {shown(zero)}")
    return _int_weights(bits, group, zero or method == "gptq", f"quant_method {method}")


def _bitsandbytes(q: Mapping[str, Any], where: str) -> DType | None:
    """bitsandbytes 4-bit (NF4 or FP4): one FP32 absmax per 64 weights, 4 + 32/64 = 4.5 bits; with
    double quantisation the absmax is 8 bits with one FP32 per 256 of them: 4 + 8/64 + 32/(64·256).
    8-bit (LLM.int8()): int8 weights with one scale per row, not counted."""
    four, eight = q.get("load_in_4bit", False), q.get("load_in_8bit", False)
    for key, value in (("load_in_4bit", four), ("load_in_8bit", eight)):
        if not isinstance(value, bool):
            raise RooflineError(f"config {where}: quantization_config {key!r} must be true or false, "
                                f"got {shown(value)}")
    if eight and not four:
        return DTYPES["int8"]
    if not four:
        return None
    kind = q.get("bnb_4bit_quant_type", "fp4")
    if kind not in ("nf4", "fp4"):
        raise RooflineError(f"config {where}: quantization_config 'bnb_4bit_quant_type' must be 'nf4' or 'fp4', "
                            f"got {shown(kind)}")
    double = q.get("bnb_4bit_use_double_quant", False)
    if not isinstance(double, bool):
        raise RooflineError(f"config {where}: quantization_config 'bnb_4bit_use_double_quant' must be true or "
                            f"false, got {shown(double)}")
    peak = "int4" if kind == "nf4" else "fp4"
    if double:
        bits = 8 * _BNB_NESTED_BLOCK + _FP32_SCALE_BITS  # per 64 x 256 weights
        return DType(f"{kind}_dq", 4, peak, scale_bits=bits, block_size=_BNB_BLOCK * _BNB_NESTED_BLOCK,
                     description=f"bitsandbytes {kind.upper()}, double-quantised absmax: 4 + 8/64 + 32/16384 bits")
    return DType(kind, 4, peak, scale_bits=_FP32_SCALE_BITS, block_size=_BNB_BLOCK,
                 description=f"bitsandbytes {kind.upper()}: one FP32 absmax per 64 weights, 4 + 32/64 bits")


def _compressed_tensors(q: Mapping[str, Any], where: str) -> tuple[DType | None, str]:
    """compressed-tensors (llm-compressor): the weights scheme of its config groups; scales are stored in
    the model's 16-bit dtype, a zero point of num_bits where the scheme is asymmetric."""
    groups = q.get("config_groups")
    found = ([g.get("weights") for g in groups.values() if isinstance(g, Mapping) and g.get("weights")]
             if isinstance(groups, Mapping) else [])
    schemes: list[Mapping[str, Any]] = [w for w in found if isinstance(w, Mapping)]
    if not schemes or len(schemes) != len(found):
        return None, "quantization_config (compressed-tensors) has no config_groups with a weights scheme"
    w = schemes[0]
    note = ("" if all(dict(x) == dict(w) for x in schemes) else
            "quantization_config (compressed-tensors) gives several weight schemes; the first is used for all")
    bits = _q_int(w, "num_bits", where, 8, "an integer from 2 to 8", lambda b: 2 <= b <= 8)
    kind, strategy = w.get("type", "int"), w.get("strategy", "tensor")
    group = w.get("group_size")
    symmetric = w.get("symmetric", True)
    how = "compressed-tensors"
    if kind == "float" and bits == 8:
        block = w.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2 and all(
                is_int(b) and 1 <= b <= MAX_SIZE for b in block):
            return _fp8_blocks("e4m3", block[0], block[1], _FP16_SCALE_BITS, how), note
        return DTYPES["fp8_e4m3"], note
    if kind == "float" and bits == 4 and group in (16, 32):
        return DTYPES["nvfp4" if group == 16 else "mxfp4"], note
    if kind == "int" and isinstance(symmetric, bool):
        if strategy == "group" and isinstance(group, int) and is_int(group) and 1 <= group <= MAX_SIZE:
            return _int_weights(bits, group, not symmetric, how), note
        if strategy in ("channel", "tensor"):
            return _int_weights(bits, -1, False, how), note
    return None, (f"quantization_config (compressed-tensors) weights scheme type {shown(kind)}, num_bits {bits}, "
                  f"strategy {shown(strategy)} is not read")


def checkpoint_weights(raw: Mapping[str, Any], where: str) -> tuple[DType | None, tuple[str, ...]]:
    """What a config's `quantization_config` stores the weights in, and a warning for each thing read
    but not used. No quantization_config: (None, ()), the weights dtype is not stated.

    The dtype is that of the quantized linear layers; what stays in 16 bits (the tables, norms,
    biases, and the modules the config names in modules_to_not_convert / ignore / exclude_modules)
    is `unquantized_parts`'."""
    q = raw.get("quantization_config")
    if q is None:
        return None, ()
    if not isinstance(q, Mapping):
        raise RooflineError(f"config {where}: field 'quantization_config' must be an object, got {shown(q)}")
    method = q.get("quant_method")
    if method is None and ("load_in_4bit" in q or "load_in_8bit" in q):
        method = "bitsandbytes"  # older transformers wrote bitsandbytes configs without quant_method
    if method is None and "quant_algo" in q:
        method = "modelopt"  # NVIDIA ModelOpt exports write quant_algo (and a producer) without quant_method
    if isinstance(method, str) and method.lower() == "fp8" and q.get("quant_algo") == "MIXED_PRECISION":
        method = "modelopt"  # NVIDIA's mixed exports keep a quant_method fp8 beside their per-layer table
    if not isinstance(method, str):
        raise RooflineError(f"config {where}: quantization_config needs a 'quant_method' (a string such as "
                            f"'fp8', 'gptq', 'awq'), got {shown(method)}")
    dtype: DType | None
    note = ""
    match method.lower():
        case "fp8":
            dtype = _fp8(q, where)
        case "gptq" | "awq":
            dtype = _gptq_awq(q, method.lower(), where)
        case "bitsandbytes":
            dtype = _bitsandbytes(q, where)
        case "compressed-tensors" | "compressed_tensors":
            dtype, note = _compressed_tensors(q, where)
        case "mxfp4":
            dtype = DTYPES["mxfp4"]
        case "fbgemm_fp8":
            dtype = DTYPES["fp8_e4m3"]  # one scale per output channel, not counted
        case "modelopt":
            dtype = _modelopt(q, where)
        case _:
            dtype, note = None, f"quantization_config quant_method {method!r} is not read"
    if dtype is None:
        note = note or f"quantization_config ({method}) quantizes nothing that is read"
        return None, (f"{where}: {note}; its weights are analysed as bf16 unless --weights-dtype says "
                      f"otherwise (int4, fp8, nvfp4, ...)",)
    return dtype, ((f"{where}: {note}",) if note else ())



def _modelopt(q: Mapping[str, Any], where: str) -> DType:
    """NVIDIA ModelOpt (TensorRT Model Optimizer) exports, read from quantization_config or from the
    hf_quant_config.json beside config.json: quant_algo FP8 (E4M3, one FP32 scale per tensor, not
    counted) or NVFP4 (E2M1 values, one FP8 E4M3 scale per 16: 4 + 8/16 = 4.5 bits; the one FP32
    scale per tensor is not counted). MIXED_PRECISION (a dtype per module in quantized_layers) is read
    by roofline.models.mixed before this is reached."""
    algo = q.get("quant_algo")
    if algo == "FP8":
        return DTYPES["fp8_e4m3"]
    if algo == "NVFP4":
        group = q.get("group_size", 16)
        if group != 16:
            raise RooflineError(f"config {where}: quantization_config 'group_size' of NVFP4 must be 16 "
                                f"(one FP8 scale per 16 values), got {shown(group)}")
        return DTYPES["nvfp4"]
    raise RooflineError(f"config {where}: quantization_config 'quant_algo' {shown(algo)} is not read "
                        f"(read: 'FP8', 'NVFP4'; MIXED_PRECISION's per-layer 'quantized_layers' is not)")


def excluded_modules(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The module names (globs allowed) a checkpoint leaves in 16 bits: quantization_config's
    modules_to_not_convert (transformers), ignore (compressed-tensors, ModelOpt in config.json) or
    exclude_modules (ModelOpt's hf_quant_config.json)."""
    q = raw.get("quantization_config")
    if not isinstance(q, Mapping):
        return ()
    method = q.get("quant_method")
    listed = isinstance(method, str) and method.lower() in ("compressed-tensors", "compressed_tensors", "modelopt")
    # transformers' own quantizers (FP8, MXFP4, GPTQ, AWQ, bitsandbytes) never convert the output
    # embedding (HfQuantizer's get_keys_to_not_convert); compressed-tensors and ModelOpt list it
    out: list[str] = [] if listed or "quant_algo" in q else ["lm_head"]
    for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
        names = q.get(key)
        if names is None:
            continue
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RooflineError(f"config {where}: quantization_config {key!r} must be a list of module names, "
                                f"got {shown(names)}")
        out += names
    return tuple(out)


# where a checkpoint's module names put a layer's parts (transformers' and vLLM's module names)
_LAYER = re.compile(r"^(?:.*\.)?layers\.(\d+|\*)(.*)$")
_TOP = (("lm_head", "lm_head"), ("embed_tokens", "embedding"), ("backbone.embeddings", "embedding"),
        ("wte", "embedding"), ("wpe", "position_embedding"))
# not in the language model's main stack (the vision tower, multi-token-prediction layers)
_OUTSIDE = ("vision", "visual", "multi_modal_projector", "mm_projector", "audio", "mtp.")
# a vision tower's module names (Qwen's model.visual, Gemma's vision_tower, Llama 4's vision_model,
# Kimi's vision_tower and mm_projector): the tower is kept whole in 16 bits
_VISION = ("vision", "visual", "multi_modal_projector", "mm_projector")


def _canonical_names(cfg: ModelConfig) -> list[str]:
    """transformers' names of the model's linear modules (one expert standing for all of a layer's), against
    which compressed-tensors' `re:` patterns are matched."""
    out = ["lm_head", "model.embed_tokens"]
    attn = (("q_a_proj", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj") if cfg.is_mla
            else ("q_proj", "k_proj", "v_proj", "o_proj"))
    for i, mlp in enumerate(cfg.mlp_kinds):
        layer = f"model.layers.{i}."
        out += [f"{layer}self_attn.{a}" for a in attn]
        if cfg.indexer is not None and i not in cfg.indexer.shared:
            out += [f"{layer}self_attn.indexer.{w}" for w in ("wq_b", "wk", "weights_proj")]
        if mlp == MlpKind.DENSE:
            out += [f"{layer}mlp.{w}" for w in ("gate_proj", "up_proj", "down_proj")]
        elif mlp == MlpKind.MOE:
            out += [f"{layer}mlp.gate", *(f"{layer}mlp.experts.0.{w}" for w in ("gate_proj", "up_proj", "down_proj"))]
            if cfg.num_shared_experts:
                out += [f"{layer}mlp.shared_experts.{w}" for w in ("gate_proj", "up_proj", "down_proj")]
    return out


def _expand_patterns(cfg: ModelConfig, modules: tuple[str, ...]) -> list[str]:
    """Module names, each compressed-tensors `re:` pattern replaced by the canonical names it matches
    (compressed-tensors matches them with re.match); a pattern matching none is kept, to be named unread."""
    out: list[str] = []
    names: list[str] | None = None
    for name in modules:
        if not name.startswith("re:"):
            out.append(name)
            continue
        try:
            pattern = re.compile(name[3:])
        except re.error:
            out.append(name)
            continue
        names = _canonical_names(cfg) if names is None else names
        hits = [n for n in names if pattern.match(n)]
        out += hits or [name]
    return out
_ATTENTION = ("self_attn", "attn", "attention")
_ROUTERS = ("mlp.gate", "mlp.router", "block_sparse_moe.gate", "router", "mlp.shared_expert_gate")
_MLP_PARTS = ("mlp", "experts", "shared_experts", "router")
# Nemotron-H's `layers.i.mixer.X` (transformers/vLLM NemotronH*): X by what it is; conv1d is no linear
# layer (its taps are in mamba_conv_and_gains, never quantized)
_MIXER: dict[str, tuple[str, ...]] = {
    **{p: (f"attention.{p}",) for p in ("q_proj", "k_proj", "v_proj", "o_proj")},
    "in_proj": ("mamba.in_proj",), "out_proj": ("mamba.out_proj",), "conv1d": (), "gate": ("router",),
    "experts": ("experts",), "shared_experts": ("shared_experts",), "up_proj": ("mlp",), "down_proj": ("mlp",),
    "fc1_latent_proj": ("latent_proj",), "fc2_latent_proj": ("latent_proj",)}


def _layer_parts(rest: str) -> tuple[str, ...] | None:
    """The parts one layer's module (after `layers.i`) holds; None when the name is not read."""
    r = rest.strip(".*")
    if r == "" or rest.startswith("*"):
        return ("attention", "linear_attention", *_MLP_PARTS)  # the whole layer
    if "norm" in r.split(".")[-1] or r.split(".")[0].endswith("norm") or r.split(".")[-1].endswith("bias"):
        return ()  # norm gains and biases (DeepSeek's e_score_correction_bias) are never quantized
    if r in ("self_attn.indexers_proj", "self_attn.indexer.weights_proj"):  # GLM-5-FP8 names weights_proj so
        return ("indexer.weights_proj",)
    if r.split(".")[:2] in (["self_attn", "indexer"], ["attn", "indexer"]):  # DeepSeek-V3.2's lightning indexer
        return ("indexer",)
    if r.split(".")[0] in _ATTENTION:
        return ("attention",) if "." not in r else (f"attention.{r.split('.', 1)[1]}",)  # one projection
    if r.split(".")[0] == "linear_attn":  # Qwen3-Next/3.5's Gated DeltaNet
        return ("linear_attention",)
    if r.startswith("mixer."):  # Nemotron-H: every block's one module is its mixer, whatever its kind
        return _MIXER.get(r.split(".")[1], None) if r.count(".") == 1 or r.split(".")[1] in (
            "experts", "shared_experts") else None
    if r in _ROUTERS:
        return ("router",)
    if r.startswith(("mlp.shared_expert", "block_sparse_moe.shared_expert")):
        return ("shared_experts",)
    if r.startswith(("mlp.experts", "block_sparse_moe.experts")) or r == "experts" or r.startswith("experts."):
        return ("experts",)  # Gemma 4's layers.i.experts: beside its mlp, not in it
    if r == "mlp" or r == "block_sparse_moe" or (rest.endswith("*") and r in ("mlp", "block_sparse_moe")):
        return _MLP_PARTS
    if r.startswith("mlp.") and r.split(".")[1] in ("gate_proj", "up_proj", "down_proj", "gate_up_proj"):
        return ("mlp",)
    return None


def _projection_share(cfg: ModelConfig, proj: str, kind: AttentionKind = AttentionKind.GLOBAL) -> float | None:
    """The share of one `kind` layer's attention parameters in projection `proj` (q_proj, kv_b_proj, ...),
    at that kind's shape (ModelConfig.attention_shape; K=V: no v_proj)."""
    s = cfg.attention_shape(kind)
    h, H, G, d = cfg.hidden_size, s.heads, s.kv_heads, s.head_dim
    if cfg.is_mla:
        dn, dr, dv, r, qr = (cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank,
                             cfg.q_lora_rank)
        sizes = {"q_a_proj": h * qr, "q_b_proj": qr * H * (dn + dr), "q_proj": 0 if qr else h * H * (dn + dr),
                 "kv_a_proj_with_mqa": h * (r + dr), "kv_b_proj": r * H * (dn + dv), "o_proj": H * dv * h}
    else:
        sizes = {"q_proj": h * s.query_width, "k_proj": h * G * d, "v_proj": 0 if s.k_eq_v else h * G * s.v_head_dim,
                 "o_proj": s.out_width * h, "qkv_proj": h * s.qkv_width}
    name = proj.rstrip("*").rstrip(".")
    if name not in sizes:
        return None
    layer = sum(v for k, v in sizes.items() if k != "qkv_proj")
    return sizes[name] / layer


_NEVER_QUANTIZED = ("embedding", "position_embedding", "norms", "biases", "sinks", "expert_biases",
                    "mamba_conv_and_gains", "mtp_norms", "mtp_tables", "attn_res")


def _mtp_kept(cfg: ModelConfig, layer: int, rest: str, kept: dict[tuple[int, str], tuple[str, float]]) -> bool:
    """Records in `kept`, per (MTP layer, component), the part and the parameters that one MTP layer's module
    `rest` (after `layers.i`) keeps in 16 bits; False when the name is not read. Its norms, tables and
    correction bias are never quantized."""
    r = rest.strip(".*")
    if r in ("enorm", "hnorm", "shared_head.norm", "embed_tokens", "shared_head.head") or r.endswith("_bias"):
        return True
    sizes = mtp_components(cfg, cfg.param_counts().parts["attention"] // (cfg.num_layers if cfg.is_mla
                                                                          else cfg.kv_layers))
    experts = cfg.num_experts * 3 * cfg.hidden_size * cfg.moe_intermediate_size
    if r == "":  # the whole layer
        kept.update({(layer, k): ("mtp", float(v)) for k, v in sizes.items()})
        kept[(layer, "experts")] = ("mtp_experts", float(experts))
        return True
    parts = ("eh_proj",) if r == "eh_proj" else _layer_parts(rest)
    if parts is None:
        return False
    for p in parts:
        if p == "experts":
            kept[(layer, "experts")] = ("mtp_experts", float(experts))
        elif p.startswith("attention.") and (share := _projection_share(cfg, p.split(".", 1)[1])) is not None:
            kept[(layer, p)] = ("mtp", share * sizes["attention"])
        elif p == "indexer.weights_proj" and cfg.indexer is not None:
            kept[(layer, p)] = ("mtp", float(cfg.hidden_size * cfg.indexer.heads))
        elif p in sizes:
            kept[(layer, p)] = ("mtp", float(sizes[p]))
        elif p not in ("linear_attention", "mlp"):
            return False
    return True


_QWEN_MTP = re.compile(r"^(?:model\.)?mtp((?:[.*].*)?)$")


def _qwen_mtp_kept(cfg: ModelConfig, rest: str, kept: dict[tuple[int, str], tuple[str, float]]) -> bool:
    """Qwen3-Next/3.5's `mtp` + `rest`: the whole module (mtp*), one of its layers (mtp.layers.i...), its fc
    (eh_proj here) or a norm."""
    r, first = rest.strip(".*"), cfg.num_layers
    if r == "":
        return all(_mtp_kept(cfg, first + i, "", kept) for i in range(cfg.mtp_layers))
    if r == "fc":
        return _mtp_kept(cfg, first, ".eh_proj", kept)
    if r in ("norm", "pre_fc_norm_embedding", "pre_fc_norm_hidden"):
        return True
    m = _LAYER.match(r)
    if m is None or m.group(1) == "*" or int(m.group(1)) >= cfg.mtp_layers:
        return False
    return _mtp_kept(cfg, first + int(m.group(1)), m.group(2) or "*", kept)


def unquantized_parts(cfg: ModelConfig, modules: tuple[str, ...], where: str, experts_only: bool = False
                      ) -> tuple[tuple[tuple[str, float], ...], tuple[str, ...]]:
    """Per parameter part (ModelConfig.param_counts), the fraction a quantized checkpoint keeps in 16
    bits, and a warning for each module name not read.

    Quantizers replace linear layers only (transformers' FP8, MXFP4, GPTQ/AWQ, bitsandbytes,
    compressed-tensors and ModelOpt alike): the embedding tables, norm gains and biases are never
    quantized. The names the config lists add whole parts (lm_head, the embedding) or one part of
    the layers they name: `model.layers.3.mlp.gate` keeps layer 3's router, `model.layers.*.self_attn`
    every layer's attention. A part's fraction is its matched layers over the layers that have it
    (experts and routers: the MoE layers; the dense MLP: the dense layers). `experts_only`: MXFP4 as
    transformers loads it (Mxfp4HfQuantizer replaces the experts' projections and nothing else)."""
    fraction: dict[str, float] = {p: 1.0 for p in _NEVER_QUANTIZED}
    if experts_only:
        fraction.update({p: 1.0 for p in cfg.param_counts().parts if p != "experts"})
    layers = cfg.num_layers

    def where_kind(kinds: tuple[Any, ...], *wanted: Any) -> set[int]:
        return {i for i, kind in enumerate(kinds) if kind in wanted}

    having = {"attention": where_kind(cfg.layer_kinds, *SOFTMAX_KINDS),
              "linear_attention": where_kind(cfg.layer_kinds, AttentionKind.LINEAR),
              "mamba": where_kind(cfg.layer_kinds, AttentionKind.MAMBA),
              "mlp": where_kind(cfg.mlp_kinds, MlpKind.DENSE), "experts": where_kind(cfg.mlp_kinds, MlpKind.MOE),
              "indexer": set(range(layers)) - set(cfg.indexer.shared) if cfg.indexer is not None else set()}
    having["router"] = having["shared_experts"] = having["latent_proj"] = having["experts"]
    matched: dict[str, dict[int, float]] = {p: {} for p in having}  # per part, layer -> share kept
    mtp_kept: dict[tuple[int, str], tuple[str, float]] = {}  # (MTP layer, component) -> (part, params kept)
    if cfg.indexer is not None:
        # the indexer's weights_proj (h -> H_I) is BF16 in every checkpoint: DeepSeek-V3.2's inference code
        # builds it in the default dtype, vLLM's loader notes FP8 checkpoints store it in BF16 beside an FP8 wk
        proj = cfg.hidden_size * cfg.indexer.heads
        matched["indexer"].update({i: proj / cfg.indexer.linear_params(cfg.hidden_size, cfg.q_lora_rank)
                                   for i in having["indexer"]})
        mtp_kept.update({(layers + i, "indexer.weights_proj"): ("mtp", float(proj)) for i in range(cfg.mtp_layers)})
    if cfg.is_mla and cfg.is_moe:
        # DeepSeek's router (DeepseekV3TopkRouter, the checkpoints' MoEGate) holds a Parameter, not an
        # nn.Linear: no quantizer replaces it, and the exports' lists never name it (GLM-5-FP8 lists it anyway)
        fraction["router"] = 1.0
        mtp_kept.update({(layers + i, "router"): ("mtp", float(cfg.hidden_size * cfg.num_experts))
                         for i in range(cfg.mtp_layers)})
    unread: list[str] = []
    kimi = isinstance(cfg.linear_attention, KimiDelta)
    # Gemma 4's MoE layers hold the dense MLP (read as shared experts), the router and the experts side by side
    # (transformers' Gemma4TextDecoderLayer: mlp, router, experts), so its `mlp` is not the whole MoE block
    siblings = cfg.architecture.startswith("gemma4") and cfg.is_moe
    for name in _expand_patterns(cfg, modules):
        if cfg.mtp_layers and (qwen := _QWEN_MTP.match(name)):  # Qwen3-Next/3.5's mtp.* module
            if not _qwen_mtp_kept(cfg, qwen.group(1), mtp_kept):
                unread.append(name)
            continue
        if any(part in name for part in _VISION):
            fraction["vision"] = 1.0  # the vision tower and its projector, whole (not read module by module)
            continue
        if any(part in name for part in _OUTSIDE):
            if cfg.vision_params and any(part in name for part in _VISION):
                fraction["vision"] = 1.0  # the vision tower (model.visual*, model.vision_tower*) kept whole
            continue
        if name in ("gate", "router"):  # a bare leaf name: transformers matches it as a suffix, every router
            name = "layers.*.mlp.gate"
        elif name.endswith("_bias") and "." not in name:  # e_score_correction_bias: a bias, never quantized
            continue
        m = _LAYER.match("layers." + name if name.startswith("*.") else name)
        if m is None:
            top = [part for key, part in _TOP if key in name]
            if top:
                fraction.update({p: 1.0 for p in top})
            elif "norm" in name:
                pass
            else:
                unread.append(name)
            continue
        index, rest = m.groups()
        if index != "*" and layers <= int(index) < layers + cfg.mtp_layers:  # a multi-token-prediction layer
            if not _mtp_kept(cfg, int(index), rest, mtp_kept):
                unread.append(name)
            continue
        parts = _layer_parts(rest)
        if parts == _MLP_PARTS and siblings and rest.strip(".*") == "mlp":
            parts = ("shared_experts",)  # Gemma 4: layers.i.mlp is the dense MLP alone, beside router and experts
        if parts is None:
            unread.append(name)
            continue
        if kimi and "attention" in parts:  # Kimi Linear names its KDA layers' modules self_attn too
            parts = (*parts, "linear_attention")
        if index == "*":
            chosen = set(range(layers))
        elif int(index) < layers:
            chosen = {int(index)}
        else:
            unread.append(name)
            continue
        for p in parts:
            share = 1.0
            if p.startswith("mamba.") and cfg.mamba is not None:
                mb = cfg.mamba
                p, share = "mamba", (cfg.hidden_size * mb.in_width if p == "mamba.in_proj"
                                     else mb.inner * cfg.hidden_size) / mb.linear_params(cfg.hidden_size)
            elif p.startswith("mamba."):
                unread.append(name)
                continue
            if p == "indexer.weights_proj":  # always kept (below): listing it adds nothing
                continue
            if p.startswith("attention."):
                projection = p.split(".", 1)[1]
                if _projection_share(cfg, projection) is None or (kimi and chosen & having["linear_attention"]):
                    unread.append(name)
                    continue
                for i in chosen & having["attention"]:  # each layer at its kind's shape
                    one = _projection_share(cfg, projection, cfg.layer_kinds[i]) or 0.0
                    matched["attention"][i] = min(1.0, matched["attention"].get(i, 0.0) + one)
                continue
            for i in chosen & having[p]:
                matched[p][i] = min(1.0, matched[p].get(i, 0.0) + share)
    weight = {i: float(cfg.attention_shape(kind).linear_params(cfg.hidden_size))
              for i, kind in enumerate(cfg.layer_kinds) if kind in SOFTMAX_KINDS}  # a layer's attention weights
    for p, done in matched.items():
        if done and having[p] and p == "attention" and not cfg.is_mla:
            fraction[p] = sum(v * weight[i] for i, v in done.items()) / sum(weight[i] for i in having[p])
        elif done and having[p]:
            fraction[p] = sum(done.values()) / len(having[p])
    counts = cfg.param_counts().parts
    for part in ("mtp", "mtp_experts"):
        kept = sum(n for p, n in mtp_kept.values() if p == part)
        if kept and counts.get(part):
            fraction[part] = min(1.0, kept / counts[part])
    # what is always kept (the router, the indexer's weights_proj) is no news: warn of what the lists add
    listed_mtp = any(component not in ("router", "indexer.weights_proj") for _, component in mtp_kept)
    always_indexer = (cfg.hidden_size * cfg.indexer.heads / cfg.indexer.linear_params(cfg.hidden_size, cfg.q_lora_rank)
                      if cfg.indexer is not None else None)
    partial = sorted(p for p, f in fraction.items() if 0 < f < 1 and (listed_mtp or p != "mtp")
                     and not (p == "indexer" and always_indexer and math.isclose(f, always_indexer)))
    notes: tuple[str, ...] = ((f"{where}: the checkpoint keeps part of its {', '.join(partial)} in 16 bits (some "
                               f"layers or projections): counted so in memory; the step reads those weights at "
                               f"the quantized dtype",) if partial else ())
    if experts_only:  # every other module is 16-bit already: a list naming one adds nothing (Kimi K3's ignore)
        unread = [n for n in unread if re.search(r"(?<!shared_)experts?\.", n)]
    notes += ((f"{where}: quantization_config leaves {len(unread)} module(s) unquantized that are not read "
              f"({', '.join(unread[:3])}{', ...' if len(unread) > 3 else ''}); they are counted in the "
              f"checkpoint's quantized dtype",) if unread else ())
    return tuple(sorted(fraction.items())), notes


__all__ = ["checkpoint_weights", "excluded_modules", "unquantized_parts"]
