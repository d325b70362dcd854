"""Placement of kernels on a machine: intensity, ridge, attainable FLOP/s, time floor, bound.

    attainable = min(peak, BW × I)
    time floor = max(FLOPs of each unit / that unit's peak, bytes of each level / its bandwidth)

Every unit and level the machine knows takes part: the matrix units, the FP32 vector lanes, the
exponential units (per-SM rate × SMs × clock, `roofline.hardware.chip`), shared memory, L2, DRAM and
the links. A machine without per-SM data (a user's file, a TPU, a CPU) is placed on its datasheet
units and DRAM alone, with a note saying so.

The largest term of the time floor names the resource that binds (`bound`, one rule for a kernel
and for a sequence of kernels: `roofline.vocab.binding`); its class (compute or memory) is
`bound_class`. With one unit and one level this is exactly
the textbook `kernel_time` (ten lines of Python), which is here too, as it is usually written.

The notebook methods (`Drawable`) draw through roofline.report.notebook, found by entry point.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen, read_only
from roofline.graph import UNFUSED, Cost, Costed, FusionPlan, Graph, Kernel, simple_cost
from roofline.hardware import Machine, get_machine
from roofline.units import finite_or_none
from roofline.vocab import ON_CHIP, Bound, Level, Plan, Resource, Unit, accumulate, binding, bound_class


def kernel_time(flops: float, bytes_moved: float, peak_flops: float = 989e12,
                bw: float = 3.35e12) -> tuple[float, float, str]:
    """The textbook ten lines: (intensity, time floor, bound) for one unit and one memory level."""
    intensity = flops / bytes_moved
    ridge = peak_flops / bw
    t = max(flops / peak_flops, bytes_moved / bw)
    bound = Bound.COMPUTE if intensity > ridge else Bound.MEMORY
    return intensity, t, bound.value


class Drawable:
    """What a notebook can draw: `.plot()` (a matplotlib Figure) and `_repr_html_` (the interactive
    page). The drawing is the report room's, above this one, so it is found the way pandas finds its
    plotting backend: by the entry point the package declares (pyproject.toml, group
    `roofline.notebook`, name `draw`: roofline.report.notebook), looked up when a method is first
    called. Nothing is attached to this class from outside, and importing it loads no report."""

    __slots__ = ()

    def plot(self) -> Any:
        """The roofline chart of these kernels (a matplotlib Figure)."""
        return _notebook().plot(self)

    def _repr_html_(self) -> str:
        """The interactive page in an iframe, for a notebook."""
        return str(_notebook().html(self))


NOTEBOOK_ENTRY_POINTS = "roofline.notebook"


@functools.cache  # the package's metadata does not change while it runs: read once
def _notebook() -> Any:
    """The module that draws a Drawable (`plot(obj)`, `html(obj)`), as the package registers it."""
    from importlib.metadata import entry_points

    found = entry_points(group=NOTEBOOK_ENTRY_POINTS, name="draw")
    if not found:
        raise RooflineError(f"no notebook drawing registered (entry point group {NOTEBOOK_ENTRY_POINTS!r}): "
                            "install roofline (pip install roofline, or pip install -e . in a checkout)")
    return next(iter(found)).load()


@frozen
class Placement(Costed, Drawable):
    """One kernel on one machine. flop, bytes and times are for one instance; `count` instances run
    per step (layers are not repeated op by op)."""

    name: str
    machine: Machine
    dtype: DType
    cost: Cost
    peak_by_unit: Mapping[Unit, float]
    bandwidth_by_level: Mapping[Level, float]
    count: int = 1
    kind: str = ""
    kernel: Kernel | None = None
    measured_time_s: float | None = None
    note: str = ""  # what a reader of the numbers should know (a bench case's caveat)
    latency_by_level: Mapping[Level, float] = field(default_factory=dict)  # α of the links, for collectives
    chip_notes: tuple[str, ...] = ()  # what inside the chip could not be placed, and why

    def __post_init__(self) -> None:
        # read_only's rule written out (a placement is made for every kernel of every plan): a read-only
        # mapping as it is (_place's are the machine's ceilings, shared), anything else copied
        if self.peak_by_unit.__class__ is not MappingProxyType:
            object.__setattr__(self, "peak_by_unit", read_only(self.peak_by_unit))
        if self.bandwidth_by_level.__class__ is not MappingProxyType:
            object.__setattr__(self, "bandwidth_by_level", read_only(self.bandwidth_by_level))
        if self.latency_by_level.__class__ is not MappingProxyType:
            object.__setattr__(self, "latency_by_level", read_only(self.latency_by_level))

    # --- the kernel (flop and bytes: Costed's, the cost's) --------------------------------------
    @property
    def flop_per_byte(self) -> float:
        """I = FLOPs / DRAM bytes."""
        return self.flop / self.bytes if self.bytes else math.inf

    # --- the machine's terms ----------------------------------------------------------------
    @cached_property
    def unit_times_s(self) -> dict[Unit, float]:
        """(FLOPs + other ops) / peak per unit placed (exponentials in ops per second)."""
        return {u: self.cost.work(u) / peak for u, peak in self.peak_by_unit.items() if self.cost.work(u)}

    @cached_property
    def level_times_s(self) -> dict[Level, float]:
        """bytes / bandwidth per level; over a link the alpha-beta time, latency + bytes / bandwidth."""
        return {lv: self.latency_by_level.get(lv, 0.0) + b / self.bandwidth_by_level[lv]
                for lv, b in self.cost.bytes_by_level.items() if b and lv in self.bandwidth_by_level}

    @property
    def compute_time_s(self) -> float:
        """The slowest FLOP unit (matrix, vector): the compute roof's term. The exp units count
        operations, not FLOPs: their time is in `unit_times_s` and in the floor, not here."""
        return max((t for u, t in self.unit_times_s.items() if u is not Unit.EXP), default=0.0)

    @property
    def memory_time_s(self) -> float:
        """The slowest level off the chip: DRAM, or a link."""
        return max((t for lv, t in self.level_times_s.items() if lv not in ON_CHIP), default=0.0)

    @property
    def onchip_time_s(self) -> float:
        """The slowest level inside the chip: shared memory or L2 (0 where the machine has no per-SM data)."""
        return max((t for lv, t in self.level_times_s.items() if lv in ON_CHIP), default=0.0)

    @property
    def time_s(self) -> float:
        """The time floor: the slowest of every unit's and every level's term."""
        return max(self.compute_time_s, self.unit_times_s.get(Unit.EXP, 0.0), self.memory_time_s,
                   self.onchip_time_s)

    @property
    def resource_times_s(self) -> dict[Resource, float]:
        """Every unit's and level's time, the binding one first, then slowest to fastest."""
        times: list[tuple[Resource, float]] = [*self.unit_times_s.items(), *self.level_times_s.items()]
        bound = self.bound
        return dict(sorted(times, key=lambda rt: (rt[0] != bound, -rt[1])))

    @property
    def margin(self) -> float | None:
        """How far the binding resource leads: its time over the next slowest resource's (1.0: a tie,
        a co-bottleneck). None with a single resource."""
        times = list(self.resource_times_s.values())
        if len(times) < 2 or not times[1]:
            return None
        return times[0] / times[1]

    @property
    def total_time_s(self) -> float:
        return self.time_s * self.count

    @property
    def bound(self) -> Resource:
        """The unit or level whose term sets the time floor (`roofline.vocab.binding`: ties go to memory)."""
        times: list[tuple[Resource, float]] = [*self.unit_times_s.items(), *self.level_times_s.items()]
        return binding(dict(times))

    @property
    def bound_class(self) -> Bound:
        """compute if a unit binds (I exceeds the kernel's ridge), memory if a level does."""
        return bound_class(self.bound)

    @property
    def peak_flop_per_s(self) -> float:
        """The compute roof this kernel sees: its FLOPs over its compute time. For a pure matmul it
        is the dtype's matrix peak; for vector work the vector peak; for a mix, the blend."""
        if self.flop and self.compute_time_s:
            return self.flop / self.compute_time_s
        return self.peak_by_unit[Unit.MATRIX]

    @property
    def roof_flop_per_s(self) -> float:
        """The machine's headline roof for this dtype (the matrix peak): what "% of peak" is of."""
        return self.peak_by_unit[Unit.MATRIX]

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_by_level[Level.DRAM]

    @property
    def ridge_flop_per_byte(self) -> float:
        """The machine's ridge for this dtype, I* = matrix peak / BW: 989.4e12 / 3.35e12 = 295.3 on an H100."""
        return self.roof_flop_per_s / self.bytes_per_s

    @property
    def kernel_ridge_flop_per_byte(self) -> float:
        """The ridge at the peak this kernel's FLOPs run at: the same as `ridge_flop_per_byte` for a
        matmul, 67e12 / 3.35e12 = 20 for vector work on an H100. `bound` compares against this one."""
        return self.peak_flop_per_s / self.bytes_per_s

    @property
    def attainable_flop_per_s(self) -> float:
        """min(peak, BW × I)."""
        if not self.flop:
            return 0.0
        return self.flop / self.time_s if self.time_s else self.peak_flop_per_s

    @property
    def fraction_of_peak(self) -> float:
        """attainable / the dtype's matrix peak: 1.5 FLOP/B on an H100 gives 5.0e12 / 989e12 = 0.5%."""
        return self.attainable_flop_per_s / self.roof_flop_per_s

    # --- measured -------------------------------------------------------------------------
    @property
    def achieved_flop_per_s(self) -> float | None:
        if self.measured_time_s is None or self.measured_time_s <= 0:
            return None
        return self.flop / self.measured_time_s

    @property
    def fraction_of_roof(self) -> float | None:
        """time floor / measured time: the share of the roof the real kernel reached."""
        if self.measured_time_s is None or self.measured_time_s <= 0:
            return None
        return self.time_s / self.measured_time_s

    @property
    def above_roof(self) -> bool:
        """A measured point faster than the floor is an error of the model or the measurement."""
        frac = self.fraction_of_roof
        return frac is not None and frac > 1.0

    def with_measured(self, seconds: float) -> Placement:
        from dataclasses import replace

        return replace(self, measured_time_s=seconds)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "count": self.count,
            "machine": self.machine.id,
            "dtype": self.dtype.name,
            "flop": self.flop,
            "bytes": self.bytes,
            "flop_per_byte": finite_or_none(self.flop_per_byte),
            "peak_flop_per_s": self.peak_flop_per_s,
            "memory_bytes_per_s": self.bytes_per_s,
            "ridge_flop_per_byte": self.ridge_flop_per_byte,
            "kernel_ridge_flop_per_byte": self.kernel_ridge_flop_per_byte,
            "attainable_flop_per_s": self.attainable_flop_per_s,
            "compute_time_s": self.compute_time_s,
            "memory_time_s": self.memory_time_s,
            "time_s": self.time_s,
            "total_time_s": self.total_time_s,
            "bound": self.bound,
            "bound_class": self.bound_class,
            "fraction_of_peak": self.fraction_of_peak,
            "flop_by_unit": dict(self.cost.flop_by_unit),
            "units": {u: {"flop_or_ops": self.cost.work(u), "time_s": t,
                          "share_of_floor": t / self.time_s if self.time_s else None}
                      for u, t in self.unit_times_s.items()},
            "levels": {lv: {"bytes": self.cost.bytes_by_level[lv], "time_s": t,
                            "share_of_floor": t / self.time_s if self.time_s else None}
                       for lv, t in self.level_times_s.items()},
            "margin": self.margin,
        }
        if self.chip_notes:
            d["chip_notes"] = list(self.chip_notes)
        if self.kernel is not None:
            d["bytes_by_role"] = self.kernel.bytes_by_role()
        if self.measured_time_s is not None:
            d["measured_time_s"] = self.measured_time_s
            d["achieved_flop_per_s"] = self.achieved_flop_per_s
            d["fraction_of_roof"] = self.fraction_of_roof
            d["above_roof"] = self.above_roof
        if self.note:
            d["note"] = self.note
        return d


