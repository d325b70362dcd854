"""A multi-token-prediction module as the draft of speculative decoding (roofline.models.mtp): its step is
one decode step of a one-layer model (the embedding of the token just drafted, the MTP layer, the
model's head), with the module's input projection in front (DeepSeek-V3 technical report §2.2):

    mtp.norms     enorm over the new token's embedding and hnorm over the target's last hidden state:
                  RMSNorm over 2 × [N, h]
    mtp.eh_proj   [N, 2h] @ [2h, h]: 2·N·2h·h FLOPs, the 2h × h weight read whole (vLLM's deepseek_mtp.py
                  builds it as a plain nn.Linear: replicated, not split, under tensor parallelism)

DeepSeek-V4's (DeepSeek's reference MTPBlock.forward, ROCm/ATOM@22da013 atom/models/deepseek_v4_mtp.py): the
target hands over its n = hc_mult residual streams, not one hidden state, and two projections replace eh_proj:

    mtp.norms     enorm over the embedding [N, h], hnorm over each stream [N·n, h]: RMSNorm over N·h + N·n·h
    mtp.e_proj    [N, h] @ [h, h]; mtp.h_proj [N·n, h] @ [h, h] (each stream); both replicated under TP
    mtp.streams   e_proj's row added to each of the n streams: N·n·h adds; then the Block (mHC, its attention,
                  its MoE) and its own hc_head, norm and the target's head
"""

from __future__ import annotations

from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, matmul_op
from roofline.models.deltanet import StepBuilder
from roofline.vocab import Unit


def mtp_input(bd: StepBuilder, embedded: Tensor, resid: Tensor) -> None:
    """From the drafted token's embedding `embedded` [N, h] and the target's hidden state into `resid`."""
    n, h = bd.n, bd.cfg.hidden_size
    previous = bd.act("mtp.previous_hidden", (n, h))
    joined = bd.act("mtp.eh_in", (n, 2 * h))
    gains = tuple(bd.weight(f"mtp.{g}.weight", (h,)) for g in ("enorm", "hnorm"))
    per = FLOP_PER_ELEMENT["rmsnorm"]
    bd.add(Op("mtp.norms", "rmsnorm", (embedded, previous, *gains), (joined,), {Unit.VECTOR: per * 2 * n * h}, 1,
              formula=f"enorm and hnorm, RMSNorm {per:g}·2·N·h = {per:g}·2·{n}·{h}"))
    bd.add(matmul_op("mtp.eh_proj", joined, bd.weight("mtp.eh_proj.weight", (2 * h, h)), resid, 1))


def mtp_streams(bd: StepBuilder, embedded: Tensor) -> Tensor:
    """DeepSeek-V4's MTP input: from the drafted token's embedding [N, h] and the target's streams [N, n·h]
    into the block's streams (the docstring's mtp.norms, e_proj, h_proj, streams)."""
    cp = bd.cfg.compressed
    assert cp is not None
    n, h, hc = bd.n, bd.cfg.hidden_size, cp.hc_mult
    previous = bd.act("mtp.previous_streams", (n * hc, h))
    e_n, x_n = bd.act("mtp.enorm.out", (n, h)), bd.act("mtp.hnorm.out", (n * hc, h))
    gains = tuple(bd.weight(f"mtp.{g}.weight", (h,)) for g in ("enorm", "hnorm"))
    per = FLOP_PER_ELEMENT["rmsnorm"]
    bd.add(Op("mtp.norms", "rmsnorm", (embedded, previous, *gains), (e_n, x_n), {Unit.VECTOR: per * (1 + hc) * n * h},
              1, formula=f"enorm over N·h and hnorm over each of the n streams N·n·h: {per:g}·(1 + {hc})·{n}·{h}"))
    e, x = bd.act("mtp.e_proj.out", (n, h)), bd.act("mtp.h_proj.out", (n * hc, h))
    bd.add(matmul_op("mtp.e_proj", e_n, bd.weight("mtp.e_proj.weight", (h, h)), e, 1))
    bd.add(matmul_op("mtp.h_proj", x_n, bd.weight("mtp.h_proj.weight", (h, h)), x, 1))
    streams = bd.act("mhc.streams", (n, hc * h))
    bd.add(Op("mtp.streams", "add", (e, x), (streams,), {Unit.VECTOR: float(n * hc * h)}, 1,
              formula=f"e_proj's row added to each of the n streams: N·n·h = {n}·{hc}·{h}"))
    return streams


__all__ = ["mtp_input", "mtp_streams"]
