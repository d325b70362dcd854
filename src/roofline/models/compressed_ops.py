"""DeepSeek-V4's layer kinds in a step graph: compressed attention (sliding window, CSA, HCA) and the mHC
residual streams (shapes and sources: roofline.models.compressed). N = B × T tokens, H heads of d, one
K = V head, window W, rope_dim r:

    mhc.attn.pre      the hyper-connection before attention: RMSNorm over the n·h streams, fn (n·h -> (2+n)·n),
                      sigmoids, Sinkhorn's t_max normalisations of the n×n mix, and the collapse Σ pre_j·x_j
    attn_norm, qkv_a_proj (h -> q_lora + d), norm_rope (q_a_norm, kv_norm, RoPE on r: writes the window's row)
    q_b_proj (q_lora -> H·d), q_norm_rope (the unweighted RMSNorm over each head and RoPE on r)
    compressor.<CSA|HCA>.kv_gate   h -> 2·w (kv and gate; w = 2d for CSA's two series, d for HCA)
    compressor.<..>.pool           per closed window: softmax over its 2m (CSA) or m (HCA) gates, the weighted
                                   sum, kv_norm and RoPE; prefill closes ⌊T/m⌋ a sequence, decode one in m steps
                                   (amortised: 1/m of it a step, the token's kv and gate row into the buffer)
    compressor.CSA.indexer.*       the indexer's own compressor at d_I, its query (index_q: q_lora -> H_I·d_I),
                                   weights_proj (h -> H_I), Σ_h w_h·ReLU(q_h·k) over the ⌊L/4⌋ index keys, top-k
    attn.<kind>.qk/softmax/pv      one query's keys: min(L, W) window rows + ⌊L/m⌋ (HCA) or min(⌊L/4⌋, k) (CSA)
                                   compressed entries; prefill pairs Σ min(i, W) + Σ min(⌊i/m⌋, k)
    attn.out_rope     RoPE at −i on the output's rope slice, o_a_proj (grouped: g groups of H·d/g -> o_lora),
                      o_b_proj (g·o_lora -> h), mhc.attn.post (post·out + combᵀ·streams)

The MLP's mHC (mhc.ffn.pre, .post) wraps the MoE alike; mhc.head collapses the streams before the final
norm. Under tensor parallelism the query heads and the output groups shard; the KV head, the compressors
and the indexer stay whole on every device (one K = V head: nothing to split).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, attention_ops, matmul_op
from roofline.models.attn_res import weighted_sum_flop  # the collapse Σ pre_j·x_j: attention residuals' sum
from roofline.models.compressed import CSA, CompressedAttention, compressed_pairs, entries
from roofline.models.deltanet import StepBuilder
from roofline.models.formulas import windowed_pairs
from roofline.vocab import Phase, Role, Unit

SINKHORN_FLOP = 4  # per entry of the n×n mix an iteration: a row sum and divide, a column sum and divide


def _shape(bd: StepBuilder) -> CompressedAttention:
    cp = bd.cfg.compressed
    assert cp is not None
    return cp


def mhc_expand(bd: StepBuilder, resid: Tensor) -> Tensor:
    """The embedding's row copied into the n streams (DeepseekV4Model.forward's expand): no FLOPs."""
    cp = _shape(bd)
    streams = bd.act("mhc.streams", (bd.n, cp.hc_mult * bd.cfg.hidden_size))
    bd.add(Op("mhc.expand", "copy", (resid,), (streams,), {}, 1,
              formula=f"the embedding copied into hc_mult = {cp.hc_mult} streams: no FLOPs"))
    return streams


def mhc_pre(bd: StepBuilder, name: str, streams: Tensor, count: int) -> Tensor:
    """A hyper-connection's weights and collapse (DeepseekV4HyperConnection.forward): the block's input."""
    cp, n, h = _shape(bd), bd.n, bd.cfg.hidden_size
    hc = cp.hc_mult
    mix = (2 + hc) * hc
    fn = bd.weight(f"mhc.{name}.fn", (hc * h, mix))
    out = bd.act(f"mhc.{name}.in", (n, h))
    weights = bd.act(f"mhc.{name}.weights", (n, mix))
    rms, sm = FLOP_PER_ELEMENT["rmsnorm"], FLOP_PER_ELEMENT["softmax"]
    vector = n * (rms * hc * h + sm * mix + SINKHORN_FLOP * cp.sinkhorn_iters * hc * hc) + weighted_sum_flop(n, hc, h)
    bd.add(Op(f"mhc.{name}.pre", "hyper_connection", (streams, fn), (out, weights),
              {Unit.MATRIX: 2.0 * n * hc * h * mix, Unit.VECTOR: float(vector)}, count,
              formula=f"fn 2·N·n·h·(2+n)·n = 2·{n}·{hc}·{h}·{mix} on the matrix units; RMSNorm {rms:g}·N·n·h, "
                      f"sigmoids and softmax {sm:g}·N·(2+n)·n, Sinkhorn {SINKHORN_FLOP}·t_max·n² "
                      f"(t_max {cp.sinkhorn_iters}), "
                      f"collapse 2·N·n·h on the vector lanes"))
    return out


def mhc_post(bd: StepBuilder, name: str, streams: Tensor, block_out: Tensor, count: int) -> Tensor:
    """post·out + combᵀ·streams: the block's output expanded into the streams and the streams mixed."""
    cp, n, h = _shape(bd), bd.n, bd.cfg.hidden_size
    hc = cp.hc_mult
    new = bd.act(f"mhc.{name}.streams", (n, hc * h))
    weights = bd.act(f"mhc.{name}.weights", (n, (2 + hc) * hc))
    bd.add(Op(f"mhc.{name}.post", "hyper_connection_mix", (streams, block_out, weights), (new,),
              {Unit.VECTOR: float(n * (2 * hc * hc * h + 2 * hc * h))}, count,
              formula=f"combᵀ·streams 2·N·n²·h + post·out and the add 2·N·n·h = 2·{n}·{hc}²·{h} + 2·{n}·{hc}·{h}"))
    return new


