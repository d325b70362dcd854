"""GLM-5's step FLOPs against transformers' own model (models/glm_moe_dsa, 5.24) under
torch.utils.flop_counter.FlopCounterMode: a tiny random GlmMoeDsa of 4 layers (1 dense, 3 MoE; the indexer
on layers 0 and 2, "shared" on 1 and 3; one MTP layer, which the main forward never runs), a 16-token
prefill with eager attention, every logit projected (a plain forward) and MLA decompressed as transformers
runs it (`mla` expanded).

FlopCounterMode counts matmuls (mm, bmm; aten._grouped_mm, the experts' path, given 2·rows·K·N here). The
conventions differ in two places, each derived here: transformers' eager attention multiplies the whole
S × S square and masks afterwards, where we count the S(S + 1)/2 causal pairs (S·S − S(S+1)/2 masked pairs
× 2·H·(d_qk + d_v) a layer); its indexer scores the square too, in a matmul that also applies the head
weights (2·H_I·S·S), where we count 2·H_I·d_I per causal pair on the matrix units and the weighting on the
vector lanes (roofline.models.dsa)."""

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
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
            num_experts_per_tok=2, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, v_head_dim=24,
            qk_nope_head_dim=16, first_k_dense_replace=1, index_topk=64, index_head_dim=16, index_n_heads=4,
            max_position_embeddings=128, indexer_types=["full", "shared", "full", "shared"],
            num_nextn_predict_layers=1)


def _grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return int(2 * a[0] * a[-1] * b[-1])  # [rows, K] @ [E, K, N]: each row through its one expert


def test_prefill_matrix_flops_match_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.GlmMoeDsaConfig(**TINY)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    ids = torch.randint(0, TINY["vocab_size"], (1, S))
    with torch.inference_mode(), FlopCounterMode(display=False,
                                                 custom_mapping={torch.ops.aten._grouped_mm: _grouped_mm}) as c:
        model(ids)
    reference = c.get_total_flops()
    ours_cfg = replace(config_from_dict({**cfg.to_dict(), "model_type": "glm_moe_dsa"}), logits="all",
                       mla="expanded")
    assert ours_cfg.indexer_layers == 2 and ours_cfg.mtp_layers == 1
    graph = build_graph(ours_cfg, "prefill", 1, S).graph
    ours = sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in graph.ops)
    masked = S * S - S * (S + 1) // 2  # 120 pairs above the diagonal
    attention = masked * 2 * 4 * ((16 + 8) + 24) * 4  # × 2·H·(d_qk + d_v), 4 layers
    indexer = 2 * (masked * 2 * 4 * 16 + 2 * 4 * S * S)  # 2 indexer layers: the masked scores, the weighting
    assert reference == ours + attention + indexer