def _peaks(machine: Machine, dtype: DType, units: Iterable[Unit], matrix_work: bool = True) -> dict[Unit, float]:
    """Each unit's peak at `dtype`. A kernel with no matrix work at a dtype the machine lists no matrix
    peak for (an fp32 matmul on a GPU's FP32 cores) has the vector peak as its roof."""
    def unit_of(u: Unit) -> Unit:
        return Unit.VECTOR if u is Unit.MATRIX and not matrix_work and not machine.has_peak(dtype) else u

    return {u: machine.peak_flop_per_s(dtype, unit_of(u)) for u in units}


def place(work: Cost | Kernel, machine: Machine | str, dtype: str | DType | None = None,
          name: str = "", measured_time_s: float | None = None) -> Placement:
    """Put one kernel (or a bare Cost) on a machine, its matrix FLOPs at `dtype`'s peak."""
    m = get_machine(machine)
    dt = _checked_dtype(m, dtype)
    return _place(work, _Ceilings(m), dt, name, measured_time_s)


def _checked_dtype(m: Machine, dtype: str | DType | None) -> DType:
    """`dtype` (default: the machine's), refused where the machine lists no matrix peak for it."""
    dt = get_dtype(dtype or m.default_dtype())
    if not m.has_peak(dt):
        raise RooflineError(f"{m.id} lists no matrix peak for {dt.peak_key}; it has: {', '.join(m.dtypes())}")
    return dt


