"""The Mamba2 layer kind (a selective state space with a fixed state per sequence) in a step graph.

Mamba2 (Dao & Gu, "Transformers are SSMs", arXiv 2405.21060; Nemotron-H, arXiv 2504.03624, whose
NemotronHMamba2Mixer transformers, vLLM and mlx-lm implement alike), per layer, N = B × T tokens,
H heads of P = head_dim, G groups of B and C of N_s = d_state each, inner width I = H·P:

    norm        RMSNorm of the residual stream (the block's one pre-norm)
    in_proj     h -> I (gate z) + I + 2·G·N_s (x, B, C: the conv channels C_c) + H (dt)
    conv1d      depthwise causal conv of K taps (+ bias) + SiLU over x, B, C: (2K + 1 + 4)·N·C_c;
                decode reads and writes the last K − 1 inputs per channel (the conv state)
    ssd         decode, recurrent, per token and head: h ← exp(dt·A)·h + (dt·B) xᵀ, y = h·C + D·x:
                decay P·N_s, outer product P·N_s, add P·N_s, readout 2·P·N_s = 5·P·N_s on the vector
                lanes; reads and writes the state [B, H, P, N_s].
                prefill, chunked SSD (Dao & Gu §6, blocks of Q = chunk_size tokens): per chunk the
                diagonal blocks C·Bᵀ (2·Q·N_s per token and group) and (L ∘ C·Bᵀ)·X (2·Q·P per token
                and head), the chunk states Bᵀ·X (2·P·N_s per token and head) and the states' output
                C·S (2·P·N_s per token and head) on the matrix units; the decay mask L (Q per token
                and head) and the passing of states between chunks (P·N_s per chunk and head) on the
                vector lanes (P·N_s·H·N/Q). Linear in tokens: no term grows with the context.
    gated_norm  y · SiLU(z), then RMSNorm over each group's I/G: (4 + 1 + 6)·N·I
    out_proj    I -> h, then the residual add

Tensor parallelism shards the heads and the groups (H/tp and G/tp per device, as vLLM's
MambaMixer2 does; roofline.models.split.shard refuses a tp that divides neither).
"""

from __future__ import annotations

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import matmul_op
from roofline.models.deltanet import StepBuilder, causal_conv1d, gated_out
from roofline.vocab import Phase, Role, Unit

P = "mamba."


def mamba2(bd: StepBuilder, resid: Tensor, hidden: Tensor, count: int) -> None:
    """The Mamba2 layers of the step (`count` of them), from the residual stream `resid` into
    `hidden`, as one set of ops run `count` times."""
    cfg, n, b, h = bd.cfg, bd.n, bd.b, bd.cfg.hidden_size
    mb = cfg.mamba
    assert mb is not None
    heads, hd, g, ns, k, q = mb.heads, mb.head_dim, mb.groups, mb.state_dim, mb.conv_kernel, mb.chunk
    inner, ch = mb.inner, mb.conv_channels
    x = bd.act(f"{P}norm.out", (n, h))
    norm = bd.norm(f"{P}norm", resid, x, count)
    zxbcdt = bd.act(f"{P}in_proj.out", (n, mb.in_width))
    bias = (Tensor(f"{P}in_proj.bias", (mb.in_width,), bd.dt.activations, Role.WEIGHT),) if mb.proj_bias else ()
    proj = bd.add(matmul_op(f"{P}in_proj", x, bd.weight(f"{P}in_proj.weight", (h, mb.in_width)), zxbcdt, count,
                            extra_inputs=bias))
    bd.fuse(norm, proj)
    decode = bd.shape.phase == Phase.DECODE
    conv_out = causal_conv1d(bd, P, zxbcdt, ch, k, count, bias=mb.conv_bias)
    state_dtype = DTYPES["fp32"] if mb.state_bytes == 4 else DTYPES["bf16"]
    state = Tensor(f"{P}ssm_state", (b, heads, hd, ns), state_dtype, Role.KV_CACHE, persistent=True)
    y = bd.act(f"{P}ssd.out", (n, inner))
    a = Tensor(f"{P}A_log_dt_bias_D", (3 * heads,), bd.dt.activations, Role.WEIGHT)
    if decode:
        flop = {Unit.VECTOR: float(mb.decode_flop_per_token * n)}
        formula = f"recurrent: 5·P·N_s per token and head = 5·{hd}·{ns}·{heads}·{n}"
        inputs: tuple[Tensor, ...] = (conv_out, zxbcdt, a, state)
    else:
        flop = {Unit.MATRIX: float((2 * q * ns * g + (2 * q * hd + 4 * hd * ns) * heads) * n),
                Unit.VECTOR: float((q + hd * ns / q) * heads * n)}
        formula = (f"chunked SSD (Q = {q}): (2·Q·N_s·G + (2·Q·P + 4·P·N_s)·H)·N = (2·{q}·{ns}·{g} + "
                   f"(2·{q}·{hd} + 4·{hd}·{ns})·{heads})·{n} on the matrix units, + (Q + P·N_s/Q)·H·N for "
                   f"the decay mask and the states passed once a chunk")
        inputs = (conv_out, zxbcdt, a)
    bd.add(Op(f"{P}ssd", "mamba2_ssd", inputs, (y, state), flop, count, formula=formula,
              note=f"{heads} heads of {hd}, {g} groups of B and C of {ns}; the state is {heads}·{hd}·{ns} "
                   f"values per sequence in {state_dtype.name}"))
    gain = Tensor(f"{P}gated_norm.weight", (inner,), bd.dt.activations, Role.WEIGHT)
    gated_out(bd, P, y, zxbcdt, gain, "y · SiLU(z), RMSNorm per group", "I", resid, hidden, count,
              bias=mb.proj_bias)


__all__ = ["mamba2"]
