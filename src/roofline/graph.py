"""Ops over named tensors, fusion plans, and the cost of a fused group.

A workload is a list of ops. Each op reads and writes named tensors (shape, dtype, role) and
carries its FLOPs split by the unit that does them. Fusion is a partition of the ops into kernels;
a kernel's bytes are the bytes of the tensors that cross its group's boundary, each counted once:
read if it comes from outside the group, written if something outside the group reads it or it
outlives the step (a graph output, a KV-cache write). Naive and fused attention are the same ops
under two plans: same FLOPs, fewer bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from types import MappingProxyType

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.vocab import Level, Plan, Role, Unit


@frozen
class Tensor:
    """A named tensor of a step's graph: its shape, dtype and role (weight, KV cache, activation)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    role: Role = Role.ACTIVATION
    persistent: bool = False  # written for later steps (KV cache): its write always reaches memory

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", get_dtype(self.dtype))
        for n in self.shape:
            if not (isinstance(n, int) and n >= 0):
                raise RooflineError(f"tensor {self.name}: dimensions must be non-negative integers, got {self.shape}")

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> float:
        """elements x bytes per element (block scales included)."""
        return self.elements * self.dtype.bytes_per_element


def tensor(name: str, shape: Sequence[int], dtype: str | DType, role: Role = Role.ACTIVATION,
           persistent: bool = False) -> Tensor:
    return Tensor(name, tuple(int(s) for s in shape), get_dtype(dtype), role, persistent)


_UNITS = frozenset(Unit)  # an op's units are checked against these (a constant: built once, not per op)


def _add(a: Mapping[Unit, float], b: Mapping[Unit, float]) -> dict[Unit, float]:
    out = dict(a)
    for unit, v in b.items():
        out[unit] = out.get(unit, 0.0) + v
    return out


@frozen
class Cost:
    """FLOPs by compute unit and bytes by memory level, for one instance of a kernel.

    `ops_by_unit` is work a unit does that the FLOP count leaves out: exponentials on the exp units
    (one op each; the FLOP convention already counts each as one vector FLOP, the multiply by
    log2(e) ahead of MUFU.EX2), and the vector work of a fused kernel's online softmax. It takes
    time on its unit and never enters `flop` or the intensity.

    `+` adds two costs as if run one after the other (their bytes are not deduplicated: to count a
    shared tensor once, put both ops in one fused group instead).
    """

    flop_by_unit: Mapping[Unit, float] = field(default_factory=dict)
    bytes_by_level: Mapping[Level, float] = field(default_factory=dict)
    ops_by_unit: Mapping[Unit, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "flop_by_unit", MappingProxyType(dict(self.flop_by_unit)))
        object.__setattr__(self, "bytes_by_level", MappingProxyType(dict(self.bytes_by_level)))
        object.__setattr__(self, "ops_by_unit", MappingProxyType(dict(self.ops_by_unit)))

    def work(self, unit: Unit) -> float:
        """What `unit` does: its FLOPs plus its other ops (the numerator of its time)."""
        return float(self.flop_by_unit.get(unit, 0.0) + self.ops_by_unit.get(unit, 0.0))

    @property
    def flop(self) -> float:
        return float(sum(self.flop_by_unit.values()))

    @property
    def bytes(self) -> float:
        """Bytes to and from off-chip memory: the denominator of the intensity."""
        return float(self.bytes_by_level.get(Level.DRAM, 0.0))

    def __add__(self, other: Cost) -> Cost:
        by = dict(self.bytes_by_level)
        for level, b in other.bytes_by_level.items():
            by[level] = by.get(level, 0.0) + b
        return Cost(_add(self.flop_by_unit, other.flop_by_unit), by, _add(self.ops_by_unit, other.ops_by_unit))

    def scaled(self, factor: float) -> Cost:
        return Cost({k: v * factor for k, v in self.flop_by_unit.items()},
                    {k: v * factor for k, v in self.bytes_by_level.items()},
                    {k: v * factor for k, v in self.ops_by_unit.items()})


def simple_cost(flop: float, bytes_moved: float, unit: Unit = Unit.MATRIX) -> Cost:
    return Cost({unit: float(flop)}, {Level.DRAM: float(bytes_moved)})