def mhc_head(bd: StepBuilder, streams: Tensor, rows: int) -> Tensor:
    """hc_head: sigmoid(fn(RMSNorm(streams))) weights and the collapse, before the final norm."""
    cp, h = _shape(bd), bd.cfg.hidden_size
    hc = cp.hc_mult
    out = bd.act("mhc.head.out", (rows, h))
    src = streams if rows == bd.n else bd.act("mhc.streams.last", (rows, hc * h))
    rms = FLOP_PER_ELEMENT["rmsnorm"]
    bd.add(Op("mhc.head", "hyper_connection", (src, bd.weight("mhc.head.fn", (hc * h, hc))), (out,),
              {Unit.MATRIX: 2.0 * rows * hc * h * hc,
               Unit.VECTOR: float(rows * rms * hc * h + weighted_sum_flop(rows, hc, h))}, 1,
              formula=f"fn 2·rows·n·h·n = 2·{rows}·{hc}·{h}·{hc}; RMSNorm {rms:g}·rows·n·h + collapse 2·rows·n·h"))
    return out


def _scaled(ops: list[Op], ratio: float, text: str) -> list[Op]:
    """Causal prefill attention ops scaled to the pairs a query attends (roofline.models.windows' rule, the
    step model's on-chip convention: FLOPs, tiles and the query's pass alike)."""
    return [replace(op, flop_by_unit={u: f * ratio for u, f in op.flop_by_unit.items()},
                    traffic={lv: b * ratio for lv, b in op.traffic.items()},
                    onchip=op.onchip.scaled(ratio) if op.onchip is not None else None,
                    formula=f"{op.formula}; {text}", note=text) for op in ops]


