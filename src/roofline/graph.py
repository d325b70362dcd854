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
from roofline.frozen import frozen, read_only
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
        if self.dtype.__class__ is not DType:  # a name: looked up (a DType, as builders pass it, stands)
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
        return math.prod(self.shape) * self.dtype.bytes_per_element


def tensor(name: str, shape: Sequence[int], dtype: str | DType, role: Role = Role.ACTIVATION,
           persistent: bool = False) -> Tensor:
    return Tensor(name, tuple(int(s) for s in shape), get_dtype(dtype), role, persistent)


_UNITS = frozenset(Unit)  # an op's units are checked against these (a constant: built once, not per op)


def _units(by: Mapping[Unit, float], op: str | None = None) -> MappingProxyType[Unit, float]:
    """`by` keyed by Unit, read-only; with `op`, a key that is not a unit is an error naming the op. A
    member stands as it is (Unit(u) is the same member, and the enum call was most of an op's
    construction); a loop, not a comprehension (a call of its own in Python 3.11)."""
    out: dict[Unit, float] = {}
    for u, f in by.items():
        if op is not None and u not in _UNITS:
            raise RooflineError(f"op {op}: unknown compute unit {u!r}")
        out[u if u.__class__ is Unit else Unit(u)] = f
    return MappingProxyType(out)


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
        # read_only's rule written out (a Cost is made for every kernel): a read-only mapping as it is (a
        # kernel's sums, wrapped by Graph for this Cost alone; another Cost's), anything else copied
        if self.flop_by_unit.__class__ is not MappingProxyType:
            object.__setattr__(self, "flop_by_unit", read_only(self.flop_by_unit))
        if self.bytes_by_level.__class__ is not MappingProxyType:
            object.__setattr__(self, "bytes_by_level", read_only(self.bytes_by_level))
        if self.ops_by_unit.__class__ is not MappingProxyType:
            object.__setattr__(self, "ops_by_unit", read_only(self.ops_by_unit))

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


def _owned_cost(flop: dict[Unit, float], by_level: dict[Level, float], other: dict[Unit, float]) -> Cost:
    """A Cost over dicts made for it alone (a kernel's sums): wrapped read-only, not copied again."""
    return Cost(MappingProxyType(flop), MappingProxyType(by_level), MappingProxyType(other))


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
        object.__setattr__(self, "ops_by_unit", _units(self.ops_by_unit))
        object.__setattr__(self, "fused_ops_by_unit", _units(self.fused_ops_by_unit))

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
        object.__setattr__(self, "flop_by_unit", _units(self.flop_by_unit, self.name))
        if Level.DRAM in self.traffic:
            raise RooflineError(f"op {self.name}: DRAM bytes come from its tensors, not from its traffic")
        traffic: dict[Level, float] = {}
        for lv, b in self.traffic.items():  # a loop, as _units (a member stands; a name becomes one)
            traffic[lv if lv.__class__ is Level else Level(lv)] = b
        object.__setattr__(self, "traffic", MappingProxyType(traffic))
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
        if len(self.ops) == 1:  # most kernels: the op's own kind
            return self.ops[0].kind
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


_PLANS = tuple(Plan)  # a plan's name is checked against these (iterating the enum is slow)


@frozen
class FusionPlan:
    """A partition of a graph's ops into kernels: kernel name -> op names. Ops not named run alone."""

    name: Plan
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in _PLANS:
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


def _declared_twice(graph: str, old: Tensor, t: Tensor) -> RooflineError:
    return RooflineError(f"graph {graph}: tensor {t.name} declared twice differently "
                         f"({old.shape} {old.dtype} vs {t.shape} {t.dtype})")


