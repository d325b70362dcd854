"""The Gated DeltaNet layer kind (linear attention with a fixed state per sequence) in a step graph.

Gated DeltaNet (Yang, Kautz, Hatamizadeh, arXiv 2412.06464; transformers Qwen3_5GatedDeltaNet,
vLLM model_executor/models/qwen3_next.py), per layer, N = B × T tokens:

    norm            RMSNorm of the residual stream
    in_proj_qkv     h -> 2·Hk·dk + Hv·dv (q, k, v)            in_proj_zba  h -> Hv·dv + 2·Hv (z, β, a)
    conv1d          depthwise causal conv of K taps + SiLU over the q, k, v channels: (2K + 4)·N·C;
                    decode reads and writes the last K − 1 inputs per channel (the conv state)
    delta_rule      decode, recurrent (one mat-vec per head on the vector lanes): per token and value
                    head, decay dk·dv, Sᵀk 2·dk·dv, rank-1 update 2·dk·dv, readout Sᵀq 2·dk·dv = 7·dk·dv;
                    reads and writes the state S [B, Hv, dk, dv].
                    prefill, chunked (blocks of C = 64, the WY form of Yang et al. arXiv 2406.06484):
                    per token and head K·Kᵀ, Q·Kᵀ and T·K 2·C·dk each, T·V and the intra-chunk P·(U − W·S)
                    2·C·dv each, and Q·S, W·S, Kᵀ(U − W·S) 2·dk·dv each: 2·C·(3·dk + 2·dv) + 6·dk·dv on
                    the matrix units, + C²/3 for the triangular solve (forward substitution) on the vector
                    lanes; the final state written once. Linear in tokens: no term grows with the context.
    gated_norm      RMSNorm over dv, times SiLU(z): (6 + 5)·N·Hv·dv
    out_proj        Hv·dv -> h, then the residual add

Tensor parallelism shards the heads (Hk/tp and Hv/tp per device, roofline.models.split.shard); the
state and the conv state are per sequence, never per token (ModelConfig.state_bytes_per_sequence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, elementwise_op, matmul_op
from roofline.models.dtypes import ModelDtypes
from roofline.models.transformer import ModelConfig
from roofline.vocab import Phase, Role, Unit

P = "linear_attn."


class StepBuilder(Protocol):
    """What a layer kind needs of the step graph's builder (roofline.models.build._Builder)."""

    cfg: ModelConfig
    dt: ModelDtypes
    shape: Any
    n: int
    b: int
    t: int  # tokens per sequence
    layers: int  # the layers the ops being built run on (their count)
    flash: dict[str, tuple[str, ...]]  # attention's ops, each fused as FlashAttention runs them

    def act(self, name: str, shape: Sequence[int]) -> Tensor: ...
    def weight(self, name: str, shape: Sequence[int]) -> Tensor: ...
    def norm(self, name: str, x: Tensor, out: Tensor, count: int) -> str: ...
    def add(self, op: Op) -> str: ...
    def fuse(self, *names: str) -> None: ...
    def tp_out(self, name: str, out: Tensor) -> Tensor: ...
    def reduce(self, name: str, partial: Tensor, out: Tensor, count: int) -> str: ...


def gated_deltanet(bd: StepBuilder, resid: Tensor, hidden: Tensor, count: int) -> None:
    """The linear-attention layers of the step (`count` of them), from the residual stream `resid`
    into `hidden`, as one set of ops run `count` times."""
    cfg, n, b, h = bd.cfg, bd.n, bd.b, bd.cfg.hidden_size
    la = cfg.linear_attention
    assert la is not None
    hk, hv, dk, dv, k, c = la.key_heads, la.value_heads, la.key_dim, la.value_dim, la.conv_kernel, la.chunk
    ch, v = la.conv_channels, hv * dv
    x = bd.act(f"{P}norm.out", (n, h))
    norm = bd.norm(f"{P}norm", resid, x, count)
    qkv = bd.act(f"{P}qkv", (n, ch))
    proj = bd.add(matmul_op(f"{P}in_proj_qkv", x, bd.weight(f"{P}in_proj_qkv.weight", (h, ch)), qkv, count))
    bd.fuse(norm, proj)
    zba = bd.act(f"{P}zba", (n, v + 2 * hv))
    bd.add(matmul_op(f"{P}in_proj_zba", x, bd.weight(f"{P}in_proj_zba.weight", (h, v + 2 * hv)), zba, count))
    decode = bd.shape.phase == Phase.DECODE
    conv_out = causal_conv1d(bd, P, qkv, ch, k, count)
    state_dtype = DTYPES["fp32"] if la.state_bytes == 4 else DTYPES["bf16"]
    state = Tensor(f"{P}state", (b, hv, dk, dv), state_dtype, Role.KV_CACHE, persistent=True)
    core = bd.act(f"{P}core.out", (n, v))
    if decode:
        flop = {Unit.VECTOR: float(la.decode_flop_per_token * n)}
        formula = f"recurrent: 7·dk·dv per token and value head = 7·{dk}·{dv}·{hv}·{n}"
        inputs: tuple[Tensor, ...] = (conv_out, zba, state)
    else:
        flop = {Unit.MATRIX: float((2 * c * (3 * dk + 2 * dv) + 6 * dk * dv) * hv * n),
                Unit.VECTOR: float(c * c / 3 * hv * n)}
        formula = (f"chunked (C = {c}): (2·C·(3·dk + 2·dv) + 6·dk·dv)·Hv·N = (2·{c}·{3 * dk + 2 * dv} + "
                   f"6·{dk}·{dv})·{hv}·{n} on the matrix units, + C²/3·Hv·N for the triangular solve")
        inputs = (conv_out, zba)
    bd.add(Op(f"{P}delta_rule", "gated_delta_rule", inputs, (core, state), flop, count, formula=formula,
              note=f"{hk} query/key heads of {dk}, {hv} value heads of {dv}; the state is "
                   f"{hv}·{dk}·{dv} values per sequence in {state_dtype.name}"))
    gain = Tensor(f"{P}norm_gate.weight", (dv,), bd.dt.activations, Role.WEIGHT)
    gated_out(bd, P, core, zba, gain, "RMSNorm over dv times SiLU(z)", "Hv·dv", resid, hidden, count)


