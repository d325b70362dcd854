"""Our prefill FLOPs and parameters for gpt-oss, Llama 4, Qwen3-Next, Qwen3.5 and GLM-4.5 against transformers
5.24 (issue 22: each architecture's FLOPs against FlopCounterMode on a tiny random model of the same config, where
transformers has it): tiny configs, one prefill, our matrix-unit FLOPs (every position's logits) against
FlopCounterMode's, each difference of convention derived below from transformers' own code. The configs and
the attention's masked pairs are tests/test_trace_today.py's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from flopcount import hf_param_count, hf_prefill_flop, our_prefill_matrix_flop
from roofline.errors import RooflineError
from roofline.models import config_from_dict
from test_trace_today import CASES

pytestmark = pytest.mark.torch

_CASE = {name: (raw, tokens, masked) for name, raw, tokens, masked in CASES}


@pytest.fixture(autouse=True)
def _torch() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers", minversion="5")


def test_gpt_oss_flops_and_parameters() -> None:
    """The one difference is the attention convention: windows of 8 on the sliding layers, causal on the full
    ones (the masked pairs × 2·H·(d + dv)); the sinks and the clamped SwiGLU experts' biases count alike."""
    raw, tokens, masked = _CASE["gpt-oss"]
    assert our_prefill_matrix_flop(copy.deepcopy(raw), tokens) == hf_prefill_flop(copy.deepcopy(raw), tokens) - masked
    assert config_from_dict(copy.deepcopy(raw)).total_params == hf_param_count(copy.deepcopy(raw))


def test_llama_4_flops_and_parameters() -> None:
    """transformers' Llama4TextMoe runs every expert on every token, each weighted by its router score (0 for
    the experts not picked: `routed_in = hidden_states.repeat(E, 1) * router_scores`), where we count the
    top-k picked: FlopCounterMode counts (E − k)·T·(2·h·2I + 2·I·h) more on each MoE layer: E = 4, k = 1,
    T = 16, h = 64, I = 32, on layers 2 and 4 (interleave_moe_layer_step 2)."""
    raw, tokens, masked = _CASE["llama-4"]
    dense_experts = 2 * (4 - 1) * tokens * (2 * 64 * 2 * 32 + 2 * 32 * 64)
    assert our_prefill_matrix_flop(copy.deepcopy(raw), tokens) == (
        hf_prefill_flop(copy.deepcopy(raw), tokens) - masked - dense_experts)
    assert config_from_dict(copy.deepcopy(raw)).total_params == hf_param_count(copy.deepcopy(raw))


@pytest.mark.parametrize("name", ["qwen3-next", "qwen3.5"])
def test_gated_deltanet_flops_and_parameters(name: str) -> None:
    """Qwen3-Next, and a text-only Qwen3.5 config (model_type qwen3_5_text, transformers' Qwen3_5TextConfig)
    read as the wrapper's text_config is. Two differences beside attention's, on each of the 2 Gated DeltaNet
    layers (one chunk of C = 64):
    - its short convolution, an aten.convolution FlopCounterMode counts at 2·C_out·K·(T + K − 1) (padding
      K − 1 each side), which we count on the vector lanes: C_out = 2·2·16 + 4·16 = 128 channels, K = 4;
    - the UT transform: transformers' torch_chunk_gated_delta_rule solves it, torch.linalg.solve_triangular
      (A, v_beta) and (A, decayed k_beta), which FlopCounterMode does not count; we count flash-linear-
      attention's chunk_gated_delta_rule, which forms A⁻¹ and multiplies both: 2·C·(d_k + d_v) more per token
      and value head, 4 value heads of 16."""
    raw, tokens, masked = _CASE[name]
    conv = 2 * (2 * 128 * 4 * (tokens + 3))
    ut = 2 * (2 * 64 * (16 + 16) * 4 * tokens)
    assert our_prefill_matrix_flop(copy.deepcopy(raw), tokens) == (
        hf_prefill_flop(copy.deepcopy(raw), tokens) - masked - conv + ut)
    assert config_from_dict(copy.deepcopy(raw)).total_params == hf_param_count(copy.deepcopy(raw))


# GLM-4.5-Air's config.json (tests/fixtures/configs/GLM-4.5-Air); GLM-4.5 from the same fields at the widths
# Megatron-Bridge documents for zai-org/GLM-4.5 (pufanyi/Megatron-Bridge docs/models/llm/glm45.md: 92 layers,
# the first 3 dense, hidden 5120, FFN 12288, 160 experts of 1536, QK LayerNorm)
AIR = "tests/fixtures/configs/GLM-4.5-Air"


def test_glm_4_5_parameters_against_the_cards() -> None:
    """zai-org's cards: GLM-4.5-Air 106B total, 12B active; GLM-4.5 355B total, 32B active. Ours, the main stack
    (the MTP layer apart) and active without the embedding and head tables (2·151552·h):
    Air 106.85 B and 12.18 B; GLM-4.5 352.80 B and 32.08 B."""
    from roofline.models import load_config

    air = load_config(AIR)
    big = config_from_dict({**json.loads((Path(AIR) / "config.json").read_text()), "hidden_size": 5120,
                            "num_hidden_layers": 92, "first_k_dense_replace": 3, "intermediate_size": 12288,
                            "n_routed_experts": 160, "moe_intermediate_size": 1536, "use_qk_norm": True})
    for c, total, active in ((air, 106e9, 12e9), (big, 355e9, 32e9)):
        p = c.param_counts()
        mtp = sum(v for k, v in p.parts.items() if k.startswith("mtp"))
        tables = 2 * 151552 * c.hidden_size
        assert (p.total - mtp) == pytest.approx(total, rel=0.01)
        assert (p.active - tables) == pytest.approx(active, rel=0.02)
    # the attention by hand (Air): q, k, v with biases over 96 + 2·8 heads of 128, o_proj without, 46 layers
    assert air.param_counts().parts["attention"] == 46 * (4096 * (96 + 16) * 128 + 96 * 128 * 4096)
    assert air.rotary_dims == 64  # partial_rotary_factor 0.5 of 128


def test_glm_4_5_flops_and_parameters_against_transformers() -> None:
    """The tiny GLM-4.5 of tests/test_trace_today.py (4 layers, the first dense, 4 routed experts and a shared
    one, q/k norms, partial RoPE): the one difference is the attention convention."""
    raw, tokens, masked = _CASE["glm-4.5"]
    assert our_prefill_matrix_flop(copy.deepcopy(raw), tokens) == hf_prefill_flop(copy.deepcopy(raw), tokens) - masked
    assert config_from_dict(copy.deepcopy(raw)).total_params == hf_param_count(copy.deepcopy(raw))


@pytest.mark.parametrize("key, value, match", [
    ("attention_bias", "yes", "field 'attention_bias' must be true or false"),
    ("partial_rotary_factor", 0.3, "field 'partial_rotary_factor' must be a number in \\(0, 1\\]"),
    ("n_routed_experts", 0, "field 'n_routed_experts' must be a positive integer"),
])
def test_hostile_glm_4_5_fields(key: str, value: object, match: str) -> None:
    raw = json.loads((Path(AIR) / "config.json").read_text())
    with pytest.raises(RooflineError, match=match):
        config_from_dict({**raw, key: value})
