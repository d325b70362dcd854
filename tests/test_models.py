"""Transformer configs, parameter counts, the step graphs, and the seed's decode figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import DEFAULT_MACHINE, get_machine
from roofline.models import (
    DEFAULT_LENGTH,
    SUPPORTED,
    AttentionKind,
    analyze_model,
    build_graph,
    compare,
    config_from_dict,
    decode_limit,
    deployments,
    dtype_steps,
    expected_experts_hit,
    experts_hit,
    load_config,
    memory_fit,
    model_dtypes,
    preset_names,
    sweep,
    windowed_pairs,
)
from roofline.parallel import Split
from roofline.vocab import Role

# Published parameter counts (total, active), in units of 1e9 parameters, and where each comes from.
# The tolerance is one unit of the last digit the source gives: sources round or truncate to those
# digits (Qwen2.5-7B has 7,615,616,512 parameters and its card says 7.61B).
PUBLISHED: dict[str, tuple[float, ...]] = {
    # Hugging Face model card / safetensors metadata of meta-llama/Meta-Llama-3-8B: "8.03B params"
    "llama-3-8b": (8.03, 8.03, 0.01),
    # meta-llama/Meta-Llama-3-70B safetensors metadata: "70.6B params"
    "llama-3-70b": (70.6, 70.6, 0.1),
    # meta-llama/Llama-3.1-405B safetensors metadata: "406B params" (405.9B)
    "llama-3.1-405b": (405.9, 405.9, 0.1),
    # mistralai/Mistral-7B-v0.1 safetensors metadata: "7.24B params"
    "mistral-7b": (7.24, 7.24, 0.01),
    # Mistral AI, "Mixtral of experts" (2023-12-11): 46.7B total, 12.9B used per token
    "mixtral-8x7b": (46.7, 12.9, 0.1),
    # Mistral AI, "Cheaper, Better, Faster, Stronger" (Mixtral 8x22B, 2024-04-17): 141B total, 39B active
    "mixtral-8x22b": (141, 39, 1),
    # Qwen/Qwen2.5-7B model card: "Number of Parameters: 7.61B"
    "qwen2.5-7b": (7.61, 7.61, 0.01),
    # Qwen/Qwen2.5-72B model card: "Number of Parameters: 72.7B"
    "qwen2.5-72b": (72.7, 72.7, 0.1),
    # Qwen/Qwen3-32B model card: "Number of Parameters: 32.8B"
    "qwen3-32b": (32.8, 32.8, 0.1),
    # Qwen/Qwen3-30B-A3B model card: "30.5B in total and 3.3B activated"
    "qwen3-30b-a3b": (30.5, 3.3, 0.1),
    # Qwen/Qwen3-235B-A22B model card: "235B in total and 22B activated"
    "qwen3-235b-a22b": (235, 22, 1),
    # deepseek-ai/DeepSeek-V3 README: "685B, which includes 671B of the Main Model weights and 14B of the
    # Multi-Token Prediction (MTP) Module weights"; the technical report (arXiv 2412.19437): "37B activated
    # for each token" (the MTP module is not in the main step). The main 671B: test_models_mtp.py
    "deepseek-v3": (685, 37, 1),
    # deepseek-ai/DeepSeek-V3.2 hub page: 685B params (V3's layout, its MTP layer included, + the lightning
    # indexer's 0.85B); activated: V3's 37B + the indexer's 0.85B (whole billions)
    "deepseek-v3.2": (685, 37 + 0.85, 1),
    # GLM-5 technical report (arXiv 2602.15763), its architecture table: 744B total (without its one MTP layer:
    # MAIN_ONLY), 40B activated, which leaves out the embedding table and the head (154,880 · 6,144 = 0.95B
    # each): 40 + 1.9, whole billions
    "glm-5": (744, 40 + 1.9, 1),
    # google/gemma-2-9b safetensors metadata: "9.24B params"
    "gemma-2-9b": (9.24, 9.24, 0.01),
    # openai-community/gpt2: GPT-2 small, 124M parameters (124,439,808 with tied embeddings)
    "gpt2": (0.124, 0.124, 0.001),
    # OpenAI gpt-oss model card (arXiv 2508.10925), table 1: 116.83B total, 5.13B active; its active count
    # leaves out the embedding table (201,088 · 2,880 = 0.579B), which ours includes: 5.13 + 0.58
    "gpt-oss-120b": (116.83, 5.13 + 0.58, 0.01),
    # the same table: 20.91B total, 3.61B active (+ the 0.58B embedding table)
    "gpt-oss-20b": (20.91, 3.61 + 0.58, 0.01),
    # Qwen/Qwen3.5-397B-A17B model card: 397B total (without its MTP layer: MAIN_ONLY), 17B activated (whole
    # billions)
    "qwen3.5-397b-a17b": (397, 17, 1),
    # Qwen/Qwen3-Next-80B-A3B-Instruct (and -Thinking, the same architecture) model card: "80B in total and 3B
    # activated", whole billions; the activated figure leaves out the embedding table and the untied head
    # (2 · 151,936 · 2,048 = 0.62B), which ours includes; the config declares no MTP layer, so none is counted
    "qwen3-next-80b-a3b": (80, 3 + 0.62, 1),
    # moonshotai/Kimi-K2-Instruct model card: "1 trillion total parameters, 32 billion activated"; the
    # activated figure leaves out the embedding table (163,840 · 7,168 = 1.17B): 32 + 1.17, whole billions;
    # the total to the trillion (±50B: 1.0T as the card rounds it)
    "kimi-k2": (1000, 32 + 1.17, 1, 50),
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 model card: "31.6B total parameters, approximately 3.2B
    # active (3.6B including embeddings)": the 3.6B, to its one decimal
    "nemotron-3-nano": (31.6, 3.6, 0.05),
    # nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8 model card: 120B total, 12B active (its name, whole
    # billions); its active count leaves out the two tables (2 · 131,072 · 4,096 = 1.07B), which ours includes
    "nemotron-3-super": (120, 12 + 1.07, 1),
    # Nemotron-H (arXiv 2504.03624): Nemotron-H-56B, whole billions (dense: every parameter active)
    "nemotron-h-56b": (56, 56, 0.5),
    # google/gemma-4-31B-it's model card (and NVIDIA's NIM card): 30.7B parameters and a ~550M vision encoder,
    # which ours counts in memory (not in a text token's active parameters)
    "gemma-4-31b": (30.7 + 0.55, 30.7, 0.05),
    # meta-llama/Llama-4-Maverick-17B-128E-Instruct model card: "17B (Activated) 400B (Total)", whole
    # hundreds of billions for the total (which also holds the vision encoder this config leaves out)
    "llama-4-maverick": (400, 17, 1),
    # deepseek-ai/DeepSeek-V4-Flash model card: "284B total parameters (13B activated)" (its MTP layer is not
    # counted here: roofline.models.architectures.deepseek_v4); the activated figure leaves out the embedding
    # table (129,280 · 4,096 = 0.53B), which ours includes: 13 + 0.53, whole billions
    "deepseek-v4-flash": (284, 13 + 0.53, 1),
    # MiniMaxAI/MiniMax-M3 model card (as the SGLang cookbook and Megatron-Bridge quote it): "428B total, ~23B
    # active"; the total counts the multimodal checkpoint (its vision tower and MTP modules, not in this text
    # config: 426.2B here, ±2B), the active figure leaves out the two tables (2 · 200,064 · 6,144 = 2.46B)
    "minimax-m3": (428, 23 + 2.46, 1, 2),
}


# published totals without the multi-token-prediction layers the checkpoint holds (DeepSeek-V4-Flash's 284B: its
# main model, as transformers counts it without mtp.*; its MTP layer: test_models_deepseek_v4.py)
MAIN_ONLY = {"glm-5", "qwen3.5-397b-a17b", "deepseek-v4-flash"}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published_figures(name: str) -> None:
    total, active, tol, *total_tol = PUBLISHED[name]
    cfg = load_config(name)
    mtp = sum(n for p, n in cfg.param_counts().parts.items() if p.startswith("mtp")) if name in MAIN_ONLY else 0
    assert (cfg.total_params - mtp) / 1e9 == pytest.approx(total, abs=total_tol[0] if total_tol else tol)
    assert cfg.active_params / 1e9 == pytest.approx(active, abs=tol)


def test_every_preset_is_checked_and_parses() -> None:
    assert set(preset_names()) == set(PUBLISHED)


def test_gpt2_parameters_exactly() -> None:
    # wte 50257·768 + wpe 1024·768 + 12 layers × (c_attn 768·2304+2304, c_proj 768·768+768,
    # c_fc 768·3072+3072, mlp c_proj 3072·768+768, 2 LayerNorms 2·2·768) + ln_f 2·768
    per_layer = 768 * 2304 + 2304 + 768 * 768 + 768 + 768 * 3072 + 3072 + 3072 * 768 + 768 + 4 * 768
    expected = 50257 * 768 + 1024 * 768 + 12 * per_layer + 2 * 768
    assert load_config("gpt2").total_params == expected == 124_439_808


def test_qwen3_next_80b_a3b_parameters_exactly() -> None:
    # its config (the preset, as published): h 2048, 48 layers, full_attention_interval 4: 36 Gated DeltaNet layers
    # (transformers Qwen3NextGatedDeltaNet: in_proj_qkvz h -> 2·16·128 + 2·32·128, in_proj_ba h -> 2·32, conv
    # 8192 channels × 4 taps, dt_bias and A_log 32 each, the gated norm 128, out_proj 32·128 -> h) and 12 gated
    # full-attention layers (q_proj h -> 2·16·256 with its gate, k and v h -> 2·256 each, o_proj 16·256 -> h, q and
    # k norms 256 each); 48 MoE layers: router h -> 512 + the shared expert's gate, one shared expert of 512,
    # 512 experts of 512; two block norms a layer, the final norm; untied embedding and head of 151,936
    h, V = 2048, 151_936
    gdn = h * 12288 + h * 64 + 8192 * 4 + 2 * 32 + 128 + 4096 * h
    full = (8192 + 1024 + 4096) * h + 2 * 256
    moe = h * 513 + 3 * h * 512 + 512 * 3 * h * 512
    total = 2 * V * h + 36 * gdn + 12 * full + 48 * moe + (2 * 48 + 1) * h
    cfg = load_config("qwen3-next-80b-a3b")
    assert cfg.total_params == total == 79_674_391_296
    assert cfg.active_params == total - 48 * (512 - 10) * 3 * h * 512  # 10 of 512 experts a token


def test_llama_3_70b_kv_cache_is_320_kib_per_token() -> None:
    # the seed: 320 KiB per token of context: 2 (K, V) · 8 KV heads · 128 · 80 layers · 2 bytes
    cfg = load_config("llama-3-70b")
    assert cfg.kv_cache_bytes_per_token(2.0) == 2 * 8 * 128 * 80 * 2 == 327_680 == 320 * 1024


def test_deepseek_v3_caches_the_compressed_latent() -> None:
    # MLA: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values per token per layer, 61 layers, bf16
    cfg = load_config("deepseek-v3")
    assert cfg.kv_cache_bytes_per_token(2.0) == 576 * 61 * 2 == 70_272


def test_decode_limit_matches_the_seed_at_8k_and_128k() -> None:
    cfg = load_config("llama-3-70b")
    # the seed: "At 8k context the cap is about 60 FLOP per byte."
    assert decode_limit(cfg, 8192).flop_per_byte == pytest.approx(60, rel=0.02)
    # "At 128k it is about 11": the seed's own formula with its figures gives
    # (2·70.6e9 + 4·131072·8192·80) / (131072·327680) = 11.28, which it rounds to 11
    seed_128k = (2 * 70.6e9 + 4 * 131072 * 8192 * 80) / (131072 * 327680)
    limit = decode_limit(cfg, 131072).flop_per_byte
    assert limit == pytest.approx(seed_128k, rel=0.02)
    assert round(limit) == 11


def test_decode_limit_formula_pieces() -> None:
    cfg = load_config("llama-3-70b")
    lim = decode_limit(cfg, 8192)
    # P: 70.55e9 parameters less the gathered embedding table (128256·8192) and the norm gains
    assert cfg.matmul_params == cfg.total_params - 128256 * 8192 - (2 * 80 + 1) * 8192
    assert lim.attention_flop_per_token == 4 * 8192 * 8192 * 80  # the seed's 4·L·h·L_layers
    assert lim.kv_bytes_per_sequence == 8192 * 327_680


def test_single_sequence_and_batch_64_decode_intensity() -> None:
    # the issue: single-sequence decode at 8k context is at about 1.1 FLOP/B; batch 64 about 33
    one = analyze_model("llama-3-70b", "h100", "decode", 1, 8192)
    assert round(one.flop_per_byte, 1) == 1.1
    b64 = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    assert b64.flop_per_byte == pytest.approx(33, rel=0.02)
    # weights are read once per step: the same bytes at batch 1 and 64 but for the 63 more embedding
    # rows gathered (8192 values of 2 bytes each); KV grows 64×
    r1, r64 = one.bytes_by_role(), b64.bytes_by_role()
    assert r64["weight"] - r1["weight"] == 63 * 8192 * 2
    # each step reads the 8192-token cache and writes one new token: (8192 + 1)·327,680 B per sequence
    assert r1["kv_cache"] == (8192 + 1) * 327_680
    assert r64["kv_cache"] == 64 * r1["kv_cache"]


def test_graph_limit_approaches_the_formula_and_decode_never_crosses() -> None:
    a = analyze_model("llama-3-70b", "h100", "decode", 64, 8192)
    cross = a.crossover
    assert cross.batch is None
    assert "never" in cross.reason
    # the graph's asymptote adds the activation bytes per sequence to the formula's KV bytes: ≤ 2% lower
    assert cross.limit_flop_per_byte == pytest.approx(a.decode_limit.flop_per_byte, rel=0.02)
    assert cross.limit_flop_per_byte < a.decode_limit.flop_per_byte
    assert cross.ridge_flop_per_byte == pytest.approx(989.4 / 3.35)


def test_crossover_is_the_first_batch_at_the_ridge() -> None:
    # a short context lets dense decode reach the ridge: check the batch found is the first one there
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 16)
    b = a.crossover.batch
    assert b is not None
    ridge = a.ridge_flop_per_byte
    assert analyze_model("llama-3-8b", "h100", "decode", b, 16).flop_per_byte >= ridge
    assert analyze_model("llama-3-8b", "h100", "decode", b - 1, 16).flop_per_byte < ridge


def test_plans_same_flops_fewer_bytes() -> None:
    for phase, seq in (("prefill", 2048), ("decode", 8192)):
        a = analyze_model("llama-3-8b", "h100", phase, 4, seq)
        none, flash, fused = a.plans["none"], a.plans["flash"], a.plans["fused"]
        assert none.flop == pytest.approx(flash.flop, rel=1e-12) and flash.flop == pytest.approx(fused.flop, rel=1e-12)
        assert none.bytes > flash.bytes > fused.bytes
        assert none.time_s > flash.time_s > fused.time_s
        assert len(none.placements) > len(flash.placements) > len(fused.placements)


def _kernel(a: object, name: str, plan: str) -> object:
    for p in a.plans[plan].placements:  # type: ignore[attr-defined]
        if p.name == name:
            return p
    raise AssertionError(f"no kernel {name} in plan {plan}")


@pytest.mark.parametrize("prompt", [128, 512, 2048, 8192])
def test_naive_attention_is_memory_bound_at_every_length(prompt: int) -> None:
    a = analyze_model("llama-3-8b", "h100", "prefill", 1, prompt)
    for op in ("attn.qk", "attn.softmax", "attn.pv"):
        p = _kernel(a, op, "none")
        assert p.bound_class == "memory"  # type: ignore[attr-defined]
    # the score matmul writes its full N×N scores: causal FLOPs 2·H·pairs·d over bytes 2·(H·N² + H·N·d + G·N·d)
    # (scores, q, k), which tends to d/2 = 64 as N grows (the seed's figure for naive attention)
    h, g, d, pairs = 32, 8, 128, prompt * (prompt + 1) // 2
    expected = 2 * h * pairs * d / (2 * (h * prompt**2 + h * prompt * d + g * prompt * d))
    assert _kernel(a, "attn.qk", "none").flop_per_byte == pytest.approx(expected)  # type: ignore[attr-defined]
    assert expected < 64 * (prompt + 1) / prompt


def test_fused_attention_is_compute_bound_past_a_few_hundred_tokens() -> None:
    # GQA 32/8, d 128, causal: I = 4·H·d·(N²/2) / (2 bytes·N·d·(2H + 2G)) = H·N/(2H + 2G) = 0.4·N for Llama 3 8B
    # (the softmax's vector FLOPs add 5·H·pairs, 1% more); the seed's N/2 is for H = G
    assert _kernel(analyze_model("llama-3-8b", "h100", "prefill", 1, 128), "attn", "flash").bound_class == "memory"  # type: ignore[attr-defined]
    for prompt in (1024, 8192):
        p = _kernel(analyze_model("llama-3-8b", "h100", "prefill", 1, prompt), "attn", "flash")
        assert p.bound_class == "compute"  # type: ignore[attr-defined]
        assert p.flop_per_byte == pytest.approx(0.4 * prompt, rel=0.02)  # type: ignore[attr-defined]


def test_elementwise_kernels_sit_left_and_prefill_matmuls_far_right() -> None:
    a = analyze_model("llama-3-70b", "h100", "prefill", 1, 4096)
    ridge = a.ridge_flop_per_byte
    for name in ("attn_norm", "mlp_norm", "attn_residual", "mlp_residual", "act", "rope"):
        intensity = _kernel(a, name, "none").flop_per_byte  # type: ignore[attr-defined]
        assert 0.1 <= intensity <= 3, name
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        assert _kernel(a, name, "none").flop_per_byte > 5 * ridge, name  # type: ignore[attr-defined]


def test_layers_are_counts_not_repeated_ops() -> None:
    mg = build_graph(load_config("llama-3-70b"), "decode", 1, 1024)
    names = [op.name for op in mg.graph.ops]
    assert len(names) == len(set(names)) < 20
    counts = {op.name: op.count for op in mg.graph.ops}
    assert counts["qkv_proj"] == counts["attn.qk"] == counts["down_proj"] == 80
    assert counts["embedding"] == counts["lm_head"] == 1
    # the embedding is a gather of the batch's rows, not a stream of the 128256×8192 table
    emb = mg.graph.op("embedding")
    assert emb.flop == 0 and emb.inputs[0].bytes == 1 * 8192 * 2


def test_kv_cache_writes_are_persistent_and_roles_are_set() -> None:
    mg = build_graph(load_config("llama-3-8b"), "prefill", 2, 64)
    kv = [t for t in mg.graph.tensors.values() if t.role == Role.KV_CACHE]
    assert {t.name for t in kv} == {"k.new", "v.new"}
    assert all(t.persistent for t in kv)
    weights = {t.name for t in mg.graph.tensors.values() if t.role == Role.WEIGHT}
    assert {"qkv_proj.weight", "o_proj.weight", "gate_up_proj.weight", "down_proj.weight", "lm_head.weight"} <= weights
    # flash: the K and V the prompt writes reach memory even though attention reads them inside the step
    attn = next(k for k in mg.graph.kernels(mg.plans["fused"]) if k.name == "attn")
    assert {t.name for t in attn.reads} >= {"q", "k.new", "v.new"}


def test_matmul_flops_are_two_per_parameter_per_token() -> None:
    # nanoGPT's cross-check: a decode step's matmul FLOPs outside attention = 2·P·B
    cfg = load_config("qwen2.5-7b")
    mg = build_graph(cfg, "decode", 3, 1)
    attention = {"attn.qk", "attn.pv"}
    mm = sum(op.flop_by_unit.get("matrix", 0.0) * op.count for op in mg.graph.ops if op.name not in attention)
    assert mm == 2 * cfg.matmul_params * 3


def test_moe_reads_the_experts_the_batch_hits() -> None:
    cfg = load_config("mixtral-8x7b")
    one = build_graph(cfg, "decode", 1, 1024)
    assert one.experts_hit == 2  # one token, top-2
    w = one.graph.tensors["experts.gate_up.weight"]
    assert w.bytes == 2 * 4096 * 2 * 14336 * 2  # 2 experts × h × 2f × bf16
    many = build_graph(cfg, "decode", 64, 1024)
    assert many.experts_hit == 8  # 8·(1 − (3/4)^64) = 8.0
    ds = build_graph(load_config("deepseek-v3"), "decode", 64, 1024)
    assert ds.experts_hit == round(256 * (1 - (1 - 8 / 256) ** 64)) == 222
    assert expected_experts_hit(256, 8, 1) == pytest.approx(8)
    fixed = build_graph(load_config("deepseek-v3"), "decode", 64, 1024, experts_hit_override=256)
    assert fixed.experts_hit == 256
    with pytest.raises(RooflineError, match="experts hit"):
        build_graph(cfg, "decode", 1, 16, experts_hit_override=9)


def test_moe_active_flops_use_k_experts_per_token() -> None:
    cfg = load_config("mixtral-8x7b")
    mg = build_graph(cfg, "decode", 5, 16)
    gu = mg.graph.op("experts.gate_up")
    assert gu.flop == 2 * 5 * 2 * 4096 * 2 * 14336  # 2·(N·k)·h·2f


def test_mla_decode_runs_absorbed_over_the_latent_cache() -> None:
    cfg = load_config("deepseek-v3")
    mg = build_graph(cfg, "decode", 2, 1000)
    cache = mg.graph.tensors["attn.latent_cache"]
    assert cache.shape == (2, 1, 1000, 576) and cache.role == Role.KV_CACHE
    qk, pv = mg.graph.op("attn.qk"), mg.graph.op("attn.pv")
    assert qk.flop == 2 * 2 * 128 * 1000 * 576  # 2·B·H·L·(kv_lora + rope)
    assert pv.flop == 2 * 2 * 128 * 1000 * 512  # values: the latent's first kv_lora_rank columns
    attn = next(k for k in mg.graph.kernels(mg.plans["flash"]) if k.name == "attn")
    # the latent is read once even though it serves as both keys and values
    assert sum(t.bytes for t in attn.reads if t.role == Role.KV_CACHE) == 2 * 1000 * 576 * 2
    # prefill decompresses: per-head K and V of 192 and 128
    pre = build_graph(cfg, "prefill", 1, 64)
    assert pre.graph.tensors["k"].shape == (1, 128, 64, 192)


def test_mla_decode_limit_far_above_gqa() -> None:
    # absorbed MLA does 2·128·(576 + 512) FLOPs per cached token per layer on 576·2 bytes: ≈ 242 FLOP/B
    # from attention alone, so DeepSeek-V3's decode limit sits far above Llama's ≈ 60
    cfg = load_config("deepseek-v3")
    lim = decode_limit(cfg, 8192).flop_per_byte
    attention_only = 2 * 128 * (576 + 512) / (576 * 2)  # 241.8: the limit of the kernel below as L grows
    mg = build_graph(cfg, "decode", 1, 8192)
    attn = next(k for k in mg.graph.kernels(mg.plans["flash"]) if k.name == "attn")
    # one token, L = 8192 cached: q·cᵀ over 576 columns and p·c over 512, 2 FLOPs each, 5 per score
    # for the softmax, over the latent cache read once plus q (576 per head) and the output (512 per head),
    # 2 bytes each: 2286944256 / 9715712 = 235.4 FLOP/B
    assert attn.flop == 2 * 128 * 8192 * (576 + 512) + 5 * 128 * 8192
    assert attn.bytes == (8192 * 576 + 128 * 576 + 128 * 512) * 2
    assert lim > attention_only > decode_limit(load_config("llama-3-70b"), 8192).flop_per_byte


def test_sliding_window_caps_the_cache_read() -> None:
    cfg = load_config("mistral-7b")
    mg = build_graph(cfg, "decode", 1, 16384)
    assert mg.graph.tensors["attn.k_cache"].shape == (1, 8, 4096, 128)
    assert cfg.kv_cache_bytes(1, 16384, 2.0) == 4096 * 131_072
    # the decode limit with a window stops falling past the window
    assert decode_limit(cfg, 16384).flop_per_byte == pytest.approx(decode_limit(cfg, 4096).flop_per_byte)
    # windowed prefill counts only pairs within the window: W(W+1)/2 + (N−W)·W
    assert windowed_pairs(8192, 4096) == 4096 * 4097 // 2 + 4096 * 4096
    full = build_graph(load_config("llama-3-8b"), "prefill", 1, 8192).graph.op("attn.qk").flop
    win = build_graph(cfg, "prefill", 1, 8192).graph.op("attn.qk").flop
    assert win / full == pytest.approx(windowed_pairs(8192, 4096) / windowed_pairs(8192, None))


def test_gemma_alternates_local_and_global_layers() -> None:
    cfg = load_config("gemma-2-9b")
    assert cfg.attention_layers("local") == cfg.attention_layers("global") == 21
    mg = build_graph(cfg, "decode", 1, 8192)
    assert mg.graph.tensors["attn.local.k_cache"].shape[2] == 4096
    assert mg.graph.tensors["attn.global.k_cache"].shape[2] == 8192
    assert mg.graph.op("attn.local.qk").count == 21
    # KV memory: 21 layers hold 4096 tokens, 21 hold all 8192; 2·8·256·2 bytes per token per layer
    assert cfg.kv_cache_bytes(1, 8192, 2.0) == 2 * 8 * 256 * 2 * (21 * 4096 + 21 * 8192)


def test_fp8_and_fp4_kv_cache_raise_the_decode_limit() -> None:
    cfg = load_config("llama-3-70b")
    bf16 = decode_limit(cfg, 131072, "bf16").flop_per_byte
    assert decode_limit(cfg, 131072, "fp8").flop_per_byte == pytest.approx(2 * bf16)
    # NVFP4: 4 bits + one 8-bit scale per 16 values = 4.5 bits
    assert decode_limit(cfg, 131072, "nvfp4").flop_per_byte == pytest.approx(bf16 * 16 / 4.5)


def test_dtypes_per_role() -> None:
    dt = model_dtypes(weights="nvfp4", activations="bf16", kv_cache="fp8", compute="fp8")
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 1024, dtypes=dt)
    assert a.dtype.name == "fp8_e4m3"
    assert a.ridge_flop_per_byte == pytest.approx(1978.9 / 3.35)
    roles = a.bytes_by_role()
    ref = analyze_model("llama-3-8b", "h100", "decode", 1, 1024).bytes_by_role()
    assert roles["kv_cache"] == pytest.approx(ref["kv_cache"] / 2)
    # weights at 4.5/16 of bf16 (norm gains stay in the activation dtype: a few KB)
    assert roles["weight"] == pytest.approx(ref["weight"] * 4.5 / 16, rel=1e-3)
    # default compute dtype: the activation dtype's peak
    assert analyze_model("llama-3-8b", "b200", "decode", 1, 64, dtypes=model_dtypes(activations="fp8")).dtype.peak_key \
        == "fp8"
    with pytest.raises(RooflineError, match="no matrix peak"):
        analyze_model("llama-3-8b", "a100", "decode", 1, 64, dtypes=model_dtypes(compute="fp8"))


def test_memory_fit_needs_the_fewest_devices() -> None:
    cfg = load_config("llama-3-70b")
    fit = memory_fit(cfg, 1, 8192, model_dtypes(), 80 * 2**30, "h100-sxm")
    # 70.55e9 · 2 B + 8192 · 327,680 B = 143.8 GB against 0.9 × 80 GiB = 77.3 GB usable: not on one device;
    # TP 2 holds half of each (the norm gains replicated): 71.9 GB, so 2 devices, as ceil(143.8 / 85.9) says too
    assert fit.total_bytes == cfg.total_params * 2 + 8192 * 327_680  # no workspace given
    assert fit.usable_bytes == 0.9 * 80 * 2**30
    assert fit.devices == math.ceil(fit.total_bytes / (80 * 2**30)) == 2 and fit.min_split == Split(tp=2)
    assert not fit.fits and "the smallest valid split that fits is TP 2" in fit.warning
    small = analyze_model("llama-3-8b", "h100", "decode", 1, 8192).memory
    assert small.fits and small.devices == 1 and small.warning == ""


def test_context_beyond_the_trained_maximum_warns() -> None:
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 16384)
    assert any("max_position_embeddings" in w for w in a.warnings)
    assert analyze_model("llama-3-8b", "h100", "decode", 1, 8192).warnings == ()


@pytest.mark.parametrize("batch,seq", [(0, 16), (1, 0), (1, -5), (-1, 16)])
def test_bad_sizes_raise(batch: int, seq: int) -> None:
    with pytest.raises(RooflineError, match="positive integer"):
        analyze_model("llama-3-8b", "h100", "decode", batch, seq)


def test_config_from_a_folder_and_file(tmp_path: Path) -> None:
    raw = json.loads((Path(__file__).parents[1] / "src/roofline/models/presets/llama-3-8b.json").read_text())
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw))
    cfg = load_config(str(folder))
    assert cfg.name == "my-model" and cfg.total_params == load_config("llama-3-8b").total_params
    assert load_config(str(folder / "config.json")).num_layers == 32


def test_malformed_and_unsupported_configs_fail_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(RooflineError, match="not valid JSON"):
        load_config(str(bad))
    with pytest.raises(RooflineError, match="missing field 'num_hidden_layers'"):
        config_from_dict({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})
    with pytest.raises(RooflineError, match="not supported; supported: llama"):
        config_from_dict({"model_type": "mamba"})
    with pytest.raises(RooflineError, match="must be a positive integer"):
        config_from_dict({**json.loads(json.dumps(load_config_raw("llama-3-8b"))), "hidden_size": "big"})
    with pytest.raises(RooflineError, match="did you mean llama-3-8b"):
        load_config("llama-3-8")
    assert "deepseek_v3" in SUPPORTED and "gemma3" in SUPPORTED


def load_config_raw(name: str) -> dict[str, object]:
    from roofline.models import preset_dict

    return preset_dict(name)


def test_gemma3_multimodal_config_uses_its_text_config() -> None:
    text = {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
            "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208,
            "max_position_embeddings": 131072, "sliding_window": 1024, "hidden_activation": "gelu_pytorch_tanh"}
    cfg = config_from_dict({"model_type": "gemma3", "text_config": text}, "gemma-3-4b")
    assert cfg.qk_norm and cfg.sandwich_norm and cfg.tie_word_embeddings
    # sliding_window_pattern 6: every sixth layer is global, 34 layers → 5 global, 29 local
    assert cfg.attention_layers("global") == 5 and cfg.attention_layers("local") == 29


def test_overrides_answer_what_ifs() -> None:
    gqa = analyze_model("llama-3-70b", "h100", "decode", 8, 8192)
    mha = analyze_model("llama-3-70b", "h100", "decode", 8, 8192, overrides={"num_key_value_heads": "64"})
    assert mha.kv_cache_bytes_per_token == 8 * gqa.kv_cache_bytes_per_token
    assert mha.decode_limit.flop_per_byte < gqa.decode_limit.flop_per_byte


def test_model_analysis_json_keys() -> None:
    d = analyze_model("llama-3-70b", "h100", "decode", 64, 8192).to_dict()
    assert d["params"]["total"] == load_config("llama-3-70b").total_params
    assert d["kv_cache_bytes_per_token"] == 327_680
    assert {"name", "count", "flop", "bytes", "flop_per_byte", "time_s", "bound"} <= set(d["kernels"][0])
    assert {"flop", "bytes", "time_s", "flop_per_byte"} <= set(d["totals"])
    assert d["decode_limit_flop_per_byte"] == pytest.approx(59.78, abs=0.01)
    assert set(d["plans"]) == {"none", "flash", "fused"}
    json.dumps(d, allow_nan=False)


def test_plot_and_html_delegate_to_the_report_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    import roofline.report.outputs as outputs

    seen: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(outputs, "model_figure", lambda sc, title="": seen.append(("fig", [s.plan for s in sc])))
    monkeypatch.setattr(outputs, "model_html", lambda sc, title="": seen.append(("html", [s.plan for s in sc])) or "x")
    a = analyze_model("gpt2", "h100", "decode", 1, 64, plan="fused")
    a.plot()
    assert 'srcdoc="x"' in a._repr_html_()  # the page, in an iframe of its own
    assert seen == [("fig", ["fused", "none", "flash"]), ("html", ["fused", "none", "flash"])]


# --- one formula each, for ints and for numpy arrays ----------------------------------------------

def test_attended_tokens_is_the_one_count_of_tokens_the_layers_hold() -> None:
    import numpy as np

    gemma = load_config("gemma-2-9b")  # 42 layers, even ones local: 21 global, 21 with the window W = 4096
    assert gemma.attended_tokens(8192) == 21 * 8192 + 21 * 4096  # global layers read 8192, local 4096
    assert gemma.attended_tokens(1000) == 42 * 1000  # below the window every layer reads all 1000
    assert gemma.cached_tokens(AttentionKind.LOCAL, 8192) == 4096
    assert gemma.cached_tokens(AttentionKind.GLOBAL, 8192) == 8192
    lengths = np.array([1000, 4096, 8192])
    assert gemma.attended_tokens(lengths).tolist() == [42 * 1000, 42 * 4096, 21 * 8192 + 21 * 4096]
    assert isinstance(gemma.attended_tokens(8192), int)
    # everything that counts held tokens takes them from there
    assert decode_limit(gemma, 8192).attended_tokens == 21 * 8192 + 21 * 4096
    per_token_layer = gemma.kv_elements_per_token_per_layer() * 2.0  # bf16
    assert gemma.kv_cache_bytes(3, 8192) == 3 * per_token_layer * (21 * 8192 + 21 * 4096)
    assert gemma.kv_cache_bytes(np.array([3, 3]), np.array([8192, 1000])).tolist() == [
        gemma.kv_cache_bytes(3, 8192), gemma.kv_cache_bytes(3, 1000)]
    llama = load_config("llama-3-70b")  # no window: 80 layers × L
    assert llama.attended_tokens(8192) == 80 * 8192
    assert llama.kv_cache_bytes(64, 8192) == 64 * 327_680 * 8192  # 320 KiB per token, all layers


def test_windowed_pairs_and_experts_hit_agree_on_ints_and_numpy_arrays() -> None:
    import numpy as np

    # Σ_i min(i, W): N(N+1)/2 up to the window, then W more pairs per query
    assert windowed_pairs(10, 4) == 4 * 5 // 2 + 6 * 4
    assert windowed_pairs(3, 4) == windowed_pairs(3, None) == 3 * 4 // 2
    queries = [1, 3, 4, 5, 10, 4096, 8192, 100_000]
    for window in (None, 4, 4096):
        as_array = windowed_pairs(np.array(queries, dtype=np.float64), window)
        assert as_array.tolist() == [windowed_pairs(q, window) for q in queries]
    # max(k, min(E, N·k, round(E·(1 − (1 − k/E)^N)))), rounding half to even in both
    assert experts_hit(8, 2, 1) == 2  # one token: its k experts
    assert experts_hit(8, 2, 64) == 8  # 8·(1 − (3/4)^64) = 8.0
    assert experts_hit(256, 8, 64) == round(256 * (1 - (1 - 8 / 256) ** 64)) == 222
    assert experts_hit(256, 8, 64, override=100) == 100
    tokens = [1, 2, 3, 5, 8, 64, 512, 1 << 20]
    for e, k in ((8, 2), (128, 8), (256, 8), (60, 4)):
        as_array = experts_hit(e, k, np.array(tokens, dtype=np.float64))
        assert as_array.tolist() == [experts_hit(e, k, n) for n in tokens]


def test_library_defaults_are_the_command_line_defaults() -> None:
    assert DEFAULT_LENGTH == 2048
    a = analyze_model("llama-3-70b")
    assert (a.machine.id, a.phase, a.batch, a.seq) == (get_machine(DEFAULT_MACHINE).id, "decode", 1, 2048)
    assert analyze_model("gpt2").seq == 1024  # 2048 capped at GPT-2's max_position_embeddings
    assert analyze_model("gpt2", seq=2048).seq == 2048  # a length given is kept (and warned about)
    assert [r["seq"] for r in compare(["llama-3-70b", "gpt2"])] == [2048, 1024]
    assert [r["seq"] for r in sweep(dtype_steps("gpt2"), deployments(["h100"]), [1, 2])] == [1024, 1024]


def test_param_counts_are_typed_parts_with_their_sums() -> None:
    c = load_config("mixtral-8x7b")
    p = c.param_counts()
    assert list(p.parts) == list(p.active_parts)
    assert p.active_parts["experts"] * 8 == p.parts["experts"] * 2  # k = 2 of E = 8 per token
    assert p.total == sum(p.parts.values()) == c.total_params
    assert p.active == p.total - p.parts["experts"] + p.active_parts["experts"] == c.active_params
    assert p.matmul == c.matmul_params == p.active - p.parts["embedding"] - p.parts["norms"] - p.parts["biases"]


def test_model_derivations_live_with_the_explanations() -> None:
    from roofline.explain import explain_kernels, explain_kv, explain_machine, explain_model, explain_placement
    from roofline.explain.placement import Sources

    a = analyze_model("mixtral-8x7b", "h100", "decode", 8, 4096)
    text = explain_model(a)
    assert "experts (k per token)" in text and "decode limit" in text
    # the kernels cite their sources as [n], numbered from the first kernel on
    assert explain_kernels(a).startswith(explain_placement(a.placements[0], Sources()))
    assert explain_kv(a.config, 2.0, "bf16")[0] == "KV cache per token"
    assert explain_machine(get_machine("h100")).startswith("NVIDIA H100")


def test_model_logits_all_adds_exactly_the_other_positions(capsys: pytest.CaptureFixture[str]) -> None:
    def lm_head(extra: list[str]) -> dict[str, Any]:
        assert main(["model", "llama-3-8b", "--phase", "prefill", "--batch", "2", "--prompt", "128", "--json",
                     *extra]) == 0
        return next(k for k in json.loads(capsys.readouterr().out)["kernels"] if k["name"] == "lm_head")

    last, every = lm_head([]), lm_head(["--logits", "all"])
    # Llama 3 8B: h = 4096, V = 128256; B = 2 rows against N = 2·128 = 256: 2·(N − B)·h·V more
    assert every["flop"] - last["flop"] == 2 * (256 - 2) * 4096 * 128256
    assert last["flop"] == 2 * 2 * 4096 * 128256  # the default is unchanged: one row per sequence


def test_model_mla_expanded_caches_per_head_k_and_v() -> None:
    from dataclasses import replace

    from roofline.models import analyze_model, load_config

    cfg = load_config("deepseek-v3")
    assert cfg.kv_elements_per_token_per_layer() == 512 + 64  # default unchanged: the absorbed latent
    expanded = replace(cfg, mla="expanded")
    # 128 heads · (128 nope + 64 rope + 128 v) per token per layer, as HF's DeepseekV3Attention caches them
    assert expanded.kv_elements_per_token_per_layer() == 128 * (128 + 64 + 128)
    a = analyze_model(cfg, "h200", "decode", 8, 4096)
    b = analyze_model(expanded, "h200", "decode", 8, 4096)
    qk_a, qk_b = a.model.graph.op("attn.qk"), b.model.graph.op("attn.qk")
    # q·kᵀ per layer: absorbed 2·B·H·L·576, expanded 2·B·H·L·192
    assert qk_a.flop == pytest.approx(2 * 8 * 128 * 4096 * 576, rel=1e-9)
    assert qk_b.flop == pytest.approx(2 * 8 * 128 * 4096 * 192, rel=1e-9)
    assert b.bytes > a.bytes  # the per-head cache is read every step
    assert not math.isclose(a.flop, b.flop)


def test_a_split_with_expert_and_data_parallel_is_scaled_in_its_layout() -> None:
    # DeepSeek-V3 on 8 H200 as EP 8 × DP 8, 4096 sequences of 4096 tokens: 4096 / 8 = 512 sequences a
    # device, each with MLA's 70,272 B a token of cache (61 layers × (512 + 64) × 2 B) × 4096 tokens =
    # 137 GiB of KV cache alone > 127 GiB usable (90% of 141 GiB). The suggestion keeps the layout the
    # user deploys (expert parallel, data-parallel attention, TP 1) with more devices, where the old
    # search answered TP 8 × PP 11 (issue 24, item 10); the smallest of that layout that fits is
    # checked against the one of 16 devices, which does not (60.3 GiB of weights + 68.6 GiB of KV)
    from roofline.parallel import Split

    a = analyze_model("deepseek-v3", "hgx-h200", "decode", 4096, 4096, split=Split(ep=8, dp=8))
    mem = a.memory
    assert mem.kv_cache_bytes == pytest.approx(512 * 61 * (512 + 64) * 2 * 4096, rel=1e-9)
    best = mem.min_split
    assert not mem.fits and best is not None and mem.layout == "EP × DP, TP 1"
    assert best.tp == 1 and best.pp == 1 and best.ep > 1 and best.dp > 1 and best.devices > 16
    assert f"the smallest split of this layout (EP × DP, TP 1) that fits is {best}" in mem.warning
    assert analyze_model("deepseek-v3", "hgx-h200", "decode", 4096, 4096, split=best).memory.fits
    assert not analyze_model("deepseek-v3", "hgx-h200", "decode", 4096, 4096, split=Split(ep=16, dp=16)).memory.fits
