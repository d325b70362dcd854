"""MiniMax-M3's block-sparse attention (MSA) in a step graph: the lightning indexer of its SPARSE layers
and their attention over the key blocks it picks (the shape and its derivation: roofline.models.block_sparse).
Per sparse layer, N = B × T tokens, H_I index heads of d_I (this device's: they split with the query heads),
block b, top-k blocks k, context L:

    indexer.qk_proj    x [N, h] -> H_I·d_I (the index queries) + d_I (the key, one a token): one GEMM
    indexer.norm_rope  Gemma RMSNorm over each d_I head of q and k, RoPE on their first rotary_dim; writes the
                       new key (d_I values in the model's dtype) into the index cache
    indexer.scores     q_h·k over every causal (query, key) pair, max-pooled per block: 2·H_I·d_I on the matrix
                       units and 1·H_I (the max) on the vector lanes a pair; decode reads the whole index cache
                       (roofline.models.dsa.index_scores, DeepSeek's indexer's alike)
    indexer.topk       per index head, the k best of a query's ⌈i/b⌉ block scores: 1 FLOP a block score

Attention on the sparse layers then reads keys(L) = min(L, (k − 1)·b + (L − 1) mod b + 1) keys a decode query
(ModelConfig.read_tokens) and Σ keys(i) pairs in prefill (BlockSparse.pairs, `sparse_prefill`).
"""

from __future__ import annotations

from roofline.dtypes import DTYPES
from roofline.graph import Op, Tensor
from roofline.kernels import FLOP_PER_ELEMENT, matmul_op
from roofline.models.block_sparse import BlockSparse
from roofline.models.deltanet import StepBuilder
from roofline.models.dsa import index_scores
from roofline.models.windows import pairs_kept
from roofline.vocab import Phase, Role, Unit

P = "indexer."


def block_sparse_indexer(bd: StepBuilder, x: Tensor, count: int) -> None:
    """The indexer's ops of the `count` sparse layers; `x` the normed residual [N, h]."""
    cfg, n, b, h, t = bd.cfg, bd.n, bd.b, bd.cfg.hidden_size, bd.shape.tokens_per_sequence
    bs = cfg.block_sparse
    assert bs is not None
    hi, di, rd = bs.index_heads, bs.index_dim, bs.rotary_dims
    qk = bd.act(f"{P}qk", (n, (hi + 1) * di))
    proj = bd.add(matmul_op(f"{P}qk_proj", x, bd.weight(f"{P}qk_proj.weight", (h, (hi + 1) * di)), qk, count))
    dtype = DTYPES["fp32" if bs.key_value_bytes == 4 else "bf16"]
    key_new = Tensor(f"{P}k_cache.new", (b, t, di), dtype, Role.KV_CACHE, persistent=True)
    q = bd.act(f"{P}q", (b, hi, t, di))
    norm, rope = FLOP_PER_ELEMENT["rmsnorm"], FLOP_PER_ELEMENT["rope"]
    gains = tuple(Tensor(f"{P}{w}_norm.weight", (di,), bd.dt.activations, Role.WEIGHT) for w in ("q", "k"))
    flop = norm * n * (hi + 1) * di + rope * n * (hi + 1) * rd
    nr = bd.add(Op(f"{P}norm_rope", "rmsnorm+rope", (qk, *gains), (q, key_new), {Unit.VECTOR: float(flop)}, count,
                   formula=f"RMSNorm {norm:g}·N·(H_I + 1)·d_I + RoPE {rope:g}·N·(H_I + 1)·rotary_dim = "
                           f"{norm:g}·{n}·{hi + 1}·{di} + {rope:g}·{n}·{hi + 1}·{rd}; writes the key "
                           f"({bs.key_bytes} B a token) into the index cache"))
    bd.fuse(proj, nr)
    decode = bd.shape.phase == Phase.DECODE
    blocks = int(bs.blocks(bd.shape.seq if decode else t))
    scores = bd.act(f"{P}block_scores", (b, hi, t, blocks))  # each query's max per key block
    index_scores(bd, P, (q,), key_new, scores, {Unit.MATRIX: 2.0 * hi * di, Unit.VECTOR: 1.0 * hi}, count,
                 "q_h·k, max-pooled over each block of b keys: 2·H_I·d_I on the matrix units + 1·H_I on the vector "
                 "lanes a pair", f"{hi} index heads of {di}; every cached token scored (the indexer is O(L) a token)")
    ranked = b * (blocks if decode else int(bs.block_sum(t)))
    what = f"B·⌈L/b⌉ = {b}·{blocks}" if decode else f"B·Σ⌈i/b⌉ = {b}·{int(bs.block_sum(t))}"
    top = Tensor(f"{P}topk", (b, hi, t, bs.topk), DTYPES["int32"])  # block indices, per index head
    bd.add(Op(f"{P}topk", "topk", (scores,), (top,), {Unit.VECTOR: float(hi * ranked)}, count,
              formula=f"per index head the best {bs.topk} of each query's block scores (its own block"
                      f"{f' and the {bs.local - 1} before it' if bs.local > 1 else ''} forced in): 1·H_I·blocks, "
                      f"blocks {what}: {hi}·{ranked}"))


def sparse_prefill(ops: list[Op], queries: int, bs: BlockSparse) -> list[Op]:
    """Causal prefill attention on the sparse layers: the pairs Σ_i keys(i) (BlockSparse.pairs)."""
    return pairs_kept(ops, queries, int(bs.pairs(queries)),
                      f"top {bs.topk} blocks of {bs.block}: pairs = Σ min(i, (k − 1)·b + (i − 1) mod b + 1)",
                      f"block-sparse: each query attends its top {bs.topk} key blocks of {bs.block}")


__all__ = ["block_sparse_indexer", "sparse_prefill"]
