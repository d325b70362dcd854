"""The tracer on today's architectures as transformers 5.24 runs them (issue 22: "in the tracer's registry
where transformers runs the layer"): gpt-oss, Qwen3-Next, Qwen3.5, Llama 4, GLM-4.5, Gemma 4, Kimi Linear,
MiMo-V2-Flash, DeepSeek-V4, GLM-5 (DeepSeek Sparse Attention), MiniMax-M2, MiniMax-M3 (block-sparse attention)
and Nemotron-H (LatentMoE).

Each tiny random model (CPU, its own attention implementation: eager where transformers picks it, with
attention sinks for gpt-oss and MiMo) runs one prefill under the tracer and under torch's FlopCounterMode.
Two checks a case:
- every ATen op the model runs has a formula in the registry (`Trace.unknown` empty) and none failed;
- the traced matrix FLOPs are FlopCounterMode's less exactly one convention, the registry's attention
  convention: we count the (query, key) pairs the mask keeps, FlopCounterMode the whole square, so
  FlopCounterMode − traced = masked pairs × 2·H·(d_qk + d_v) summed over the attention layers, the masked
  pairs derived by hand below for each layer's mask (causal, sliding window, chunked, compressed).
  Everything else transformers computes (Llama 4's experts run densely on every token, Gated DeltaNet's
  chunked torch fallback, DeepSeek-V4's mHC and indexer scores, the short convolutions) both count alike.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flopcount import hf_prefill_flop, masked_pairs
from test_models_deepseek_v4_torch import TINY as V4_TINY
from test_models_gemma4 import TINY as GEMMA4_TINY
from test_models_glm_torch import TINY as GLM5_TINY
from test_models_kda import TINY as KIMI_LINEAR_TINY
from test_models_minimax_m3_torch import TINY as M3_TINY
from test_models_minimax_m3_torch import _model as minimax_m3_model
from test_models_today_third import MIMO_TINY

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from roofline.tracing import trace  # noqa: E402
from roofline.vocab import Unit  # noqa: E402

pytestmark = pytest.mark.torch

BASE = dict(vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, max_position_embeddings=128, tie_word_embeddings=False)
GDN = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
           linear_conv_kernel_dim=4, partial_rotary_factor=0.25)

T, T_CHUNKED = 16, 64  # prompt tokens; 64 for the chunked linear attentions (one chunk of 64, no padding)
CAUSAL = masked_pairs(T)  # T(T − 1)/2 = 120 pairs a head the causal mask removes
CAUSAL_64 = masked_pairs(T_CHUNKED)  # 2016
W8_OUT = T * T - (8 * 9 // 2 + (T - 8) * 8)  # a window of 8 keeps W(W + 1)/2 + (T − W)·W = 100 of 256: 156 out
PER_PAIR = 2 * 4 * (16 + 16)  # 2·H·(d_qk + d_v): q·kᵀ and p·v over 4 heads of 16

# DeepSeek-V4 (tests/test_models_deepseek_v4_torch.py derives each): a window of 4 keeps 58 pairs; a CSA layer
# (1/4) attends 58 + 22 of its 16 × (16 + 4) rectangle, the HCA layer (1/8) 58 + 10 of 16 × (16 + 2)
V4_MASKED = (16 * 16 - 58) + 2 * (16 * 20 - 80) + (16 * 18 - 68)

CASES: list[tuple[str, dict[str, Any], int, int]] = [
    # (name, config.json, prompt tokens, FlopCounterMode − traced)
    ("gpt-oss", {**BASE, "model_type": "gpt_oss", "intermediate_size": 32, "num_local_experts": 4,
                 "num_experts_per_tok": 2, "sliding_window": 8,
                 "layer_types": ["sliding_attention", "full_attention"] * 2},
     T, (2 * CAUSAL + 2 * W8_OUT) * PER_PAIR),  # 2 full, 2 sliding layers; eager with sinks
    ("qwen3-next", {**BASE, **GDN, "model_type": "qwen3_next", "intermediate_size": 96, "moe_intermediate_size": 32,
                    "shared_expert_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2,
                    "full_attention_interval": 2, "decoder_sparse_step": 1, "mlp_only_layers": []},
     T_CHUNKED, 2 * CAUSAL_64 * PER_PAIR),  # layers 2 and 4 attend; 1 and 3 are Gated DeltaNet
    ("qwen3.5", {**BASE, **GDN, "model_type": "qwen3_5_text", "intermediate_size": 96,
                 "layer_types": ["linear_attention", "full_attention"] * 2},
     T_CHUNKED, 2 * CAUSAL_64 * PER_PAIR),
    # chunks of 8 on the RoPE layers (no_rope_layers 1): 2 chunks of 8·9/2 = 36 pairs kept, 256 − 72 out;
    # the NoPE layer (0) causal
    ("llama-4", {**BASE, "model_type": "llama4_text", "intermediate_size": 32, "intermediate_size_mlp": 96,
                 "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
                 "attention_chunk_size": 8, "no_rope_layers": [1, 1, 1, 0]},
     T, (3 * (T * T - 2 * 36) + CAUSAL) * PER_PAIR),
    ("glm-4.5", {**BASE, "model_type": "glm4_moe", "intermediate_size": 96, "moe_intermediate_size": 32,
                 "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
                 "partial_rotary_factor": 0.5, "n_group": 1, "topk_group": 1, "use_qk_norm": True},
     T, 4 * CAUSAL * PER_PAIR),
    # Gemma 4: 2 full layers of 4 heads of 32 (global_head_dim, K = V) causal, 2 sliding layers of 16 in 8
    ("gemma-4", GEMMA4_TINY, T, 2 * CAUSAL * 2 * 4 * (32 + 32) + 2 * W8_OUT * PER_PAIR),
    # Kimi Linear: 1 MLA layer (layer 3) of 4 heads, q·k over 16 + 8, v 16; 3 KDA layers
    ("kimi-linear", KIMI_LINEAR_TINY, T_CHUNKED, CAUSAL_64 * 2 * 4 * (24 + 16)),
    # MiMo-V2-Flash (tests/test_models_today_third.py): q·k 24 wide, v 16, 2 full layers and 2 windows of 8,
    # eager with sinks on the sliding layers
    ("mimo-v2-flash", MIMO_TINY, T, 2 * (CAUSAL + W8_OUT) * 2 * 4 * (24 + 16)),
    # DeepSeek-V4: one K = V head of 32 shared by 4 query heads
    ("deepseek-v4", {**V4_TINY, "model_type": "deepseek_v4"}, T, V4_MASKED * 2 * 4 * (32 + 32)),
    # GLM-5 (DeepSeek Sparse Attention over MLA): 4 heads, q·k 16 + 8, v 24, every layer causal (top-k 64
    # covers the 16 tokens)
    ("glm-5", {**GLM5_TINY, "model_type": "glm_moe_dsa"}, T, 4 * CAUSAL * 2 * 4 * (24 + 24)),
    ("minimax-m2", {"model_type": "minimax_m2", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rotary_dim": 8,
                    "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256,
                    "max_position_embeddings": 128, "qk_norm_type": "per_layer", "use_qk_norm": True,
                    "use_routing_bias": True, "scoring_func": "sigmoid", "tie_word_embeddings": False},
     T, 2 * CAUSAL * PER_PAIR),
    # Nemotron-H: one attention layer (*), a LatentMoE block (E), a ReLU² MLP (-)
    ("nemotron-h", {"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 3,
                    "hybrid_override_pattern": "*E-", "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 16, "intermediate_size": 48, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 64, "n_shared_experts": 1,
                    "moe_latent_size": 16, "vocab_size": 256, "max_position_embeddings": 128,
                    "tie_word_embeddings": False, "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 1,
                    "ssm_state_size": 16, "conv_kernel": 4, "chunk_size": 16, "n_group": 1, "topk_group": 1},
     T, CAUSAL * PER_PAIR),
]


@pytest.mark.parametrize("name, raw, tokens, masked", CASES, ids=[c[0] for c in CASES])
def test_the_tracer_counts_every_op_of_todays_architectures(name: str, raw: dict[str, Any], tokens: int,
                                                             masked: int) -> None:
    reference = hf_prefill_flop(copy.deepcopy(raw), tokens)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**copy.deepcopy(raw)))
    ids = torch.randint(0, 128, (1, tokens))
    with torch.inference_mode(), trace(model.eval()) as t:
        model(ids)
    assert t.unknown == {} and t.errors == {}
    traced = sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in t.ops)
    assert traced == reference - masked


def test_the_tracer_counts_minimax_m3_block_sparse_attention() -> None:
    """MiniMax-M3 (transformers' MiniMaxM3VLForCausalLM, eager; tests/test_models_minimax_m3_torch.py's tiny
    model: 1 full layer and 2 block-sparse ones, blocks of 4, the top 2 kept, 16 tokens): the full layer keeps
    the causal 136 pairs, each sparse one 88 (its query's own block and one more); FlopCounterMode − traced =
    (120 + 2·(256 − 88)) pairs × 2·H·(d + d), 4 heads of 16. The indexer's scores are a plain matmul over the
    whole rectangle in both counts."""
    from torch.utils.flop_counter import FlopCounterMode

    from flopcount import _cpu_flash_flop, _grouped_mm_flop

    model = minimax_m3_model(M3_TINY)
    ids = torch.randint(0, 128, (1, T))
    custom = {torch.ops.aten._grouped_mm: _grouped_mm_flop,
              torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flop}
    with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=custom) as counter:
        model(ids)
    with torch.inference_mode(), trace(model) as t:
        model(ids)
    assert t.unknown == {} and t.errors == {}
    traced = sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in t.ops)
    assert traced == counter.get_total_flops() - (CAUSAL + 2 * (T * T - 88)) * PER_PAIR


def test_attention_sinks_keep_eager_attention_on_the_kept_pairs() -> None:
    """gpt-oss's eager attention appends a sink column before its softmax, cat([scores, sinks], -1), and
    slices it off before p·v: p·v is still attention, over the pairs the mask keeps. Layer 0 slides a window
    of 8 over 16 tokens: 100 of 256 pairs, so p·v = 2·B·H·kept·d_v = 2·1·4·100·16 = 12,800 FLOPs."""
    raw = CASES[0][1]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**copy.deepcopy(raw)))
    with torch.inference_mode(), trace(model.eval()) as t:
        model(torch.randint(0, 128, (1, T)))
    pv = [op for op in t.ops if op.kind == "attention_pv" and ".layers.0." in op.name]
    assert len(pv) == 1 and pv[0].flop_by_unit[Unit.MATRIX] == 2 * 1 * 4 * 100 * 16


class _Ops(torch.nn.Module):
    """The cheap ops today's models added to a step: a triangular solve (Gated DeltaNet's UT transform), a
    boolean mask's `&` (transformers' sliding and chunked masks), a histogram and a floor division (the MoE
    routers' token counts per expert)."""

    def forward(self, a: Any, b: Any, m1: Any, m2: Any, ids: Any) -> Any:
        x = torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True)
        return x, m1 & m2, torch.histc(ids, bins=4, min=0, max=3), ids // 2


def test_the_cheap_ops_of_todays_models_have_formulas() -> None:
    a, b = torch.randn(2, 3, 8, 8).tril(), torch.randn(2, 3, 8, 5)
    m1, m2 = torch.rand(4, 16) > 0.5, torch.rand(4, 16) > 0.5
    ids = torch.randint(0, 4, (32,)).float()
    module = _Ops()
    with torch.inference_mode(), trace(module) as t:
        module(a, b, m1, m2, ids)
    assert t.unknown == {}
    flop = {op.kind: op.flop_by_unit.get(Unit.VECTOR, 0.0) for op in t.ops}
    assert flop["solve_triangular"] == 8 ** 2 * 5 * (2 * 3)  # LAPACK's xTRSM count m²·n, 6 systems
    assert flop["bitwise_and"] == 4 * 16  # aten::__and__, pointwise: 1 FLOP an element, as every untagged pointwise op
    assert flop["reduce"] == 32  # histc reads 32 values: 1 FLOP each, the reductions' convention
    assert flop["floor_divide"] == 32
