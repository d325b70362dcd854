"""A traced program as a graph, torch-free: the `Trace` the recorder fills, and what is read off it.

    t.graph, t.plan            # a core Graph and the fusion plan it ran under
    t.analyze("h100")          # every table, chart and fusion plan works on it

Roofs: `Trace.analyze` puts each op's matrix FLOPs on the roof of its own operands' dtype
(`own_roofs`: an fp32 matmul on a GPU without an fp32 matrix peak runs on the FP32 cores unless
TF32 was allowed); a dtype given puts them all on its roof. `roof_dtypes` names the roofs used,
`flop_by_kind` and `bytes_by_kind` sum a graph by op and kernel kind.

Nothing here imports torch: a Trace built by the recorder (roofline.tracing.recorder), read from a
file or written by hand is analysed the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from roofline.dtypes import DType, get_dtype
from roofline.graph import FusionPlan, Graph, Op
from roofline.hardware import Machine, get_machine
from roofline.placement import GraphAnalysis, analyze_graph
from roofline.vocab import Plan, Unit


@dataclass
class Trace:
    """What a traced program ran: ops in execution order, the kernels that ran fused, op times."""

    name: str = "traced"
    ops: list[Op] = field(default_factory=list)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fused kernel -> its ops
    times_s: dict[str, float] = field(default_factory=dict)  # kernel name -> measured seconds
    unknown: dict[str, int] = field(default_factory=dict)  # aten ops without a FLOP formula -> calls
    errors: dict[str, str] = field(default_factory=dict)  # aten ops the tracer failed on -> why (not counted)
    initialisation: dict[str, int] = field(default_factory=dict)  # weight-init fills left out -> calls
    module_of: dict[str, str] = field(default_factory=dict)  # op name -> module path ("" at top level)
    tf32: bool = False  # fp32 matmuls were allowed to run as TF32 (torch.get_float32_matmul_precision())

    @property
    def graph(self) -> Graph:
        return Graph(self.ops, name=self.name)

    @property
    def plan(self) -> FusionPlan:
        """The kernels as they ran: each fused attention call one kernel, everything else alone."""
        return FusionPlan(Plan.TRACED, self.groups)

    @property
    def flop(self) -> float:
        return sum(op.flop * op.count for op in self.ops)

    def flop_by_kind(self) -> dict[str, float]:
        return flop_by_kind(self.graph)

    def analyze(self, machine: Machine | str, dtype: str | DType | None = None,
                plan: FusionPlan | None = None) -> GraphAnalysis:
        """The traced graph placed on `machine` under `plan` (default: as it ran); kernels with a
        measured time (time_ops=True) carry it, so their percentage of the roof is known.

        `dtype` None: each op's matrix FLOPs on the roof of its own operands' dtype (`own_roofs`),
        and the analysis' dtype (its ridge, its "% of peak") the one doing most matrix FLOPs; a
        dtype given puts every matmul on that dtype's roof instead (a what-if)."""
        chosen = plan or self.plan
        graph = self.graph
        if dtype is None:
            m = get_machine(machine)
            graph = Graph(own_roofs(self.ops, m, self.tf32), name=self.name)
            dtype = headline_dtype(graph.ops, m)
        analysis = analyze_graph(graph, machine, dtype, chosen)
        if not self.times_s:
            return analysis
        placed = tuple(p.with_measured(self.times_s[p.name]) if p.name in self.times_s else p
                       for p in analysis.placements)
        return GraphAnalysis(placed, analysis.plan, analysis.machine, analysis.dtype)


ON_FP32_CORES = "fp32 matmul on the FP32 cores"  # the note of a matmul moved to the vector unit (roof_dtypes)
VECTOR_FLOAT_KEYS = frozenset(("fp64", "fp32", "bf16", "fp16"))  # elementwise dtypes labelled as they ran


def _operand_dtype(op: Op) -> DType | None:
    return op.inputs[0].dtype if op.inputs else None


