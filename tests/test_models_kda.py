"""Kimi Linear (KDA and MLA layers, DeepSeek-V3's experts) from its config.json, and Kimi K3 refused naming
the field it cannot read (issue 22). Parameters against the model card and transformers' own count, the KV
cache per token and the state per sequence by hand from the config, KDA's FLOPs by hand (linear in tokens),
tensor parallelism over its heads, FlopCounterMode on a tiny random KimiLinear, a hostile config per field."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flopcount import hf_param_count, hf_prefill_flop, masked_pairs, our_prefill_matrix_flop
from roofline.errors import RooflineError
from roofline.models import build_graph, config_from_dict, load_config
from roofline.parallel import Split

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
KIMI = str(CONFIGS / "Kimi-Linear-48B-A3B-Instruct")
h, V, H, d = 2304, 163840, 32, 128  # hidden, vocabulary, KDA heads and head_dim (linear_attn_config)
hd = H * d  # 4096


def raw(folder: str = "Kimi-Linear-48B-A3B-Instruct") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


def test_kimi_linear_parameters_by_hand_and_against_the_card() -> None:
    cfg = load_config(KIMI)
    # transformers KimiLinearDeltaAttention: q, k, v h -> H·d; conv 3·H·d channels × 4 taps; f_a, g_a h -> d;
    # f_b, g_b d -> H·d; dt_bias H·d; A_log H; b_proj h -> H; o_norm d; o_proj H·d -> h
    kda = 3 * h * hd + 3 * hd * 4 + 2 * (h * d + d * hd) + hd + H + h * H + d + hd * h
    # MLA with q_lora_rank null: q_proj h -> 32·(128 + 64), kv_a h -> 512 + 64, kv_b 512 -> 32·(128 + 128), o_proj
    mla = h * 32 * 192 + h * 576 + 512 * 32 * 256 + 32 * 128 * h
    # 26 MoE layers: router h·256 and its e_score_correction_bias 256, one shared and 256 routed experts of 1024
    moe = h * 256 + 256 + 3 * h * 1024 + 256 * 3 * h * 1024
    # embedding and head, 20 KDA and 7 MLA layers (each + kv_a_layernorm 512), the dense layer 0 (9216), norms
    total = 2 * V * h + 20 * kda + 7 * (mla + 512) + 3 * h * 9216 + 26 * moe + (2 * 27 + 1) * h
    assert cfg.total_params == total == 49_122_681_728
    # the model card (huggingface.co/moonshotai/Kimi-Linear-48B-A3B-Instruct): 48B total, 3B activated;
    # "48B" is its nominal name: transformers' KimiLinearForCausalLM holds 49.12 B (test below)
    assert 48e9 <= cfg.total_params < 49.5e9
    active = cfg.active_params - 2 * V * h  # 8 of 256 experts a token, without the embedding and the head
    assert round(active / 1e9) == 3
    assert cfg.layer_groups() == (("KDA", 20), ("MLA (no RoPE)", 7), ("dense MLP", 1), ("MoE", 26))


@pytest.mark.torch
def test_kimi_linear_parameters_equal_transformers() -> None:
    pytest.importorskip("transformers", minversion="5")
    assert hf_param_count(raw()) == load_config(KIMI).total_params


def test_kv_cache_per_token_and_state_per_sequence_by_hand() -> None:
    cfg = load_config(KIMI)
    # KV: the 7 MLA layers (full_attn_layers) keep the latent, kv_lora_rank + qk_rope_head_dim = 576, in bf16
    assert cfg.kv_cache_bytes_per_token() == 7 * 576 * 2 == 8064
    # state per sequence and KDA layer: H·d·d in float32, conv (4 − 1) taps of 3·H·d channels in bf16
    state = 20 * (32 * 128 * 128 * 4 + 3 * (3 * 4096) * 2)
    assert cfg.state_bytes_per_sequence() == state == 43_417_600
    assert cfg.kv_cache_bytes(4, 65536) == 4 * (65536 * 8064 + state)
    # read as every layer MLA (DeepSeek-V3's kimi_k2) the cache would be 27/7 of it and the state missing
    assert 27 * 576 * 2 == pytest.approx(3.857 * cfg.kv_cache_bytes_per_token(), rel=1e-3)


def _delta(cfg: Any, phase: str, batch: int, seq: int, split: Split | None = None) -> Any:
    g = build_graph(cfg, phase, batch, seq, split=split) if split else build_graph(cfg, phase, batch, seq)
    return next(op for op in g.graph.ops if op.name == "linear_attn.delta_rule")


def test_kda_flops_are_linear_in_tokens() -> None:
    cfg = load_config(KIMI)
    # decode, recurrent: per token and head Gated DeltaNet's 7·dk·dv + the channel gate's 6·dk, any context
    for context in (1024, 262144):
        op = _delta(cfg, "decode", 8, context)
        assert sum(op.flop_by_unit.values()) == (7 * d * d + 6 * d) * H * 8
    # prefill, chunked at C = 64: (2·C·(3·dk + 2·dv) + 6·dk·dv) on the matrix units; C²/3 (the triangular
    # solve) + 6·dk (the gate) + 8·dk (the decay folded into q and k) on the vector lanes, per token and head
    per_token = 2 * 64 * (5 * d) + 6 * d * d + 64 * 64 / 3 + 14 * d
    a, b = _delta(cfg, "prefill", 1, 4096), _delta(cfg, "prefill", 1, 8192)
    assert sum(a.flop_by_unit.values()) == pytest.approx(per_token * H * 4096, rel=1e-12)
    assert sum(b.flop_by_unit.values()) == pytest.approx(2 * sum(a.flop_by_unit.values()), rel=1e-12)
    # decode reads and writes the float32 state: 8 sequences · 32 · 128 · 128 · 4 bytes each way
    state = [t for t in (*_delta(cfg, "decode", 8, 1024).inputs, *_delta(cfg, "decode", 8, 1024).outputs)
             if t.name == "linear_attn.state"]
    assert [t.bytes for t in state] == [8 * 32 * 128 * 128 * 4] * 2


def test_tensor_parallel_shards_the_kda_heads() -> None:
    cfg = load_config(KIMI)
    one, eight = _delta(cfg, "decode", 8, 1024), _delta(cfg, "decode", 8, 1024, Split(tp=8))
    assert sum(eight.flop_by_unit.values()) * 8 == sum(one.flop_by_unit.values())  # 32/8 heads a device
    with pytest.raises(RooflineError, match=r"^tp 64 does not divide .*32 query heads"):
        build_graph(cfg, "decode", 8, 1024, split=Split(tp=64))
    tiny = config_from_dict(copy.deepcopy(TINY))  # 4 MLA heads, 2 KDA heads: tp 4 divides the first only
    with pytest.raises(RooflineError, match=r"^tp 4 does not divide .*\(linear_attn_config num_heads 2\)"):
        build_graph(tiny, "decode", 8, 1024, split=Split(tp=4))


def test_mla_runs_no_rope_with_mla_use_nope() -> None:
    ops = {op.name: op for op in build_graph(load_config(KIMI), "decode", 1, 1024).graph.ops}
    assert ops["q_rope"].flop_by_unit.get("vector", 0.0) == 0.0  # NoPE: the rope key shared, never rotated


TINY: dict[str, Any] = dict(
    model_type="kimi_linear", vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
    num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4, num_experts=8, num_experts_per_token=2,
    num_shared_experts=1, kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8,
    v_head_dim=16, mla_use_nope=True, first_k_dense_replace=1, model_max_length=1024, tie_word_embeddings=False,
    pad_token_id=0, bos_token_id=1, eos_token_id=2,
    linear_attn_config={"kda_layers": [1, 2, 4], "full_attn_layers": [3], "num_heads": 2, "head_dim": 16,
                        "short_conv_kernel_size": 4})


@pytest.mark.torch
def test_kimi_linear_flops_against_flop_counter() -> None:
    pytest.importorskip("transformers", minversion="5")
    tokens = 64  # one KDA chunk: transformers' chunk_kimi_delta_attention pads to multiples of 64
    reference = hf_prefill_flop(copy.deepcopy(TINY), tokens)
    # Where FlopCounterMode's count of transformers' torch code differs from ours, each derived:
    # - its attention's whole square: the masked pairs × 2·H·(d_qk + d_v) on the 1 MLA layer
    attention = masked_pairs(tokens) * 2 * 4 * (24 + 16)
    # - its depthwise conv, an aten.convolution it counts at 2·C_out·K·(T + K − 1) (padding K − 1 each side),
    #   which we count on the vector lanes: 3·2·16 = 96 channels, 4 taps, 3 KDA layers
    conv = 3 * 2 * 96 * 4 * (tokens + 3)
    # - K·Kᵀ and Q·Kᵀ inside the chunk with the channel decay between them: transformers multiplies them
    #   elementwise, fla's chunk_kda on the matrix units (the decay folded into q and k): 2·(2·C·dk) per token
    #   and head, 2 heads of 16, 3 KDA layers
    intra = 3 * 2 * tokens * 2 * (2 * 64 * 16)
    assert our_prefill_matrix_flop(copy.deepcopy(TINY), tokens) == pytest.approx(
        reference - attention - conv + intra, rel=1e-9)


@pytest.mark.parametrize("change, match", [
    ({"linear_attn_config": None}, "field 'linear_attn_config' must be an object"),
    ({"linear_attn_config": {"kda_layers": [0, 1, 2], "full_attn_layers": [3], "num_heads": 2, "head_dim": 16,
                             "short_conv_kernel_size": 4}}, "field 'kda_layers' must be a list of distinct layer"),
    ({"linear_attn_config": {"kda_layers": [1, 2, 3], "full_attn_layers": [3], "num_heads": 2, "head_dim": 16,
                             "short_conv_kernel_size": 4}}, "field 'full_attn_layers' and kda_layers must together"),
    ({"linear_attn_config": {**TINY["linear_attn_config"], "gate_lower_bound": 5.0}},
     "field 'gate_lower_bound' must be a negative number"),  # K3's -5.0 is read (test_models_kimi_k3.py)
    ({"linear_attn_config": {**TINY["linear_attn_config"], "gate_upper_bound": 5.0}},
     "field 'gate_upper_bound' is not read"),
    ({"linear_attn_config": {**TINY["linear_attn_config"], "num_heads": 0}}, "field 'num_heads' must be a positive"),
    ({"mla_use_output_gate": "yes"}, "field 'mla_use_output_gate' must be true or false"),
    ({"routed_expert_hidden_size": 10**6}, "field 'routed_expert_hidden_size' \\(1000000\\) must be at most"),
    ({"moe_router_activation_func": "softmax"}, "field 'moe_router_activation_func' 'softmax' is not read"),
    ({"moe_layer_freq": 2}, "field 'moe_layer_freq' other than 1"),
    ({"num_nextn_predict_layers": 1}, "field 'num_nextn_predict_layers' is not 0"),
    ({"hidden_act": "situ", "activation_situ_beta": 0}, "field 'activation_situ_beta' must be a positive"),
    ({"hidden_act": "gelu_situ"}, "hidden_act 'gelu_situ' is not supported"),
    ({"num_experts_per_token": 9}, "field 'num_experts_per_token' \\(9\\) must be at most num_experts")])
def test_hostile_kimi_linear_fields(change: dict[str, Any], match: str) -> None:
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**copy.deepcopy(TINY), **change})


def test_kimi_k3_reads_a_kimi_linear_text_config_only() -> None:
    # Kimi K3 (analysed: test_models_kimi_k3.py) wraps a kimi_linear text_config; any other is refused by name
    k3 = raw("Kimi-K3")
    k3["text_config"] = {**k3["text_config"], "model_type": "deepseek_v3"}
    with pytest.raises(RooflineError, match="text_config's model_type 'deepseek_v3' is not read"):
        config_from_dict(k3)


def test_an_fp8_kimi_linear_keeps_every_self_attn_module_in_bf16() -> None:
    # Kimi Linear names both its MLA and its KDA layers' modules self_attn (transformers KimiLinearDecoderLayer):
    # modules_to_not_convert "self_attn" keeps both parts in 16 bits, not the MLA layers' alone
    q = {"quant_method": "fp8", "weight_block_size": [128, 128],
         "modules_to_not_convert": ["lm_head", "model.layers.*.self_attn"]}
    cfg = config_from_dict({**raw(), "quantization_config": q})
    kept = dict(cfg.unquantized)
    assert kept["attention"] == kept["linear_attention"] == kept["lm_head"] == 1.0
    # one projection of a KDA layer is not read: said, not silently quantized
    one = {**q, "modules_to_not_convert": ["model.layers.0.self_attn.q_proj"]}
    cfg = config_from_dict({**raw(), "quantization_config": one})
    assert any("not read (model.layers.0.self_attn.q_proj" in w for w in cfg.load_warnings)


def test_the_text_names_the_recurrent_state_kda() -> None:
    out = subprocess.run([sys.executable, "-m", "roofline.cli", "model", KIMI, "--machine", "h200", "--phase", "decode",
                          "--batch", "8", "--context", "8192"], capture_output=True, text=True, check=True).stdout
    # 20 KDA layers' state, 43,417,600 B a sequence (test_kv_cache_per_token_and_state_per_sequence_by_hand)
    assert "+ recurrent state (KDA layers) 43,417,600 B" in out