def causal_conv1d(bd: StepBuilder, P: str, inp: Tensor, channels: int, taps: int, count: int,
                  bias: bool = False) -> Tensor:
    """A recurrent mixer's (Gated DeltaNet's, Mamba2's) depthwise causal conv over `channels` with `taps`
    taps, then SiLU: 2 FLOPs a tap (multiply-add), one more for the bias, and SiLU's per element, per
    token and channel. It keeps the last K − 1 inputs per channel per sequence (the conv state): decode
    reads and writes it, prefill writes it for decode."""
    n, b, k, ch = bd.n, bd.b, taps, channels
    decode = bd.shape.phase == Phase.DECODE
    conv_state = Tensor(f"{P}conv_state", (b, ch, k - 1), bd.dt.activations, Role.KV_CACHE, persistent=True)
    conv_w = Tensor(f"{P}conv1d.weight", (ch, k + (1 if bias else 0)), bd.dt.activations, Role.WEIGHT)
    conv_out = bd.act(f"{P}conv.out", (n, ch))
    per = 2 * k + (1 if bias else 0) + FLOP_PER_ELEMENT["silu"]
    bd.add(Op(f"{P}conv1d", "conv1d", (inp, conv_w, *((conv_state,) if decode else ())), (conv_out, conv_state),
              {Unit.VECTOR: float(per * n * ch)}, count,
              formula=f"depthwise causal conv, {k} taps{' + bias' if bias else ''}, + SiLU: "
                      f"{per}·N·C = {per}·{n}·{ch}",
              note="reads and writes the last K − 1 inputs per channel (the conv state)" if decode
              else "writes the last K − 1 inputs per channel (the conv state) for decode"))
    return conv_out


def gated_out(bd: StepBuilder, P: str, core: Tensor, gate: Tensor, gain: Tensor, what: str, width_name: str,
              resid: Tensor, hidden: Tensor, count: int, bias: bool = False) -> None:
    """A recurrent mixer's gated RMSNorm, core · SiLU(z) normalised with its gain (RMSNorm's, SiLU's and the
    multiply's FLOPs per element), then its out_proj (`out_projection`)."""
    n, width = bd.n, core.shape[-1]
    gated = bd.act(f"{P}gated_norm.out", (n, width))
    gn = FLOP_PER_ELEMENT["rmsnorm"] + FLOP_PER_ELEMENT["silu"] + FLOP_PER_ELEMENT["mul"]
    bd.add(Op(f"{P}gated_norm", "rmsnorm_gated", (core, gate, gain), (gated,), {Unit.VECTOR: float(gn * n * width)},
              count, formula=f"{what}: {gn:g}·N·{width_name} = {gn:g}·{n}·{width}"))
    out_projection(bd, P, gated, resid, hidden, count, bias=bias)


def out_projection(bd: StepBuilder, P: str, gated: Tensor, resid: Tensor, hidden: Tensor, count: int,
                   bias: bool = False) -> None:
    """A recurrent mixer's (Gated DeltaNet's, Mamba2's) out_proj back to the hidden size, row-parallel under
    TP with its all-reduce, and the residual add (fused into the matmul's epilogue on one device)."""
    n, width, h = gated.shape[0], gated.shape[1], bd.cfg.hidden_size
    o = bd.act(f"{P}out_proj.out", (n, h))
    o_part = bd.tp_out(f"{P}out_proj", o)
    ob = (Tensor(f"{P}out_proj.bias", (h,), bd.dt.activations, Role.WEIGHT),) if bias else ()
    out = bd.add(matmul_op(f"{P}out_proj", gated, bd.weight(f"{P}out_proj.weight", (width, h)), o_part, count,
                           extra_inputs=ob))
    if o_part is not o:
        out = bd.reduce(f"{P}all_reduce", o_part, o, count)
    res = bd.add(elementwise_op(f"{P}residual", "add", (resid, o), hidden, count))
    if o_part is o:
        bd.fuse(out, res)


__all__ = ["gated_deltanet", "out_projection"]
