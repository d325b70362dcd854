"""Attention residuals, a residual-stream mixer (Kimi K3's `attn_res_block_size`; Block AttnRes of MoonshotAI's
"Attention Residuals", arXiv 2603.15031; computed as TensorRT-LLM@000a860 tensorrt_llm/_torch/models/
modeling_kimi_linear.py `_apply_attn_res` and KimiLinearDecoderLayer.forward, its port of the checkpoint's
modeling_kimi.py).

The stream keeps snapshots b_0, b_1, ... of the residual and a running partial sum p. Layer i (0-based, L
layers, block B = attn_res_block_size):

    x = mix(p, snapshots) if there are snapshots else p          (layer 0: the embedding itself)
    if i mod B == 0: snapshots += [p]; p = 0                     (b_0 the embedding, then every B layers)
    p = p + attn(norm(x));  x = mix(p, snapshots);  p = p + mlp(norm(x))
    the head: norm(mix(p, snapshots))

mix over C = K + 1 candidates v (the K snapshots and p), per token: k_j = RMSNorm(v_j) without its gain,
score_j = k_j · (norm.weight ⊙ proj.weight) (proj: a Linear h -> 1, the layer's pseudo-query), α =
softmax(score), out = Σ_j α_j·v_j. FLOPs a token (vector lanes): v² and its mean 2, · rsqrt 1, the dot 2 per
value: 5·C·h; the softmax FLOP_PER_ELEMENT["softmax"]·C (C exponentials); the weighted sum 2·C·h. Bytes: the
K snapshots [K, N, h] are read from memory by every mix (a depth-wise attention: nothing is cached across
steps); all of them stay live through the step: ⌊(L − 1)/B⌋ + 1 of [N, h] (8 for K3's 93 layers at 12).

Snapshots before layer i's attention mix: K = ⌈i/B⌉ (i ≥ 1); before its MLP mix: ⌊i/B⌋ + 1; the head:
⌊(L − 1)/B⌋ + 1. Parameters: per layer two RMSNorm gains and two h -> 1 projections (self_attention_res_norm,
self_attention_res_proj, mlp_res_norm, mlp_res_proj), the head's pair: 4·h·L + 2·h, part "attn_res" (their
dot product is the mix's vector work, not a matmul). mHC's collapse (roofline.models.compressed_ops) is the
same weighted sum over its n streams: `weighted_sum_flop` is both. The step graph's ops: roofline.models.attn_res_ops.
"""

from __future__ import annotations

from roofline.frozen import frozen
from roofline.kernels import FLOP_PER_ELEMENT

SCORE_FLOP = 5  # per value of a candidate: v² and its mean (2), the multiply by rsqrt (1), the dot (2)


def weighted_sum_flop(rows: int, candidates: int, width: int) -> int:
    """Σ_j α_j·v_j over `candidates` vectors of `width`, for `rows` tokens: a multiply and an add a value."""
    return 2 * rows * candidates * width


@frozen
class AttentionResiduals:
    """Block AttnRes over `layers` layers, a snapshot every `block_size` (see the module docstring)."""

    block_size: int
    layers: int

    @property
    def live_snapshots(self) -> int:
        """Snapshots kept through the step, all of them read by the head's mix: ⌊(L − 1)/B⌋ + 1."""
        return (self.layers - 1) // self.block_size + 1

    def mixes(self) -> tuple[tuple[int, int], ...]:
        """The layers' mixes as (snapshots K, how many mixes read K), K ascending: before attention
        ⌈i/B⌉ for i = 1..L−1, before the MLP ⌊i/B⌋ + 1 for i = 0..L−1 (the head's is `live_snapshots`)."""
        b = self.block_size
        counts: dict[int, int] = {}
        for i in range(self.layers):
            for k in ((-(-i // b),) if i else ()) + (i // b + 1,):
                counts[k] = counts.get(k, 0) + 1
        return tuple(sorted(counts.items()))

    @property
    def candidates_per_token(self) -> int:
        """Σ C over every mix a token goes through, the head's included (1002 for K3)."""
        return sum((k + 1) * c for k, c in self.mixes()) + self.live_snapshots + 1

    @property
    def snapshot_reads_per_token(self) -> int:
        """Σ K: snapshot rows of h a token's mixes read from memory (816 for K3)."""
        return sum(k * c for k, c in self.mixes()) + self.live_snapshots

    @staticmethod
    def mix_flop_per_token(candidates: int, hidden: int) -> float:
        """One mix over C candidates: 5·C·h scores + softmax 5·C + the weighted sum 2·C·h."""
        return float(SCORE_FLOP * candidates * hidden + FLOP_PER_ELEMENT["softmax"] * candidates
                     + weighted_sum_flop(1, candidates, hidden))

    def flop_per_token(self, hidden: int) -> float:
        """Every mix of a token, the head's included."""
        return self.mix_flop_per_token(self.candidates_per_token, hidden)

    def params(self, hidden: int) -> int:
        """Two gains and two pseudo-queries a layer, and the head's two: 4·h·L + 2·h."""
        return 4 * hidden * self.layers + 2 * hidden


__all__ = ["SCORE_FLOP", "AttentionResiduals", "weighted_sum_flop"]