class _Ceilings:
    """One machine's ceilings as `place` reads them, each looked up once for every kernel placed on it
    in one analysis: the bandwidth and latency of each level (a measured [memory.l2] bandwidth winning
    over the per-SM figure), the exponential rate and shared memory of its chip, and the peaks of each
    set of units at each dtype. Every mapping is read-only and shared by the placements that read it."""

    __slots__ = ("bandwidths", "capacity", "exp_per_s", "latencies", "machine", "peaks")

    def __init__(self, m: Machine) -> None:
        self.machine = m
        bandwidths: dict[Level, float] = {lv.name: lv.bytes_per_s for lv in m.memory.values() if lv.bytes_per_s}
        chip = m.chip
        self.exp_per_s = None if chip is None else chip.exp_per_s
        self.capacity = None if chip is None else chip.smem_capacity_bytes
        if chip is not None:
            if chip.smem_bytes_per_s:
                bandwidths.setdefault(Level.SMEM, chip.smem_bytes_per_s)
            if chip.l2_bytes_per_s:
                bandwidths.setdefault(Level.L2, chip.l2_bytes_per_s)
        self.bandwidths: Mapping[Level, float] = MappingProxyType(bandwidths)
        self.latencies: Mapping[Level, float] = MappingProxyType(
            {lv.name: lv.latency_s for lv in m.memory.values() if lv.latency_s})
        self.peaks: dict[tuple[str, tuple[Unit, ...], bool, bool], Mapping[Unit, float]] = {}

    def peaks_of(self, dt: DType, units: tuple[Unit, ...], matrix_work: bool, exp: bool) -> Mapping[Unit, float]:
        """Each of `units`' peak at `dt` (`_peaks`), and with `exp` the exponential rate last. Looked up by
        the dtype's peak key, all that a machine's peaks depend on (a string: hashed without a call)."""
        key = (dt.peak_key, units, matrix_work, exp)
        found = self.peaks.get(key)
        if found is None:
            peaks = _peaks(self.machine, dt, units, matrix_work)
            if exp:
                peaks[Unit.EXP] = self.exp_per_s  # type: ignore[assignment]  # exp: the chip has a rate
            found = self.peaks[key] = MappingProxyType(peaks)
        return found

    def notes(self, kernel: Kernel | None, cost: Cost) -> list[str]:
        """What inside the chip one kernel on this machine cannot be placed on, and why; raises when
        tiles the user chose do not fit the SM's shared memory."""
        m, chip = self.machine, self.machine.chip
        notes: list[str] = []
        if chip is None:
            if cost.ops_by_unit or any(cost.bytes_by_level.get(lv) for lv in ON_CHIP):
                notes.append(f"{m.id} has no per-SM data ([chip]): placed on its datasheet units and DRAM only")
            return notes
        if self.exp_per_s is None and cost.ops_by_unit.get(Unit.EXP):
            notes.append(f"{m.id} publishes no exponential rate: each exponential counts as its one vector FLOP")
        capacity = self.capacity
        if kernel is not None and capacity:
            for op in kernel.ops:
                if op.onchip is None or op.onchip.smem_bytes <= capacity:
                    continue
                text = (f"{op.name}: {op.onchip.tiles} needs {op.onchip.smem_bytes / 1024:.0f} KiB of shared "
                        f"memory per thread block; {m.id} has {capacity / 1024:.0f} KiB per {chip.unit}")
                if op.onchip.explicit:
                    raise RooflineError(text + "; choose smaller tiles")
                notes.append(text + " (default tiles; its shared-memory and L2 bytes assume them)")
        return notes


