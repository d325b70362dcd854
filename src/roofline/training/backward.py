"""The backward of a forward graph, op by op: the same tensors, their gradients, and the FLOPs.

Conventions (one place; `roofline train --explain` prints them):

    a matmul out = x @ W (2·m·n·k FLOPs)   two matmuls: dX = dOut @ Wᵀ and dW = xᵀ @ dOut, 2·m·n·k each
                                           (a matmul of two activations, such as naive attention's
                                           q·kᵀ and p·v, gives the gradients of both: 2·m·n·k each)
    FlashAttention's backward              one kernel (FlashAttention-2, Dao 2023, arXiv 2307.08691,
                                           section 3.2: five matmuls against the forward's two, the
                                           scores recomputed): 2.5 × the forward's matmul FLOPs; reads
                                           q, k, v, out, dOut and the log-sum-exp rows, writes dq, dk, dv
    an elementwise or norm op              2 × its forward vector FLOPs; reads the output's gradient and
                                           the saved inputs, writes the inputs' gradients (a norm's gain too)
    a copy, gather or embedding            its gradient's bytes, no FLOPs (the embedding's is a
                                           scatter-add of the rows into the table's gradient)
    a collective                           its conjugate over the same group (Megatron-LM's f and g):
                                           all-reduce ↔ all-reduce, all-gather ↔ reduce-scatter,
                                           all-to-all ↔ all-to-all; the embedding's all-reduce has none

A gradient is stored in the activation dtype (BF16); a weight's gradient in BF16 (ZeRO's 2 bytes a
parameter). Backward kernels run unfused, each op its own kernel, except attention's one kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from roofline.dtypes import DType, get_dtype
from roofline.graph import OnChip, Op, Tensor
from roofline.parallel import Collective, CollectiveCall, collective_op
from roofline.parallel.algorithms import AllReduceRule, all_reduce_op
from roofline.vocab import Level, Role, Unit

FLASH_BACKWARD_FACTOR = 2.5  # FlashAttention-2, section 3.2: 5 matmuls in the backward, 2 in the forward
ELEMENTWISE_BACKWARD_FACTOR = 2.0  # the gradient of an elementwise op: about twice its forward's work
_BF16 = get_dtype("bf16")
CONJUGATE = {Collective.ALL_REDUCE: Collective.ALL_REDUCE, Collective.ALL_GATHER: Collective.REDUCE_SCATTER,
             Collective.REDUCE_SCATTER: Collective.ALL_GATHER, Collective.ALL_TO_ALL: Collective.ALL_TO_ALL,
             Collective.SEND_RECV: Collective.SEND_RECV}
# vocab-parallel embedding: each rank scatters into its own rows; the loss computes its own gradient
NO_BACKWARD = ("embedding.all_reduce", "loss", "loss.all_reduce")


def grad(t: Tensor, dtype: DType) -> Tensor:
    """The gradient of `t`: same shape, `dtype`; a weight's keeps the weight role."""
    return Tensor(f"d.{t.name}", t.shape, _BF16 if t.role is Role.WEIGHT else dtype,
                  Role.WEIGHT if t.role is Role.WEIGHT else Role.ACTIVATION)


def _split(op: Op) -> tuple[list[Tensor], list[Tensor]]:
    """(activation inputs, weight inputs) of a forward op; a KV-cache-role tensor is an activation here."""
    acts = [t for t in op.inputs if t.role is not Role.WEIGHT]
    weights = [t for t in op.inputs if t.role is Role.WEIGHT]
    return acts, weights


def matmul_backward(op: Op, dtype: DType) -> list[Op]:
    """Two matmuls of the forward's matrix FLOPs each (module docstring); the op's vector FLOPs, ×2, ride
    on the first."""
    acts, weights = _split(op)
    d_out = tuple(grad(t, dtype) for t in op.outputs)
    mat = op.flop_by_unit.get(Unit.MATRIX, 0.0)
    vec = op.flop_by_unit.get(Unit.VECTOR, 0.0) * ELEMENTWISE_BACKWARD_FACTOR
    matrices = [w for w in weights if len(w.shape) >= 2]
    biases = [w for w in weights if len(w.shape) < 2]
    out: list[Op] = []
    first = acts[:1] if matrices else acts[:2]
    for i, x in enumerate(first):
        others = tuple(t for t in op.inputs if (t is not x and t.role is not Role.WEIGHT) or t in matrices)
        flop = {Unit.MATRIX: mat} | ({Unit.VECTOR: vec} if vec and i == 0 else {})
        rest = tuple(grad(t, dtype) for t in acts[len(first):]) if i == 0 else ()
        out.append(Op(f"{op.name}.dgrad" + (f".{i}" if len(first) > 1 else ""), "matmul_dgrad",
                      (*d_out, *others), (grad(x, dtype), *rest), flop, op.count,
                      formula=f"dX = dOut·Wᵀ: the forward's {op.formula or 'FLOPs'}", compute_dtype=op.compute_dtype))
    for w in matrices:
        out.append(Op(f"{op.name}.wgrad", "matmul_wgrad", (*d_out, *acts), (grad(w, dtype), *(grad(b, dtype)
                      for b in biases)), {Unit.MATRIX: mat}, op.count,
                      formula=f"dW = Xᵀ·dOut: the forward's {op.formula or 'FLOPs'}", compute_dtype=op.compute_dtype))
    if len(first) == 1 and not matrices:  # one activation operand, no weight: still two matmuls' worth
        out[0] = Op(out[0].name, out[0].kind, out[0].inputs, out[0].outputs,
                    {**out[0].flop_by_unit, Unit.MATRIX: 2 * mat}, op.count, formula=out[0].formula,
                    compute_dtype=op.compute_dtype)
    return out


