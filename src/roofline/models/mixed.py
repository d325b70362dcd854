"""NVIDIA ModelOpt's MIXED_PRECISION checkpoints: a quant_algo per module, applied exactly.

`quantization.quantized_layers` (hf_quant_config.json, or quantization_config in config.json) maps
each quantized linear module to its own `quant_algo`: FP8 (E4M3, one FP32 scale per tensor, not
counted), NVFP4 and W4A16_NVFP4 (E2M1 weights, one FP8 scale per 16: 4.5 bits; W4A16 keeps the
activations in 16 bits, the weights the same), MXFP8 (E4M3, one E8M0 scale per 32: 8.25 bits).
A module it does not list stays in the checkpoint's 16 bits, as ModelOpt leaves it (its
exclude_modules say so too). Each listed module is one share of one parameter part of one layer:
q_proj its share of the layer's attention, `mlp.gate_proj` a third of a SwiGLU MLP,
`mixer.experts.5.down_proj` half of one of E ReLU² experts; a part's fraction in a dtype is its
shares summed over the layers that have the part, divided by them. The dtype holding the most
parameters is the checkpoint's `weights_dtype`; the others are `ModelConfig.mixed_weights`. A
module name, or a quant_algo, that is not read is refused naming it: never charged a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from roofline.dtypes import DTYPES, DType
from roofline.errors import RooflineError, shown
from roofline.models.quantization import _NEVER_QUANTIZED, _projection_share
from roofline.models.transformer import SOFTMAX_KINDS, AttentionKind, MlpKind, ModelConfig

_ALGOS = {"FP8": "fp8_e4m3", "NVFP4": "nvfp4", "W4A16_NVFP4": "nvfp4", "MXFP8": "mxfp8"}
_MODULE = re.compile(r"^(?:.*\.)?layers\.(\d+)\.(.+)$")
# one projection's share of a gated MLP (gate, up, down; MiniMax's w1, w3, w2) or of a plain one (up, down)
_GATED = {"gate_proj": 1 / 3, "up_proj": 1 / 3, "down_proj": 1 / 3, "w1": 1 / 3, "w3": 1 / 3, "w2": 1 / 3,
          "gate_up_proj": 2 / 3}
_PLAIN = {"up_proj": 1 / 2, "down_proj": 1 / 2, "fc1": 1 / 2, "fc2": 1 / 2}
_MLP_HEADS = (("mlp.shared_expert.", "shared_experts"), ("mlp.shared_experts.", "shared_experts"),
              ("mixer.shared_experts.", "shared_experts"), ("block_sparse_moe.shared_experts.", "shared_experts"),
              ("mlp.", "mlp"), ("mixer.", "mlp"))


def _mlp_share(cfg: ModelConfig, proj: str) -> float | None:
    """One projection's share of an MLP (or expert): a third of a SwiGLU's, half of a ReLU²'s."""
    return (_GATED if cfg.gated else _PLAIN).get(proj)


def _linear_attention_share(cfg: ModelConfig, proj: str) -> float | None:
    """Gated DeltaNet's projections (Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj)
    as shares of its layer's parameters (LinearAttention.layer_params)."""
    la, h = cfg.linear_attention, cfg.hidden_size
    if la is None:
        return None
    v = la.value_heads * la.value_dim
    sizes = {"in_proj_qkv": h * la.conv_channels, "in_proj_z": h * v, "in_proj_b": h * la.value_heads,
             "in_proj_a": h * la.value_heads, "in_proj_qkvz": h * (la.conv_channels + v),
             "in_proj_ba": 2 * h * la.value_heads, "out_proj": v * h}
    return sizes[proj] / la.layer_params(h) if proj in sizes else None


def module_share(cfg: ModelConfig, rest: str, kind: AttentionKind = AttentionKind.GLOBAL) -> tuple[str, float] | None:
    """The parameter part one layer's module (the name after `layers.i.`) belongs to, and its share
    of that part in the layer (its attention at the `kind` layer's own shape); None when not read."""
    head, _, proj = rest.rpartition(".")
    if head in ("self_attn", "mixer") and proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        share = _projection_share(cfg, proj, kind)
        return None if share is None else ("attention", share)
    bs = cfg.block_sparse  # MiniMax-M3's indexer: index_q_proj H_I·d_I of its (H_I + 1)·d_I, index_k_proj d_I
    if head == "self_attn" and proj in ("index_q_proj", "index_k_proj") and bs is not None:
        return "indexer", (bs.index_heads if proj == "index_q_proj" else 1) / (bs.index_heads + 1)
    if head == "linear_attn":
        share = _linear_attention_share(cfg, proj)
        return None if share is None else ("linear_attention", share)
    if head == "mixer" and proj in ("in_proj", "out_proj") and cfg.mamba is not None:
        mb, h = cfg.mamba, cfg.hidden_size
        return "mamba", (h * mb.in_width if proj == "in_proj" else mb.inner * h) / mb.linear_params(h)
    if rest in ("mlp.experts", "block_sparse_moe.experts", "mixer.experts"):
        return "experts", 1.0  # the layer's experts stacked in one module
    expert = re.match(r"^(?:mlp|mixer|block_sparse_moe)\.experts\.(\d+)\.(\w+)$", rest)
    if expert is not None and cfg.is_moe and int(expert.group(1)) < cfg.num_experts:
        share = _mlp_share(cfg, expert.group(2))
        return None if share is None else ("experts", share / cfg.num_experts)
    for prefix, part in _MLP_HEADS:
        if rest.startswith(prefix) and rest.count(".") == prefix.count("."):
            share = _mlp_share(cfg, proj)
            return None if share is None else (part, share)
    return None