_UNIT_ORDER = tuple(Unit)  # a placement's units in Unit's order (stable output); iterating the enum is slow


def _place(work: Cost | Kernel, ceilings: _Ceilings, dt: DType, name: str = "",
           measured_time_s: float | None = None) -> Placement:
    """`place` on a machine's ceilings, the dtype already checked."""
    m = ceilings.machine
    if isinstance(work, Kernel):
        kernel: Kernel | None = work
        cost = work.cost
        if work.compute_dtype is not None:
            dt = work.compute_dtype
    else:
        kernel, cost = None, work
    notes = ceilings.notes(kernel, cost)
    if m.chip is None and cost.ops_by_unit:  # DRAM-only placement: the FLOPs alone, as without per-SM data
        cost = Cost(cost.flop_by_unit, cost.bytes_by_level)
    # the units with work (Cost.work: FLOPs + other ops) in Unit's order; the exp units only where the chip has
    # their rate (a loop: a comprehension is a call of its own in Python 3.11, and this runs for every kernel)
    flop, other = cost.flop_by_unit.get, cost.ops_by_unit.get
    units: list[Unit] = []
    for u in _UNIT_ORDER:
        if u is Unit.MATRIX or (u is not Unit.EXP and flop(u, 0.0) + other(u, 0.0)):
            units.append(u)
    exp = ceilings.exp_per_s is not None and bool(flop(Unit.EXP, 0.0) + other(Unit.EXP, 0.0))
    peaks = ceilings.peaks_of(dt, tuple(units), bool(flop(Unit.MATRIX, 0.0) + other(Unit.MATRIX, 0.0)), exp)
    bandwidths = ceilings.bandwidths
    for level, b in cost.bytes_by_level.items():
        if b and level not in bandwidths and level not in ON_CHIP:
            raise RooflineError(f"{m.id} has no bandwidth for memory level {level!r}")
    return Placement(
        name or (kernel.name if kernel else "kernel"), m, dt, cost, peaks, bandwidths,
        kernel.count if kernel else 1, kernel.kind if kernel else "", kernel, measured_time_s,
        latency_by_level=ceilings.latencies, chip_notes=tuple(notes),
    )


