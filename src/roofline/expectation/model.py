"""The expected-time model: a placed kernel's floor mapped to the band real kernels take.

The floor comes from placement alone (the machine's ceilings); this room never changes it. Measured
kernels take longer: they reach a share e of the roof asymptotically and pay a fixed cost t0 per
launch (the usual first fit of a roofline, t = floor / e + t0). Small matmuls also lose to wave
quantization: an output of `tiles` thread-block tiles runs in ⌈tiles / SMs⌉ waves, each as long as
one full wave, so the matrix units' term is stretched by

    q = ⌈tiles / SMs⌉ · SMs / tiles                 (q = 1 when the tiles fill whole waves)

and the model is, per GPU × engine × kernel kind,

    t      = max(floor, compute time · q) / e + t0 + c_tile · tile pairs / SMs + c_head · sequences·heads / SMs
    band   = [t · r25, t · r75], never below the floor

The last two terms are attention's fixed costs at short length (zero for GEMMs): each (query tile,
key tile) step of 128 × 128 a FlashAttention-style kernel visits (causal prefill: ⌈nq/128⌉·(⌈nq/128⌉+1)/2
per sequence and query head; decode: ⌈kv/128⌉ key tiles per sequence and K/V head), and each sequence ×
query head (its softmax state set up and its output written), spread over the SMs. Measured H100
context attention grew with the number of sequences at a fixed token count until the per-head term
was added (median measured/t 0.90 at batch 1, 2.40 at batch 256 with t0 alone).

with r25 and r75 the 25th and 75th percentiles of measured / t over the rows fitted
(roofline.calibration.fit writes them; the shipped files in expectation/data/ name their tables,
package version, engine version and rows used).

Kinds (`kind_of`): gemm.<dtype> (bf16, fp8, fp8_block, nvfp4), context_attention.<dtype> (causal
prefill, FlashAttention-style), generation_attention.<kv dtype> (decode: one query per sequence). A
kernel of another kind (a norm, an elementwise op) takes the fit of the kind nearest its bound: a
compute-bound one the GEMM of its dtype, a memory-bound one decode attention (a streaming read of
the KV cache), and says so.

Layering: imports roofline.errors, roofline.dtypes, roofline.vocab and roofline.placement (types).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.vocab import Bound, Unit

if TYPE_CHECKING:
    from roofline.placement import Placement

FORMAT = "roofline-expected-times"
VERSION = 1
MODEL = ("t = max(floor, compute time x waves) / e + t0 + per-tile cost x tile pairs / SMs "
         "+ per-head cost x sequences x heads / SMs; "
         "waves = ceil(tiles / SMs) x SMs / tiles; band = t x [25th, 75th percentile of measured / t]")

# our dtype names -> the table's dtype key
DTYPE_KEY: Mapping[str, str] = {
    "bf16": "bf16", "fp16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "mxfp8": "fp8", "nvfp4": "nvfp4",
    "mxfp4": "nvfp4", "fp4": "nvfp4",
}
GEMM, CONTEXT, GENERATION = "gemm", "context_attention", "generation_attention"
FALLBACK_MEMORY = f"{GENERATION}.bf16"
ATTENTION_TILE = 128  # FlashAttention-3's 128 queries × 128 keys (roofline.kernels.ATTENTION_TILE)


def waves_factor(tiles: int, sms: int) -> float:
    """q = ⌈tiles / SMs⌉ · SMs / tiles: 1 for whole waves; 132 SMs and 133 tiles give 2·132/133 = 1.985."""
    if tiles <= 0 or sms <= 0:
        return 1.0
    return math.ceil(tiles / sms) * sms / tiles


@dataclass(frozen=True)
class Shape:
    """What the expected-time model reads of a placed kernel."""

    kind: str  # gemm.bf16, context_attention.bf16, ...
    floor_s: float
    compute_s: float  # the FLOP units' term of the floor (what wave quantization stretches)
    m: int = 0  # gemm: output rows and columns; attention: query rows (all heads) and 0
    n: int = 0
    sms: int = 0
    tile_pairs: float = 0.0  # attention: (query tile, key tile) pairs of 128 × 128 the kernel visits
    heads: float = 0.0  # attention: sequences × query heads (each one a softmax state to set up and write)


def tiles_of(shape: Shape, tile: tuple[int, int]) -> int:
    """Output tiles: ⌈m / tile_m⌉ · ⌈n / tile_n⌉ (attention: ⌈query rows / tile_m⌉, n = 0)."""
    if shape.m <= 0:
        return 0
    return math.ceil(shape.m / tile[0]) * (math.ceil(shape.n / tile[1]) if shape.n > 0 else 1)


@dataclass(frozen=True)
class Fit:
    """One kind's fitted constants: efficiency e in (0, 1], fixed cost t0 ≥ 0 s, the tile the waves
    are counted in (None: no wave term), the residual band (r25, r75) and how many rows made it."""

    kind: str
    efficiency: float
    t0_s: float
    low: float
    high: float
    rows: int
    tile: tuple[int, int] | None = None
    mape: float | None = None  # in-sample mean |t − measured| / measured
    per_tile_s: float = 0.0  # attention: the fixed cost of one (query tile, key tile) step on one SM
    per_head_s: float = 0.0  # attention: the fixed cost of one sequence × query head on one SM

    def __post_init__(self) -> None:
        if not 0 < self.efficiency <= 1:
            raise RooflineError(f"{self.kind}: efficiency must be in (0, 1], got {self.efficiency:g}")
        for what, v in (("tile", self.per_tile_s), ("head", self.per_head_s)):
            if v < 0 or not math.isfinite(v):
                raise RooflineError(f"{self.kind}: the cost per {what} must be a finite time ≥ 0, got {v:g}")
        if self.t0_s < 0 or not math.isfinite(self.t0_s):
            raise RooflineError(f"{self.kind}: t0 must be a finite time ≥ 0, got {self.t0_s:g}")
        if not 0 < self.low <= self.high:
            raise RooflineError(f"{self.kind}: the band needs 0 < low ≤ high, got {self.low:g}, {self.high:g}")

    def stretched_floor_s(self, shape: Shape) -> float:
        """max(floor, compute time · q): the floor with the last wave's idle SMs counted."""
        if self.tile is None:
            return shape.floor_s
        return max(shape.floor_s, shape.compute_s * waves_factor(tiles_of(shape, self.tile), shape.sms))

    @staticmethod
    def per_sm(shape: Shape) -> tuple[float, float]:
        """(tile pairs, sequences × heads) per SM (0 without per-SM data)."""
        return (shape.tile_pairs / shape.sms, shape.heads / shape.sms) if shape.sms else (0.0, 0.0)

    def expected_s(self, shape: Shape) -> float:
        """t = max(floor, compute · q) / e + t0 + per-tile cost · tile pairs / SMs + per-head cost · heads / SMs."""
        tiles, heads = self.per_sm(shape)
        return (self.stretched_floor_s(shape) / self.efficiency + self.t0_s + self.per_tile_s * tiles
                + self.per_head_s * heads)

    def band_s(self, shape: Shape) -> tuple[float, float]:
        """(low, high) = t · (r25, r75), each at least the floor."""
        return self.band_around(self.expected_s(shape), shape.floor_s)

    def band_around(self, t: float, floor_s: float) -> tuple[float, float]:
        """(low, high) = t · (r25, r75) for an expected time t already computed, each at least the floor."""
        low = max(floor_s, t * self.low)
        return low, max(low, t * self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"efficiency": self.efficiency, "t0_s": self.t0_s, "band": [self.low, self.high],
                "tile": list(self.tile) if self.tile else None,
                "per_tile_s": self.per_tile_s, "per_head_s": self.per_head_s, "rows": self.rows, "mape": self.mape}


