"""The KDA layer kind (Kimi Delta Attention: a delta rule with a decay per channel) in a step graph.

Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; transformers models/kimi_linear
KimiLinearDeltaAttention; fla ops/kda chunk_kda and fused_recurrent_kda), per layer, N = B × T tokens, H heads
of d = dk = dv (roofline.models.recurrent.KimiDelta):

    norm            RMSNorm of the residual stream
    qkv_proj        h -> 3·H·d (q_proj, k_proj, v_proj)
    gate_a_proj     h -> H + 2·d: b_proj (β, one per head), f_a_proj and g_a_proj (the two low-rank gates)
    f_b_proj        d -> H·d: the forget gate, one log-decay per channel
    g_b_proj        d -> H·d: the output gate
    conv1d          depthwise causal conv of K taps + SiLU over the 3·H·d channels (the conv state, as Gated
                    DeltaNet's: roofline.models.deltanet.causal_conv1d)
    delta_rule      decode, recurrent: per token and head Gated DeltaNet's 7·dk·dv (S decayed row by row,
                    Sᵀk, the rank-1 update, the readout) + the gate's KDA_GATE_FLOP·dk, on the vector lanes;
                    reads and writes the state S [B, H, dk, dv].
                    prefill, chunked (C = 64): the WY form of Gated DeltaNet with the channel decay folded into
                    q and k (fla's chunk_kda: exp(g)·q, exp(−g)·k inside each chunk), so the matrix work is
                    Gated DeltaNet's, per token and head 2·C·(3·dk + 2·dv) + 6·dk·dv; on the vector lanes the
                    triangular solve C²/3, the gate KDA_GATE_FLOP·dk and the decay's folding
                    KDA_CHUNK_DECAY_FLOP·dk. Linear in tokens: no term grows with the context.
                    The two C × C products (K·Kᵀ, Q·Kᵀ) are counted whole, as Gated DeltaNet's; fla's
                    chunk_kda computes only their causal lower triangle, the 16-token diagonal sub-blocks
                    elementwise (chunk_kda_fwd_kernel_intra_sub_intra), so this is an upper bound on them.
    o_norm          RMSNorm over d times sigmoid(gate): (6 + 4 + 1)·N·H·d (a sigmoid: negate, exp, add, divide)
    Kimi K3's full-rank gate (KimiDelta.full_rank_gate): g_proj h -> H·d joins qkv_proj (h -> 4·H·d, TensorRT-LLM's
    fused qkvg) and gate_a_proj gives β and f_a only; its safe gate costs SAFE_GATE_FLOP a channel.
    o_proj          H·d -> h, then the residual add (roofline.models.deltanet.out_projection)

Tensor parallelism shards the heads (H/tp per device, roofline.models.split.shard; the low-rank f_a and g_a
projections stay whole, counted once per device); the state and the conv state are per sequence.
"""

from __future__ import annotations

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, matmul_op
from roofline.models.deltanet import P, StepBuilder, causal_conv1d, gated_deltanet, out_projection
from roofline.models.recurrent import KDA_CHUNK_DECAY_FLOP, KimiDelta
from roofline.vocab import Phase, Role, Unit

SIGMOID_FLOP = 4  # 1 / (1 + exp(−x)): negate, exp, add, divide