def _compressor(bd: StepBuilder, x: Tensor, m: int, width: int, prefix: str, count: int) -> Tensor:
    """One compressor's projections and pooling (width: one series; CSA's two series are 2·width)."""
    cp, b, t, n, h = _shape(bd), bd.b, bd.shape.tokens_per_sequence, bd.n, bd.cfg.hidden_size
    series = 2 if m == cp.csa else 1
    w = series * width
    kv_gate = bd.act(f"{prefix}.kv_gate", (n, 2 * w))
    bd.add(matmul_op(f"{prefix}.kv_gate", x, bd.weight(f"{prefix}.kv_gate.weight", (h, 2 * w)), kv_gate, count))
    slots = series * m  # a window's entry pools 2m (CSA: this window and the one before) or m tokens
    sm, rms, rope = FLOP_PER_ELEMENT["softmax"], FLOP_PER_ELEMENT["rmsnorm"], FLOP_PER_ELEMENT["rope"]
    per_entry = slots * width * (sm + 2) + rms * width + rope * bd.cfg.qk_rope_head_dim
    if bd.shape.phase == Phase.PREFILL:
        made = b * int(entries(t, m))
        out = Tensor(f"{prefix}.entries.new", (b, int(entries(t, m)), width), bd.dt.kv_cache, Role.KV_CACHE,
                     persistent=True)
        flop = float(made * per_entry)
        what = f"B·⌊T/m⌋ = {b}·⌊{t}/{m}⌋ = {made} entries"
        inputs: tuple[Tensor, ...] = (kv_gate,)
    else:
        out = Tensor(f"{prefix}.buffer", (b, 2 * w), bd.dt.activations, Role.KV_CACHE, persistent=True)
        flop = b * per_entry / m
        what = f"one window closes every {m} steps: B·1/m = {b}/{m} entries a step, amortised"
        inputs = (kv_gate, Tensor(f"{prefix}.buffer.window", (b, 2 * w), bd.dt.activations, Role.KV_CACHE))
    bd.add(Op(f"{prefix}.pool", "compress_pool", inputs, (out,), {Unit.VECTOR: flop}, count,
              formula=f"per entry: softmax-gated sum over {slots} slots of {width} ({sm:g} + 2 a value) + kv_norm "
                      f"{rms:g}·{width} + RoPE {rope:g}·rope_dim = {per_entry:g}; {what}",
              note=f"ratio {m}: one entry of {width} values per {m} tokens"
                   + ("; the open window is the compressor's state" if bd.shape.phase == Phase.DECODE else "")))
    return out


def _indexer(bd: StepBuilder, x: Tensor, q_latent: Tensor, count: int) -> None:
    """CSA's lightning indexer over the index keys (DeepseekV4Indexer): its compressor, query, scores, top-k."""
    cp, b, t, n, h = _shape(bd), bd.b, bd.shape.tokens_per_sequence, bd.n, bd.cfg.hidden_size
    hi, di, m = cp.index_heads, cp.index_dim, cp.csa
    p = "compressor.CSA.indexer"
    keys_new = _compressor(bd, x, m, di, p, count)
    q = bd.act("index_q.q", (n, hi * di))
    bd.add(matmul_op("index_q.q_b_proj", q_latent, bd.weight("index_q.q_b_proj.weight", (cp.q_lora, hi * di)), q,
                     count))
    w = bd.act(f"{p}.weights", (n, hi))
    bd.add(matmul_op(f"{p}.weights_proj", x, bd.weight(f"{p}.weights_proj.weight", (h, hi)), w, count))
    rope = FLOP_PER_ELEMENT["rope"]
    q_r = bd.act("index_q.q.roped", (n, hi * di))
    bd.add(Op("index_q.rope", "rope", (q,), (q_r,), {Unit.VECTOR: float(rope * n * hi * bd.cfg.qk_rope_head_dim)},
              count, formula=f"{rope:g}·N·H_I·rope_dim = {rope:g}·{n}·{hi}·{bd.cfg.qk_rope_head_dim}"))
    if bd.shape.phase == Phase.DECODE:
        keys = int(entries(bd.shape.seq, m))
        pairs = b * keys
        cache = Tensor(f"{p}.keys", (b, keys, di), bd.dt.kv_cache, Role.KV_CACHE)
        inputs: tuple[Tensor, ...] = (q_r, w, cache)
        what = f"B·⌊L/{m}⌋ = {b}·{keys}"
        width = keys
    else:
        pairs = b * int(compressed_pairs(t, m))
        inputs = (q_r, w, keys_new)
        what = f"B·Σ⌊i/{m}⌋ = {pairs}"
        width = int(entries(t, m))
    scores = bd.act(f"{p}.scores", (b, t, width))
    bd.add(Op(f"{p}.scores", "index_scores", inputs, (scores,),
              {Unit.MATRIX: 2.0 * hi * di * pairs, Unit.VECTOR: 3.0 * hi * pairs}, count,
              formula=f"Σ_h w_h·ReLU(q_h·k): 2·H_I·d_I on the matrix units + 3·H_I on the vector lanes a pair, "
                      f"pairs {what} = {pairs}", note=f"{hi} index heads of {di} over the compressed index keys"))
    top = Tensor(f"{p}.topk", (n, cp.topk), DTYPES["int32"])
    bd.add(Op(f"{p}.topk", "topk", (scores,), (top,), {Unit.VECTOR: float(pairs)}, count,
              formula=f"select the best {cp.topk} of each query's scores: 1·pairs = {pairs}"))


