"""DeepSeek Sparse Attention's lightning indexer in a step graph (DeepSeek-V3.2-Exp inference/model.py
Indexer; vLLM deepseek_v2.py): per MLA layer, N = B × T tokens, H_I index heads of d_I, context L:

    indexer.wq_b          the query latent (q_a_norm.out, q_lora wide) -> H_I·d_I
    indexer.wk            h -> d_I (one key per token, shared by the index heads)
    indexer.weights_proj  h -> H_I (each index head's weight)
    indexer.norm_rope     LayerNorm of k over d_I, RoPE on the first rope_dim of q and k, the Hadamard
                          rotation of q and k (d_I·log2(d_I) adds a vector) and their FP8 cast; writes
                          the new key, FP8 with a float32 scale a 128 values, into the index cache
    indexer.scores        Σ_h w_h · ReLU(q_h · k) over every (query, key) pair: 2·H_I·d_I on the matrix
                          units and 3·H_I (ReLU, weight, sum) on the vector lanes a pair; decode reads
                          the whole index cache, L keys a sequence: the indexer is O(L) a token
    indexer.topk          keep the best topk of each query's scores: 1 FLOP a score

MLA then attends the top-k tokens only (roofline.models.build: min(L, topk) latent rows in decode,
Σ min(i, topk) pairs in prefill). vLLM runs the indexer replicated (its projections are
ReplicatedLinear): under tensor parallelism every device runs it whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, matmul_op
from roofline.models.deltanet import StepBuilder
from roofline.models.formulas import windowed_pairs
from roofline.vocab import Phase, Role, Unit

P = "indexer."


def lightning_indexer(bd: StepBuilder, x: Tensor, q_latent: Tensor, count: int) -> None:
    """The indexer's ops of the MLA layers (`count` of them): `x` the normed residual [N, h],
    `q_latent` the query latent [N, q_lora]."""
    cfg, n, b, h = bd.cfg, bd.n, bd.b, bd.cfg.hidden_size
    ix = cfg.indexer
    assert ix is not None
    hi, di, dr = ix.heads, ix.head_dim, cfg.qk_rope_head_dim
    q = bd.act(f"{P}q", (n, hi * di))
    bd.add(matmul_op(f"{P}wq_b", q_latent, bd.weight(f"{P}wq_b.weight", (q_latent.shape[-1], hi * di)), q, count))
    k = bd.act(f"{P}k", (n, di))
    bd.add(matmul_op(f"{P}wk", x, bd.weight(f"{P}wk.weight", (h, di)), k, count))
    w = bd.act(f"{P}weights", (n, hi))
    bd.add(matmul_op(f"{P}weights_proj", x, bd.weight(f"{P}weights_proj.weight", (h, hi)), w, count))
    fp8 = DTYPES["fp8_e4m3"]
    t = bd.shape.tokens_per_sequence
    key_new = Tensor(f"{P}k_cache.new", (b, t, ix.key_bytes), fp8, Role.KV_CACHE, persistent=True)
    q8 = bd.act(f"{P}q.fp8", (n, hi * di))
    ln, rope = FLOP_PER_ELEMENT["layernorm"], FLOP_PER_ELEMENT["rope"]
    had = int(math.log2(di)) if di & (di - 1) == 0 else math.ceil(math.log2(di))
    flop = ln * n * di + rope * n * (hi + 1) * dr + had * n * (hi + 1) * di
    gains = tuple(Tensor(f"{P}k_norm.{p}", (di,), bd.dt.activations, Role.WEIGHT) for p in ("weight", "bias"))
    bd.add(Op(f"{P}norm_rope", "layernorm+rope+hadamard", (q, k, *gains), (q8, key_new), {Unit.VECTOR: float(flop)},
              count, formula=f"LayerNorm {ln:g}·N·d_I + RoPE {rope:g}·N·(H_I + 1)·rope_dim + Hadamard "
                             f"log2(d_I)·N·(H_I + 1)·d_I = {ln:g}·{n}·{di} + {rope:g}·{n}·{hi + 1}·{dr} + "
                             f"{had}·{n}·{hi + 1}·{di}; writes the FP8 key and its scale "
                             f"({ix.key_bytes} B a token) into the index cache"))
    # the reference writes each query's scores over the keys (masked causally in prefill), then picks
    scores = bd.act(f"{P}scores", (b, t, bd.shape.seq if bd.shape.phase == Phase.DECODE else t))
    pairs = index_scores(bd, P, (q8, w), key_new, scores, {Unit.MATRIX: 2.0 * hi * di, Unit.VECTOR: 3.0 * hi}, count,
                         "Σ_h w_h·ReLU(q_h·k): 2·H_I·d_I on the matrix units + 3·H_I on the vector lanes a pair",
                         f"{hi} index heads of {di}; every cached token scored (the indexer is O(L) a token)")
    top = Tensor(f"{P}topk", (n, ix.topk), DTYPES["int32"])  # token indices
    bd.add(Op(f"{P}topk", "topk", (scores,), (top,), {Unit.VECTOR: float(pairs)}, count,
              formula=f"select the best {ix.topk} of each query's scores: 1·pairs = {pairs}"))


def index_scores(bd: StepBuilder, p: str, queries: tuple[Tensor, ...], key_new: Tensor, scores: Tensor,
                 per_pair: Mapping[Unit, float], count: int, rule: str, note: str) -> int:
    """An indexer's scores of every causal (query, key) pair, DeepSeek's and MiniMax-M3's alike: prefill the
    prompt's B·T(T+1)/2 pairs against the keys it writes (`key_new`, [B, T, ...]), decode each query against
    its sequence's whole index cache, B·L pairs, read from `p`k_cache (the indexer is O(L) a token). FLOPs
    `per_pair` by unit; returns the pairs."""
    b, t = bd.b, bd.shape.tokens_per_sequence
    if bd.shape.phase == Phase.DECODE:
        keys = bd.shape.seq
        pairs = b * keys
        cache = Tensor(f"{p}k_cache", (b, keys, *key_new.shape[2:]), key_new.dtype, Role.KV_CACHE)
        inputs: tuple[Tensor, ...] = (*queries, cache)
        what = f"B·L = {b}·{keys}"
    else:
        pairs = b * int(windowed_pairs(t, None))
        inputs = (*queries, key_new)
        what = f"B·T(T+1)/2 = {b}·{t}·{t + 1}/2"
    bd.add(Op(f"{p}scores", "index_scores", inputs, (scores,), {u: f * pairs for u, f in per_pair.items()}, count,
              formula=f"{rule}, pairs {what} = {pairs}", note=note))
    return pairs


__all__ = ["index_scores", "lightning_indexer"]
