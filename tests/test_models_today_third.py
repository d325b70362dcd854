"""Today's models, third part (issue 22): Xiaomi's MiMo-7B (Qwen2 with a multi-token-prediction layer) and
MiMo-V2-Flash (sliding and full layers each at their own attention shape, sinks on the sliding ones),
Qwen3.6's output_gate_type, and StepFun's Step 3.7 refused naming the field it cannot pin. Configs:
tests/fixtures/configs (sources in its README); every figure is derived here by hand from the config or
quoted from the model card cited beside it."""

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


# --- MiMo-V2-Flash ------------------------------------------------------------------------------------

def test_mimo_v2_flash_against_its_model_card() -> None:
    # XiaomiMiMo/MiMo-V2-Flash's model card: 309B total parameters, 15B active. Its config: h = 4096, 48 layers
    # (9 full, 39 sliding), 64 query heads of 192 (values 128); full layers 4 K/V heads, sliding layers 8 and a
    # sink logit per head; layer 0 a dense SwiGLU of 16384, the rest 256 experts of 2048, top 8, the
    # e_score_correction_bias; 152,576 rows, untied
    cfg = load_config(str(CONFIGS / "MiMo-V2-Flash"))
    h, v = 4096, 152576
    full = h * 64 * 192 + h * 4 * 192 + h * 4 * 128 + 64 * 128 * h
    sliding = h * 64 * 192 + h * 8 * 192 + h * 8 * 128 + 64 * 128 * h
    experts = 47 * 256 * 3 * h * 2048
    total = (2 * v * h + 9 * full + 39 * sliding + 3 * h * 16384 + 47 * h * 256 + experts
             + 48 * 2 * h + h + 39 * 64 + 47 * 256)  # + norms, the final norm, sinks, correction biases
    assert cfg.total_params == total == 308_778_780_864
    assert total / 1e9 == pytest.approx(309, abs=0.5)
    active = total - experts + 47 * 8 * 3 * h * 2048
    assert cfg.active_params == active
    assert active / 1e9 == pytest.approx(15, abs=0.5)
    assert cfg.attention_shape("global") == AttentionShape(64, 4, 192, 128, rotary_dims=64)
    assert cfg.attention_shape("local") == AttentionShape(64, 8, 192, 128, rotary_dims=64, sinks=True)
    # sliding_window_size 128 + 1: transformers' window counts the token itself
    assert cfg.sliding_window == 129
    assert any("attention_chunk_size is not read" in w for w in cfg.load_warnings)


def test_mimo_v2_flash_kv_cache_by_hand() -> None:
    a = analyze_model(str(CONFIGS / "MiMo-V2-Flash"), "hgx-h200", "decode", 8, 8192, split=Split(tp=8))
    full = 9 * 4 * (192 + 128) * 2  # K and V per token, BF16: 23,040 B
    sliding = 39 * 8 * (192 + 128) * 2  # 199,680 B
    kv = a.kv_cache
    assert kv["bytes_per_token_uncapped"] == full + sliding == 222_720
    assert kv["bytes_per_token_at_length"] == pytest.approx(full + sliding * 129 / 8192, rel=1e-12)
    # tp 8: the sliding layers' 8 K/V heads one a device; the full layers' 4 replicated twice
    assert a.memory.kv_cache_bytes == 8 * (9 * 1 * 320 * 2 * 8192 + 39 * 1 * 320 * 2 * 129)


MIMO_TINY = {"model_type": "mimo_v2_flash", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 24, "v_head_dim": 16,
             "vocab_size": 128, "sliding_window_size": 7,
             "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
             "moe_layer_freq": [0, 1, 1, 1], "n_routed_experts": 4, "num_experts_per_tok": 2,
             "moe_intermediate_size": 32, "max_position_embeddings": 256, "partial_rotary_factor": 0.334}


