"""Hybrid models with linear attention (Gated DeltaNet) from their own config.json: Qwen3.5
(tests/fixtures/configs, sources in its README). Parameters against the model cards, the KV cache
per token and the state per sequence by hand from the config, the DeltaNet FLOPs by hand (linear in
tokens), tensor parallelism over its heads, and a hostile config per new field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.models import analyze_model, build_graph, config_from_dict, load_config
from roofline.parallel import Split
from roofline.vocab import Unit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
BIG = str(CONFIGS / "Qwen3.5-397B-A17B")


def raw(folder: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / folder / "config.json").read_text())
    return data


@pytest.mark.parametrize(("folder", "total", "active"), [
    # Qwen3.5 model cards (huggingface.co/Qwen): 397B total with 17B activated; 27B dense (the main model:
    # its multi-token-prediction layer, in the checkpoint's memory, is test_models_mtp.py's)
    ("Qwen3.5-397B-A17B", 397e9, 17e9),
    ("Qwen3.5-27B", 27e9, None),
])
def test_qwen3_5_parameters_match_the_model_card(folder: str, total: float, active: float | None) -> None:
    cfg = load_config(str(CONFIGS / folder))
    mtp = sum(n for p, n in cfg.param_counts().parts.items() if p.startswith("mtp"))
    assert round((cfg.total_params - mtp) / 1e9) == total / 1e9  # the cards give whole billions
    if active is not None:
        assert round(cfg.active_params / 1e9) == active / 1e9


def test_qwen3_5_397b_layers_by_hand() -> None:
    cfg = load_config(BIG)
    # 60 layers: three Gated DeltaNet, then one gated full attention (layer_types), 15 times
    assert (cfg.attention_layers(cfg.layer_kinds[0]), cfg.kv_layers) == (45, 15)
    parts = cfg.param_counts().parts
    h = 4096
    # Gated DeltaNet: in_proj q, k (16·128 each), v, z (64·128 each), β, a (64 each); conv 4 taps over
    # 2·16·128 + 64·128 = 12,288 channels; dt_bias, A_log (64 each); gated-norm gain 128; out_proj
    in_width = 2 * 16 * 128 + 2 * 64 * 128 + 2 * 64
    per_linear = h * in_width + 12_288 * 4 + 2 * 64 + 128 + 64 * 128 * h
    assert parts["linear_attention"] == 45 * per_linear
    # gated attention: q_proj 2·32·256 (query and gate), k and v 2·256 each, o_proj 32·256·h
    assert parts["attention"] == 15 * (h * (2 * 32 + 2 * 2) * 256 + 32 * 256 * h)
    # router 512 experts + the shared expert's gate (h -> 1)
    assert parts["router"] == 60 * h * (512 + 1)


def test_kv_cache_per_token_and_state_per_sequence_by_hand() -> None:
    cfg = load_config(BIG)
    # KV: only the 15 full-attention layers, 2 KV heads · 256 · K and V · 2 bytes
    assert cfg.kv_cache_bytes_per_token() == 15 * 2 * 2 * 256 * 2 == 30_720
    # state per sequence and DeltaNet layer: recurrent 64 heads · 128 · 128 in float32 (mamba_ssm_dtype),
    # conv (4 − 1) · 12,288 channels in bf16
    state = 45 * (64 * 128 * 128 * 4 + 3 * 12_288 * 2)
    assert cfg.state_bytes_per_sequence() == state == 192_061_440
    # the memory fit: batch · (tokens · KV per token + state), whatever the context
    assert cfg.kv_cache_bytes(8, 8192) == 8 * (8192 * 30_720 + state)
    # read as qwen3_moe (every layer full attention, no state) the KV cache would be 4× (issue 22)
    assert 60 * 2 * 2 * 256 * 2 == 4 * cfg.kv_cache_bytes_per_token()


def _delta(cfg: Any, phase: str, batch: int, seq: int) -> Any:
    return next(op for op in build_graph(cfg, phase, batch, seq).graph.ops if op.name == "linear_attn.delta_rule")


def test_deltanet_flops_are_linear_in_tokens() -> None:
    cfg = load_config(BIG)
    dk = dv = 128
    # decode, recurrent: 7·dk·dv per token and value head, whatever the context
    for context in (1024, 65536):
        op = _delta(cfg, "decode", 8, context)
        assert sum(op.flop_by_unit.values()) == 7 * dk * dv * 64 * 8
    # prefill, chunked at C = 64: (2·C·(3·dk + 2·dv) + 6·dk·dv) on the matrix units + C²/3 per token and head
    per_token = 2 * 64 * (3 * dk + 2 * dv) + 6 * dk * dv + 64 * 64 / 3
    a, b = _delta(cfg, "prefill", 1, 4096), _delta(cfg, "prefill", 1, 8192)
    assert sum(a.flop_by_unit.values()) == pytest.approx(per_token * 64 * 4096, rel=1e-12)
    assert sum(b.flop_by_unit.values()) == pytest.approx(2 * sum(a.flop_by_unit.values()), rel=1e-12)
    # decode reads and writes the float32 state of each sequence: 8 · 64 · 128 · 128 · 4 bytes each way
    op = _delta(cfg, "decode", 8, 1024)
    state = [t for t in (*op.inputs, *op.outputs) if t.name == "linear_attn.state"]
    assert [t.bytes for t in state] == [8 * 64 * 128 * 128 * 4] * 2


def test_rope_rotates_a_quarter_of_each_head() -> None:
    # Qwen3.5 rope_parameters.partial_rotary_factor 0.25: 64 of 256 dims; RoPE 3 FLOPs a rotated value
    # on the 32 query and 2 key heads of one token each of 8 sequences
    cfg = load_config(BIG)
    assert cfg.rotary_dims == 64
    op = next(op for op in build_graph(cfg, "decode", 8, 1024).graph.ops if op.name == "qk_norm_rope")
    assert op.flop_by_unit[Unit.VECTOR] == 6 * 8 * (32 + 2) * 256 + 3 * 8 * (32 + 2) * 64  # RMSNorm + RoPE


def test_tensor_parallel_shards_the_linear_heads() -> None:
    cfg = load_config(BIG)
    one = _delta(cfg, "decode", 8, 1024)
    g = build_graph(cfg, "decode", 8, 1024, split=Split(tp=8))
    eight = next(op for op in g.graph.ops if op.name == "linear_attn.delta_rule")
    assert sum(eight.flop_by_unit.values()) * 8 == sum(one.flop_by_unit.values())  # 64/8 value heads a device
    with pytest.raises(RooflineError, match=r"^tp 32 does not divide .*linear_num_key_heads 16"):
        build_graph(cfg, "decode", 8, 1024, split=Split(tp=32))


def test_the_vision_tower_is_counted_in_memory_not_in_the_step() -> None:
    cfg = load_config(BIG)
    v = raw("Qwen3.5-397B-A17B")["vision_config"]
    w, inter, depth = v["hidden_size"], v["intermediate_size"], v["depth"]  # 1152, 4304, 27
    # Qwen3_5VisionModel: Conv3d patch embedding, learned positions, blocks, 2x2 merger (transformers)
    patch = 3 * 2 * 16 * 16 * w + w
    block = 2 * 2 * w + (3 * w * w + 3 * w) + (w * w + w) + (w * inter + inter) + (inter * w + w)
    merger = 2 * w + (4 * w) ** 2 + 4 * w + 4 * w * 4096 + 4096
    assert cfg.param_counts().parts["vision"] == patch + 2304 * w + depth * block + merger
    assert cfg.param_counts().active_parts["vision"] == 0
    a = analyze_model(BIG, "h200", "decode", 8, 8192, split=Split(tp=8))
    parts = cfg.param_counts().parts  # every device of the split holds the whole tower (not sharded here)
    assert a.memory.weights_bytes > parts["vision"] * 2
    assert not any("vision" in op.name for op in a.model.graph.ops)


@pytest.mark.parametrize(("change", "says"), [
    ({"linear_num_value_heads": 24}, "'linear_num_value_heads' \\(24\\) must be a multiple of linear_num_key_heads"),
    ({"mamba_ssm_dtype": "int8"}, "'mamba_ssm_dtype' must be"),
    ({"layer_types": ["linear_attention"] * 59 + ["mystery"]}, "'layer_types' must be a list of 60"),
    ({"shared_expert_intermediate_size": 1500}, "'shared_expert_intermediate_size' \\(1500\\) must be a multiple"),
    ({"mlp_only_layers": [3]}, "'mlp_only_layers' .* is not read"),
    ({"linear_conv_kernel_dim": 0}, "'linear_conv_kernel_dim' must be a positive integer"),
    ({"rope_parameters": {"partial_rotary_factor": 1.5}}, "'partial_rotary_factor' must be a number in \\(0, 1\\]"),
])
def test_a_hostile_qwen3_5_field_is_refused_by_name(change: dict[str, Any], says: str) -> None:
    r = raw("Qwen3.5-397B-A17B")
    with pytest.raises(RooflineError, match=says):
        config_from_dict({**r, "text_config": {**r["text_config"], **change}})
