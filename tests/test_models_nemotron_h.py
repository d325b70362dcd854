"""Nemotron-H and Nemotron 3 (`nemotron_h`) from their own config.json (tests/fixtures/configs, hub
pages in its README): Mamba2 as a layer kind, hybrid_override_pattern, ReLU² MLP and experts.
Parameters against the model cards, the KV cache per token and the Mamba2 state per sequence by hand
from the config, the SSD FLOPs by hand (linear in tokens, Dao & Gu arXiv 2405.21060), tensor
parallelism over the Mamba2 heads, the step model against the graph, a hostile config per new field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import StepModel, analyze_model, build_graph, config_from_dict, load_config, model_dtypes
from roofline.parallel import Split, deploy
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
NANO = str(CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
H56 = str(CONFIGS / "Nemotron-H-56B-Base-8K")


def raw(folder: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


def _op(cfg: Any, phase: str, batch: int, seq: int, name: str, split: Split | None = None) -> Any:
    return next(op for op in build_graph(cfg, phase, batch, seq, split=split).graph.ops if op.name == name)


def test_nemotron_3_nano_parameters_match_the_model_card() -> None:
    # huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: "31.6B total parameters, approximately
    # 3.2B active (3.6B including embeddings)"
    cfg = load_config(NANO)
    assert round(cfg.total_params / 1e8) == 316
    embedding = 131_072 * 2688
    assert round(cfg.active_params / 1e8) == 36
    assert round((cfg.active_params - embedding) / 1e8) == 32


def test_nemotron_h_56b_parameters_match_the_paper() -> None:
    # Nemotron-H (arXiv 2504.03624) Table 1: Nemotron-H-56B, 118 layers: 54 Mamba2, 10 attention, 54 FFN
    cfg = load_config(H56)
    assert round(cfg.total_params / 1e9) == 56
    assert cfg.layer_groups() == (("Mamba2", 54), ("full attention (no RoPE)", 10), ("ReLU² MLP", 54))


def test_nano_layers_by_hand() -> None:
    cfg = load_config(NANO)
    # MEMEM*E...: 23 Mamba2, 6 attention, 23 MoE blocks, one RMSNorm each
    assert cfg.layer_groups() == (("Mamba2", 23), ("full attention (no RoPE)", 6), ("MoE", 23))
    parts, h = cfg.param_counts().parts, 2688
    # Mamba2: inner 64 heads · 64 = 4096; conv over x, B, C = 4096 + 2·8·128 = 6144 channels;
    # in_proj to z (4096), x B C (6144), dt (64); out_proj 4096·h
    assert parts["mamba"] == 23 * (h * (4096 + 6144 + 64) + 4096 * h)
    # conv taps 4 + bias, dt_bias, A_log, D per head, the gated norm's gain over 4096
    assert parts["mamba_conv_and_gains"] == 23 * (6144 * 5 + 3 * 64 + 4096)
    # GQA 32 query, 2 KV heads of 128, no bias
    assert parts["attention"] == 6 * (h * (32 + 2 * 2) * 128 + 32 * 128 * h)
    # ReLU² experts: up and down only (2·h·f), 128 of them; the shared MLP 3712 wide; router h·128
    assert parts["experts"] == 23 * 128 * 2 * h * 1856
    assert parts["shared_experts"] == 23 * 2 * h * 3712
    assert parts["router"] == 23 * h * 128
    assert parts["biases"] == 23 * 128  # e_score_correction_bias
    assert parts["norms"] == (23 + 6 + 23) * h + h  # one per block, and norm_f
    assert cfg.param_counts().active_parts["experts"] == 23 * 6 * 2 * h * 1856


def test_kv_cache_per_token_and_mamba_state_per_sequence_by_hand() -> None:
    nano = load_config(NANO)
    # KV: only the 6 attention blocks, 2 KV heads · 128 · K and V · 2 bytes
    assert nano.kv_cache_bytes_per_token() == 6 * 2 * 2 * 128 * 2 == 6144
    # per Mamba2 block and sequence: SSM state 64 heads · 64 · 128 in float32 (mamba_ssm_cache_dtype),
    # conv (4 − 1) · 6144 channels in bf16
    state = 23 * (64 * 64 * 128 * 4 + 3 * 6144 * 2)
    assert nano.state_bytes_per_sequence() == state == 49_082_368
    assert nano.kv_cache_bytes(8, 8192) == 8 * (8192 * 6144 + state)
    big = load_config(H56)
    assert big.kv_cache_bytes_per_token() == 10 * 2 * 8 * 128 * 2 == 40_960
    # 256 heads · 64 · 256 in float32 (no mamba_ssm_cache_dtype: said in a warning); conv over
    # 256·64 + 2·8·256 = 20,480 channels
    assert big.state_bytes_per_sequence() == 54 * (256 * 64 * 256 * 4 + 3 * 20_480 * 2)
    assert any("mamba_ssm_cache_dtype" in w for w in big.load_warnings)


def test_ssd_flops_are_linear_in_tokens() -> None:
    cfg = load_config(NANO)
    heads, p, n_s, groups, q = 64, 64, 128, 8, 128
    # decode, recurrent: 5·P·N_s per token and head (decay, outer product, add, readout), any context
    for context in (1024, 65536):
        op = _op(cfg, "decode", 8, context, "mamba.ssd")
        assert op.flop_by_unit[Unit.VECTOR] == 5 * p * n_s * heads * 8
    # prefill, chunked SSD at Q = chunk_size 128 (Dao & Gu §6): C·Bᵀ 2·Q·N_s per group, (L∘CBᵀ)·X 2·Q·P,
    # chunk states and their output 2·P·N_s each, per token and head; decay mask Q and state passing P·N_s/Q
    a, b = _op(cfg, "prefill", 1, 4096, "mamba.ssd"), _op(cfg, "prefill", 1, 8192, "mamba.ssd")
    assert a.flop_by_unit[Unit.MATRIX] == (2 * q * n_s * groups + (2 * q * p + 4 * p * n_s) * heads) * 4096
    assert a.flop_by_unit[Unit.VECTOR] == pytest.approx((q + p * n_s / q) * heads * 4096, rel=1e-12)
    assert b.flop_by_unit[Unit.MATRIX] == 2 * a.flop_by_unit[Unit.MATRIX]
    # decode reads and writes each sequence's float32 state: 8 · 64 · 64 · 128 · 4 bytes each way
    op = _op(cfg, "decode", 8, 1024, "mamba.ssd")
    assert [t.bytes for t in (*op.inputs, *op.outputs) if t.name == "mamba.ssm_state"] == [8 * 64 * 64 * 128 * 4] * 2


def test_relu2_mlp_and_experts_have_no_gate_and_attention_no_rope() -> None:
    big, nano = load_config(H56), load_config(NANO)
    up = _op(big, "prefill", 1, 1024, "up_proj")
    assert up.flop_by_unit[Unit.MATRIX] == 2 * 1024 * 8192 * 32768  # h -> I, one matrix (no gate)
    act = _op(big, "prefill", 1, 1024, "act")
    assert act.flop_by_unit[Unit.VECTOR] == 2 * 1024 * 32768  # ReLU²: max and square
    experts = _op(nano, "decode", 8, 1024, "experts.gate_up")
    assert experts.flop_by_unit[Unit.MATRIX] == 2 * 8 * 6 * 2688 * 1856  # N·k rows, up only
    write = _op(nano, "decode", 8, 1024, "kv_write")  # NemotronHAttention applies no RoPE
    assert write.flop_by_unit == {}


def test_tensor_parallel_shards_the_mamba_heads_in_both_phases() -> None:
    cfg = load_config(NANO)
    for phase, seq in (("decode", 1024), ("prefill", 2048)):
        one = _op(cfg, phase, 8, seq, "mamba.ssd")
        four = _op(cfg, phase, 8, seq, "mamba.ssd", Split(tp=4))
        assert sum(four.flop_by_unit.values()) * 4 == pytest.approx(sum(one.flop_by_unit.values()), rel=1e-12)
    proj = _op(cfg, "decode", 8, 1024, "mamba.in_proj", Split(tp=4))
    assert proj.outputs[0].shape == (8, (2 * 4096 + 2 * 8 * 128 + 64) // 4)
    with pytest.raises(RooflineError, match=r"^tp 16 does not divide .*mamba_num_heads 64, n_groups 8"):
        build_graph(cfg, "decode", 8, 1024, split=Split(tp=16))


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("split", [None, Split(tp=2), Split(tp=2, ep=2)])
def test_step_model_agrees_with_the_graph(phase: str, split: Split | None) -> None:
    cfg, dt = load_config(NANO), model_dtypes()
    nvls = deploy("dgx-h100", split).nvls  # its NVSwitch reduces: the graph's all-reduces may run NVLS
    fitted = StepModel.fit(cfg, phase, dt, split=split, devices_per_node=8, nvls=nvls)  # checks its own fit
    for b, s in ((2, 700), (16, 5000), (64, 8192)):
        a = analyze_model(cfg, "dgx-h100", phase, b, s, dtypes=dt, split=split)
        r = fitted.evaluate([b], [s], a.machine, a.dtype)
        assert float(r["flop"][0]) == pytest.approx(a.flop, rel=1e-9)
        assert float(r["bytes"][0]) == pytest.approx(a.bytes, rel=1e-9)
        assert float(r["time_s"][0]) == pytest.approx(a.time_s, rel=1e-9)


def test_nvfp4_keeps_its_excluded_mixers_in_16_bits() -> None:
    # hf_quant_config.json exclude_modules: every attention block's q/k/v/o and 6 of the 23 Mamba2 blocks'
    # in_proj and out_proj (layers 4, 11, 18, 25, 32, 41)
    cfg = load_config(str(CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"))
    kept = dict(cfg.unquantized)
    assert kept["attention"] == 1.0
    assert kept["mamba"] == pytest.approx(6 / 23, rel=1e-12)
    assert kept["mamba_conv_and_gains"] == 1.0 and kept["lm_head"] == 1.0


@pytest.mark.parametrize(("change", "says"), [
    ({"hybrid_override_pattern": "MEX"}, "'hybrid_override_pattern' must be a string of M"),
    ({"hybrid_override_pattern": "ME"}, "'hybrid_override_pattern' gives 2 blocks, num_hidden_layers 52"),
    ({"hybrid_override_pattern": None, "layers_block_type": ["mamba", "mystery"]}, "'layers_block_type' must be"),
    ({"mamba_num_heads": 60}, "'n_groups' \\(8\\) must divide mamba_num_heads \\(60\\)"),
    ({"mamba_ssm_cache_dtype": "int8"}, "'mamba_ssm_cache_dtype' must be"),
    ({"ssm_state_size": 0}, "'ssm_state_size' must be a positive integer"),
    ({"mlp_hidden_act": "gelu"}, "'mlp_hidden_act' 'gelu' is not read"),
    ({"mamba_hidden_act": "gelu"}, "'mamba_hidden_act' 'gelu' is not read"),
    ({"moe_latent_size": 4096}, "'moe_latent_size' \\(4096\\) must be at most hidden_size \\(2688\\)"),
    ({"moe_latent_size": 0}, "'moe_latent_size' must be a positive integer"),
    ({"moe_shared_expert_intermediate_size": 1000}, "'moe_shared_expert_intermediate_size' \\(1000\\) must be"),
    ({"n_shared_experts": 2}, "'n_shared_experts' other than 1 is not read"),
    ({"use_bias": True}, "'use_bias' true is not read"),
    ({"mamba_proj_bias": True}, "'mamba_proj_bias' true is not read"),
    ({"residual_in_fp32": True}, "'residual_in_fp32' true is not read"),
    ({"sliding_window": 4096}, "'sliding_window' is not read"),
])
def test_a_hostile_nemotron_h_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**raw("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), **change})