@frozen
class OnChip:
    """What an op does inside the chip beyond its FLOPs and its boundary tensors (its bytes through
    shared memory and L2 are in `Op.traffic`).

    ops_by_unit         exponentials (Unit.EXP) and vector work the FLOP convention leaves out
    fused_ops_by_unit   work only done when the op runs fused with others in one kernel (the online
                        softmax's rescaling of the running output, FlashAttention)
    smem_bytes          the shared memory one thread block's tiles need (checked against the SM's)
    tiles               the tiling, in words, for --explain ("CTA tile 128×256×64, 2 stages")
    explicit            the tiles were chosen by the user: not fitting is an error, not a note
    """

    ops_by_unit: Mapping[Unit, float] = field(default_factory=dict)
    fused_ops_by_unit: Mapping[Unit, float] = field(default_factory=dict)
    smem_bytes: float = 0.0
    tiles: str = ""
    explicit: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops_by_unit", MappingProxyType({Unit(u): f for u, f in self.ops_by_unit.items()}))
        object.__setattr__(self, "fused_ops_by_unit",
                           MappingProxyType({Unit(u): f for u, f in self.fused_ops_by_unit.items()}))

    def scaled(self, factor: float) -> OnChip:
        """The same tiling over `factor` times the work (a sliding window's share of the pairs)."""
        return OnChip({u: f * factor for u, f in self.ops_by_unit.items()},
                      {u: f * factor for u, f in self.fused_ops_by_unit.items()},
                      self.smem_bytes, self.tiles, self.explicit)


@frozen
class Op:
    """One operation: what it reads, what it writes, and the FLOPs it performs per unit.

    `formula` is the FLOP derivation with the numbers put in, for --explain; `note` flags an
    approximation where it happens.
    """

    name: str
    kind: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    flop_by_unit: Mapping[Unit, float]
    count: int = 1
    formula: str = ""
    note: str = ""
    compute_dtype: DType | None = None  # overrides the analysis' compute dtype for MATRIX FLOPs
    # bytes this op moves over levels other than DRAM, per instance (a collective's bytes on a link);
    # DRAM bytes are never listed here: they are the tensors that cross the kernel's boundary
    traffic: Mapping[Level, float] = field(default_factory=dict)
    onchip: OnChip | None = None  # exponentials, online-softmax work, the tiles' shared memory

    def __post_init__(self) -> None:
        for unit in self.flop_by_unit:
            if unit not in _UNITS:
                raise RooflineError(f"op {self.name}: unknown compute unit {unit!r}")
        object.__setattr__(self, "flop_by_unit", MappingProxyType({Unit(u): f for u, f in self.flop_by_unit.items()}))
        if Level.DRAM in self.traffic:
            raise RooflineError(f"op {self.name}: DRAM bytes come from its tensors, not from its traffic")
        object.__setattr__(self, "traffic", MappingProxyType({Level(lv): b for lv, b in self.traffic.items()}))
        if self.count < 1:
            raise RooflineError(f"op {self.name}: count must be at least 1")

    @property
    def flop(self) -> float:
        return float(sum(self.flop_by_unit.values()))


class Costed:
    """Something whose FLOPs and bytes are those of its `cost` (a kernel, a kernel placed on a machine):
    the one place the two read them."""

    cost: Cost

    @property
    def flop(self) -> float:
        return self.cost.flop

    @property
    def bytes(self) -> float:
        return self.cost.bytes


@frozen
class Kernel(Costed):
    """A fused group of ops run as one kernel, `count` times per step, and its boundary traffic."""

    name: str
    ops: tuple[Op, ...]
    count: int
    reads: tuple[Tensor, ...]
    writes: tuple[Tensor, ...]
    cost: Cost
    compute_dtype: DType | None = None

    @property
    def kind(self) -> str:
        kinds = dict.fromkeys(op.kind for op in self.ops)
        return "+".join(kinds)

    def bytes_by_role(self) -> dict[Role, float]:
        out = dict.fromkeys(Role, 0.0)
        for t in (*self.reads, *self.writes):
            out[t.role] = out.get(t.role, 0.0) + t.bytes
        return out

    @property
    def formula(self) -> str:
        return "; ".join(f"{op.name}: {op.formula}" for op in self.ops if op.formula)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(op.note for op in self.ops if op.note)


@frozen
class FusionPlan:
    """A partition of a graph's ops into kernels: kernel name -> op names. Ops not named run alone."""

    name: Plan
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in tuple(Plan):
            raise RooflineError(f"unknown fusion plan {self.name!r}; plans: {', '.join(Plan)}")
        object.__setattr__(self, "name", Plan(self.name))
        object.__setattr__(self, "groups", MappingProxyType({k: tuple(v) for k, v in self.groups.items()}))
        seen: set[str] = set()
        for ops in self.groups.values():
            for op in ops:
                if op in seen:
                    raise RooflineError(f"fusion plan {self.name}: op {op} is in two kernels")
                seen.add(op)


UNFUSED = FusionPlan(Plan.NONE)


