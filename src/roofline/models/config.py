"""Transformer configs: a Hugging Face `config.json` (or a preset, which is one) in, a ModelConfig out.

Nothing is downloaded. A config comes from a file, a model folder holding `config.json`, or a preset
under `presets/` (one JSON file each, shaped like the model's own `config.json`). One parser per
`model_type` reads the fields that architecture uses; a missing field is named, an unknown
architecture lists the supported ones.

ModelConfig itself (the shape, the KV cache, the parameter counts) is in
`roofline.models.transformer`.

Every value is checked where it is read, naming the field as the file spells it: sizes are integers
from 1 to MAX_SIZE (0, negatives, floats, true/false and 5,000-digit numbers are refused in one line),
counts that may be zero say so, and a file is read only if it is a regular file of at most 1 MiB
(roofline.fileio.read_text_file), UTF-8 or UTF-16/32 with a byte-order mark.

A checkpoint's `quantization_config` sets what its weights are stored in (`ModelConfig.weights_dtype`,
used unless --weights-dtype says otherwise), scales included: FP8 with 128x128 block scales (DeepSeek-V3,
Qwen3-FP8), GPTQ/AWQ int4 with FP16 group scales and packed zero points, bitsandbytes NF4/FP4 and
int8, compressed-tensors, MXFP4. A method it cannot read is named in `ModelConfig.load_warnings`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.dtypes import DTYPES, DType
from roofline.errors import RooflineError, shown, unknown
from roofline.fileio import read_text_file
from roofline.models.transformer import AttentionKind, ModelConfig
from roofline.vocab import Norm

GLOBAL, LOCAL = AttentionKind.GLOBAL, AttentionKind.LOCAL

PRESETS_DIR = Path(__file__).parent / "presets"

# --- parsing ---------------------------------------------------------------------------------------

MAX_SIZE = 2**31 - 1  # the largest size a config may give (an int32; no model comes near it)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Fields:
    """Reads a config dict, naming the file and field in every error."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def _bad(self, key: str, want: str, value: Any) -> RooflineError:
        return RooflineError(f"config {self.where}: field {key!r} must be {want}, got {shown(value)}")

    def integer(self, key: str, default: int | None = None, *alts: str, minimum: int = 1) -> int:
        """A size (`minimum` 1) or a count that may be zero (`minimum` 0), at most MAX_SIZE."""
        for k in (key, *alts):
            if k in self.raw and self.raw[k] is not None:
                value = self.raw[k]
                if not _is_int(value) or not minimum <= value <= MAX_SIZE:
                    want = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
                    raise self._bad(k, f"{want} (at most {MAX_SIZE:,})", value)
                return int(value)
        if default is None:
            raise RooflineError(f"config {self.where}: missing field {key!r}"
                                + (f" (or {', '.join(repr(a) for a in alts)})" if alts else ""))
        return default

    def optional_int(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not _is_int(value) or not 1 <= value <= MAX_SIZE:
            raise self._bad(key, f"a positive integer (at most {MAX_SIZE:,}) or null", value)
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, "true or false", value)
        return value

    def text(self, key: str, default: str, *alts: str) -> str:
        for k in (key, *alts):
            value = self.raw.get(k)
            if value is not None:
                if not isinstance(value, str):
                    raise self._bad(k, "a string", value)
                return value
        return default

    def at_most(self, key: str, value: int, limit_key: str, limit: int) -> int:
        """`value` (read from `key`) if it is at most `limit` (read from `limit_key`)."""
        if value > limit:
            raise RooflineError(f"config {self.where}: field {key!r} ({value}) must be at most "
                                f"{limit_key} ({limit})")
        return value


_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu_pytorch_tanh": "geglu", "gelu": "geglu",
                "gelu_new": "geglu", "gelu_fast": "geglu"}