@pytest.mark.torch
def test_mimo_v2_flash_flops_and_parameters_against_transformers() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers", minversion="5")
    t, w = 16, 8  # the window: sliding_window_size 7 + 1
    # FlopCounterMode counts the whole square of pairs, 2·H·(d + d_v) = 2·4·(24 + 16) each; we count the causal
    # ones on the 2 full layers and those within the window on the 2 sliding ones: W(W+1)/2 + (T − W)·W
    windowed_out = t * t - (w * (w + 1) // 2 + (t - w) * w)
    expected = hf_prefill_flop(MIMO_TINY, t) - 2 * 4 * (24 + 16) * 2 * (masked_pairs(t) + windowed_out)
    assert our_prefill_matrix_flop(MIMO_TINY, t) == pytest.approx(expected, rel=1e-12)
    assert hf_param_count(MIMO_TINY) == config_from_dict(MIMO_TINY).total_params


@pytest.mark.parametrize("change, match", [
    ({"swa_num_key_value_heads": 4}, "field 'swa_num_key_value_heads' \\(4\\) is not what transformers"),
    ({"swa_v_head_dim": 192}, "field 'swa_v_head_dim' \\(192\\)"),
    ({"add_full_attention_sink_bias": True}, "field 'add_full_attention_sink_bias'"),
    ({"hybrid_layer_pattern": [1] * 48}, "field 'hybrid_layer_pattern' disagrees with layer_types"),
    ({"hybrid_layer_pattern": [2] * 48}, "field 'hybrid_layer_pattern' must be a list of 48"),
    ({"n_shared_experts": 1}, "field 'n_shared_experts' is not read"),
    ({"partial_rotary_factor": 1.5}, "field 'partial_rotary_factor' must be a number in \\(0, 1\\]")])
def test_hostile_mimo_v2_flash_fields(change: dict[str, Any], match: str) -> None:
    bad = {**raw("MiMo-V2-Flash"), **change}
    if "hybrid_layer_pattern" in change and "disagrees" in match:
        bad["layer_types"] = ["full_attention" if i % 6 == 5 or i == 0 else "sliding_attention" for i in range(48)]
    with pytest.raises(RooflineError, match=match):
        config_from_dict(bad)


# --- MiMo-7B ------------------------------------------------------------------------------------------

def test_mimo_7b_by_hand_with_its_mtp_layer() -> None:
    # XiaomiMiMo/MiMo-7B-Base: "7B" (its name); Qwen2's layers (h = 4096, 36 layers, 32 heads, 8 K/V heads of
    # 128 with q/k/v biases, SwiGLU of 11008), 151,680 untied rows; one MTP layer (the MiMo-7B technical report,
    # arXiv 2505.07608: one MTP layer used for speculative decoding)
    cfg = load_config(str(CONFIGS / "MiMo-7B-Base"))
    h, v, f = 4096, 151680, 11008
    attn = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h
    bias = (32 + 2 * 8) * 128
    layer = attn + bias + 3 * h * f + 2 * h
    main = 2 * v * h + 36 * layer + h
    # the MTP layer: input_proj 2h -> h, one decoder layer, token/hidden/final layernorms (vLLM mimo_mtp.py)
    mtp = 2 * h * h + layer + 3 * h
    assert cfg.total_params == main + mtp == 7_833_409_536
    assert cfg.active_params == main  # the main step runs without it
    assert 7e9 < main < 8e9
    a = analyze_model(str(CONFIGS / "MiMo-7B-Base"), "h200", "decode", 8, 8192)
    assert a.kv_cache["bytes_per_token_uncapped"] == 36 * 2 * 8 * 128 * 2  # 147,456 B


def test_mimo_7b_serves_its_mtp_layer_as_the_draft(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    code = main(["serve", str(CONFIGS / "MiMo-7B-Base"), "--machine", "h200", "--prompt", "1024", "--output", "128",
                 "--batch", "8", "--mtp", "1", "--acceptance", "0.9", "--json"])
    spec = json.loads(capsys.readouterr().out)["speculative"]
    assert code == 0
    # (1 − a^(k+1)) / (1 − a) tokens a step (Leviathan et al., 2023): 1.9 at k = 1, a = 0.9
    assert spec["expected_tokens_per_step"] == pytest.approx((1 - 0.9 ** 2) / (1 - 0.9), rel=1e-9)
    assert spec["speedup"] > 1.0


@pytest.mark.parametrize("change, match", [
    ({"use_mrope": True}, "field 'use_mrope' true is not read"),
    ({"attention_bias": False}, "field 'attention_bias' false is not read"),
    ({"num_nextn_predict_layers": -1}, "field 'num_nextn_predict_layers'")])
def test_hostile_mimo_7b_fields(change: dict[str, Any], match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**raw("MiMo-7B-Base"), **change})


# --- Qwen3.6's output_gate_type -------------------------------------------------------------------------

def test_qwen3_6_output_gate_type_swish_is_the_silu_gate_transformers_runs() -> None:
    # nvidia/Qwen3.6-27B-NVFP4 says output_gate_type "swish": the Gated DeltaNet's gated RMSNorm activation,
    # SiLU in transformers' Qwen3_5RMSNormGated (swish is SiLU); leaving it out means the same
    bare = raw("Qwen3.6-27B-NVFP4")
    assert bare["text_config"]["output_gate_type"] == "swish"
    without = copy.deepcopy(bare)
    del without["text_config"]["output_gate_type"]
    a, b = config_from_dict(bare), config_from_dict(without)
    assert a.param_counts() == b.param_counts() and a.linear_attention == b.linear_attention


@pytest.mark.parametrize("gate", ["sigmoid", "relu"])
def test_another_output_gate_type_is_refused(gate: str) -> None:
    bad = raw("Qwen3.6-27B-NVFP4")
    bad["text_config"]["output_gate_type"] = gate
    with pytest.raises(RooflineError, match=f"field 'output_gate_type' '{gate}' is not read"):
        config_from_dict(bad)


# --- Step 3.7 -----------------------------------------------------------------------------------------

def test_step_3_7_is_refused_naming_its_sliding_heads() -> None:
    with pytest.raises(RooflineError, match="field 'attention_other_setting' is missing: the sliding layers' own"):
        load_config(str(CONFIGS / "Step-3.7-Flash"))


def test_step_3_7_with_its_sliding_heads_is_refused_naming_the_head_wise_gate() -> None:
    given = {**raw("Step-3.7-Flash"), "attention_other_setting": {"num_attention_heads": 96}}
    with pytest.raises(RooflineError, match="field 'use_head_wise_attn_gate'"):
        config_from_dict(given)
