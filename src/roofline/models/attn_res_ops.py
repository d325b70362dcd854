"""Kimi K3's attention residuals in a step graph (the shape and its derivation: roofline.models.attn_res): one op
per snapshot count K, run by the mixes that read K snapshots (before each layer's attention and MLP norms), and
the head's mix before the final norm. Each reads its K snapshots [K, N, h] and the partial sum [N, h] and writes
the norm's input [N, h]; nothing is sharded under tensor parallelism (the hidden state is whole on every device).
"""

from __future__ import annotations

from roofline.graph import OnChip, Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT
from roofline.models.attn_res import SCORE_FLOP, AttentionResiduals
from roofline.models.deltanet import StepBuilder
from roofline.vocab import Unit


def _mix(bd: StepBuilder, name: str, p: Tensor, k: int, rows: int, count: int) -> Tensor:
    h = bd.cfg.hidden_size
    snapshots = bd.act(f"{name}.snapshots", (k, rows, h))  # b_0 .. b_{K-1}, kept since they were taken
    out = bd.act(f"{name}.out", (rows, h))
    gains = tuple(bd.weight(f"attn_res.{w}", (h,)) for w in ("norm.weight", "proj.weight"))
    c = k + 1
    flop = rows * AttentionResiduals.mix_flop_per_token(c, h)
    sm = FLOP_PER_ELEMENT["softmax"]
    bd.add(Op(name, "attn_res", (snapshots, p, *gains), (out,), {Unit.VECTOR: flop}, count,
              onchip=OnChip({Unit.EXP: float(rows * c)}),
              formula=f"softmax over C = K + 1 = {c} candidates (the {k} snapshot{'s' * (k > 1)} and the partial "
                      f"sum) a token: "
                      f"scores {SCORE_FLOP}·C·h + softmax {sm:g}·C + Σ α·v 2·C·h = "
                      f"{rows}·({SCORE_FLOP}·{c}·{h} + {sm:g}·{c} + 2·{c}·{h})",
              note=f"reads {k} snapshot{'s' * (k > 1)} of the residual stream [{k}, {rows}, {h}] (attention "
                   f"residuals)"))
    return out


def attn_res_layers(bd: StepBuilder, resid: Tensor) -> None:
    """Every layer's two mixes, one op per snapshot count K (count: the mixes that read K)."""
    ar = bd.cfg.attn_res
    assert ar is not None
    for k, count in ar.mixes():
        _mix(bd, f"attn_res.k{k}", resid, k, bd.n, count)


def attn_res_head(bd: StepBuilder, resid: Tensor, rows: int) -> Tensor:
    """The head's mix over every snapshot, before the final norm (`rows`: the positions projected)."""
    ar = bd.cfg.attn_res
    assert ar is not None
    p = resid if rows == bd.n else bd.act("resid.last", (rows, bd.cfg.hidden_size))
    return _mix(bd, "attn_res.head", p, ar.live_snapshots, rows, 1)


__all__ = ["attn_res_head", "attn_res_layers"]
