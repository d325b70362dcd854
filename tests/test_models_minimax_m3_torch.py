"""MiniMax-M3 against transformers' own model (5.24, models/minimax_m3_vl: MiniMaxM3VLTextConfig and
MiniMaxM3VLForCausalLM, the language model of MiniMaxAI/MiniMax-M3): its parameter count on the meta device
(shapes only) from the published config, and its step FLOPs under torch.utils.flop_counter.FlopCounterMode on a
tiny random model of the same layout (one full layer, two block-sparse ones; blocks of 4 keys, the top 2 kept,
so a 16-token prompt is sparse), eager attention, prefill (every logit projected) and one decode token.

FlopCounterMode counts matmuls (mm, bmm; aten._grouped_mm, the experts' path, given 2·rows·K·N here). Where the
conventions differ, derived here: transformers' eager attention multiplies the whole rectangle of (query, key)
pairs and masks afterwards (the block mask MiniMaxM3VLIndexer.build_block_mask builds), where we count the pairs
a query attends, causal Σ i on the full layer and Σ keys(i) on the sparse ones (roofline.models.block_sparse);
and the indexer scores the whole S × S rectangle where we count the causal S(S + 1)/2."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from roofline.models import build_graph, config_from_dict, load_config  # noqa: E402
from roofline.vocab import Unit  # noqa: E402

pytestmark = pytest.mark.torch

M3 = Path(__file__).parent / "fixtures" / "configs" / "MiniMax-M3"
S = 16  # prompt tokens
H, G, D, HI, DI = 4, 2, 16, 2, 16  # query heads, K/V heads, head_dim; index heads, index_dim
TINY: dict[str, Any] = dict(
    vocab_size=256, hidden_size=64, intermediate_size=32, dense_intermediate_size=96, shared_intermediate_size=32,
    num_hidden_layers=3, num_attention_heads=H, num_key_value_heads=G, head_dim=D, rotary_dim=8,
    partial_rotary_factor=0.5, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=128,
    hidden_act="swigluoai", moe_layer_freq=[0, 1, 1], qk_norm_type="per_head", use_qk_norm=True,
    scoring_func="sigmoid", use_routing_bias=True, n_shared_experts=1, tie_word_embeddings=False, bos_token_id=1,
    eos_token_id=2,
    sparse_attention_config=dict(use_sparse_attention=True, sparse_attention_freq=[0, 1, 1],
                                 sparse_disable_index_value=[0, 1, 1], sparse_num_index_heads=HI, sparse_index_dim=DI,
                                 sparse_block_size=4, sparse_topk_blocks=2, sparse_local_block=1, sparse_init_block=0,
                                 sparse_score_type="max"))


def _grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return int(2 * a[0] * a[-1] * b[-1])  # [rows, K] @ [E, K, N]: each row through its one expert


def _model(raw: dict[str, Any]) -> Any:
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3VLForCausalLM

    cfg = transformers.MiniMaxM3VLTextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    torch.manual_seed(0)
    return MiniMaxM3VLForCausalLM._from_config(cfg, attn_implementation="eager").eval()


def _ours(phase: str, seq: int) -> float:
    cfg = replace(config_from_dict({**TINY, "model_type": "minimax_m3"}), logits="all")
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in build_graph(cfg, phase, 1, seq).graph.ops)


def test_parameters_equal_transformers_count() -> None:
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3VLForCausalLM

    raw = json.loads((M3 / "config.json").read_text())
    cfg = transformers.MiniMaxM3VLTextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    with torch.device("meta"):
        model = MiniMaxM3VLForCausalLM(cfg)
    seen: set[int] = set()
    total = 0
    for t in model.state_dict(keep_vars=True).values():  # parameters and e_score_correction_bias (a buffer)
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel()
    assert load_config(str(M3)).total_params == total == 426_174_572_928


def test_the_multimodal_export_equals_transformers_count() -> None:
    # MiniMaxM3SparseForConditionalGeneration: the language model, the vision tower and the projector
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3SparseForConditionalGeneration

    from test_models_minimax_m3 import vl

    raw = vl()
    cfg = transformers.MiniMaxM3VLConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    with torch.device("meta"):
        model = MiniMaxM3SparseForConditionalGeneration(cfg)
    total = sum(t.numel() for t in {id(t): t for t in model.state_dict(keep_vars=True).values()}.values())
    assert config_from_dict(raw).total_params == total == 427_040_140_160


def test_prefill_matrix_flops_match_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(TINY)
    ids = torch.randint(0, TINY["vocab_size"], (1, S))
    with torch.inference_mode(), FlopCounterMode(display=False,
                                                 custom_mapping={torch.ops.aten._grouped_mm: _grouped_mm}) as c:
        model(ids, use_cache=False)
    causal = S * (S + 1) // 2  # 136
    # Σ_i keys(i), b = 4, k = 2: every key up to i = 8 (36), then 4 (one whole block) + (i − 1) mod 4 + 1:
    # 2 runs of 5..8 over the last 8 queries (52)
    sparse = 8 * 9 // 2 + 2 * (5 + 6 + 7 + 8)
    assert sparse == 88
    attention = ((S * S - causal) + 2 * (S * S - sparse)) * 2 * H * (D + D)  # the masked pairs, q·kᵀ and p·v
    indexer = 2 * (S * S - causal) * 2 * HI * DI  # 2 sparse layers: the masked scores, × 2·H_I·d_I
    assert c.get_total_flops() == _ours("prefill", S) + attention + indexer


def test_decode_matrix_flops_match_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(TINY)
    ids = torch.randint(0, TINY["vocab_size"], (1, S + 1))
    with torch.inference_mode():
        cache = model(ids[:, :S], use_cache=True).cache
    with torch.inference_mode(), FlopCounterMode(display=False,
                                                 custom_mapping={torch.ops.aten._grouped_mm: _grouped_mm}) as c:
        model(ids[:, S:], cache=cache, use_cache=True)
    # the new token at L = 17 scores all 17 index keys (as we count), and its sparse layers attend
    # keys(17) = min(17, 4 + (16 mod 4) + 1) = 5 of the 17 keys transformers multiplies
    assert c.get_total_flops() == _ours("decode", S + 1) + 2 * (17 - 5) * 2 * H * (D + D)
