"""Trace any PyTorch program onto the graph the analytic models produce.

    with roofline.trace(model) as t:
        model(x)
    t.graph, t.plan            # a core Graph and the fusion plan it ran under
    t.analyze("h100")          # every table, chart and fusion plan works on it

A `TorchDispatchMode` sees every ATen op the program runs. Each op that computes becomes one core
`Op` over named tensors; views and aliases (an output sharing storage with an input, from an op
that writes nothing) are skipped: they move no bytes. The recorder turns each live call into a
shape-only `OpCall` and counts it with the formula roofline.tracing.registry holds for the op (the
FLOP conventions are listed there); an op without one is counted by `generic`.

Bytes are the tensors each op reads and writes, at their dtype; a view's bytes are its distinct
elements (an expanded dimension is read once), an embedding reads only the rows it gathers, and an
op's `out=` argument is written, not read. A tensor written in place gets a new version name, so a
kernel that reads x and writes x is not mistaken for one that keeps x on chip.

Fusion: scaled_dot_product_attention's backend is chosen at run time; the recorder asks PyTorch
(torch._fused_sdp_choice) before the formula runs and passes the answer as `OpCall.fused`. A call
that ran fused becomes one kernel of the trace's plan (Plan.TRACED), its ops grouped in `groups`.

By default the trace runs under `torch.inference_mode()`, where PyTorch dispatches composite ops
(linear, rms_norm, scaled_dot_product_attention, softmax) before decomposing them: one op per call
the program made, as the analytic models count. `inference=False` traces the decomposed ops
(autograd on, backward included when the program runs it).

Layering: imports roofline.dtypes, errors, graph, hardware, placement, vocab and this room's
registry; torch only inside functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from roofline.dtypes import DType
from roofline.errors import RooflineError, need_torch
from roofline.graph import FusionPlan, Graph, Op, Tensor
from roofline.hardware import Machine
from roofline.placement import GraphAnalysis, analyze_graph
from roofline.tracing.registry import (
    FORMULAS,
    FUSED_ATTENTION,
    SDPA,
    Arg,
    ArgShape,
    OpCall,
    Registry,
    generic,
    torch_dtype,
)
from roofline.vocab import Plan, Role


@dataclass
class Trace:
    """What a traced program ran: ops in execution order, the kernels that ran fused, op times."""

    name: str = "traced"
    ops: list[Op] = field(default_factory=list)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fused kernel -> its ops
    times_s: dict[str, float] = field(default_factory=dict)  # kernel name -> measured seconds
    unknown: dict[str, int] = field(default_factory=dict)  # aten ops without a FLOP formula -> calls
    errors: dict[str, str] = field(default_factory=dict)  # aten ops the tracer failed on -> why (not counted)
    module_of: dict[str, str] = field(default_factory=dict)  # op name -> module path ("" at top level)

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
        measured time (time_ops=True) carry it, so their percentage of the roof is known."""
        chosen = plan or self.plan
        analysis = analyze_graph(self.graph, machine, dtype, chosen)
        if not self.times_s:
            return analysis
        placed = tuple(p.with_measured(self.times_s[p.name]) if p.name in self.times_s else p
                       for p in analysis.placements)
        return GraphAnalysis(placed, analysis.plan, analysis.machine, analysis.dtype)


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


# --- live tensors -> shapes -------------------------------------------------------------------------

def dtype_of(t: Any) -> DType:
    """Our dtype for a torch tensor's dtype (roofline.tracing.registry.torch_dtype)."""
    return torch_dtype(str(t.dtype), int(getattr(t.dtype, "itemsize", 0) or 0))


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _distinct_shape(t: Any) -> tuple[int, ...]:
    """The shape with broadcast (stride-0) dimensions collapsed: what a kernel actually reads."""
    try:
        strides = t.stride()
    except (RuntimeError, NotImplementedError):  # sparse and other layouts without strides
        return _shape(t)
    return tuple(int(s) if st != 0 else 1 for s, st in zip(t.shape, strides, strict=True))