def place_flop_bytes(flop: float, bytes_moved: float, machine: Machine | str,
                     dtype: str | DType | None = None, name: str = "custom") -> Placement:
    """A kernel known only by its FLOPs and bytes, all FLOPs on the matrix units (the one-roof model)."""
    if not (flop > 0 and math.isfinite(flop)):
        raise RooflineError(f"FLOPs must be positive, got {flop!r}")
    if not (bytes_moved > 0 and math.isfinite(bytes_moved)):
        raise RooflineError(f"bytes must be positive, got {bytes_moved!r}")
    return place(simple_cost(flop, bytes_moved), machine, dtype, name=name)


@frozen
class GraphAnalysis(Drawable):
    """Every kernel of a graph under one fusion plan, placed on one machine, and the totals."""

    placements: tuple[Placement, ...]
    plan: Plan
    machine: Machine
    dtype: DType

    @property
    def flop(self) -> float:
        return sum(p.flop * p.count for p in self.placements)

    @property
    def bytes(self) -> float:
        return sum(p.bytes * p.count for p in self.placements)

    @property
    def time_s(self) -> float:
        """Sum of the kernels' floors: kernels run one after another."""
        return sum(p.total_time_s for p in self.placements)

    @property
    def flop_per_byte(self) -> float:
        return self.flop / self.bytes if self.bytes else math.inf

    @property
    def ridge_flop_per_byte(self) -> float:
        """The machine's ridge for this dtype, I* = matrix peak / DRAM bandwidth."""
        return self.machine.ridge_flop_per_byte(self.dtype)

    @property
    def attainable_flop_per_s(self) -> float:
        """FLOPs / Σ floors: the rate of the whole sequence at its floor."""
        return self.flop / self.time_s if self.time_s else 0.0

    @property
    def bound_times_s(self) -> dict[Resource, float]:
        """Per resource, the step time of the kernels it binds (kernels × their counts)."""
        return accumulate((p.bound, p.total_time_s) for p in self.placements)

    @property
    def bound(self) -> Resource:
        """The resource that binds the sequence: the one whose kernels take the most time (`binding`)."""
        return binding(self.bound_times_s)

    @property
    def bound_class(self) -> Bound:
        return bound_class(self.bound)

    @property
    def memory_bound_time_s(self) -> float:
        return sum(t for r, t in self.bound_times_s.items() if bound_class(r) is Bound.MEMORY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "machine": self.machine.id,
            "dtype": self.dtype.name,
            "kernels": [p.to_dict() for p in self.placements],
            "totals": {"flop": self.flop, "bytes": self.bytes, "time_s": self.time_s,
                       "flop_per_byte": finite_or_none(self.flop_per_byte),
                       "memory_bound_time_s": self.memory_bound_time_s},
        }


