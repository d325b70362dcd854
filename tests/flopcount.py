"""FLOPs of a tiny random transformers model's prefill, counted by torch's FlopCounterMode, beside ours
from the same config.json (issue 22: each architecture's FLOPs against FlopCounterMode where
transformers has it). Conventions matched as in tests/test_trace_hf.py: FlopCounterMode counts the
matmuls only, so we compare our matrix-unit FLOPs with logits over every position (a plain forward()
projects them all); it has no formula for aten::_grouped_mm (the MoE experts) nor for CPU flash
attention, and we give it one each (2·rows·K·N; its whole square 2·B·H·Nq·Nkv·(d + dv)); it counts
the whole square of (query, key) pairs where we count those the causal mask keeps, so the caller
subtracts the masked pairs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from roofline.models import analyze_model, config_from_dict
from roofline.vocab import Logits, Unit


def _grouped_mm_flop(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return 2 * a[0] * a[1] * b[-1]


def _cpu_flash_flop(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    b, h, nq, d = q
    return 2 * b * h * nq * k[-2] * (d + v[-1])


def hf_prefill_flop(raw: dict[str, Any], tokens: int) -> int:
    """FlopCounterMode's count of one forward() over `tokens` random ids, the model built from `raw`
    (a config.json dict) with random weights."""
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**raw)
    try:
        model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    except ValueError:  # a multimodal config (Qwen3-VL): the text-to-text model, run on text alone
        model = transformers.AutoModelForImageTextToText.from_config(cfg).eval()
    text = getattr(cfg, "text_config", cfg)
    ids = torch.randint(0, text.vocab_size, (1, tokens))
    custom = {torch.ops.aten._grouped_mm: _grouped_mm_flop,
              torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flop}
    with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=custom) as counter:
        model(ids)
    return int(counter.get_total_flops())


def our_prefill_matrix_flop(raw: dict[str, Any], tokens: int) -> float:
    """Our matrix-unit FLOPs of the same prefill, every position's logits projected."""
    cfg = replace(config_from_dict(raw), logits=Logits.ALL)
    a = analyze_model(cfg, "h200", "prefill", 1, tokens)
    return sum(op.flop_by_unit.get(Unit.MATRIX, 0.0) * op.count for op in a.model.graph.ops)


def masked_pairs(tokens: int) -> int:
    """Pairs the causal mask removes per head and layer in a prefill of `tokens`: T·(T − 1)/2."""
    return tokens * (tokens - 1) // 2


def hf_param_count(raw: dict[str, Any]) -> int:
    """Values the transformers model built from `raw` stores in its checkpoint (on the meta device: shapes
    only): its state dict, parameters and persistent buffers (MiniMax-M2's e_score_correction_bias is a
    buffer the checkpoint holds), tied tables once."""
    import torch
    import transformers

    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        except ValueError:
            model = transformers.AutoModelForImageTextToText.from_config(cfg)
    seen: set[int] = set()
    total = 0
    for t in model.state_dict(keep_vars=True).values():
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel()
    return total