def _storage_ptr(t: Any) -> int | None:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return None


def _version(t: Any) -> int:
    try:
        return int(t._version)
    except RuntimeError:  # inference tensors keep no version counter
        return -1


def _plain(value: Any, shape_of: Callable[[Any], ArgShape]) -> Arg:
    """An argument as the formulas see it: a tensor's shape, a list's items, a plain value as is;
    anything else (a torch.dtype, a device, a memory format) as its text."""
    import torch

    if isinstance(value, torch.Tensor):
        return shape_of(value)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, shape_of) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _sdp_runs_fused(bound: Mapping[str, Any]) -> bool:
    """Whether PyTorch runs this scaled_dot_product_attention call on a fused backend (flash,
    efficient, cuDNN): 0 from torch._fused_sdp_choice is the math backend, which writes the scores."""
    import torch

    try:
        choice = torch._fused_sdp_choice(bound["query"], bound["key"], bound["value"], bound.get("attn_mask"),
                                         float(bound.get("dropout_p", 0.0) or 0.0), bool(bound.get("is_causal", False)),
                                         scale=bound.get("scale"), enable_gqa=bool(bound.get("enable_gqa", False)))
        return int(choice) != 0
    except (RuntimeError, TypeError, AttributeError, KeyError):
        return True


# --- the recorder ---------------------------------------------------------------------------------

# ops that move no data: allocations (their tensor is named when first used) and queries. detach,
# alias and lift_fresh are not here: they share storage, so the alias rule keeps their data flow
_NO_OP = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_fused_sdp_choice",
          "_local_scalar_dense", "item", "is_same_size", "size", "stride", "sym_size", "sym_stride", "sym_numel",
          "_has_compatible_shallow_copy_type", "set_")


# these write self without reading it
_OVERWRITES = ("copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_")


