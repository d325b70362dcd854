"""The crossover batch of one step at one length, from two or three graphs and no fit.

At a fixed length S every FLOP and byte count of a step is linear in the features of
`roofline.models.stepmodel` that remain: 1, the replica's batch r (every B·f(S) column is r times a
constant) and, for a MoE, the experts a device reads, h(r) (`roofline.models.formulas.experts_hit`).
So the step's totals are F(r) = a0 + a1·r + a2·h(r) and D(r) = c0 + c1·r + c2·h(r) (DRAM bytes),
and three graphs at batches whose rows (1, r, h(r)) are independent give a and c exactly (two without
experts, or when h does not change with r). The intensity F/D at any batch is then arithmetic; the
crossover is the smallest batch where it reaches the ridge (a bisection), and as r grows h(r) stops
at the experts there are, so the limit is a1 / c1. The graph at the batch found is built as a check:
where it disagrees (a step that is not linear as assumed), the numpy step model's fit answers instead.
"""

from __future__ import annotations

from roofline.dtypes import DType
from roofline.graph import Kernel
from roofline.hardware import Machine
from roofline.models.build import build_graph
from roofline.models.dtypes import ModelDtypes
from roofline.models.formulas import experts_hit
from roofline.models.split import sequence_split
from roofline.models.stepmodel import Crossover, StepModel, batch_unit, crossover_reason, find_crossover
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split
from roofline.placement import crossover
from roofline.vocab import Level, Phase, Plan, Unit

_SAMPLES = (1, 1 << 10, 1 << 20)  # replica batches (× the batch unit) whose rows (1, r, h(r)) are independent
_LARGEST = 1 << 24  # the crossover is looked for up to this many batch units, as the step model's is


def _totals(kernels: list[Kernel]) -> tuple[float, float]:
    """The step's FLOPs (matrix and vector units) and DRAM bytes, each kernel times its count."""
    flop = sum(k.count * (k.cost.flop_by_unit.get(Unit.MATRIX, 0.0) + k.cost.flop_by_unit.get(Unit.VECTOR, 0.0))
               for k in kernels)
    return flop, sum(k.count * k.cost.bytes_by_level.get(Level.DRAM, 0.0) for k in kernels)


def _solve(rows: list[list[float]], ys: list[float]) -> list[float]:
    """x with rows · x = ys for a square, nonsingular system (Gaussian elimination, partial pivoting)."""
    n = len(rows)
    m = [[*row, y] for row, y in zip(rows, ys, strict=True)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[p] = m[p], m[i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            m[r] = [a - f * b for a, b in zip(m[r], m[i], strict=True)]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def step_crossover(cfg: ModelConfig, phase: Phase, dtypes: ModelDtypes, plan: Plan, seq: int, machine: Machine,
                   dtype: DType, hit_override: int | None = None, split: Split | None = None,
                   devices_per_node: int | None = None) -> Crossover:
    """The smallest batch whose step at length `seq` reaches the ridge, or never (see the module
    docstring); the same answer as `find_crossover` on the fitted step model, from 3 or 4 graphs."""
    sp = split or Split()
    unit = batch_unit(sp)
    per_replica = unit // sp.dp  # a batch of `units` batch units gives each replica `units` × this

    def graph_totals(units: int) -> tuple[float, float]:
        mg = build_graph(cfg, phase, units * unit, seq, dtypes, hit_override, sp,
                         devices_per_node if not sp.trivial else None)
        return _totals(mg.graph.kernels(mg.plan(plan)))

    def hit(r: int) -> float:
        if not cfg.is_moe:
            return 0.0
        tokens = r * (seq if phase == Phase.PREFILL else 1) // (sp.tp if sequence_split(sp) else 1)
        h = experts_hit(cfg.num_experts, cfg.experts_per_token, tokens * sp.ep, hit_override)
        return float(-(-h // sp.ep) if sp.ep > 1 else h)

    rs = [u * per_replica for u in _SAMPLES]
    varies = len({hit(r) for r in rs}) > 1
    samples = _SAMPLES if varies else _SAMPLES[:2]
    rows = [[1.0, float(u * per_replica), *([hit(u * per_replica)] if varies else [])] for u in samples]
    totals = [graph_totals(u) for u in samples]
    a = _solve(rows, [f for f, _ in totals])
    c = _solve(rows, [d for _, d in totals])

    def intensity(units: int) -> float:
        r = units * per_replica
        x = [1.0, float(r), *([hit(r)] if varies else [])]
        flop, byt = sum(p * q for p, q in zip(a, x, strict=True)), sum(p * q for p, q in zip(c, x, strict=True))
        return flop / byt if byt else float("inf")

    ridge = machine.ridge_flop_per_byte(dtype)
    limit = a[1] / c[1] if c[1] else float("inf")
    found = crossover(intensity, ridge, 1, _LARGEST) if limit >= ridge or intensity(_LARGEST) >= ridge else None
    if found is not None:
        flop, byt = graph_totals(found)
        if abs(flop / byt - intensity(found)) > 1e-6 * abs(flop / byt):  # not linear as assumed: fit instead
            model = StepModel.fit(cfg, phase, dtypes, plan, hit_override, sp, devices_per_node)
            return find_crossover(model, seq, machine, dtype)
    flop_seq, bytes_seq = a[1], c[1]  # per extra sequence of a replica, as StepModel.limit gives them
    return Crossover(None if found is None else found * unit, ridge, limit,
                     crossover_reason(phase, None if found is None else found * unit,
                                      None if found is None else intensity(found), ridge, limit, flop_seq,
                                      bytes_seq))


__all__ = ["step_crossover"]