@dataclass(frozen=True)
class ExpectedTimes:
    """Fits of one GPU × engine, with where they came from. `borrowed_for` names the machine they
    are applied to when it has no tables of its own (the nearest architecture's fit)."""

    machine: str
    engine: str
    engine_version: str
    source: Mapping[str, Any]
    fits: Mapping[str, Fit] = field(default_factory=dict)
    file: str = ""
    borrowed_for: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "fits", MappingProxyType(dict(self.fits)))
        object.__setattr__(self, "source", MappingProxyType(dict(self.source)))

    @property
    def origin(self) -> str:
        """In words: the tables, the engine, the rows, and a borrowing if there is one."""
        rows = sum(f.rows for f in self.fits.values())
        pkg = f"{self.source.get('package', 'measured tables')} {self.source.get('version', '')}".strip()
        text = (f"fitted on {rows} measured kernels of {self.machine} ({self.engine} {self.engine_version}, "
                f"{pkg})")
        if self.borrowed_for:
            text += f"; {self.borrowed_for} has no measured tables: the nearest architecture's fit, {self.machine}"
        return text

    def fit_for(self, kind: str, bound: Bound) -> tuple[Fit, str]:
        """The fit of `kind`, or of the kind nearest its bound (and why), or an error listing the kinds."""
        if kind in self.fits:
            return self.fits[kind], ""
        family, _, dtype = kind.partition(".")
        if bound is Bound.COMPUTE:
            for near in (f"{GEMM}.{dtype}", f"{GEMM}.bf16"):
                if near in self.fits:
                    return self.fits[near], f"no {kind} rows: the {near} fit (a compute-bound kernel)"
        for near in (f"{family}.bf16", FALLBACK_MEMORY, f"{GEMM}.bf16"):
            if near in self.fits:
                return self.fits[near], f"no {kind} rows: the {near} fit (the nearest measured kind)"
        raise RooflineError(f"no fit for {kind} in {self.file or self.machine}; it has: {', '.join(self.fits)}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "machine": self.machine, "engine": self.engine,
                "engine_version": self.engine_version, "source": dict(self.source), "model": MODEL,
                "fits": {k: f.to_dict() for k, f in self.fits.items()}}


