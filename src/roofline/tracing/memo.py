"""The recorder's formula memo: a call counted once per trace for each shape it comes in.

A decode step runs the same op on the same shapes once per layer; a formula (roofline.tracing.registry)
sees shapes only, so its ops for a call are those of an earlier call of the same op with the same
arguments, renamed. `key` is what a formula can read of a call: the op's schema, every argument
(a tensor as its shape, dtype, the graph tensor it is: shape, dtype, role, persistence, and which
earlier argument it is the same tensor as), the fused flag and the kept pairs. `template` keeps a
call's ops only where renaming is all there is to it: each op named by the call, reading and writing
only the call's own graph tensors, and no name in its formula or note; anything else (attention's
intermediate tensors, an embedding's gathered rows) is counted afresh each time. `rebuild` makes the
ops for a new call from a template. Torch-free (capture.py imports torch only in its functions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.graph import Op, Tensor
from roofline.tracing.capture import Seen

# per op of a template: (the op, indices of its inputs and outputs in the call's tensors)
Template = tuple[tuple[Op, tuple[int, ...], tuple[int, ...]], ...]


def key(schema: object, stack: Sequence[Any], reads: Sequence[Tensor], writes: Sequence[Tensor],
        known: dict[int, Tensor], offsets: object, fused: bool, kept: int | None) -> tuple[Any, ...] | None:
    """What the formula can read of this call (the module's text), or None when a value cannot be a
    key (not hashable). `known`: id(argument) -> its graph tensor."""
    order: dict[int, int] = {}  # id(graph tensor) -> its index among the call's tensors, first seen

    def tensor_key(r: Tensor | None) -> Any:
        if r is None:
            return None
        at = order.setdefault(id(r), len(order))
        return at, r.shape, r.dtype, r.role, r.persistent

    def arg_key(v: Any) -> Any:
        if isinstance(v, Seen):
            return (tuple(v.shape), v.dtype, v.values if v is offsets else None, tensor_key(known.get(id(v))))
        if isinstance(v, tuple):
            return tuple(arg_key(x) for x in v)
        return type(v), v

    made = (id(schema), fused, kept, tuple(arg_key(v) for v in stack), tuple(tensor_key(r) for r in reads),
            tuple(tensor_key(r) for r in writes))
    try:
        hash(made)
    except TypeError:
        return None
    return made


def template(ops: Sequence[Op], name: str, tensors: Sequence[Tensor]) -> Template | None:
    """`ops`, made by a formula for the call `name` over `tensors` (its reads, then its writes), as a
    template; None where renaming would not make them for another call."""
    index: dict[int, int] = {}
    for i, t in enumerate(tensors):
        index.setdefault(id(t), i)
    names = [name, *(t.name for t in tensors)]
    made = []
    for op in ops:
        if op.name != name or any(id(t) not in index for t in (*op.inputs, *op.outputs)):
            return None
        if any(n in op.formula or n in op.note for n in names):
            return None
        made.append((op, tuple(index[id(t)] for t in op.inputs), tuple(index[id(t)] for t in op.outputs)))
    return tuple(made)


def rebuild(made: Template, name: str, tensors: Sequence[Tensor]) -> list[Op]:
    """A template's ops for the call `name` over `tensors` (its reads, then its writes)."""
    return [Op(name, op.kind, tuple(tensors[i] for i in ins), tuple(tensors[i] for i in outs), op.flop_by_unit,
               op.count, op.formula, op.note, op.compute_dtype, op.traffic, op.onchip)
            for op, ins, outs in made]


__all__ = ["Template", "key", "rebuild", "template"]
