"""A placed kernel read by the expected-time model: its Shape (the kind and the dimensions each term of
roofline.expectation.model reads, from the placement's ops and machine) and its band under one GPU ×
engine's fits (`expect`), with the fit used and why.

Layering: imports roofline.vocab, this room's model, and roofline.placement and roofline.hardware for
types only.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from roofline.expectation.model import (
    ACTIVATION_BYTES,
    ATTENTION_TILE,
    CONTEXT,
    GEMM,
    GENERATION,
    Fit,
    Shape,
    dtype_key,
    gemm_dtype_key,
    l2_stream_time_s,
)
from roofline.expectation.times import MODEL, ExpectedTimes
from roofline.frozen import frozen
from roofline.vocab import Bound, Level, Unit

if TYPE_CHECKING:
    from roofline.hardware import Machine
    from roofline.placement import Placement


def l2_stream_s(machine: Machine) -> float:
    """τ = L2 capacity / DRAM bandwidth: the time DRAM takes to stream one L2's worth (decode's short
    stream, Fit.short_stream_s); 0 where the machine has no L2 capacity or DRAM bandwidth."""
    l2, dram = machine.memory.get(Level.L2), machine.memory.get(Level.DRAM)
    return l2_stream_time_s(l2.capacity_bytes if l2 is not None else None,
                            dram.bytes_per_s if dram is not None else None)


def shape_of(p: Placement) -> Shape:
    """The kind and shape of a placed kernel: a matmul (gemm.<dtype>), a fused attention (context or
    generation by its queries per sequence), or another kind named by its ops (`other.<dtype>`)."""
    sms = p.machine.chip.sms if p.machine.chip is not None else 0
    compute = max((t for u, t in p.unit_times_s.items() if u is not Unit.EXP), default=0.0)
    # DRAM's time: the on-chip levels feed the matrix units and overlap their time (what the fits show:
    # the slowest level's time in its place fitted H100 prefill attention worse, 14% against 12% MAPE)
    memory = p.level_times_s.get(Level.DRAM, max(p.level_times_s.values(), default=0.0))
    if p.bound in (Level.LINK, Level.NETWORK):  # a collective: its link's time is its memory term
        memory = p.time_s
    exp = p.unit_times_s.get(Unit.EXP, 0.0)
    ops = p.kernel.ops if p.kernel is not None else ()
    kinds = [op.kind for op in ops]
    dt = dtype_key(p.dtype.name)
    if kinds == ["matmul"]:
        out = ops[0].outputs[0].shape
        batch = math.prod(out[:-2]) if len(out) > 2 else 1
        m, n, depth = out[-2] * batch, out[-1], ops[0].inputs[0].shape[-1]
        dram = p.machine.memory.get(Level.DRAM)
        bw = dram.bytes_per_s if dram is not None and dram.bytes_per_s else 0.0
        act, res = ((m * depth * ACTIVATION_BYTES / bw, m * n * ACTIVATION_BYTES / bw) if bw else (0.0, 0.0))
        dt = gemm_dtype_key(p.dtype.name, tuple(t.dtype.name for t in ops[0].inputs))
        return Shape(f"{GEMM}.{dt}", p.time_s, compute, m, n, sms, memory_s=memory, exp_s=exp, input_s=act,
                     output_s=res, k=depth)
    if "attention_qk" in kinds:
        qk = ops[kinds.index("attention_qk")]
        q, k = qk.inputs[0], qk.inputs[1]
        b, h, nq = q.shape[0], q.shape[1], q.shape[2]
        g, nkv = k.shape[1], k.shape[2]
        kt = math.ceil(nkv / ATTENTION_TILE)
        if nq == 1:  # decode: each sequence's K/V heads stream their key tiles
            return Shape(f"{GENERATION}.{dtype_key(k.dtype.name)}", p.time_s, compute, 0, 0, sms,
                         float(b * g * kt), float(b * h), memory_s=memory, exp_s=exp, kv_heads=float(b * g),
                         head_dim=q.shape[3], l2_s=l2_stream_s(p.machine))
        # FlashAttention tiles the queries of the heads sharing a K/V head together: b·g groups of nq·h/g rows
        rows = b * g * math.ceil(nq * (h // g) / ATTENTION_TILE) * ATTENTION_TILE
        # causal, per query head: query tile i visits the key tiles up to its own, qt(qt+1)/2 pairs
        qt = math.ceil(nq / ATTENTION_TILE)
        pairs = qt * (qt + 1) / 2 if nq == nkv else qt * kt
        return Shape(f"{CONTEXT}.{dt}", p.time_s, compute, rows, 0, sms, b * h * pairs, float(b * h),
                     memory_s=memory, exp_s=exp, kv_heads=float(b * g), head_dim=q.shape[3],
                     query_tiles=float(b * h * qt), narrow_kv=k.dtype.bytes_per_element < q.dtype.bytes_per_element)
    return Shape(f"other.{dt}", p.time_s, compute, 0, 0, sms, memory_s=memory, exp_s=exp)


@frozen
class Expected:
    """A placed kernel's band, with the fit used and why (a nearer kind, a borrowed machine)."""

    floor_s: float
    low_s: float
    high_s: float
    kind: str
    fit: Fit
    note: str
    times: ExpectedTimes

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low_s, "high": self.high_s}

    def calibration_dict(self) -> dict[str, Any]:
        return {"file": self.times.file, "machine": self.times.machine, "engine": self.times.engine,
                "engine_version": self.times.engine_version, "source": dict(self.times.source),
                "kind": self.kind, "fit": self.fit.to_dict(), "model": MODEL,
                "note": "; ".join(n for n in (self.note, self.times.origin) if n)}


def expect(p: Placement, times: ExpectedTimes, shape: Shape | None = None) -> Expected:
    """The band of one placed kernel under `times` (the floor is the placement's, untouched);
    `shape`: shape_of(p) where the caller has it already."""
    shape = shape_of(p) if shape is None else shape
    fit, note = times.fit_for(shape.kind, Bound(p.bound_class))
    low, high = fit.band_s(shape)
    return Expected(shape.floor_s, low, high, shape.kind, fit, note, times)


__all__ = ["Expected", "expect", "l2_stream_s", "shape_of"]