def _dtype_key(name: str) -> str:
    return DTYPE_KEY.get(name, name)


def shape_of(p: Placement) -> Shape:
    """The kind and shape of a placed kernel: a matmul (gemm.<dtype>), a fused attention (context or
    generation by its queries per sequence), or another kind named by its ops (`other.<dtype>`)."""
    sms = p.machine.chip.sms if p.machine.chip is not None else 0
    compute = max((t for u, t in p.unit_times_s.items() if u is not Unit.EXP), default=0.0)
    ops = p.kernel.ops if p.kernel is not None else ()
    kinds = [op.kind for op in ops]
    dt = _dtype_key(p.dtype.name)
    if kinds == ["matmul"]:
        out = ops[0].outputs[0].shape
        batch = math.prod(out[:-2]) if len(out) > 2 else 1
        return Shape(f"{GEMM}.{dt}", p.time_s, compute, out[-2] * batch, out[-1], sms)
    if "attention_qk" in kinds:
        qk = ops[kinds.index("attention_qk")]
        q, k = qk.inputs[0], qk.inputs[1]
        b, h, nq = q.shape[0], q.shape[1], q.shape[2]
        g, nkv = k.shape[1], k.shape[2]
        kt = math.ceil(nkv / ATTENTION_TILE)
        if nq == 1:  # decode: each sequence's K/V heads stream their key tiles
            return Shape(f"{GENERATION}.{_dtype_key(k.dtype.name)}", p.time_s, compute, 0, 0, sms,
                         float(b * g * kt), float(b * h))
        # FlashAttention tiles the queries of the heads sharing a K/V head together: b·g groups of nq·h/g rows
        rows = b * g * math.ceil(nq * (h // g) / ATTENTION_TILE) * ATTENTION_TILE
        # causal, per query head: query tile i visits the key tiles up to its own, qt(qt+1)/2 pairs
        qt = math.ceil(nq / ATTENTION_TILE)
        pairs = qt * (qt + 1) / 2 if nq == nkv else qt * kt
        return Shape(f"{CONTEXT}.{dt}", p.time_s, compute, rows, 0, sms, b * h * pairs, float(b * h))
    return Shape(f"other.{dt}", p.time_s, compute, 0, 0, sms)


@dataclass(frozen=True)
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


def expect(p: Placement, times: ExpectedTimes) -> Expected:
    """The band of one placed kernel under `times` (the floor is the placement's, untouched)."""
    shape = shape_of(p)
    fit, note = times.fit_for(shape.kind, Bound(p.bound_class))
    low, high = fit.band_s(shape)
    return Expected(p.time_s, low, high, shape.kind, fit, note, times)


__all__ = ["FORMAT", "MODEL", "VERSION", "Expected", "ExpectedTimes", "Fit", "Shape", "expect", "shape_of",
           "tiles_of", "waves_factor"]
