"""Prefill attention under a sliding window or in chunks: the full causal ops scaled to the pairs kept
(roofline.models.formulas.windowed_pairs, shared with the numpy step model)."""

from __future__ import annotations

from dataclasses import replace

from roofline.graph import Op
from roofline.models.formulas import windowed_pairs


def windowed(ops: list[Op], queries: int, window: int | None, chunked: bool = False,
             label: str = "sliding window") -> list[Op]:
    """Causal prefill attention under a sliding window: each query sees at most W keys, so the FLOPs
    scale by Σ min(i, W) / Σ i (DeepSeek Sparse Attention's top-k alike, `label` "DSA top-k");
    `chunked` (Llama 4), each query its own chunk of W. The naive kernels still write the full N×N
    score matrix."""
    if window is None or queries <= window:
        return ops
    what = "chunks" if chunked else label
    rule = "q·C(C+1)/2 + r(r+1)/2" if chunked else "W(W+1)/2 + (N−W)·W"
    return pairs_kept(ops, queries, windowed_pairs(queries, window, chunked), f"{what} {window}: pairs = {rule}",
                      f"{what} {window}: only pairs within the {'chunk' if chunked else 'window'} are counted")


def pairs_kept(ops: list[Op], queries: int, pairs: int, rule: str, note: str) -> list[Op]:
    """The full causal ops of `queries` queries scaled to the `pairs` (query, key) pairs attended (a window's,
    a top-k's, MiniMax-M3's key blocks'): FLOPs and tile traffic by pairs / (N(N+1)/2)."""
    full = windowed_pairs(queries, None)
    if pairs == full:
        return ops
    ratio = pairs / full
    return [replace(op, flop_by_unit={u: f * ratio for u, f in op.flop_by_unit.items()},
                    traffic={lv: b * ratio for lv, b in op.traffic.items()},  # the tiles of the pairs kept
                    onchip=op.onchip.scaled(ratio) if op.onchip is not None else None,
                    formula=f"{op.formula}; {rule} = {pairs}", note=note)
            for op in ops]


__all__ = ["pairs_kept", "windowed"]