class _Recorder:
    def __init__(self, trace: Trace, names: Mapping[int, str], time_ops: bool, formulas: Registry) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self.trace = trace
        self.formulas = formulas
        self.records: Any = WeakIdKeyDictionary()  # torch tensor -> (record, version)
        self.param_names = dict(names)  # id(tensor) -> "layers.0.attn.wq.weight"
        self.time_ops = time_ops
        self.path: list[str] = []
        self.counter: dict[str, int] = {}
        self.op_names: set[str] = set()
        self.inputs = 0
        self.versions: dict[str, int] = {}
        self.tensor_names: set[str] = set()

    # names ---------------------------------------------------------------------------------------
    def _unique_tensor(self, base: str) -> str:
        name, k = base, 1
        while name in self.tensor_names:
            k += 1
            name = f"{base}#{k}"
        self.tensor_names.add(name)
        return name

    def _op_name(self, aten: str) -> str:
        base = f"{self.path[-1]}.{aten}" if self.path else aten  # the innermost module's full path
        k = self.counter.get(base, 0) + 1
        self.counter[base] = k
        name = base if k == 1 else f"{base}#{k}"
        while name in self.op_names:
            k += 1
            name = f"{base}#{k}"
        self.op_names.add(name)
        return name

    def record_of(self, t: Any) -> Tensor:
        """The record of a tensor the program holds; new ones are named (parameters by their module path)."""
        import torch

        entry = self.records.get(t)
        version = _version(t)
        if entry is not None and (entry[1] == version or version < 0):
            return entry[0]
        if entry is not None:  # changed in place by something the trace did not see
            rec = self._fresh(entry[0].name.split("@")[0], t, entry[0].role)
        else:
            known = self.param_names.get(id(t))
            is_param = known is not None or isinstance(t, torch.nn.Parameter)
            if known is None:
                self.inputs += 1
                known = f"{'param' if is_param else 'input'}{self.inputs}"
            rec = Tensor(self._unique_tensor(known), _distinct_shape(t), dtype_of(t),
                         Role.WEIGHT if is_param else Role.ACTIVATION)
        self.records[t] = (rec, version)
        return rec

    def _fresh(self, base: str, t: Any, role: Role) -> Tensor:
        k = self.versions.get(base, 0) + 1
        self.versions[base] = k
        return Tensor(self._unique_tensor(f"{base}@{k}"), _distinct_shape(t), dtype_of(t), role)

    def _alias(self, out: Any, base: Any) -> None:
        rec = self.record_of(base)
        shape = _distinct_shape(out)
        dt = dtype_of(out)
        if math.prod(shape) * dt.bytes_per_element == rec.bytes:
            self.records[out] = (rec, _version(out))  # same bytes: the same tensor seen another way
        else:
            part = Tensor(self._unique_tensor(f"{rec.name}[part]"), shape, dt, rec.role)
            self.records[out] = (part, _version(out))

    # one call ------------------------------------------------------------------------------------
    def record(self, func: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any,
               seconds: float | None) -> None:
        import torch
        from torch.utils._pytree import tree_leaves

        schema = func._schema
        aten = schema.name.split("::")[-1]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not outs or aten in _NO_OP:
            for t in outs:  # empty tensors are named when first used
                self.records.pop(t, None)
            return
        bound: dict[str, Any] = {}  # the arguments given, by schema name
        stack: list[Any] = []  # every schema argument in order, defaults filled in
        read_args: list[Any] = []
        written: list[Any] = []
        for i, arg in enumerate(schema.arguments):
            if i < len(args):
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            else:
                stack.append(arg.default_value if arg.has_default_value() else None)
                continue
            bound[arg.name] = value
            stack.append(value)
            tensors = [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
            alias = arg.alias_info
            is_write = bool(alias is not None and alias.is_write)
            if is_write:
                written += tensors
            if not (is_write and (getattr(arg, "is_out", False) or aten in _OVERWRITES)):
                read_args += tensors
        mutable = bool(written)
        if not mutable and read_args:
            ptrs = {_storage_ptr(t): t for t in read_args}
            if all(_storage_ptr(o) in ptrs and _storage_ptr(o) is not None for o in outs):
                for o in outs:
                    self._alias(o, ptrs[_storage_ptr(o)])
                return
        name = self._op_name(aten)
        reads = [(t, self.record_of(t)) for t in read_args]
        writes: list[tuple[Any, Tensor]] = []
        for t in written:
            old = self.record_of(t)
            new = self._fresh(old.name.split("@")[0], t, old.role)
            self.records[t] = (new, _version(t))
            writes.append((t, new))
        for o in outs:
            if any(o is w for w, _ in writes):
                continue
            if mutable and any(_storage_ptr(o) == _storage_ptr(w) for w, _ in writes):
                self.records[o] = (next(r for w, r in writes if _storage_ptr(o) == _storage_ptr(w)), _version(o))
                continue
            rec = Tensor(self._unique_tensor(f"{name}.out"), _distinct_shape(o), dtype_of(o), Role.ACTIVATION)
            self.records[o] = (rec, _version(o))
            writes.append((o, rec))

        # the live call as the formulas see it: shapes, dtypes and the graph's records, no tensors
        known = {id(t): r for t, r in writes}
        known.update((id(t), r) for t, r in reads)  # an argument read and written is, to the formula, what it read

        def shape_of(t: Any) -> ArgShape:
            return ArgShape(_shape(t), dtype_of(t), known.get(id(t)))

        key = self.formulas.key(aten)
        # the one fact a shape cannot tell: which attention backend PyTorch picks for this call
        fused = key in FUSED_ATTENTION or (key == SDPA and _sdp_runs_fused(bound))
        call = OpCall(name, key, tuple(_plain(v, shape_of) for v in stack),
                      tuple(ArgShape(_shape(t), r.dtype, r) for t, r in reads),
                      tuple(ArgShape(_shape(t), r.dtype, r) for t, r in writes), fused)
        handler = self.formulas.get(key)
        if handler is not None:
            ops = handler(call)
        else:
            tags = set(getattr(func, "tags", ()))
            ops, counted = generic(call, pointwise=torch.Tag.pointwise in tags,
                                   reduction=torch.Tag.reduction in tags)
            if not counted:
                self.trace.unknown[aten] = self.trace.unknown.get(aten, 0) + 1
        self.trace.ops.extend(ops)
        where = self.path[-1] if self.path else ""
        for op in ops:
            self.trace.module_of[op.name] = where
        if fused and len(ops) > 1:
            self.trace.groups[name] = tuple(op.name for op in ops)
        if seconds is not None and (len(ops) == 1 or name in self.trace.groups):
            # a call that became several unfused ops has one time for all of them: not attributable
            self.trace.times_s[name if len(ops) > 1 else ops[0].name] = seconds


def _parameter_names(module: Any) -> dict[int, str]:
    names: dict[int, str] = {}
    if module is None:
        return names
    for n, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), n)
    for n, b in module.named_buffers(remove_duplicate=False):
        names.setdefault(id(b), n)
    return names


