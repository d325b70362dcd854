"""MLA rows (aiconfigurator's context_mla_perf and generation_mla_perf) joined to our MLA attention.

What the collectors time (ai-dynamo/aiconfigurator, collector/trtllm/collect_mla.py and
collector/sglang/collect_mla.py): DeepSeek-V3's attention kernel alone, projections excluded, with
kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128 (TRT-LLM's `Scenario`,
SGLang's KV_LORA_RANK and QK_*_HEAD_DIM constants); `num_heads` is the heads on the device (the
collectors divide by tp_size before timing and log the local count); `step` is the cached length,
the decode query attends step + 1 keys (the new token's latent is written first: TRT-LLM adds one
token per sequence, SGLang sets seq_lens = history + 1).

Our kernels of the same shape, as roofline.models.build's MLA counts them:

    generation (absorbed)   q [b, H, 1, 576] against one latent cache [b, 1, step + 1, 576] that is K
                            and V at once (read once), p·v over its first 512 columns:
                            2·P·576 + 2·P·512 FLOPs, P = b·H·(step + 1); out [b, H, 512]
    context (decompressed)  DeepSeek's prefill: per-head q and K of 128 + 64 = 192, V of 128, causal,
                            H K/V heads (TRT-LLM; SGLang's trtllm_mla backend)
    context (absorbed)      SGLang's other backends (flashinfer, flash_attention) run prefill over the
                            latent as decode does: q [b, H, isl, 576], the latent K = V, p·v 512 wide,
                            causal (collect_mla.py: v_head_dim = kv_lora_rank outside trtllm_mla)

The matrix roof is the KV cache's dtype when that is FP8 (TRT-LLM quantizes q for an FP8 cache and
runs both products in FP8, collect_mla.py's quant_q_buffer), else the table's mla_dtype: the faster
roof, so the floor stays a lower bound. Kinds: context_mla.<kv dtype>, generation_mla.<kv dtype>.

Layering: imports roofline.errors and this room's floors, join and tables; numpy lazily.
"""

from __future__ import annotations

from typing import Any

from roofline.calibration.floors import attention_floors
from roofline.calibration.join import DTYPES, JoinedTable, _key, assemble, count_left, machine_roofs, whole
from roofline.calibration.tables import Table

KV_LORA_RANK = 512  # DeepSeek-V3's kv_lora_rank (config.json; the collectors' constant)
ROPE_DIM = 64  # qk_rope_head_dim
NOPE_DIM = 128  # qk_nope_head_dim
V_DIM = 128  # v_head_dim
LATENT = KV_LORA_RANK + ROPE_DIM  # 576 values a token: the absorbed form's one K/V "head"
DECOMPRESSED_BACKENDS = ("default", "trtllm_mla")  # TRT-LLM's kernel_source, SGLang's trtllm_mla backend


def _name(t: Table, i: int) -> str:
    c = t.columns
    b, h = int(c["batch_size"][i]), int(c["num_heads"][i])
    if t.table == "generation_mla":
        return f"generation_mla absorbed b{b} h{h} kv {int(c['step'][i]) + 1}"
    form = "decompressed" if str(t.column("kernel_source", "default")[i]) in DECOMPRESSED_BACKENDS else "absorbed"
    return f"context_mla {form} b{b} h{h} isl {int(c['isl'][i])}"


def join_mla(t: Table) -> JoinedTable:
    """Every row of an MLA table beside our floor of its kernel (module docstring)."""
    import numpy as np

    generation = t.table == "generation_mla"
    left: dict[str, int] = {}
    ok = np.ones(len(t), dtype=bool)
    b, h = (whole(t, c, ok, left) for c in ("batch_size", "num_heads"))
    n = whole(t, "step", ok, left) + 1 if generation else whole(t, "isl", ok, left)
    empty = ok & ((n < 1) | (b < 1) | (h < 1))
    if empty.any():
        count_left(left, "an empty shape", int(empty.sum()))
    ok &= ~empty
    qraw = np.asarray(t.column("mla_dtype", "bfloat16"), dtype=object)
    kvraw = np.asarray(t.column("kv_cache_dtype", "bfloat16"), dtype=object)
    source = np.asarray(t.column("kernel_source", "default"), dtype=object)
    absorbed = np.ones(len(t), dtype=bool) if generation else ~np.isin(source, DECOMPRESSED_BACKENDS)
    parts: list[tuple[Any, str, Any, Any]] = []
    for qn, kvn, ab in sorted({(str(a), str(c), bool(f)) for a, c, f in zip(qraw[ok], kvraw[ok], absorbed[ok],
                                                                             strict=True)}):
        sel = ok & (qraw == qn) & (kvraw == kvn) & (absorbed == ab)
        bad = next((x for x in (qn, kvn) if x not in DTYPES), None)
        if bad is not None:
            count_left(left, f"dtype {bad!r} has no counterpart here", int(sel.sum()))
            continue
        qdt, kvdt = DTYPES[qn], DTYPES[kvn]
        roof_dt = kvdt if _key(kvdt) == "fp8" else qdt
        r = machine_roofs(t.machine, roof_dt, left, int(sel.sum()))
        if r is None:
            continue
        i = np.flatnonzero(sel)
        one = np.ones(len(i))
        if ab:  # over the latent: one K/V head of 576, read once, p·v over its first 512 columns
            f = attention_floors(r, generation, qdt, kvdt, b[i], h[i], one, LATENT * one, n[i], shared_kv=True,
                                 pv_width=KV_LORA_RANK * one)
        else:  # decompressed: per-head K of 192 and V of 128
            f = attention_floors(r, generation, qdt, kvdt, b[i], h[i], h[i], (NOPE_DIM + ROPE_DIM) * one, n[i],
                                 dv=V_DIM * one)
        parts.append((i, f"{t.table}.{_key(kvdt)}", r, f))
    # a kind holds both context forms: assemble keys the roofs by kind, and both forms share them
    return assemble(t, parts, left, _name)


__all__ = ["KV_LORA_RANK", "LATENT", "join_mla"]