def _gated_activation(f: _Fields) -> str:
    act = f.text("hidden_act", "silu", "hidden_activation")
    if act not in _ACTIVATIONS:
        raise RooflineError(f"config {f.where}: hidden_act {act!r} is not supported; "
                            f"supported: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[act]


def _common(f: _Fields, name: str, model_type: str, tie_default: bool) -> dict[str, Any]:
    hidden = f.integer("hidden_size")
    heads = f.integer("num_attention_heads")
    if hidden % heads and "head_dim" not in f.raw:
        raise RooflineError(f"config {f.where}: hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {heads}; give head_dim")
    return {
        "name": name,
        "architecture": model_type,
        "hidden_size": hidden,
        "num_layers": f.integer("num_hidden_layers"),
        "num_heads": heads,
        "num_kv_heads": f.at_most("num_key_value_heads", f.integer("num_key_value_heads", heads),
                                  "num_attention_heads", heads),
        "head_dim": f.integer("head_dim", hidden // heads),
        "intermediate_size": f.integer("intermediate_size"),
        "vocab_size": f.integer("vocab_size"),
        "max_position_embeddings": f.integer("max_position_embeddings"),
        "tie_word_embeddings": f.flag("tie_word_embeddings", tie_default),
        "activation": _gated_activation(f),
    }


def _llama(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    return ModelConfig(**kw)


def _mistral(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    return ModelConfig(**kw)


def _mixtral(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["sliding_window"] = f.optional_int("sliding_window")
    kw["num_experts"] = f.integer("num_local_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_local_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = kw["intermediate_size"]  # every expert is a full-width SwiGLU MLP
    kw["intermediate_size"] = 0
    return ModelConfig(**kw)


def _qwen2(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = True  # Qwen2 has biases on q, k and v, none elsewhere
    if f.flag("use_sliding_window", False):
        kw["sliding_window"] = f.optional_int("sliding_window")
        first_full = f.integer("max_window_layers", kw["num_layers"], minimum=0)
        kw["layer_attention"] = tuple(GLOBAL if i < first_full else LOCAL for i in range(kw["num_layers"]))
    return ModelConfig(**kw)


def _qwen3(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    return ModelConfig(**kw)


def _qwen3_moe(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    kw["qkv_bias"] = kw["o_bias"] = f.flag("attention_bias", False)  # HF: bias on q, k, v and o_proj
    kw["qk_norm"] = True
    if f.integer("decoder_sparse_step", 1) != 1 or f.raw.get("mlp_only_layers"):
        raise RooflineError(f"config {f.where}: only decoder_sparse_step 1 with no mlp_only_layers is supported")
    kw["num_experts"] = f.integer("num_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "num_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["intermediate_size"] = 0  # the dense width in the file is unused when every layer is MoE
    return ModelConfig(**kw)


def _deepseek(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, False)
    if f.integer("moe_layer_freq", 1) != 1:
        raise RooflineError(f"config {f.where}: only moe_layer_freq 1 is supported")
    kw["num_experts"] = f.integer("n_routed_experts")
    kw["experts_per_token"] = f.at_most("num_experts_per_tok", f.integer("num_experts_per_tok"),
                                        "n_routed_experts", kw["num_experts"])
    kw["moe_intermediate_size"] = f.integer("moe_intermediate_size")
    kw["num_shared_experts"] = f.integer("n_shared_experts", 0, minimum=0)
    kw["first_dense_layers"] = f.at_most("first_k_dense_replace", f.integer("first_k_dense_replace", 0, minimum=0),
                                         "num_hidden_layers", kw["num_layers"])
    kw["router_bias"] = model_type == "deepseek_v3"  # e_score_correction_bias
    kw["q_lora_rank"] = f.optional_int("q_lora_rank") or 0
    kw["kv_lora_rank"] = f.integer("kv_lora_rank")
    kw["qk_nope_head_dim"] = f.integer("qk_nope_head_dim")
    kw["qk_rope_head_dim"] = f.integer("qk_rope_head_dim")
    kw["v_head_dim"] = f.integer("v_head_dim")
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["num_kv_heads"] = kw["num_heads"]  # MLA: every head has its own (decompressed) K and V
    return ModelConfig(**kw)


_LAYER_TYPES = {"sliding_attention": LOCAL, "full_attention": GLOBAL}


def _gemma(f: _Fields, name: str, model_type: str) -> ModelConfig:
    kw = _common(f, name, model_type, True)
    kw["sandwich_norm"] = True
    kw["qk_norm"] = model_type.startswith("gemma3")
    window = f.optional_int("sliding_window")
    kw["sliding_window"] = window
    layers = kw["num_layers"]
    types = f.raw.get("layer_types")
    if types is not None:
        if (not isinstance(types, list) or len(types) != layers
                or not all(t in _LAYER_TYPES for t in types)):
            raise f._bad("layer_types", f"a list of {layers} (num_hidden_layers) of "
                                        f"{' or '.join(repr(t) for t in _LAYER_TYPES)}", types)
        kw["layer_attention"] = tuple(_LAYER_TYPES[t] for t in types)
    elif model_type == "gemma2":
        kw["layer_attention"] = tuple(LOCAL if i % 2 == 0 else GLOBAL for i in range(layers))  # even layers slide
    else:  # Gemma 3: sliding_window_pattern 6 = five local layers, then one global
        pattern = f.integer("sliding_window_pattern", 6)
        kw["layer_attention"] = tuple(GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(layers))
    if window is None:
        kw["layer_attention"] = tuple(GLOBAL for _ in range(layers))
    return ModelConfig(**kw)


def _gpt2(f: _Fields, name: str, model_type: str) -> ModelConfig:
    hidden = f.integer("n_embd", None, "hidden_size")
    act = f.text("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh"):
        raise RooflineError(f"config {f.where}: activation_function {act!r} is not supported (GELU variants only)")
    positions = f.integer("n_positions", None, "max_position_embeddings")
    heads = f.integer("n_head", None, "num_attention_heads")
    if hidden % heads:
        raise RooflineError(f"config {f.where}: n_embd {hidden} is not a multiple of n_head {heads}")
    return ModelConfig(
        name=name, architecture=model_type, hidden_size=hidden,
        num_layers=f.integer("n_layer", None, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=f.integer("n_inner", 4 * hidden),
        vocab_size=f.integer("vocab_size"), max_position_embeddings=positions,
        tie_word_embeddings=f.flag("tie_word_embeddings", True), norm=Norm.LAYERNORM, activation="gelu",
        linear_bias=True, learned_positions=positions)


_PARSERS: dict[str, Callable[[_Fields, str, str], ModelConfig]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek,
    "deepseek_v2": _deepseek,
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "gemma3": _gemma,
    "gpt2": _gpt2,
}
SUPPORTED = tuple(_PARSERS)


# --- quantization_config: what the checkpoint stores its weights in ----------------------------------

_FP16_SCALE_BITS = 16  # GPTQ, AWQ and compressed-tensors store group scales in FP16/BF16
_FP32_SCALE_BITS = 32  # DeepSeek-V3's weight_scale_inv and bitsandbytes' absmax are FP32
_BNB_BLOCK = 64  # bitsandbytes 4-bit: one absmax per 64 weights (quantize_4bit's default blocksize)
_BNB_NESTED_BLOCK = 256  # double quantisation: the absmax in 8 bits, one FP32 per 256 of them


def _q_int(q: Mapping[str, Any], key: str, where: str, default: int | None, allowed: str,
           ok: Callable[[int], bool]) -> int:
    value = q.get(key, default)
    if not _is_int(value) or not ok(value):
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


def _fp8(q: Mapping[str, Any], where: str) -> DType:
    """`quant_method: fp8` (transformers' FineGrainedFP8: DeepSeek-V3, Qwen3-FP8): E4M3 weights with one
    FP32 scale (weight_scale_inv) per weight_block_size block, or one per tensor without it."""
    fmt = q.get("fmt", "e4m3")
    if fmt not in ("e4m3", "e5m2"):
        raise RooflineError(f"config {where}: quantization_config 'fmt' must be 'e4m3' or 'e5m2', got {shown(fmt)}")
    block = q.get("weight_block_size")
    if block is None:
        return DTYPES[f"fp8_{fmt}"]
    if (not isinstance(block, list) or len(block) != 2
            or not all(_is_int(b) and 1 <= b <= MAX_SIZE for b in block)):
        raise RooflineError(f"config {where}: quantization_config 'weight_block_size' must be two positive "
                            f"integers like [128, 128], got {shown(block)}")
    return _fp8_blocks(fmt, block[0], block[1], _FP32_SCALE_BITS, "quant_method fp8")


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
                _is_int(b) and 1 <= b <= MAX_SIZE for b in block):
            return _fp8_blocks("e4m3", block[0], block[1], _FP16_SCALE_BITS, how), note
        return DTYPES["fp8_e4m3"], note
    if kind == "float" and bits == 4 and group in (16, 32):
        return DTYPES["nvfp4" if group == 16 else "mxfp4"], note
    if kind == "int" and isinstance(symmetric, bool):
        if strategy == "group" and isinstance(group, int) and _is_int(group) and 1 <= group <= MAX_SIZE:
            return _int_weights(bits, group, not symmetric, how), note
        if strategy in ("channel", "tensor"):
            return _int_weights(bits, -1, False, how), note
    return None, (f"quantization_config (compressed-tensors) weights scheme type {shown(kind)}, num_bits {bits}, "
                  f"strategy {shown(strategy)} is not read")


def checkpoint_weights(raw: Mapping[str, Any], where: str) -> tuple[DType | None, tuple[str, ...]]:
    """What a config's `quantization_config` stores the weights in, and a warning for each thing read
    but not used. No quantization_config: (None, ()), the weights dtype is not stated.

    One dtype serves every weight: the few tensors a checkpoint leaves unquantized
    (modules_to_not_convert, ignore: often the embedding and the LM head, 1.85 B of DeepSeek-V3's
    671 B parameters) are counted in it too."""
    q = raw.get("quantization_config")
    if q is None:
        return None, ()
    if not isinstance(q, Mapping):
        raise RooflineError(f"config {where}: field 'quantization_config' must be an object, got {shown(q)}")
    method = q.get("quant_method")
    if method is None and ("load_in_4bit" in q or "load_in_8bit" in q):
        method = "bitsandbytes"  # older transformers wrote bitsandbytes configs without quant_method
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
        case _:
            dtype, note = None, f"quantization_config quant_method {method!r} is not read"
    if dtype is None:
        note = note or f"quantization_config ({method}) quantizes nothing that is read"
        return None, (f"{where}: {note}; its weights are analysed as bf16 unless --weights-dtype says "
                      f"otherwise (int4, fp8, nvfp4, ...)",)
    return dtype, ((f"{where}: {note}",) if note else ())


def config_from_dict(raw: Mapping[str, Any], name: str = "model", where: str = "") -> ModelConfig:
    """Parse a Hugging Face config dict. Gemma 3's multimodal config nests the text model in text_config.
    A quantization_config sets `weights_dtype` (`checkpoint_weights`)."""
    where = where or name
    if not isinstance(raw, Mapping):
        raise RooflineError(f"config {where}: expected a JSON object at the top level")
    weights, notes = checkpoint_weights(raw, where)
    model_type = raw.get("model_type")
    if model_type == "gemma3" and isinstance(raw.get("text_config"), Mapping):
        raw = {**raw["text_config"], "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    if model_type is None:
        raise RooflineError(f"config {where}: missing field 'model_type'; supported: {', '.join(SUPPORTED)}")
    if not isinstance(model_type, str):
        raise RooflineError(f"config {where}: field 'model_type' must be a string, got {shown(model_type)}; "
                            f"supported: {', '.join(SUPPORTED)}")
    if model_type not in _PARSERS:
        raise RooflineError(f"config {where}: architecture {shown(model_type)} is not supported; "
                            f"supported: {', '.join(SUPPORTED)}")
    config = _PARSERS[model_type](_Fields(raw, where), name, model_type)
    if weights is None and not notes:
        return config
    from dataclasses import replace

    return replace(config, weights_dtype=weights, load_warnings=notes)


def _max_digits() -> str:
    return f"{sys.get_int_max_str_digits():,}"


def _loads(text: str, where: str) -> Any:
    """JSON text in, its value out; malformed, too deeply nested or too long a number is one line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise RooflineError(f"{where}: not a config: its JSON is nested too deeply") from None
    except ValueError:  # Python's limit on the digits of an int (sys.get_int_max_str_digits)
        raise RooflineError(f"{where}: a number in it has more than {_max_digits()} digits") from None


def _read_json(path: Path) -> dict[str, Any]:
    raw = _loads(read_text_file(path, "config"), f"config {path}")
    if not isinstance(raw, dict):
        raise RooflineError(f"config {path}: expected a JSON object at the top level")
    return raw


@cache
def _preset_raw(name: str) -> Mapping[str, Any]:
    return MappingProxyType(_read_json(PRESETS_DIR / f"{name}.json"))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_dict(name: str) -> dict[str, Any]:
    """A preset's HF-shaped config dict (a copy: overrides may change it)."""
    key = name.strip().lower()
    names = preset_names()
    if key not in names:
        raise unknown("model", name, names, "give a preset name or a path to a config.json")
    return dict(_preset_raw(key))


def _coerce(text: str, key: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except RecursionError:
        raise RooflineError(f"--set {key}: the value is nested too deeply") from None
    except ValueError:  # Python's limit on the digits of an int
        raise RooflineError(f"--set {key}: the number has more than {_max_digits()} digits") from None


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None) -> dict[str, Any]:
    """`--set num_key_value_heads=64` style what-ifs: values are JSON (numbers, true, null) or strings."""
    out = dict(raw)
    for key, value in (overrides or {}).items():
        out[key] = _coerce(value, key) if isinstance(value, str) else value
    return out


class _Reads(dict[str, Any]):
    """A config dict that remembers which fields the parser looked at, so that a `--set` of a field
    no parser reads (a typo, or another architecture's name for it) is an error, not a silent no-op."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        super().__init__(raw)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.seen.add(key)
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)


def _parse_with_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None, name: str,
                          where: str) -> ModelConfig:
    reads = _Reads(apply_overrides(raw, overrides))
    cfg = config_from_dict(reads, name, where)
    for key in overrides or {}:
        if key not in reads.seen:
            import difflib

            close = difflib.get_close_matches(key, sorted(reads.seen), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise RooflineError(f"--set {key}: {where} has no field {key!r} that the model is built from{hint}")
    return cfg


def load_config(model: str | ModelConfig, overrides: Mapping[str, str] | None = None) -> ModelConfig:
    """A preset name, a config.json path, or a folder holding config.json. Nothing is downloaded."""
    if isinstance(model, ModelConfig):
        if overrides:
            raise RooflineError("overrides apply to a preset or a config file, not to a parsed ModelConfig")
        return model
    text = model.strip()
    path = Path(text).expanduser()
    if text.endswith(".json") or "/" in text or path.exists():
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise RooflineError(f"no config file at {path} (give a config.json, a folder holding one, "
                                f"or a preset: {', '.join(preset_names())})")
        raw = _read_json(path)
        name = path.parent.name if path.name == "config.json" else path.stem
        cfg = _parse_with_overrides(raw, overrides, name, str(path))
        return _with_source(cfg, str(path))
    raw = preset_dict(text)
    return _with_source(_parse_with_overrides(raw, overrides, text.lower(), f"preset {text}"),
                        f"preset {text.lower()}")


def _with_source(cfg: ModelConfig, source: str) -> ModelConfig:
    from dataclasses import replace

    return replace(cfg, source=source)


__all__ = ["MAX_SIZE", "SUPPORTED", "ModelConfig", "apply_overrides", "checkpoint_weights", "config_from_dict",
           "load_config", "preset_dict", "preset_names"]