class Graph:
    """Ops in execution order over named tensors. Build once; apply any number of fusion plans."""

    def __init__(self, ops: Iterable[Op], name: str = "") -> None:
        self.name = name
        self.ops: tuple[Op, ...] = tuple(ops)
        self._by_name: dict[str, Op] = {}
        tensors: dict[str, Tensor] = {}
        self.readers: dict[str, list[str]] = {}
        by_name, readers = self._by_name, self.readers
        for op in self.ops:
            me = op.name
            if me in by_name:
                raise RooflineError(f"graph {name}: two ops named {me}")
            by_name[me] = op
            for t in op.inputs:
                old = tensors.setdefault(t.name, t)
                if old is not t and old != t:  # the same object (most reads): equal without comparing fields
                    raise _declared_twice(name, old, t)
                rs = readers.get(t.name)
                if rs is None:
                    readers[t.name] = [me]
                else:
                    rs.append(me)
            for t in op.outputs:
                old = tensors.setdefault(t.name, t)
                if old is not t and old != t:
                    raise _declared_twice(name, old, t)
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
            key = (name, (ops[0].name,) if len(ops) == 1 else tuple([op.name for op in ops]))
            k = built.get(key)
            if k is None:
                k = built[key] = self._kernel(name, ops)
            out.append(k)
        return out

    def _kernel(self, name: str, ops: list[Op]) -> Kernel:
        return self._alone(name, ops[0]) if len(ops) == 1 else self._group(name, ops)

    def _group(self, name: str, ops: list[Op]) -> Kernel:
        """The kernel of `ops` fused (of any number of ops). Loops, not comprehensions: each comprehension
        is a function call of its own (Python 3.11), and a kernel is built for every group of every step."""
        count = ops[0].count
        for op in ops:
            if op.count != count:
                raise RooflineError(f"kernel {name}: fused ops run different numbers of times "
                                    f"({', '.join(f'{o.name}x{o.count}' for o in ops)})")
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
        inside = {op.name for op in ops}
        writes: list[Tensor] = []
        for t in produced.values():  # written if it outlives the step or something outside the kernel reads it
            rs = self.readers.get(t.name)
            if t.persistent or not rs or not inside.issuperset(rs):
                writes.append(t)
        read_bytes: list[float] = []
        for t in reads.values():
            read_bytes.append(t.bytes)
        write_bytes: list[float] = []
        for t in writes:
            write_bytes.append(t.bytes)
        by_level: dict[Level, float] = {Level.DRAM: float(sum(read_bytes) + sum(write_bytes))}
        flop: dict[Unit, float] = {}
        other: dict[Unit, float] = {}
        fused = len(ops) > 1
        for op in ops:
            for unit, f in op.flop_by_unit.items():
                flop[unit] = flop.get(unit, 0.0) + f
            for level, b in op.traffic.items():
                by_level[level] = by_level.get(level, 0.0) + b
            if op.onchip is not None:  # its own ops, and the work only done fused with others
                chip = op.onchip
                for unit, f in (*chip.ops_by_unit.items(), *(chip.fused_ops_by_unit.items() if fused else ())):
                    other[unit] = other.get(unit, 0.0) + f
        # the roof's dtype: that of the matmuls; a kernel without one, its ops' own (an fp32 matmul moved to the
        # FP32 cores keeps fp32, so it is placed, and reported, on the fp32 roof)
        matmuls = [op for op in ops if op.flop_by_unit.get(Unit.MATRIX)]
        dtypes = {op.compute_dtype for op in (matmuls or [op for op in ops if op.flop]) if op.compute_dtype is not None}
        return Kernel(name, tuple(ops), count, tuple(reads.values()), tuple(writes), _owned_cost(flop, by_level, other),
                      dtypes.pop() if len(dtypes) == 1 else None)

    def _alone(self, name: str, op: Op) -> Kernel:
        """`_kernel` of one op (most kernels of a step; the same Kernel, without the work of a group):
        every input read, each output written unless this op is its only reader (a state updated in
        place: read and written), no fused-only work, the sums started from 0.0 as `_kernel` starts them.
        Loops, not comprehensions: each comprehension is a function call of its own (Python 3.11)."""
        reads: dict[str, Tensor] = {}
        for t in op.inputs:
            reads.setdefault(t.name, t)
        produced: dict[str, Tensor] = {}
        for t in op.outputs:
            produced[t.name] = t
        readers, me = self.readers, op.name
        writes: list[Tensor] = []
        for t in produced.values():
            rs = readers.get(t.name)
            if t.persistent or not rs or rs.count(me) != len(rs):  # a reader other than this op
                writes.append(t)
        read_bytes: list[float] = []
        for t in reads.values():
            read_bytes.append(t.bytes)
        write_bytes: list[float] = []
        for t in writes:
            write_bytes.append(t.bytes)
        by_level: dict[Level, float] = {Level.DRAM: float(sum(read_bytes) + sum(write_bytes))}
        for level, b in op.traffic.items():  # never DRAM (Op refuses it)
            by_level[level] = 0.0 + b
        flop: dict[Unit, float] = {}
        for unit, f in op.flop_by_unit.items():
            flop[unit] = 0.0 + f
        other: dict[Unit, float] = {}
        if op.onchip is not None:
            for unit, f in op.onchip.ops_by_unit.items():
                other[unit] = 0.0 + f
        dt = op.compute_dtype
        if dt is not None and not (op.flop_by_unit.get(Unit.MATRIX) or op.flop):
            dt = None
        return Kernel(name, (op,), op.count, tuple(reads.values()), tuple(writes), _owned_cost(flop, by_level, other),
                      dt)


__all__ = ["UNFUSED", "Cost", "FusionPlan", "Graph", "Kernel", "OnChip", "Op", "Tensor", "simple_cost", "tensor"]
