"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2, GLM-5) as the step graph's ops: decode absorbed over
the latent cache (W_UK folded into the query, W_UV applied to the latent output), prefill decompressed into
per-head K and V (DeepSeek-V2 paper, §2.1; DeepSeek's inference code). DeepSeek-V3.2's lightning indexer
(roofline.models.dsa) picks the tokens attended; `--mla expanded` is HF's per-head cache."""

from __future__ import annotations

from dataclasses import replace

from roofline.errors import RooflineError, T
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, attention_ops, matmul_op
from roofline.models.deltanet import StepBuilder
from roofline.models.dsa import lightning_indexer
from roofline.models.transformer import AttentionKind
from roofline.models.windows import windowed
from roofline.vocab import Phase, Role, Unit


def mla(bd: StepBuilder, x: Tensor, attn_out: Tensor, norm: str) -> str:
    """DeepSeek-V3 attention: decode absorbed over the latent cache, prefill decompressed."""
    cfg, n, b, t, layers, h = bd.cfg, bd.n, bd.b, bd.t, bd.layers, bd.cfg.hidden_size
    H, dn, dr, dv, r, qr = (cfg.num_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                            cfg.kv_lora_rank, cfg.q_lora_rank)
    latent_width = r + dr
    a_width = qr + latent_width
    qkv_a = bd.act("qkv_a", (n, a_width))
    proj = bd.add(matmul_op("qkv_a_proj", x, bd.weight("qkv_a_proj.weight", (h, a_width)), qkv_a, layers))
    bd.fuse(norm, proj)
    latent_new = Tensor("kv_latent.new", (b, 1, t, latent_width), bd.dt.kv_cache, Role.KV_CACHE, persistent=True)
    # Kimi Linear's MLA runs no RoPE (mla_use_nope): its rope key is shared but never rotated
    per, rope = FLOP_PER_ELEMENT["rmsnorm"], 0 if cfg.nope else FLOP_PER_ELEMENT["rope"]
    gains: tuple[Tensor, ...] = (Tensor("kv_a_norm.weight", (r,), bd.dt.activations, Role.WEIGHT),)
    outs: tuple[Tensor, ...] = (latent_new,)
    q_in = x
    if qr:
        q_in = bd.act("q_a_norm.out", (n, qr))
        gains += (Tensor("q_a_norm.weight", (qr,), bd.dt.activations, Role.WEIGHT),)
        outs = (q_in, latent_new)
    lat = bd.add(Op("latent_norm_rope", "rmsnorm+rope", (qkv_a, *gains), outs,
                      {Unit.VECTOR: float(per * n * (qr + r) + rope * n * dr)}, layers,
                      formula=f"RMSNorm {per:g}·N·(q_lora + kv_lora) + RoPE {rope:g}·N·rope_dim = "
                              f"{per:g}·{n}·{qr + r} + {rope:g}·{n}·{dr}; writes the latent "
                              f"({r} + {dr} values per token) into the cache"))
    if cfg.indexer is not None:  # DeepSeek-V3.2: the lightning indexer picks the tokens MLA attends
        lightning_indexer(bd, x, q_in, cfg.indexer_layers)  # not on GLM-5.2's shared layers
    q = bd.act("q", (n, H * (dn + dr)))
    if qr:
        qb = bd.add(matmul_op("q_b_proj", q_in, bd.weight("q_b_proj.weight", (qr, H * (dn + dr))), q, layers))
        bd.fuse(lat, qb)
    else:
        bd.add(matmul_op("q_proj", x, bd.weight("q_proj.weight", (h, H * (dn + dr))), q, layers))
    if bd.shape.phase == Phase.PREFILL and cfg.mla == "absorbed":
        raise RooflineError(f"{T.mla} absorbed applies to decode: MLA prefill runs decompressed, as DeepSeek's "
                            f"prefill does (give {T.mla} expanded or leave it out)")
    if bd.shape.phase == Phase.DECODE and cfg.mla != "expanded":
        cached = cfg.read_tokens(AttentionKind.GLOBAL, bd.shape.seq)  # DSA: the top-k rows
        q_nope = bd.act("q.nope", (H, n, dn))
        q_pe = bd.act("q.pe", (n, H * dr))
        bd.add(Op("q_rope", "rope", (q,), (q_nope, q_pe), {Unit.VECTOR: float(rope * n * H * dr)}, layers,
                    formula=f"{rope:g}·N·H·rope_dim = {rope:g}·{n}·{H}·{dr}"))
        q_mla = bd.act("q.latent", (b, H, 1, latent_width))
        absorb = matmul_op("q_absorb", q_nope, bd.weight("kv_b_proj.k_weight", (H, dn, r)),
                           bd.act("q.latent_nope", (H, n, r)), layers)
        bd.add(replace(absorb, inputs=(*absorb.inputs, q_pe), outputs=(q_mla,),
                         note="W_UK absorbed into the query; its rope part appended in the epilogue"))
        cache = Tensor("attn.latent_cache", (b, 1, cached, latent_width), bd.dt.kv_cache, Role.KV_CACHE)
        o_lat = bd.act("attn.out_latent", (H, n, r))
        qk, sm, pv = attention_ops("attn", q_mla, cache, cache, o_lat, causal=True, count=layers,
                                   scores_dtype=bd.dt.activations)
        pairs = cached  # one query against the whole cache
        pv = replace(pv, flop_by_unit={Unit.MATRIX: 2.0 * b * H * pairs * r},
                     formula=f"2·B·H·pairs·kv_lora = 2·{b}·{H}·{pairs}·{r}",
                     note="values are the first kv_lora_rank columns of the same latent rows: read once")
        for op in (qk, sm, pv):
            bd.add(op)
        bd.flash["attn"] = (qk.name, sm.name, pv.name)
        o_abs = matmul_op("o_absorb", o_lat, bd.weight("kv_b_proj.v_weight", (H, r, dv)),
                          bd.act("attn.out_heads", (H, n, dv)), layers)
        bd.add(replace(o_abs, outputs=(attn_out,), note="W_UV applied to the latent output, per head"))
    else:
        q_full = bd.act("q.full", (b, H, t, dn + dr))
        bd.add(Op("q_rope", "rope", (q,), (q_full,), {Unit.VECTOR: float(rope * n * H * dr)}, layers,
                    formula=f"{rope:g}·N·H·rope_dim = {rope:g}·{n}·{H}·{dr}"))
        latent = Tensor("kv_latent.c", (n, r), bd.dt.kv_cache, Role.KV_CACHE)
        kv_b = bd.act("kv_b", (n, H * (dn + dv)))
        decode = bd.shape.phase == Phase.DECODE  # --mla expanded: HF's per-head K/V cache
        bd.add(replace(matmul_op("kv_b_proj", latent, bd.weight("kv_b_proj.weight", (r, H * (dn + dv))),
                                   kv_b, layers),
                         note="decode expanded: the new token's latent decompressed into per-head K and V"
                         if decode else "prefill decompresses the latent just written back into per-head K and V"))
        pe = Tensor("kv_latent.pe", (n, dr), bd.dt.kv_cache, Role.KV_CACHE)
        if decode:
            cached = cfg.read_tokens(AttentionKind.GLOBAL, bd.shape.seq)
            k_new = Tensor("k.new", (b, H, t, dn + dr), bd.dt.kv_cache, Role.KV_CACHE, persistent=True)
            v_new = Tensor("v.new", (b, H, t, dv), bd.dt.kv_cache, Role.KV_CACHE, persistent=True)
            bd.add(Op("k_assemble", "copy", (kv_b, pe), (k_new, v_new), {}, layers,
                        formula="concatenate k_nope with the shared rope key and write the per-head K and V "
                                "into the cache: no FLOPs"))
            k = Tensor("attn.k_cache", (b, H, cached, dn + dr), bd.dt.kv_cache, Role.KV_CACHE)
            v = Tensor("attn.v_cache", (b, H, cached, dv), bd.dt.kv_cache, Role.KV_CACHE)
        else:
            k = bd.act("k", (b, H, t, dn + dr))
            v = bd.act("v", (b, H, t, dv))
            bd.add(Op("k_assemble", "copy", (kv_b, pe), (k, v), {}, layers,
                        formula="concatenate k_nope with the shared rope key: no FLOPs"))
        ops = attention_ops("attn", q_full, k, v, attn_out, causal=True, count=layers,
                            scores_dtype=bd.dt.activations)
        if not decode and cfg.indexer is not None:  # DSA: each query attends its top-k: Σ min(i, k) pairs
            ops = windowed(ops, t, cfg.indexer.topk, label="DSA top-k")
        for op in ops:
            bd.add(op)
        bd.flash["attn"] = tuple(op.name for op in ops)
    return proj


__all__ = ["mla"]
