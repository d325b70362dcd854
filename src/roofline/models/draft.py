"""A multi-token-prediction module as the draft of speculative decoding (roofline.models.mtp): its step is
one decode step of a one-layer model (the embedding of the token just drafted, the MTP layer, the
model's head), with the module's input projection in front (DeepSeek-V3 technical report §2.2):

    mtp.norms     enorm over the new token's embedding and hnorm over the target's last hidden state:
                  RMSNorm over 2 × [N, h]
    mtp.eh_proj   [N, 2h] @ [2h, h]: 2·N·2h·h FLOPs, the 2h × h weight read whole (vLLM's deepseek_mtp.py
                  builds it as a plain nn.Linear: replicated, not split, under tensor parallelism)
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


__all__ = ["mtp_input"]