def kimi_delta(bd: StepBuilder, resid: Tensor, hidden: Tensor, count: int) -> None:
    """The KDA layers of the step (`count` of them), from the residual stream `resid` into `hidden`, as one
    set of ops run `count` times."""
    cfg, n, b, h = bd.cfg, bd.n, bd.b, bd.cfg.hidden_size
    la = cfg.linear_attention
    assert isinstance(la, KimiDelta)
    heads, d, k, c = la.value_heads, la.value_dim, la.conv_kernel, la.chunk
    hd = heads * d
    x = bd.act(f"{P}norm.out", (n, h))
    norm = bd.norm(f"{P}norm", resid, x, count)
    full = la.full_rank_gate  # K3: g_proj h -> H·d rides with q, k, v (TensorRT-LLM's fused qkvg projection)
    qkv = bd.act(f"{P}qkv", (n, (4 if full else 3) * hd))
    proj = bd.add(matmul_op(f"{P}qkv{'g' if full else ''}_proj", x,
                            bd.weight(f"{P}qkv_proj.weight", (h, (4 if full else 3) * hd)), qkv, count))
    bd.fuse(norm, proj)
    lows = 1 if full else 2  # f_a, and g_a unless the gate is full rank
    low = bd.act(f"{P}gate_a", (n, heads + lows * d))
    bd.add(matmul_op(f"{P}gate_a_proj", x, bd.weight(f"{P}gate_a_proj.weight", (h, heads + lows * d)), low, count))
    f_low, g_low = bd.act(f"{P}f_a", (n, d)), bd.act(f"{P}g_a", (n, d))
    forget, gate = bd.act(f"{P}forget", (n, hd)), bd.act(f"{P}gate", (n, hd))
    bd.add(matmul_op(f"{P}f_b_proj", f_low, bd.weight(f"{P}f_b_proj.weight", (d, hd)), forget, count))
    if not full:
        bd.add(matmul_op(f"{P}g_b_proj", g_low, bd.weight(f"{P}g_b_proj.weight", (d, hd)), gate, count))
    conv_out = causal_conv1d(bd, P, qkv, 3 * hd, k, count)
    state_dtype = DTYPES["fp32"] if la.state_bytes == 4 else DTYPES["bf16"]
    state = Tensor(f"{P}state", (b, heads, d, d), state_dtype, Role.KV_CACHE, persistent=True)
    core = bd.act(f"{P}core.out", (n, hd))
    if bd.shape.phase == Phase.DECODE:
        flop = {Unit.VECTOR: float(la.decode_flop_per_token * n)}
        formula = (f"recurrent: (7·dk·dv + {la.gate_flop}·dk) per token and head = "
                   f"(7·{d}·{d} + {la.gate_flop}·{d})·{heads}·{n}")
        inputs: tuple[Tensor, ...] = (conv_out, forget, low, state)
    else:
        vector = c * c / 3 + (la.gate_flop + KDA_CHUNK_DECAY_FLOP) * d
        flop = {Unit.MATRIX: float((2 * c * (3 * d + 2 * d) + 6 * d * d) * heads * n),
                Unit.VECTOR: float(vector * heads * n)}
        formula = (f"chunked (C = {c}): (2·C·(3·dk + 2·dv) + 6·dk·dv)·H·N = (2·{c}·{5 * d} + 6·{d}·{d})·{heads}·{n} "
                   f"on the matrix units, + (C²/3 + {la.gate_flop + KDA_CHUNK_DECAY_FLOP}·dk)·H·N for the "
                   f"triangular solve and the channel decay")
        inputs = (conv_out, forget, low)
    bd.add(Op(f"{P}delta_rule", "kimi_delta_rule", inputs, (core, state), flop, count, formula=formula,
              note=f"{heads} heads of {d}, a decay per channel; the state is {heads}·{d}·{d} values per "
                   f"sequence in {state_dtype.name}"))
    gain = Tensor(f"{P}o_norm.weight", (d,), bd.dt.activations, Role.WEIGHT)
    gated = bd.act(f"{P}gated_norm.out", (n, hd))
    per = FLOP_PER_ELEMENT["rmsnorm"] + SIGMOID_FLOP + FLOP_PER_ELEMENT["mul"]
    bd.add(Op(f"{P}gated_norm", "rmsnorm_gated", (core, gate, gain), (gated,), {Unit.VECTOR: float(per * n * hd)},
              count, formula=f"RMSNorm over d times sigmoid(gate): {per:g}·N·H·d = {per:g}·{n}·{hd}"))
    out_projection(bd, P, gated, resid, hidden, count)


def linear_mixer(bd: StepBuilder, resid: Tensor, hidden: Tensor, count: int) -> None:
    """The LINEAR layers' mixer: KDA for a KimiDelta shape, Gated DeltaNet otherwise."""
    mixer = kimi_delta if isinstance(bd.cfg.linear_attention, KimiDelta) else gated_deltanet
    mixer(bd, resid, hidden, count)


__all__ = ["kimi_delta", "linear_mixer"]
