"""What a point is, shared by the static charts and the page: a kernel's coordinates, its measured
point, the ceilings besides the main roof, the one-line derivation, and the colours of the bounds.

Layering: a report module; imports roofline.placement, roofline.units and roofline.vocab only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from roofline.placement import GraphAnalysis, Placement
from roofline.units import (
    format_bytes,
    format_bytes_per_s,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_time,
)
from roofline.vocab import Bound, Level, Plan, Unit

# one colour per bound class, on the static charts and the page alike
BOUND_COLOURS: dict[Bound, str] = {Bound.MEMORY: "#1f77b4", Bound.COMPUTE: "#e6550d"}
ABOVE_ROOF_COLOUR = "#d62728"
ROOF_COLOUR = "#222222"
# one colour per extra roof (tab10 without the bound colours' blue and orange first)
ROOF_CYCLE = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4", "#ff7f0e")


@dataclass(frozen=True)
class Scenario:
    """One analysis to draw: "decode · flash" and its kernels in execution order."""

    label: str
    analysis: GraphAnalysis
    phase: str = ""  # a Phase, or "" for a kernel on its own
    plan: Plan | str = ""  # the plan to name in a subtitle, or ""


def on_chart(p: Placement) -> bool:
    """A kernel has a point on log-log axes only if it has FLOPs and bytes (a pure copy has no
    FLOPs, a kernel moving no bytes has infinite intensity); the others are listed, not drawn."""
    return p.flop > 0 and p.bytes > 0 and math.isfinite(p.flop_per_byte)


def point_xy(p: Placement) -> tuple[float, float]:
    """(intensity I in FLOP/byte, attainable FLOP/s = FLOPs / time floor): where the kernel sits."""
    return p.flop_per_byte, p.attainable_flop_per_s


def measured_xy(p: Placement) -> tuple[float, float] | None:
    """(I, achieved FLOP/s = FLOPs / measured time): the measured point, straight below (or, if
    the model or the measurement is wrong, above) the predicted one."""
    achieved = p.achieved_flop_per_s
    if achieved is None or not on_chart(p):
        return None
    return p.flop_per_byte, achieved


def secondary_ceilings(placements: Sequence[Placement], peak_key: str, peak_flop_per_s: float
                       ) -> list[tuple[str, str, float]]:
    """Ceilings besides the main matrix roof that some kernels run under, as (kind, label, FLOP/s):
    the matrix peak of another precision (an fp8 matmul in a bf16 model) and the vector peak (norms,
    softmax, elementwise work), the latter only where it is below the main roof."""
    out: dict[str, tuple[str, str, float]] = {}
    for p in placements:
        key = p.dtype.peak_key
        if key != peak_key and p.roof_flop_per_s != peak_flop_per_s:
            out.setdefault(f"matrix-{key}", ("matrix", f"{key} peak", p.roof_flop_per_s))
    vector = [p.peak_by_unit[Unit.VECTOR] for p in placements
              if p.cost.flop_by_unit.get(Unit.VECTOR) and Unit.VECTOR in p.peak_by_unit]
    if vector and min(vector) < peak_flop_per_s:
        out["vector"] = ("vector", "vector peak", min(vector))
    return sorted(out.values(), key=lambda t: -t[2])


def floor_term(p: Placement) -> str:
    """The term that sets the time floor, with its numbers: '134 MB / 3.35 TB/s = 40 µs'."""
    lim = p.bound
    if isinstance(lim, Level) and lim in p.level_times_s:
        return (f"{format_bytes(p.cost.bytes_by_level[lim])} / {format_bytes_per_s(p.bandwidth_by_level[lim])}"
                f" = {format_time(p.time_s)}")
    if isinstance(lim, Unit) and lim in p.unit_times_s:
        return (f"{format_flop(p.cost.flop_by_unit[lim])} / {format_flop_per_s(p.peak_by_unit[lim])} ({lim})"
                f" = {format_time(p.time_s)}")
    return format_time(p.time_s)


def derivation_line(p: Placement) -> str:
    """One line from the FLOP formula to the bound and the floor, numbers put in."""
    formula = p.kernel.formula if p.kernel is not None and p.kernel.formula else ""
    head = f"FLOPs {formula} = {format_flop(p.flop)}" if formula else f"FLOPs = {format_flop(p.flop)}"
    if not on_chart(p):
        return f"{head}; bytes = {format_bytes(p.bytes)}; floor = {floor_term(p)} (not on the log-log chart)"
    cmp = ">" if p.bound_class is Bound.COMPUTE else "≤"
    return (f"{head}; I = {format_flop(p.flop)} / {format_bytes(p.bytes)} = {format_intensity(p.flop_per_byte)} "
            f"{cmp} ridge {format_intensity(p.ridge_flop_per_byte)} → {p.bound_class}-bound; floor = {floor_term(p)}")


def measured_note(p: Placement) -> str:
    """'measured 52 µs = 77% of the roof' or the ABOVE THE ROOF flag; '' if not measured."""
    frac = p.fraction_of_roof
    if p.measured_time_s is None or frac is None:
        return ""
    text = f"measured {format_time(p.measured_time_s)} = {frac:.0%} of the roof"
    if p.above_roof:
        text += " — ABOVE THE ROOF: the model or the measurement is wrong"
    return text


