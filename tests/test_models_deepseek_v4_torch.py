"""DeepSeek-V4's step FLOPs against transformers' own model (models/deepseek_v4, 5.24) under
torch.utils.flop_counter.FlopCounterMode: a tiny random DeepseekV4 of 4 layers (sliding, CSA, HCA, CSA; CSA at
4 with top-2, HCA at 8, window 4, mHC of 2 streams, the first MoE layer hash-routed), a 16-token prefill
without a cache, eager attention, every logit projected (a plain forward).

FlopCounterMode counts matmuls (mm, bmm; aten._grouped_mm, the experts' path, given 2·rows·K·N here). The
conventions differ in three places, each derived here: transformers' eager attention multiplies the whole
S × (S + ⌊S/m⌋) rectangle (the prompt's rows and its compressed entries) and masks afterwards, where we count
the pairs a query attends, Σ min(i, W) + Σ min(⌊i/m⌋, k) (roofline.models.compressed_ops); its indexer scores
the whole S × ⌊S/4⌋ rectangle where we count Σ ⌊i/4⌋; and mHC's combᵀ·streams (an n×n by n×h matmul a
token) is a bmm there and vector work here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from roofline.models import build_graph, config_from_dict  # noqa: E402
from roofline.vocab import Unit  # noqa: E402

pytestmark = pytest.mark.torch

S = 16  # prompt tokens
TINY = dict(vocab_size=256, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=1, head_dim=32, q_lora_rank=48, o_groups=2, o_lora_rank=24, n_routed_experts=8,
            num_experts_per_tok=2, n_shared_experts=1, index_n_heads=2, index_head_dim=16, index_topk=2,
            sliding_window=4, hc_mult=2, hc_sinkhorn_iters=3, max_position_embeddings=128,
            layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                         "compressed_sparse_attention"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
            mlp_layer_types=["hash_moe", "moe", "moe", "moe"])


def _grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return int(2 * a[0] * a[-1] * b[-1])  # [rows, K] @ [E, K, N]: each row through its one expert


def test_prefill_matrix_flops_match_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.DeepseekV4Config(**TINY)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    ids = torch.randint(0, TINY["vocab_size"], (1, S))
    with torch.inference_mode(), FlopCounterMode(display=False,
                                                 custom_mapping={torch.ops.aten._grouped_mm: _grouped_mm}) as c:
        model(ids, use_cache=False)
    reference = c.get_total_flops()
    ours_cfg = replace(config_from_dict({**cfg.to_dict(), "model_type": "deepseek_v4"}), logits="all")
    assert ours_cfg.compressed is not None and ours_cfg.compressed.ratios == (0, 4, 8, 4)
    assert ours_cfg.hash_layers == 1
    graph = build_graph(ours_cfg, "prefill", 1, S).graph
    ours = sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in graph.ops)
    window = 4 * 5 // 2 + 12 * 4  # Σ min(i, 4), i = 1..16: 58 pairs
    csa = window + (4 * 2 * 1 // 2 + 2 * 1) + 2 * (16 - 8)  # + Σ min(⌊i/4⌋, 2): ⌊i/4⌋ reaches 2 at i = 8: 6 + 16
    hca = window + (8 * 2 * 1 // 2 + 2 * 1)  # + Σ ⌊i/8⌋ = 10
    masked = (16 * 16 - window) + 2 * (16 * 20 - csa) + (16 * 18 - hca)  # the rectangles less the pairs attended
    attention = masked * 2 * 4 * (32 + 32)  # × 2·H·(d + d): q·kᵀ and p·v over one K = V head of 32
    index_pairs = 4 * 4 * 3 // 2 + 4 * 1  # Σ ⌊i/4⌋, i = 1..16 = 28
    indexer = 2 * (16 * 4 - index_pairs) * 2 * 2 * 16  # 2 CSA layers: the masked scores, × 2·H_I·d_I
    comb = 4 * 2 * 2 * S * 2 * 2 * 64  # 4 layers × 2 hyper-connections × 2·S·n·n·h
    assert reference == ours + attention + indexer + comb
