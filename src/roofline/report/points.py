"""What a point is, shared by the static charts and the page: a kernel's coordinates, its measured
point, the ceilings besides the main roof, the one-line derivation, and the colours of the bounds.

A collective (a kernel with bytes on Level.LINK or Level.NETWORK) sits under its link's roof, not
under DRAM's: its intensity is FLOPs per byte on the link (a ring all-reduce's reduction FLOPs over
the 2(n−1)/n · S bytes each device sends), its height FLOPs / time floor, which the link's latency α
puts below the slope BW_link × I. A collective with no FLOPs (all-gather, send/recv) has no point on
log axes and is listed, as any zero-FLOP kernel is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import field

from roofline import units as u
from roofline.frozen import frozen
from roofline.placement import GraphAnalysis, Placement
from roofline.report.intensity import intensity, link_bytes, link_level
from roofline.vocab import LINKS, Bound, Level, Plan, Unit

# one colour per bound class, on the static charts and the page alike
BOUND_COLOURS: dict[Bound, str] = {Bound.MEMORY: "#1f77b4", Bound.COMPUTE: "#e6550d",
                                   Bound.COMMUNICATION: "#6a3d9a"}
ABOVE_ROOF_COLOUR = "#d62728"
ROOF_COLOUR = "#222222"
# one colour per extra roof (tab10 without the bound colours' blue and orange first)
ROOF_CYCLE = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4", "#ff7f0e")


@frozen
class DeviceShare:
    """One device's share of a step split over devices, for the page's per-device panel: the step's
    time by what bounds it, and what the device holds. Built by the caller that knows the split
    (`roofline.report.notebook.model_scenarios`), so that drawing needs nothing but the Scenario."""

    split: str  # "TP 8", "TP 4 × PP 2"
    system: str  # the system's id
    devices: int
    step_time_s: float  # the step time (with overlap: the larger of compute + memory and communication)
    compute_time_s: float  # time in compute-bound kernels
    memory_time_s: float  # time in memory-bound kernels
    communication_time_s: float  # time in the collectives
    weights_bytes: float
    kv_cache_bytes: float
    workspace_bytes: float
    usable_bytes: float | None = None  # capacity × the usable fraction; None: capacity unknown
    stages: int = 1  # pipeline stages: each device runs one stage, the step runs them in turn
    overlap: bool = False

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.workspace_bytes


@frozen
class Scenario:
    """One analysis to draw: "decode · flash" and its kernels in execution order; `device` is one
    device's share when the step is split over several (None for one device)."""

    label: str
    analysis: GraphAnalysis
    phase: str = ""  # a Phase, or "" for a kernel on its own
    plan: Plan | str = ""  # the plan to name in a subtitle, or ""
    device: DeviceShare | None = field(default=None, compare=False)


def link_name(p: Placement, level: Level) -> str:
    """The link's own name, short ("NVLink 4 through NVSwitch", "InfiniBand NDR"), or the level's."""
    ml = p.machine.memory.get(level)
    name = (ml.technology if ml is not None else "").split(",")[0].strip()
    return name or str(level)


def on_chart(p: Placement) -> bool:
    """A kernel has a point on log-log axes only if it has FLOPs and bytes (a pure copy has no
    FLOPs, a kernel moving no bytes has infinite intensity); the others are listed, not drawn. A
    collective's bytes are those on its link."""
    if link_level(p) is not None:
        return p.flop > 0 and math.isfinite(intensity(p))
    return p.flop > 0 and p.bytes > 0 and math.isfinite(p.flop_per_byte)


def point_xy(p: Placement) -> tuple[float, float]:
    """(intensity I in FLOP/byte, attainable FLOP/s = FLOPs / time floor): where the kernel sits; for
    a collective I is FLOPs per byte on the link."""
    return intensity(p), p.attainable_flop_per_s


@frozen
class LinkRoof:
    """The roof collectives sit under: a slope of the link's bandwidth per direction meeting the
    compute roof at I = peak / BW_link."""

    level: Level
    name: str  # "NVLink 4 through NVSwitch"
    bytes_per_s: float
    latency_s: float

    def ridge(self, peak_flop_per_s: float) -> float:
        return peak_flop_per_s / self.bytes_per_s

    @property
    def label(self) -> str:
        """'NVLink 4 through NVSwitch 450 GB/s × I'."""
        return f"{self.name} {u.format_bytes_per_s(self.bytes_per_s)} × I"


