"""Expected, not only ideal: the efficiencies measured kernels reach, and the bands they give.

The floor is the roofline: every kernel at its bound's peak. Real kernels reach a share of it. The
defaults are the usual published figures, all overridable (`Efficiency(...)`, or the CLI's
--efficiency-matmul, --efficiency-memory, --efficiency-comm and --step-overhead):

    compute-bound (matmul) kernels   70–80% of the peak FLOP/s      (cuBLAS/CUTLASS GEMMs at serving shapes)
    memory-bound kernels             80–90% of the DRAM bandwidth   (STREAM-like copies, decode attention)
    collectives                      80–90% of the link's bandwidth (nccl-tests' busbw sits below the link figure)
    per-step overhead                20–50 µs a step                (kernel launches and the scheduler: an assumption)

Expected time of a step:

    expected = Σ over kernels of floor / efficiency of its bound class  +  per-step overhead
    low      = Σ floor / high efficiency + low overhead      high = Σ floor / low efficiency + high overhead

so floor ≤ low ≤ high. With communication overlapped (--overlap) the two sums are taken apart and the
step is the larger of them, as the floor is.

`--calibration FILE` takes them from `roofline bench --save-calibration` / `roofline measure --collectives
--save-calibration` results (roofline.serving.calibration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofline.errors import RooflineError, T
from roofline.units import MIN_SHARE, format_time
from roofline.vocab import Bound

SOURCES = {
    "compute": "matmul-bound kernels: cuBLAS/CUTLASS GEMMs reach 70-80% of the dense peak at serving shapes",
    "memory": "memory-bound kernels: 80-90% of the DRAM bandwidth (STREAM-like copies, decode attention)",
    "communication": "collectives: 80-90% of the link (nccl-tests' busbw is below the link's figure)",
    "step_overhead_s": "an assumption: kernel launches and the engine's scheduler, 20-50 us per step",
}


def check_share(label: str, band: tuple[float, float]) -> tuple[float, float]:
    """(low, high) shares of the roofline, each in (0, 1] and at least units.MIN_SHARE (a subnormal 1e-320
    would make floor / share infinite), low ≤ high; one line naming `label` otherwise."""
    lo, hi = (float(band[0]), float(band[1]))
    for v in (lo, hi):
        if not 0 < v <= 1:
            raise RooflineError(f"{label}: an efficiency is a share of the roofline in (0, 1], got {v:g}")
        if v < MIN_SHARE:
            raise RooflineError(f"{label}: an efficiency is a share of the roofline in (0, 1], at least {MIN_SHARE:g}; "
                                f"got {v:g}")
    if lo > hi:
        raise RooflineError(f"{label}: low {lo:g} is above high {hi:g}; write LOW:HIGH")
    return lo, hi


@dataclass(frozen=True)
class Efficiency:
    """Shares of the roofline that kernels reach, per bound class, as (low, high), and the fixed
    overhead per step in seconds, (low, high). Defaults: the usual published figures (module docstring)."""

    compute: tuple[float, float] = (0.70, 0.80)
    memory: tuple[float, float] = (0.80, 0.90)
    communication: tuple[float, float] = (0.80, 0.90)
    step_overhead_s: tuple[float, float] = (20e-6, 50e-6)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compute", check_share("matmul (compute-bound) efficiency", self.compute))
        object.__setattr__(self, "memory", check_share("memory-bound efficiency", self.memory))
        object.__setattr__(self, "communication", check_share("communication efficiency", self.communication))
        lo, hi = (float(self.step_overhead_s[0]), float(self.step_overhead_s[1]))
        if lo < 0 or hi < 0:
            raise RooflineError(f"{T.step_overhead_s} must not be negative, got {format_time(min(lo, hi))}")
        if lo > hi:
            raise RooflineError(f"{T.step_overhead_s}: low {format_time(lo)} is above high {format_time(hi)}")
        object.__setattr__(self, "step_overhead_s", (lo, hi))

    @property
    def measured_on(self) -> str:
        """The machine a calibration file measured ("" for the published figures)."""
        return ""

    @property
    def origin(self) -> str:
        """Where the shares come from, in words: the published figures, and the classes given otherwise."""
        base = Efficiency()
        given = [name for name, mine, theirs in (("compute", self.compute, base.compute),
                                                 ("memory", self.memory, base.memory),
                                                 ("communication", self.communication, base.communication),
                                                 ("overhead", self.step_overhead_s, base.step_overhead_s))
                 if mine != theirs]
        text = ("the usual published figures (GEMM libraries, STREAM-like copies, nccl-tests' busbw; the overhead "
                "an assumption)")
        return text + (f"; given on the command line: {', '.join(given)}" if given else "")

    def of(self, bound: Bound | str) -> tuple[float, float]:
        """(low, high) efficiency of a bound class."""
        b = Bound(bound)
        return {Bound.COMPUTE: self.compute, Bound.MEMORY: self.memory, Bound.COMMUNICATION: self.communication}[b]

    def to_dict(self) -> dict[str, Any]:
        return {"compute": list(self.compute), "memory": list(self.memory),
                "communication": list(self.communication), "step_overhead_s": list(self.step_overhead_s),
                "sources": dict(SOURCES)}


@dataclass(frozen=True)
class Band:
    """A time or a cost: the roofline floor and the expected band, floor ≤ low ≤ high."""

    floor: float
    low: float
    high: float

    def scaled(self, k: float) -> Band:
        return Band(self.floor * k, self.low * k, self.high * k)

    def to_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "expected": {"low": self.low, "high": self.high}}


@dataclass(frozen=True)
class Rate:
    """A rate (tokens/s): the roofline ceiling and the expected band, low ≤ high ≤ ceiling."""

    ceiling: float
    low: float
    high: float

    def scaled(self, k: float) -> Rate:
        return Rate(self.ceiling * k, self.low * k, self.high * k)

    def to_dict(self) -> dict[str, Any]:
        return {"ceiling": self.ceiling, "expected": {"low": self.low, "high": self.high}}


def per_rate(amount: float, t: Band) -> Rate:
    """amount / time: the ceiling from the floor, the band from the band (a longer time, a lower rate)."""
    return Rate(amount / t.floor, amount / t.high, amount / t.low)


__all__ = ["SOURCES", "Band", "Efficiency", "Rate", "per_rate"]