def compressed_attention(bd: StepBuilder, streams: Tensor, count: int) -> Tensor:
    """Every layer's attention and its mHC (`count` layers), from the streams into the next streams."""
    cfg, cp = bd.cfg, _shape(bd)
    b, t, n, h = bd.b, bd.shape.tokens_per_sequence, bd.n, cfg.hidden_size
    H, d, dr, ql = cfg.num_heads, cp.head_dim, cfg.qk_rope_head_dim, cp.q_lora
    x_in = mhc_pre(bd, "attn", streams, count)
    x = bd.act("attn_norm.out", (n, h))
    norm = bd.norm("attn_norm", x_in, x, count)
    a = bd.act("qkv_a", (n, ql + d))
    proj = bd.add(matmul_op("qkv_a_proj", x, bd.weight("qkv_a_proj.weight", (h, ql + d)), a, count))
    bd.fuse(norm, proj)
    q_lat = bd.act("q_a_norm.out", (n, ql))
    row_new = Tensor("attn.window.new", (b, 1, t, d), bd.dt.kv_cache, Role.KV_CACHE, persistent=True)
    rms, rope = FLOP_PER_ELEMENT["rmsnorm"], FLOP_PER_ELEMENT["rope"]
    gains = tuple(Tensor(f"{g}.weight", (w,), bd.dt.activations, Role.WEIGHT) for g, w in (("q_a_norm", ql),
                                                                                          ("kv_norm", d)))
    bd.add(Op("norm_rope", "rmsnorm+rope", (a, *gains), (q_lat, row_new),
              {Unit.VECTOR: float(rms * n * (ql + d) + rope * n * dr)}, count,
              formula=f"RMSNorm {rms:g}·N·(q_lora + d) + RoPE {rope:g}·N·rope_dim = {rms:g}·{n}·{ql + d} + "
                      f"{rope:g}·{n}·{dr}; writes the window's K = V row ({d} values a token)"))
    q = bd.act("q", (n, H * d))
    bd.add(matmul_op("q_b_proj", q_lat, bd.weight("q_b_proj.weight", (ql, H * d)), q, count))
    q4 = bd.act("q.heads", (b, H, t, d))
    bd.add(Op("q_norm_rope", "rmsnorm+rope", (q,), (q4,), {Unit.VECTOR: float(rms * n * H * d + rope * n * H * dr)},
              count, formula=f"unweighted RMSNorm {rms:g}·N·H·d + RoPE {rope:g}·N·H·rope_dim = "
                             f"{rms:g}·{n}·{H * d} + {rope:g}·{n}·{H}·{dr}"))
    for mm in cp.kinds:
        _compressor(bd, x, mm, d, f"compressor.{cp.kind(mm)}", cp.layers(mm))
    if cp.layers(cp.csa):
        _indexer(bd, x, q_lat, cp.layers(cp.csa))
    out = bd.act("attn.out", (b, H, t, d))
    for m in (0, *cp.kinds):
        layers = cp.layers(m)
        if not layers:
            continue
        label = "window" if m == 0 else cp.kind(m)
        prefix = f"attn.{label}"
        topk = cp.topk if m == cp.csa else None
        if bd.shape.phase == Phase.DECODE:
            s = bd.shape.seq
            keys = min(s, cp.window) + (int(cp.read_entries(m, s)) if m else 0)
            cache = Tensor(f"{prefix}.cache", (b, 1, keys, d), bd.dt.kv_cache, Role.KV_CACHE)
            ops = attention_ops(prefix, q4, cache, cache, out, causal=True, count=layers,
                                scores_dtype=bd.dt.activations)
        else:
            rows = bd.act(f"{prefix}.keys", (b, 1, t, d))  # the prompt's K = V rows
            ops = attention_ops(prefix, q4, rows, rows, out, causal=True, count=layers,
                                scores_dtype=bd.dt.activations)
            pairs = int(windowed_pairs(t, cp.window)) + (int(compressed_pairs(t, m, topk)) if m else 0)
            what = (f"pairs Σ min(i, W){' + Σ min(⌊i/m⌋, k)' if topk else ' + Σ ⌊i/m⌋' if m else ''} "
                    f"= {pairs} a sequence")
            ops = _scaled(ops, pairs / (t * (t + 1) / 2), what)
            if m:  # q·kᵀ reads this prompt's compressed entries beside its rows
                made = Tensor(f"compressor.{cp.kind(m)}.entries.new", (b, int(entries(t, m)), d), bd.dt.kv_cache,
                              Role.KV_CACHE, persistent=True)
                ops[0] = replace(ops[0], inputs=(*ops[0].inputs, made))
        for op in ops:
            bd.add(op)
        bd.flash[prefix] = tuple(op.name for op in ops)
    g, ol = cp.o_groups, cp.o_lora
    o_in = bd.act("attn.out.roped", (g, n, H * d // g))
    bd.add(Op("attn.out_rope", "rope", (out,), (o_in,), {Unit.VECTOR: float(rope * n * H * dr)}, count,
              formula=f"RoPE at −i on the output's rope slice {rope:g}·N·H·rope_dim = {rope:g}·{n}·{H}·{dr}"))
    o_a = bd.act("o_a", (g, n, ol))
    bd.add(matmul_op("o_a_proj", o_in, bd.weight("o_a_proj.weight", (g, H * d // g, ol)), o_a, count))
    o = bd.act("o_proj.out", (n, h))
    o_part = bd.tp_out("o_b_proj", o)
    o_flat = bd.act("o_a.flat", (n, g * ol))
    bd.add(matmul_op("o_b_proj", o_flat, bd.weight("o_b_proj.weight", (g * ol, h)), o_part, count))
    if o_part is not o:
        bd.reduce("attn.all_reduce", o_part, o, count)
    return mhc_post(bd, "attn", streams, o, count)


def streams_step(bd: Any, resid: Tensor, expand: bool = True) -> Tensor:
    """Every layer's compressed attention and MoE between mHC's hyper-connections, from the embedding (or,
    `expand` False, streams already made: an MTP draft's) into the last layer's streams (`bd`:
    roofline.models.build's builder, whose MoE ops it runs)."""
    layers, n, h = bd.cfg.num_layers, bd.n, bd.cfg.hidden_size
    mid = compressed_attention(bd, mhc_expand(bd, resid) if expand else resid, layers)
    x_in = mhc_pre(bd, "ffn", mid, layers)
    x = bd.act("mlp_norm.out", (n, h))
    norm = bd.norm("mlp_norm", x_in, x, layers)
    out = bd.act("mlp.out", (n, h))
    part = bd.tp_out("mlp", out) if bd.comm.ep == 1 else out
    bd.moe(x, part, layers, "", norm)
    if part is not out:
        bd.reduce("mlp.all_reduce", part, out, layers)
    return mhc_post(bd, "ffn", mid, out, layers)


__all__ = ["CSA", "compressed_attention", "mhc_expand", "mhc_head", "mhc_post", "mhc_pre", "streams_step"]