def own_roofs(ops: Sequence[Op], machine: Machine, tf32: bool = False) -> list[Op]:
    """Each op with matrix FLOPs placed on the roof of its operands' dtype (the first input's):

        the machine lists a matrix peak for it      that peak (compute_dtype = the dtype)
        fp32 without one (GPUs), TF32 allowed       the tf32 matrix peak
        fp32 without one, TF32 off (PyTorch's default for matmuls)   the FP32 vector peak: the
                                                    FLOPs move to the vector unit, as the FP32 cores do them
        anything else (integer matmuls)             the analysis' dtype, as before

    An op with no matrix FLOPs on floating-point operands (an fp32 add, a bf16 SiLU) is labelled with
    its operands' dtype too: its roof is the vector unit's either way, and its `dtype` in the JSON and
    the table is then what it ran in, never the analysis' bf16 for an fp32 elementwise op (issue 24)."""
    out: list[Op] = []
    for op in ops:
        matrix = op.flop_by_unit.get(Unit.MATRIX, 0.0)
        dt = _operand_dtype(op)
        if not matrix and dt is not None and op.compute_dtype is None and dt.peak_key in VECTOR_FLOAT_KEYS:
            out.append(replace(op, compute_dtype=dt))
        elif not matrix or dt is None or op.compute_dtype is not None:
            out.append(op)
        elif machine.has_peak(dt):
            out.append(replace(op, compute_dtype=dt))
        elif dt.peak_key == "fp32" and tf32 and machine.has_peak("tf32"):
            out.append(replace(op, compute_dtype=get_dtype("tf32")))
        elif dt.peak_key == "fp32":
            flop = dict(op.flop_by_unit)
            flop[Unit.VECTOR] = flop.get(Unit.VECTOR, 0.0) + flop.pop(Unit.MATRIX)
            note = f"{ON_FP32_CORES}: {machine.id} lists no fp32 matrix peak and TF32 was off"
            out.append(replace(op, flop_by_unit=flop, compute_dtype=dt,
                               note=f"{op.note}; {note}" if op.note else note))
        else:
            out.append(op)
    return out


def headline_dtype(ops: Sequence[Op], machine: Machine) -> DType:
    """The dtype doing most matrix FLOPs that the machine has a matrix peak for (its default when none)."""
    by_dtype: dict[DType, float] = {}
    for op in ops:
        dt = op.compute_dtype
        if dt is not None and op.flop_by_unit.get(Unit.MATRIX) and machine.has_peak(dt):
            by_dtype[dt] = by_dtype.get(dt, 0.0) + op.flop_by_unit[Unit.MATRIX] * op.count
    if not by_dtype:
        return get_dtype(machine.default_dtype())
    return max(by_dtype, key=lambda d: by_dtype[d])


def roof_dtypes(analysis: GraphAnalysis) -> dict[str, float]:
    """FLOPs of the matmul-like ops per dtype whose roof they were placed on ("fp32 (vector cores)"
    for fp32 matmuls moved to the FP32 cores), counts included: what the report names beside the machine."""
    out: dict[str, float] = {}
    for p in analysis.placements:
        ops = p.kernel.ops if p.kernel is not None else ()
        for op in ops:
            dt = op.compute_dtype or analysis.dtype
            if op.flop_by_unit.get(Unit.MATRIX):
                key = dt.name
            elif op.compute_dtype is not None and op.flop_by_unit.get(Unit.VECTOR) and ON_FP32_CORES in op.note:
                key = f"{dt.name} (vector cores)"
            else:
                continue
            out[key] = out.get(key, 0.0) + op.flop * op.count
    return out


def flop_by_kind(graph: Graph) -> dict[str, float]:
    """FLOPs per op kind, layers' counts included."""
    out: dict[str, float] = {}
    for op in graph.ops:
        out[op.kind] = out.get(op.kind, 0.0) + op.flop * op.count
    return out


def bytes_by_kind(graph: Graph, plan: FusionPlan) -> dict[str, float]:
    """Boundary bytes per kernel kind under `plan`, counts included."""
    out: dict[str, float] = {}
    for k in graph.kernels(plan):
        out[k.kind] = out.get(k.kind, 0.0) + k.bytes * k.count
    return out


__all__ = ["Trace", "bytes_by_kind", "flop_by_kind", "headline_dtype", "own_roofs", "roof_dtypes"]