def link_roofs(placements: Sequence[Placement]) -> list[LinkRoof]:
    """One roof per link the collectives of `placements` cross (node link first, then the network);
    empty when no kernel moves bytes between devices."""
    out: dict[Level, LinkRoof] = {}
    for p in placements:
        lv = link_level(p)
        if lv is not None and lv not in out:
            out[lv] = LinkRoof(lv, link_name(p, lv), p.bandwidth_by_level[lv], p.latency_by_level.get(lv, 0.0))
    return [out[lv] for lv in LINKS if lv in out]


def measured_xy(p: Placement) -> tuple[float, float] | None:
    """(I, achieved FLOP/s = FLOPs / measured time): the measured point, straight below (or, if
    the model or the measurement is wrong, above) the predicted one."""
    achieved = p.achieved_flop_per_s
    if achieved is None or not on_chart(p):
        return None
    return intensity(p), achieved


def secondary_ceilings(placements: Sequence[Placement], peak_key: str, peak_flop_per_s: float
                       ) -> list[tuple[str, str, float]]:
    """Ceilings besides the main matrix roof that some kernels run under, as (kind, label, FLOP/s):
    the matrix peak of another precision (an fp8 matmul in a bf16 model) and the vector peak (norms,
    softmax, elementwise work), the latter only where it is below the main roof."""
    out: dict[str, tuple[str, str, float]] = {}
    for p in placements:
        key = p.dtype.peak_key
        if key != peak_key and p.roof_flop_per_s != peak_flop_per_s and p.cost.work(Unit.MATRIX):
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
        alpha = p.latency_by_level.get(lim, 0.0)
        head = f"α {u.format_time(alpha)} + " if alpha else ""
        return (f"{head}{u.format_bytes(p.cost.bytes_by_level[lim])} / "
                f"{u.format_bytes_per_s(p.bandwidth_by_level[lim])} = {u.format_time(p.time_s)}")
    if lim is Unit.EXP and lim in p.unit_times_s:  # operations, not FLOPs: exponentials per second
        return (f"{p.cost.work(lim):.4g} exponentials / {p.peak_by_unit[lim]:.4g} per s (exp units)"
                f" = {u.format_time(p.time_s)}")
    if isinstance(lim, Unit) and lim in p.unit_times_s:
        return (f"{u.format_flop(p.cost.work(lim))} / {u.format_flop_per_s(p.peak_by_unit[lim])} ({lim})"
                f" = {u.format_time(p.time_s)}")
    return u.format_time(p.time_s)


def derivation_line(p: Placement) -> str:
    """One line from the FLOP formula to the bound and the floor, numbers put in."""
    formula = p.kernel.formula if p.kernel is not None and p.kernel.formula else ""
    head = f"FLOPs {formula} = {u.format_flop(p.flop)}" if formula else f"FLOPs = {u.format_flop(p.flop)}"
    lv = link_level(p)
    if lv is not None:
        moved = f"{u.format_bytes(link_bytes(p))} on the {link_name(p, lv)} ({lv})"
        if not on_chart(p):
            return f"{head}; bytes = {moved}; floor = {floor_term(p)} (not on the log-log chart)"
        return (f"{head}; I = {u.format_flop(p.flop)} / {moved} = {u.format_intensity(intensity(p))} under the "
                f"{lv} roof → {p.bound_class}-bound; floor = {floor_term(p)}")
    if not on_chart(p):
        return f"{head}; bytes = {u.format_bytes(p.bytes)}; floor = {floor_term(p)} (not on the log-log chart)"
    cmp = ">" if p.bound_class is Bound.COMPUTE else "≤"
    return (f"{head}; I = {u.format_flop(p.flop)} / {u.format_bytes(p.bytes)} = {u.format_intensity(p.flop_per_byte)} "
            f"{cmp} ridge {u.format_intensity(p.ridge_flop_per_byte)} → {p.bound_class}-bound; floor = {floor_term(p)}")


def measured_note(p: Placement) -> str:
    """'measured 52 µs = 77% of the roof' or the ABOVE THE ROOF flag; '' if not measured."""
    frac = p.fraction_of_roof
    if p.measured_time_s is None or frac is None:
        return ""
    text = f"measured {u.format_time(p.measured_time_s)} = {frac:.0%} of the roof"
    if p.above_roof:
        text += " — ABOVE THE ROOF: the model or the measurement is wrong"
    return text


