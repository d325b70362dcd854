"""Today's models, second part (issue 22): Qwen3-VL and Llama 4's vision towers, Gemma 4, MiniMax M2,
LatentMoE (Nemotron 3 Super/Ultra), MIXED_PRECISION checkpoints, the phi3 and olmo2 aliases, and the
decode limit with per-sequence recurrent state. Every expected figure is derived here by hand from the
config (tests/fixtures/configs, sources in its README) or taken from the model card cited beside it."""

from __future__ import annotations

import pytest

from roofline.models import analyze_model, load_config

# --- the decode limit counts the recurrent state ---------------------------------------------------

def test_decode_limit_reads_and_writes_each_sequences_recurrent_state() -> None:
    # Qwen3.5-397B-A17B (its config.json): 45 Gated DeltaNet layers (64 value heads, 16 key heads of
    # dk = dv = 128, conv of 4 taps) and 15 gated full-attention layers (32 heads, 2 KV heads of 256)
    a = analyze_model("qwen3.5-397b-a17b", "h200", "decode", 8, 8192)
    lim = a.decode_limit
    state = 45 * (64 * 128 * 128 * 4 + (2 * 16 * 128 + 64 * 128) * 3 * 2)  # fp32 state + bf16 conv state
    assert state == 192_061_440
    kv = 15 * 2 * 2 * 256 * 2 * 8192  # K and V, 2 heads of 256, BF16, 8192 tokens, 15 layers
    recurrent = 45 * 7 * 128 * 128 * 64  # 7·dk·dv per value head and token
    attention = 15 * 2 * 32 * (256 + 256) * 8192
    expected = (2 * a.config.matmul_params + attention + recurrent) / (kv + 2 * state)
    assert lim.flop_per_byte == pytest.approx(expected, rel=1e-12)
    # it was 145.8 FLOP/B without the state (issue 22); the graph's totals, activations included, are
    # within 10% below the formula's (the activations are per sequence too)
    assert lim.flop_per_byte == pytest.approx(58.22, abs=0.01)
    assert 0.9 * lim.flop_per_byte < a.crossover.limit_flop_per_byte < lim.flop_per_byte


def test_the_decode_step_reads_and_writes_the_state() -> None:
    # the delta rule reads S [B, 64, 128, 128] fp32 and writes it back: 2·8·4,194,304 B plus its inputs
    a = analyze_model("qwen3.5-397b-a17b", "h200", "decode", 8, 8192, plan="none")
    rule = next(p for p in a.placements if p.name == "linear_attn.delta_rule")
    state = 8 * 64 * 128 * 128 * 4
    assert 2 * state < rule.bytes < 2 * state * 1.01
    # prefill writes the final state once, never reads one
    a = analyze_model("qwen3.5-397b-a17b", "h200", "prefill", 1, 4096, plan="none")
    rule = next(p for p in a.placements if p.name == "linear_attn.delta_rule")
    assert state / 8 < rule.bytes < state / 8 + 4096 * 64 * 128 * 2 * 8


def test_nemotron_h_decode_limit_counts_mamba_state() -> None:
    cfg = load_config("nemotron-3-nano")
    mb = cfg.mamba
    assert mb is not None
    a = analyze_model("nemotron-3-nano", "h200", "decode", 8, 8192)
    lim = a.decode_limit
    layers = cfg.attention_layers("mamba")
    assert lim.recurrent_flop_per_token == 5 * mb.head_dim * mb.state_dim * mb.heads * layers
    assert lim.state_bytes_per_sequence == 2 * cfg.state_bytes_per_sequence(2.0)
    assert lim.state_bytes_per_sequence == 2 * 49_082_368  # Nemotron 3 Nano's state (test_models_nemotron_h)