def flash_backward(name: str, qk: Op, softmax: Op, pv: Op, dtype: DType) -> Op:
    """FlashAttention-2's backward as one kernel (module docstring)."""
    q, k = qk.inputs[0], qk.inputs[1]
    v, o = pv.inputs[1], pv.outputs[0]
    b, h, nq = q.shape[0], q.shape[1], q.shape[2]
    lse = Tensor(f"{name}.lse", (b, h, nq), get_dtype("fp32"))
    mat = FLASH_BACKWARD_FACTOR * (qk.flop_by_unit.get(Unit.MATRIX, 0.0) + pv.flop_by_unit.get(Unit.MATRIX, 0.0))
    vec = ELEMENTWISE_BACKWARD_FACTOR * softmax.flop_by_unit.get(Unit.VECTOR, 0.0)
    traffic: dict[Level, float] = {}
    for op in (qk, pv):
        for lv, by in op.traffic.items():
            traffic[lv] = traffic.get(lv, 0.0) + FLASH_BACKWARD_FACTOR * by
    exps = dict(softmax.onchip.ops_by_unit) if softmax.onchip is not None else {}
    smem = qk.onchip.smem_bytes if qk.onchip is not None else 0.0
    return Op(f"{name}.backward", "flash_attention_backward", (q, k, v, o, grad(o, dtype), lse),
              (grad(q, dtype), grad(k, dtype), grad(v, dtype)), {Unit.MATRIX: mat, Unit.VECTOR: vec}, qk.count,
              formula=f"{FLASH_BACKWARD_FACTOR:g} × the forward's matmul FLOPs (FlashAttention-2: 5 matmuls to 2, "
                      "the scores recomputed); vector 2 × the softmax's",
              note="the forward kernel's log-sum-exp rows (fp32, one per query and head) are read here",
              compute_dtype=qk.compute_dtype, traffic=traffic, onchip=OnChip(exps, smem_bytes=smem,
                                                                               tiles="FlashAttention-2 backward"))


def elementwise_backward(op: Op, dtype: DType) -> Op:
    """2 × the forward's vector FLOPs (none for a copy); the saved inputs read, their gradients written."""
    acts, weights = _split(op)
    d_out = tuple(grad(t, dtype) for t in op.outputs)
    vec = op.flop_by_unit.get(Unit.VECTOR, 0.0) * ELEMENTWISE_BACKWARD_FACTOR
    reads = (*d_out, *acts, *weights) if vec else d_out
    writes = tuple(grad(t, dtype) for t in (*acts, *weights))
    exps = dict(op.onchip.ops_by_unit) if op.onchip is not None and op.onchip.ops_by_unit else {}
    return Op(f"{op.name}.backward", f"{op.kind}_backward", reads, writes, {Unit.VECTOR: vec} if vec else {},
              op.count, formula=f"{ELEMENTWISE_BACKWARD_FACTOR:g} × the forward's vector FLOPs" if vec else
              "the gradient's bytes, no FLOPs", onchip=OnChip(exps) if exps else None)


def collective_backward(op: Op, call: CollectiveCall, dtype: DType, rule: AllReduceRule | None = None) -> Op | None:
    """The conjugate collective over the same group and roof (module docstring); an all-reduce's by the
    algorithm `rule` runs for its size (roofline.parallel.algorithms), as the forward's."""
    if not op.outputs:
        return None
    kind = CONJUGATE[call.kind]
    message, out = grad(op.outputs[0], dtype), grad(op.inputs[0], dtype)
    if kind is Collective.ALL_REDUCE and rule is not None:
        return all_reduce_op(f"{op.name}.backward", message, out, call.group, call.level, rule, op.count)[0]
    return collective_op(f"{op.name}.backward", kind, message, out, call.group, call.level, op.count)


def backward_ops(ops: Iterable[Op], collectives: Mapping[str, CollectiveCall], attention: Mapping[str, tuple[Op, ...]],
                 dtype: DType, rule: AllReduceRule | None = None) -> list[tuple[str, Op]]:
    """(the forward op's name, its backward op) in backward order (the forward's reversed); an
    attention group named in `attention` (prefix -> its qk, softmax and pv ops) is one FlashAttention
    backward kernel, attributed to its qk op."""
    grouped = {op.name: prefix for prefix, group in attention.items() for op in group}
    out: list[tuple[str, Op]] = []
    for op in reversed(list(ops)):
        if op.name in NO_BACKWARD:
            continue
        if op.name in grouped:
            prefix = grouped[op.name]
            qk, sm, pv = attention[prefix]
            if op is pv:  # the last forward op of the group comes first in reverse
                out.append((qk.name, flash_backward(prefix, qk, sm, pv, dtype)))
            continue
        if op.name in collectives:
            b = collective_backward(op, collectives[op.name], dtype, rule)
            if b is not None:
                out.append((op.name, b))
        elif op.flop_by_unit.get(Unit.MATRIX):
            out += [(op.name, b) for b in matmul_backward(op, dtype)]
        else:
            out.append((op.name, elementwise_backward(op, dtype)))
    return out


__all__ = ["ELEMENTWISE_BACKWARD_FACTOR", "FLASH_BACKWARD_FACTOR", "backward_ops", "flash_backward", "grad",
           "matmul_backward"]
