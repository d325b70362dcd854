"""Gemma 4 (issue 22): two attention shapes, one per layer kind (roofline.models.attention_shape), and the
MoE beside a dense MLP. Configs: tests/fixtures/configs (sources in its README) and the preset gemma-4-31b;
every figure is derived here by hand from the config or quoted from the model card cited beside it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from flopcount import hf_param_count, hf_prefill_flop, masked_pairs, our_prefill_matrix_flop
from roofline.errors import RooflineError
from roofline.models import analyze_model, config_from_dict, load_config
from roofline.models.attention_shape import AttentionShape
from roofline.parallel import Split

CONFIGS = Path(__file__).parent / "fixtures" / "configs"


def raw(folder: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


# 31B: h = 5376, 60 layers (50 sliding, 10 full), 32 query heads; sliding 16 K/V heads of 256, full 4 of 512
# under K=V; GeGLU of 21504; 262,144 tied rows
H31, F31, V = 5376, 21504, 262144
SLIDING_31 = H31 * 32 * 256 + 2 * H31 * 16 * 256 + 32 * 256 * H31  # q, k, v, o
FULL_31 = H31 * 32 * 512 + H31 * 4 * 512 + 32 * 512 * H31  # q, k (K=V: no v_proj), o
# per layer 4 sandwich norms of h and q_norm, k_norm of the head dim; the final norm
NORMS_31 = 60 * 4 * H31 + 50 * 2 * 256 + 10 * 2 * 512 + H31
TEXT_31 = V * H31 + 50 * SLIDING_31 + 10 * FULL_31 + 60 * 3 * H31 * F31 + NORMS_31


def test_gemma_4_31b_against_its_model_card() -> None:
    # nvidia/Gemma-4-31B-IT-NVFP4 (google/gemma-4-31B-it's model card, and NVIDIA's NIM card for it: "Total
    # Parameters: 30.7B", and a ~550M vision encoder)
    cfg = load_config("gemma-4-31b")
    parts = cfg.param_counts().parts
    assert cfg.total_params - parts["vision"] == TEXT_31 == 30_697_345_280
    assert TEXT_31 / 1e9 == pytest.approx(30.7, abs=0.05)
    assert 0.5e9 < parts["vision"] < 0.6e9
    assert cfg.active_params == TEXT_31  # dense; a text token does not run the vision tower
    assert cfg.attention_layers("global") == 10 and cfg.attention_layers("local") == 50
    assert cfg.attention_shape("global") == AttentionShape(32, 4, 512, 512, k_eq_v=True, rotary_dims=128)
    assert cfg.attention_shape("local") == AttentionShape(32, 16, 256, 256)


def test_gemma_4_26b_a4b_against_its_model_card() -> None:
    # google/gemma-4-26B-A4B's model card: 25.2B total, 3.8B active, 128 experts (8 active) and a shared one
    cfg = load_config(str(CONFIGS / "gemma-4-26B-A4B"))
    h, e = 2816, 128
    sliding = h * 16 * 256 + 2 * h * 8 * 256 + 16 * 256 * h
    full = h * 16 * 512 + h * 2 * 512 + 16 * 512 * h
    experts = 30 * e * 3 * h * 704
    dense = 30 * 3 * h * 2112  # the dense MLP beside the experts: 3 shared experts of 704
    router = 30 * h * e
    norms = 30 * 4 * h + 25 * 2 * 256 + 5 * 2 * 512 + h + 30 * (3 * h + h + e)  # + 3 MoE norms and 2 scales
    text = V * h + 25 * sliding + 5 * full + experts + dense + router + norms
    assert cfg.total_params - cfg.param_counts().parts["vision"] == text == 25_233_141_760
    assert text / 1e9 == pytest.approx(25.2, abs=0.05)
    active = text - experts + 30 * 8 * 3 * h * 704
    assert cfg.active_params == active
    assert active / 1e9 == pytest.approx(3.8, abs=0.05)


@pytest.mark.torch
@pytest.mark.parametrize("folder", ["Gemma-4-31B-IT-NVFP4", "gemma-4-26B-A4B"])
def test_gemma_4_parameters_and_vision_tower_against_transformers(folder: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", minversion="5")
    from transformers.models.gemma4 import modeling_gemma4

    config = {k: v for k, v in raw(folder).items() if k != "quantization_config"}
    with torch.device("meta"):  # the real shapes, no memory
        model = modeling_gemma4.Gemma4ForConditionalGeneration(transformers.Gemma4Config(**config))
    text = sum(p.numel() for n, p in model.named_parameters() if ".language_model." in n)
    vision = sum(p.numel() for n, p in model.named_parameters() if ".vision_tower." in n or ".embed_vision." in n)
    parts = load_config(str(CONFIGS / folder)).param_counts()
    assert parts.parts["vision"] == vision
    assert parts.total - vision == text


def test_gemma_4_31b_kv_cache_per_token_by_hand() -> None:
    a = analyze_model("gemma-4-31b", "h200", "decode", 8, 8192)
    full = 10 * 4 * (512 + 512) * 2  # K and V both cached under K=V, 4 heads of 512, BF16: 81,920 B
    sliding = 50 * 16 * (256 + 256) * 2  # 819,200 B
    kv = a.kv_cache
    assert kv["bytes_per_token_uncapped"] == full + sliding == 901_120
    # at 8192 tokens the sliding layers keep their last 1024
    assert kv["bytes_per_token_at_length"] == full + sliding * 1024 / 8192 == 184_320
    assert kv["window_tokens"] == 1024
    assert a.memory.kv_cache_bytes == 8 * (full * 8192 + sliding * 1024)
    # the decode limit reads each kind's cache at its shape
    lim = a.decode_limit
    assert lim.kv_bytes_per_sequence == full * 8192 + sliding * 1024
    assert lim.attention_flop_per_token == 10 * 2 * 32 * 1024 * 8192 + 50 * 2 * 32 * 512 * 1024


def test_gemma_4_31b_graph_runs_each_kind_at_its_shape() -> None:
    a = analyze_model("gemma-4-31b", "h200", "decode", 1, 4096, plan="none")
    by_name = {p.name: p for p in a.placements}
    full, local = by_name["global.qkv_proj"], by_name["local.qkv_proj"]
    assert full.count == 10 and local.count == 50
    # full: q 32·512 + k 4·512 (K=V) = 18,432 columns; sliding q 32·256 + k, v 2·16·256 = 16,384
    assert full.flop == 2 * H31 * (32 * 512 + 4 * 512)
    assert local.flop == 2 * H31 * (32 * 256 + 2 * 16 * 256)
    assert by_name["global.o_proj"].flop == 2 * 32 * 512 * H31


def test_gemma_4_31b_under_tensor_parallelism() -> None:
    # tp 8: 4 query heads a device; the sliding layers' 16 K/V heads split 2 a device, the full layers' 4 are
    # each replicated twice (one a device), so their cache stops shrinking at tp 4
    a = analyze_model("gemma-4-31b", "hgx-h200", "decode", 8, 8192, split=Split(tp=8))
    assert any("exceeds the 4 key/value heads" in w for w in a.warnings)
    per_device = 8 * (10 * 1 * 1024 * 2 * 8192 + 50 * 2 * 512 * 2 * 1024)
    assert a.memory.kv_cache_bytes == per_device
    with pytest.raises(RooflineError, match="tp 3 does not divide"):
        analyze_model("gemma-4-31b", "hgx-h200", "decode", 8, 8192, split=Split(tp=3))


def test_gemma_4_31b_nvfp4_keeps_its_attention_in_bf16() -> None:
    # its quantization_config ignores every layer's self_attn and the vision tower: attention whole in BF16
    cfg = load_config(str(CONFIGS / "Gemma-4-31B-IT-NVFP4"))
    kept = dict(cfg.unquantized)
    assert cfg.weights_dtype is not None and cfg.weights_dtype.name == "nvfp4"
    assert kept["attention"] == 1.0 and kept["vision"] == 1.0 and kept.get("mlp", 0.0) == 0.0


def test_gemma_4_26b_a4b_nvfp4_quantizes_its_experts_only() -> None:
    # nvidia/Gemma-4-26B-A4B-NVFP4 ignores every layer's mlp* (the dense MLP beside the experts: transformers'
    # Gemma4TextDecoderLayer holds mlp, router and experts side by side), router* and self_attn*, and the
    # vision tower: the 128 experts alone are NVFP4, 16 E2M1 values sharing one FP8 scale (4.5 bits)
    cfg = load_config(str(CONFIGS / "Gemma-4-26B-A4B-NVFP4"))
    kept = dict(cfg.unquantized)
    assert "experts" not in kept
    assert kept["shared_experts"] == kept["router"] == kept["attention"] == kept["vision"] == 1.0
    experts = 30 * 128 * 3 * 2816 * 704
    a = analyze_model(str(CONFIGS / "Gemma-4-26B-A4B-NVFP4"), "h200", "decode", 1, 1024)
    assert a.memory.weights_bytes == pytest.approx(experts * 4.5 / 8 + (cfg.total_params - experts) * 2, rel=1e-9)


def test_one_excluded_full_layer_counts_by_its_own_shape() -> None:
    # only layer 5 (a full layer) left in BF16: its share of the attention weights is FULL / (50·SLIDING + 10·FULL)
    bad = raw("Gemma-4-31B-IT-NVFP4")
    only = ["lm_head", "model.language_model.layers.5.self_attn*"]
    bad["quantization_config"] = {**bad["quantization_config"], "ignore": only}
    kept = dict(config_from_dict(bad).unquantized)
    assert kept["attention"] == pytest.approx(FULL_31 / (50 * SLIDING_31 + 10 * FULL_31), rel=1e-12)


TINY = {"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
        "num_global_key_value_heads": 1, "attention_k_eq_v": True, "vocab_size": 128, "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "hidden_size_per_layer_input": 0, "max_position_embeddings": 256,
        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True}


@pytest.mark.torch
@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_gemma_4_flops_and_parameters_against_transformers(moe: bool) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers", minversion="5")
    tiny = copy.deepcopy(TINY)
    if moe:
        tiny.update(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32)
    t, w = 16, 8
    # FlopCounterMode counts the whole square; we count the pairs kept: causal on the full layers (32 + 32 wide,
    # 2 of them), within the window of 8 on the sliding ones (16 + 16 wide): W(W+1)/2 + (T − W)·W
    windowed_out = t * t - (w * (w + 1) // 2 + (t - w) * w)
    expected = (hf_prefill_flop(tiny, t) - 2 * 4 * (32 + 32) * 2 * masked_pairs(t)
                - 2 * 4 * (16 + 16) * 2 * windowed_out)
    assert our_prefill_matrix_flop(tiny, t) == pytest.approx(expected, rel=1e-12)
    # the checkpoint also holds each layer's layer_scalar (a buffer of one value), which we leave out
    assert hf_param_count(tiny) == config_from_dict(tiny).total_params + 4


@pytest.mark.parametrize("change, match", [
    ({"hidden_size_per_layer_input": 256}, "field 'hidden_size_per_layer_input' is not read"),
    ({"num_kv_shared_layers": 10}, "field 'num_kv_shared_layers' is not read"),
    ({"use_double_wide_mlp": True}, "field 'use_double_wide_mlp' true is not read"),
    ({"use_bidirectional_attention": "all"}, "field 'use_bidirectional_attention' 'all'"),
    ({"global_head_dim": "big"}, "field 'global_head_dim' must be a positive integer"),
    ({"num_global_key_value_heads": 3}, "field 'num_global_key_value_heads' \\(3\\) must divide"),
    ({"intermediate_size": 2000}, "field 'intermediate_size' \\(2000\\) beside experts"),
    ({"rope_parameters": {"full_attention": {"partial_rotary_factor": 2}, "sliding_attention": {}}},
     "field 'rope_parameters.full_attention.partial_rotary_factor' must be a number in \\(0, 1\\]")])
def test_hostile_gemma_4_fields(change: dict[str, Any], match: str) -> None:
    bad = raw("gemma-4-26B-A4B")
    bad["text_config"] = {**bad["text_config"], **change}
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


def test_an_audio_tower_is_refused_by_name() -> None:
    bad = raw("gemma-4-26B-A4B")
    bad["audio_config"] = {"hidden_size": 1536}
    with pytest.raises(RooflineError, match="field 'audio_config' is not read"):
        config_from_dict(bad)


def test_a_last_sliding_layer_is_forced_to_full_as_transformers_does() -> None:
    tiny = copy.deepcopy(TINY)
    tiny["layer_types"] = ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]
    cfg = config_from_dict(tiny)
    assert cfg.layer_kinds[-1] == "global" and any("forces the last layer" in w for w in cfg.load_warnings)


def test_models_lists_each_layer_kind_at_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    assert main(["models", "--json"]) == 0
    row = {r["id"]: r for r in json.loads(capsys.readouterr().out)}["gemma-4-31b"]
    # layer_types: 50 sliding layers of 1024, 10 full ones at their own shape; every layer a dense GeGLU
    assert row["layer_kinds"] == "50 window 1024 + 10 full attention (GQA 32/4 × 512, K=V) + 60 dense MLP"
    assert row["attention"] == "GQA 32/16 × 256, window 1,024 on 50 of 60 layers; full: GQA 32/4 × 512, K=V"


def test_mixed_precision_counts_each_listed_projection_at_its_layers_shape() -> None:
    # a MIXED_PRECISION export of Gemma 4 31B listing every MLP projection in NVFP4 and, of the attention, only
    # the 10 full layers' q_proj in FP8: those weigh 5376·32·512 each, not the sliding layers' 5376·32·256
    bare = {k: v for k, v in raw("Gemma-4-31B-IT-NVFP4").items() if k != "quantization_config"}
    listed: dict[str, dict[str, str]] = {}
    for i in range(60):
        for p in ("gate_proj", "up_proj", "down_proj"):
            listed[f"model.language_model.layers.{i}.mlp.{p}"] = {"quant_algo": "NVFP4"}
        if i % 6 == 5:  # the full layers
            listed[f"model.language_model.layers.{i}.self_attn.q_proj"] = {"quant_algo": "FP8"}
    cfg = config_from_dict({**bare, "quantization_config": {"quant_algo": "MIXED_PRECISION",
                                                            "quantized_layers": listed}})
    mixed = {(part, d.name): f for part, d, f in cfg.mixed_weights}
    q_full = 10 * H31 * 32 * 512
    assert mixed[("attention", "fp8_e4m3")] == pytest.approx(q_full / (50 * SLIDING_31 + 10 * FULL_31), rel=1e-12)


def test_the_full_layers_shape_defaults_as_transformers_sets_it() -> None:
    # Gemma4TextConfig.__post_init__: global_head_dim 512 when absent; num_global_key_value_heads read only under
    # attention_k_eq_v (without it the full layers keep num_key_value_heads, and their own v_proj)
    tiny = {k: v for k, v in TINY.items() if k not in ("global_head_dim", "attention_k_eq_v")}
    cfg = config_from_dict(tiny)
    assert cfg.attention_shape("global") == AttentionShape(4, 2, 512, 512, rotary_dims=128)
    # 2 sliding layers of 2·2·16 values a token, 2 full ones of 2·2·512
    assert cfg.kv_elements_per_token() == 2 * 2 * 2 * 16 + 2 * 2 * 2 * 512