def analyze_graph(graph: Graph, machine: Machine | str, dtype: str | DType | None = None,
                  plan: FusionPlan = UNFUSED) -> GraphAnalysis:
    m = get_machine(machine)
    return analyze_plans(graph, m, dtype, (plan,))[plan.name]


def analyze_plans(graph: Graph, machine: Machine | str, dtype: str | DType | None,
                  plans: Iterable[FusionPlan]) -> dict[Plan, GraphAnalysis]:
    """`analyze_graph` under each of `plans`, by plan name. The plans share most kernels (`flash`
    differs from `none` only in attention): each distinct kernel is built and placed once, and the
    same Placement stands in every plan that has it (same ops on the same machine, the same numbers)."""
    m = get_machine(machine)
    dt = _checked_dtype(m, dtype)
    ceilings = _Ceilings(m)
    built: dict[tuple[str, tuple[str, ...]], Kernel] = {}
    placed: dict[int, Placement] = {}  # by id of a kernel held in `built`
    out: dict[Plan, GraphAnalysis] = {}
    for plan in plans:
        placements: list[Placement] = []
        for k in graph.kernels(plan, built):
            p = placed.get(id(k))
            if p is None:
                p = placed[id(k)] = _place(k, ceilings, dt)
            placements.append(p)
        out[plan.name] = GraphAnalysis(tuple(placements), plan.name, m, dt)
    return out


def crossover(intensity_of: Callable[[int], float], ridge: float, lo: int = 1, hi: int = 1 << 40) -> int | None:
    """The smallest integer x in [lo, hi] with intensity_of(x) >= ridge, for an intensity that grows
    with x (a batch size, a matrix size); None if even hi stays below the ridge."""
    if intensity_of(hi) < ridge:
        return None
    if intensity_of(lo) >= ridge:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if intensity_of(mid) >= ridge:
            hi = mid
        else:
            lo = mid
    return hi