def mixed_precision(cfg: ModelConfig, q: Mapping[str, Any], where: str
                    ) -> tuple[DType, tuple[tuple[str, float], ...], tuple[tuple[str, DType, float], ...]]:
    """(weights_dtype, unquantized, mixed_weights) of a MIXED_PRECISION checkpoint, every module exactly."""
    layers = q.get("quantized_layers")
    if not isinstance(layers, Mapping) or not layers:
        raise RooflineError(f"config {where}: quantization_config 'quantized_layers' must be an object of module "
                            f"names and their quant_algo (MIXED_PRECISION), got {shown(layers)}")
    having = {"attention": {i for i, k in enumerate(cfg.layer_kinds) if k in SOFTMAX_KINDS},
              "linear_attention": {i for i, k in enumerate(cfg.layer_kinds) if k == AttentionKind.LINEAR},
              "mamba": {i for i, k in enumerate(cfg.layer_kinds) if k == AttentionKind.MAMBA},
              "indexer": {i for i, k in enumerate(cfg.layer_kinds) if k == AttentionKind.SPARSE},
              "mlp": {i for i, k in enumerate(cfg.mlp_kinds) if k == MlpKind.DENSE},
              "experts": {i for i, k in enumerate(cfg.mlp_kinds) if k == MlpKind.MOE}}
    having["shared_experts"] = having["experts"] if cfg.num_shared_experts else set()
    shares: dict[tuple[str, str], dict[int, float]] = {}  # (dtype, part) -> layer -> share
    whole: dict[tuple[str, str], float] = {}  # (dtype, part) for parts outside the layers (the LM head)
    for name, spec in layers.items():
        algo = spec.get("quant_algo") if isinstance(spec, Mapping) else None
        if algo not in _ALGOS:
            raise RooflineError(f"config {where}: quantization_config 'quantized_layers' gives {shown(name)} "
                                f"quant_algo {shown(algo)}, not read (read: {', '.join(repr(a) for a in _ALGOS)})")
        if "NVFP4" in algo and spec.get("group_size", 16) != 16:
            raise RooflineError(f"config {where}: quantization_config 'quantized_layers' gives {shown(name)} NVFP4 "
                                f"with group_size {shown(spec.get('group_size'))}; NVFP4 is one scale per 16")
        dtype = _ALGOS[algo]
        if not isinstance(name, str):
            raise RooflineError(f"config {where}: quantization_config 'quantized_layers' has a non-string key")
        if name.startswith("mtp"):
            continue  # multi-token-prediction layers: outside the main stack
        if name == "lm_head":
            whole[(dtype, "lm_head")] = 1.0
            continue
        m = _MODULE.match(name)
        kind = cfg.layer_kinds[int(m.group(1))] if m is not None and int(m.group(1)) < cfg.num_layers \
            else AttentionKind.GLOBAL
        found = None if m is None else module_share(cfg, m.group(2), kind)
        if m is None or found is None or int(m.group(1)) not in having.get(found[0], set()):
            raise RooflineError(f"config {where}: quantization_config 'quantized_layers' module {shown(name)} is not "
                                f"read: MIXED_PRECISION is applied per module exactly or not at all")
        part, share = found
        layer = shares.setdefault((dtype, part), {})
        layer[int(m.group(1))] = layer.get(int(m.group(1)), 0.0) + share
    fractions: dict[tuple[str, str], float] = dict(whole)
    # a layer's share of a part weighs by that layer's parameters in it: attention at each layer kind's shape
    weight = {i: float(cfg.attention_shape(k).linear_params(cfg.hidden_size)) if k in SOFTMAX_KINDS else 1.0
              for i, k in enumerate(cfg.layer_kinds)}
    for (dtype, part), by_layer in shares.items():
        if part == "attention" and not cfg.is_mla:
            fractions[(dtype, part)] = (sum(v * weight[i] for i, v in by_layer.items())
                                        / sum(weight[i] for i in having[part]))
        else:
            fractions[(dtype, part)] = sum(by_layer.values()) / len(having[part])
    parts = cfg.param_counts().parts
    total_by_part: dict[str, float] = {}
    for (_, part), f in fractions.items():
        total_by_part[part] = total_by_part.get(part, 0.0) + f
    over = [p for p, f in total_by_part.items() if f > 1 + 1e-9]
    if over:
        raise RooflineError(f"config {where}: quantization_config 'quantized_layers' lists part of {over[0]} twice")
    by_dtype: dict[str, float] = {}
    for (dtype, part), f in fractions.items():
        by_dtype[dtype] = by_dtype.get(dtype, 0.0) + f * parts.get(part, 0)
    main = max(by_dtype, key=lambda d: by_dtype[d])
    kept = {p: 1.0 for p in _NEVER_QUANTIZED}
    for part in parts:
        if part not in kept:
            kept[part] = max(0.0, 1.0 - total_by_part.get(part, 0.0))
    mixed = tuple(sorted((part, DTYPES[d], f) for (d, part), f in fractions.items() if d != main))
    return DTYPES[main], tuple(sorted(kept.items())), mixed


__all__ = ["mixed_precision", "module_share"]