@contextmanager
def trace(module: Any = None, *, name: str = "traced", inference: bool = True,
          time_ops: bool = False, formulas: Registry = FORMULAS) -> Iterator[Trace]:
    """Record every ATen op run inside the block. `module` (optional) names the weights by their
    parameter paths and the ops by the module that ran them. `time_ops` times each op (the device is
    synchronized around it, so the program runs slower). `formulas`: the registry to count with."""
    torch = need_torch("roofline.tracing")
    from torch.utils._python_dispatch import TorchDispatchMode

    result = Trace(name=name)
    recorder = _Recorder(result, _parameter_names(module), time_ops, formulas)

    def sync() -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kw = dict(kwargs or {})
            if time_ops:
                sync()
                t0 = time.perf_counter()
                out = func(*args, **kw)
                sync()
                seconds: float | None = time.perf_counter() - t0
            else:
                out = func(*args, **kw)
                seconds = None
            try:
                recorder.record(func, args, kw, out, seconds)
            except Exception as exc:  # never break the traced program; say what was left uncounted
                result.errors.setdefault(str(func), f"{type(exc).__name__}: {exc}")
            return out

    with ExitStack() as stack:
        if inference:
            stack.enter_context(torch.inference_mode())
        if module is not None:
            def leave(_module: Any, _args: Any, _out: Any) -> None:  # a hook returning a value replaces the output
                if recorder.path:
                    recorder.path.pop()

            for path, sub in module.named_modules():
                if not path:
                    continue
                pre = sub.register_forward_pre_hook(lambda _m, _a, path=path: recorder.path.append(path))
                post = sub.register_forward_hook(leave)
                stack.callback(pre.remove)
                stack.callback(post.remove)
        stack.enter_context(Mode())
        yield result


def trace_call(fn: Callable[[], Any], module: Any = None, **options: Any) -> Trace:
    """Trace one call of `fn()`."""
    with trace(module, **options) as t:
        fn()
    return t


def trace_script(path: str, argv: Sequence[str] = (), **options: Any) -> Trace:
    """Run a Python script under the tracer (as `python script.py ARGS` would, __name__ == "__main__")."""
    import runpy
    import sys
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"no script at {path}")
    old_argv = sys.argv
    sys.argv = [str(p), *argv]
    try:
        with trace(name=options.pop("name", p.stem), **options) as t:
            try:
                runpy.run_path(str(p), run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise RooflineError(f"{path} exited with status {exc.code}") from None
    finally:
        sys.argv = old_argv
    return t


__all__ = ["Trace", "bytes_by_kind", "dtype_of", "flop_by_kind", "trace", "trace_call", "trace_script"]