class Graph:
    """Ops in execution order over named tensors. Build once; apply any number of fusion plans."""

    def __init__(self, ops: Iterable[Op], name: str = "") -> None:
        self.name = name
        self.ops: tuple[Op, ...] = tuple(ops)
        self._by_name: dict[str, Op] = {}
        tensors: dict[str, Tensor] = {}
        self.readers: dict[str, list[str]] = {}
        for op in self.ops:
            if op.name in self._by_name:
                raise RooflineError(f"graph {name}: two ops named {op.name}")
            self._by_name[op.name] = op
            for t in (*op.inputs, *op.outputs):
                old = tensors.setdefault(t.name, t)
                if old is not t and old != t:  # the same object (most reads): equal without comparing fields
                    raise RooflineError(f"graph {name}: tensor {t.name} declared twice differently "
                                        f"({old.shape} {old.dtype} vs {t.shape} {t.dtype})")
            for t in op.inputs:
                self.readers.setdefault(t.name, []).append(op.name)
        self.tensors = tensors

    def op(self, name: str) -> Op:
        try:
            return self._by_name[name]
        except KeyError:
            raise RooflineError(f"graph {self.name}: no op named {name}") from None

    @property
    def flop(self) -> float:
        return sum(op.flop * op.count for op in self.ops)

    def kernels(self, plan: FusionPlan = UNFUSED,
                built: dict[tuple[str, tuple[str, ...]], Kernel] | None = None) -> list[Kernel]:
        """The kernels of `plan`, in the order their first op runs.

        `built`: kernels of this graph already made under other plans, by (kernel name, op names); a
        group that recurs (every op outside attention under `none` and `flash`) is taken from it, a
        new one added. A kernel is a function of its name, its ops and the graph alone, so the kernels
        are the same, and of several plans of one analysis each is built once."""
        group_of: dict[str, str] = {}
        for kernel_name, names in plan.groups.items():
            for n in names:
                if n in self._by_name:  # a plan may name ops a particular graph lacks
                    group_of[n] = kernel_name
        members: dict[str, list[Op]] = {}
        for op in self.ops:
            members.setdefault(group_of.get(op.name, op.name), []).append(op)
        if built is None:
            return [self._kernel(name, ops) for name, ops in members.items()]
        out: list[Kernel] = []
        for name, ops in members.items():
            key = (name, tuple(op.name for op in ops))
            k = built.get(key)
            if k is None:
                k = built[key] = self._kernel(name, ops)
            out.append(k)
        return out

    def _kernel(self, name: str, ops: list[Op]) -> Kernel:
        counts = {op.count for op in ops}
        if len(counts) != 1:
            raise RooflineError(f"kernel {name}: fused ops run different numbers of times "
                                f"({', '.join(f'{o.name}x{o.count}' for o in ops)})")
        inside = {op.name for op in ops}
        # a read comes from memory unless an earlier op of the kernel produced it: an op that reads and
        # writes the same tensor (a recurrent state updated in place) moves it both ways
        produced: dict[str, Tensor] = {}
        reads: dict[str, Tensor] = {}
        for op in ops:
            for t in op.inputs:
                if t.name not in produced:
                    reads.setdefault(t.name, t)
            for t in op.outputs:
                produced[t.name] = t
        writes = [t for t in produced.values()
                  if t.persistent or not self.readers.get(t.name)
                  or any(r not in inside for r in self.readers[t.name])]
        flop: dict[Unit, float] = {}
        for op in ops:
            for unit, f in op.flop_by_unit.items():
                flop[unit] = flop.get(unit, 0.0) + f
        moved = sum(t.bytes for t in reads.values()) + sum(t.bytes for t in writes)
        by_level: dict[Level, float] = {Level.DRAM: float(moved)}
        for op in ops:
            for level, b in op.traffic.items():
                by_level[level] = by_level.get(level, 0.0) + b
        other: dict[Unit, float] = {}
        for op in ops:
            if op.onchip is not None:
                other = _add(other, op.onchip.ops_by_unit)
                if len(ops) > 1:
                    other = _add(other, op.onchip.fused_ops_by_unit)
        # the roof's dtype: that of the matmuls; a kernel without one, its ops' own (an fp32 matmul moved to the
        # FP32 cores keeps fp32, so it is placed, and reported, on the fp32 roof)
        dtypes = {op.compute_dtype for op in ops if op.compute_dtype is not None and op.flop_by_unit.get(Unit.MATRIX)}
        if not any(op.flop_by_unit.get(Unit.MATRIX) for op in ops):
            dtypes = {op.compute_dtype for op in ops if op.compute_dtype is not None and op.flop}
        return Kernel(name, tuple(ops), counts.pop(), tuple(reads.values()), tuple(writes),
                      Cost(flop, by_level, other), dtypes.pop() if len(dtypes) == 1 else None)


__all__ = ["UNFUSED", "Cost", "FusionPlan", "Graph", "Kernel", "OnChip", "Op", "Tensor", "simple_cost", "tensor"]
