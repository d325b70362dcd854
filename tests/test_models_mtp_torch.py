"""The MTP draft's FLOPs (roofline.models.draft, serving.speculative.mtp_draft) against transformers' own MTP
module (modeling_layers.MtpLayer / MtpModel, 5.24) under torch.utils.flop_counter.FlopCounterMode: a tiny
random DeepSeek-V3 with one MTP layer, one draft pass over 16 positions (eh_proj over the embedded tokens
and the main model's hidden states, the MTP layer, the shared head on the last position), eager attention,
MLA decompressed as transformers runs it (`mla` expanded).

FlopCounterMode counts matmuls (aten._grouped_mm, the experts' path, given 2·rows·K·N here); the one
convention that differs is attention's: eager multiplies the S × S square and masks afterwards, we count
the S(S + 1)/2 causal pairs: S·S − S(S+1)/2 masked pairs × 2·H·(d_qk + d_v)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from roofline.models import build_graph, config_from_dict  # noqa: E402
from roofline.serving.speculative import mtp_draft  # noqa: E402
from roofline.vocab import Unit  # noqa: E402

pytestmark = pytest.mark.torch

S, H = 16, 64  # positions drafted over, hidden width
TINY = dict(vocab_size=256, hidden_size=H, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
            num_experts_per_tok=2, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, v_head_dim=24,
            qk_nope_head_dim=16, first_k_dense_replace=1, max_position_embeddings=128, num_nextn_predict_layers=1,
            n_group=1, topk_group=1)


def _grouped_mm(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return int(2 * a[0] * a[-1] * b[-1])  # [rows, K] @ [E, K, N]: each row through its one expert


def test_mtp_draft_matrix_flops_match_flop_counter_mode() -> None:
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.modeling_layers import MtpModel

    cfg = transformers.DeepseekV3Config(**TINY)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    mtp = MtpModel(model, 1).eval()
    ids = torch.randint(0, TINY["vocab_size"], (1, S))
    hidden, positions = torch.randn(1, S, H), torch.arange(S)[None]
    with torch.inference_mode(), FlopCounterMode(display=False,
                                                 custom_mapping={torch.ops.aten._grouped_mm: _grouped_mm}) as c:
        out = mtp.forward_layer(0, hidden, positions, None, input_ids=ids)
        mtp._project_to_logits(out[:, -1:, :])
    draft, _ = mtp_draft(config_from_dict({**cfg.to_dict(), "model_type": "deepseek_v3"}), 1, None, None, 0.8)
    graph = build_graph(replace(draft, mla="expanded"), "prefill", 1, S).graph
    ours = sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in graph.ops)
    eh_proj = next(op for op in graph.ops if op.name == "mtp.eh_proj")
    assert eh_proj.flop_by_unit[Unit.MATRIX] == 2 * S * (2 * H) * H
    masked = S * S - S * (S + 1) // 2
    assert c.get_total_flops() == ours + masked * 2 * 4 * ((16 + 8) + 24)
