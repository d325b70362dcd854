"""A torch.profiler trace (Chrome/Kineto JSON) as the graph the tracer and the analytic models produce.

    prof.export_chrome_trace("trace.json")          # torch.profiler.profile(record_shapes=True)
    p = load_kineto("trace.json")
    p.trace.analyze("h100")                          # every op with its measured time

What a trace holds, and what each part becomes:

    cpu_op events ("aten::linear", ...)   the ops the program called: the outermost aten op of each
                                          call stack is one op; the ops it dispatched to are inside it
    "Input Dims" / "Input type" /         the call's schema arguments, as record_shapes wrote them:
    "Concrete Inputs" / "Input Strides"   a shape-only `OpCall`, counted by the SAME formulas the live
                                          tracer uses (roofline.tracing.registry); the result's shape,
                                          which a profile does not record, follows from the op
                                          (`result_shape`: 2-D matmul [M, K]·[K, N] -> [M, N], ...)
    kernel events (CUDA)                  an op's time is the sum of its GPU kernels' durations, joined
                                          through the launch's "correlation" id; the idle time on the
                                          stream before an op's first kernel is its launch gap
    CPU only                              an op's time is its event's duration (the inner call where
                                          the tracer's dispatch mode wrapped it: the op without the
                                          tracer's bookkeeping)

A trace recorded without record_shapes has names and times only: each op is placed with its
measured time and no FLOPs or bytes (`Profile.shapes` False, said so by every report).

torch is imported only inside functions (for an op's pointwise/reduction tags), never required.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.dtypes import DType
from roofline.errors import RooflineError
from roofline.graph import Op, Tensor
from roofline.tracing.analysis import Trace
from roofline.tracing.chrome import stream_trace_events
from roofline.tracing.events import checked_events
from roofline.tracing.registry import (
    ATTENTION,
    FORMULAS,
    REDUCTIONS,
    SDPA,
    Arg,
    ArgShape,
    OpCall,
    Registry,
    generic,
    torch_dtype,
)

US = 1e-6  # trace timestamps and durations are microseconds


@dataclass
class Profile:
    """A program's ops with measured times, from a profiler (or the tracer and a profiler together).

    trace     the ops (FLOPs from the registry, bytes from the recorded shapes) and `times_s` per kernel
    device    "cpu" (op times) or "cuda" (kernel times)
    shapes    False: the trace had no shapes (record_shapes off): time-only placement
    gaps_s    kernel -> idle time on its stream before its first GPU kernel (CUDA; launch overhead)
    launches  kernel -> GPU kernels it launched
    gpu_kernels      (kernel, GPU kernel name, start) for every GPU kernel, in launch order (CUDA)
    measured_bytes   kernel -> measured bytes per memory level, "dram", "l2", "l1" (Nsight Compute)
    measured_flop    kernel -> measured FLOPs (Nsight Compute: tensor-pipe ops and FP instructions)
    """

    trace: Trace
    device: str = "cpu"
    shapes: bool = True
    source: str = ""
    gaps_s: dict[str, float] = field(default_factory=dict)
    launches: dict[str, int] = field(default_factory=dict)
    gpu_kernels: list[tuple[str, str, float]] = field(default_factory=list)
    measured_bytes: dict[str, dict[str, float]] = field(default_factory=dict)
    measured_flop: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def measured_time_s(self) -> float:
        return sum(self.trace.times_s.values())

    @property
    def gap_time_s(self) -> float:
        return sum(self.gaps_s.values())


# --- reading the file -------------------------------------------------------------------------------

# the categories the importer reads (parse_kineto): operators, GPU work, runtime calls; all else is dropped
CPU_CATEGORIES = ("cpu_op", "Operator", "operator")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "Runtime")
_KEPT = frozenset((*CPU_CATEGORIES, *GPU_CATEGORIES, *RUNTIME_CATEGORIES))
# Stated bounds (README, "Import"; bench/bench_import.py). A trace is streamed, so its size costs time, not
# memory; what is kept costs both: about 9 KB of memory and 0.75 ms of analysis per operator with its launch
# and kernel on 2 idle cores (a 20 MB trace of 30,000: 276 MB, 22.8 s at load 1; 50,000 took 470 MB and far
# longer than 30 s under load), so 90,000 events (30,000 operators) stay within 1 GiB and about 30 s.
# torch.profiler.schedule(wait=1, warmup=1, active=1) records one step.
MAX_TRACE_BYTES = 512 << 20  # 512 MiB, refused before reading: streamed at 20-50 MB/s on 2 cores, so within 30 s
MAX_TRACE_EVENTS = 90_000


def _kept(event: Any) -> bool:
    return isinstance(event, dict) and event.get("ph") == "X" and event.get("cat") in _KEPT


def read_trace_json(path: str | Path, max_events: int = MAX_TRACE_EVENTS,
                    max_bytes: int = MAX_TRACE_BYTES) -> dict[str, Any]:
    """The trace as {"traceEvents": [the events the importer reads]}, streamed from the file (the
    other events and keys are dropped as they are read), or one clear error: missing, truncated, not a
    Chrome trace, or past a stated bound (`MAX_TRACE_EVENTS` kept events, `MAX_TRACE_BYTES`)."""
    def too_many(n: int) -> str:
        return (f"{path} holds more than {n:,} operator, kernel and runtime events; the importer reads at most "
                f"{n:,} (about {n // 3:,} operators with their kernels, within 1 GiB of memory): record fewer steps "
                "(torch.profiler.schedule(wait=1, warmup=1, active=1))")

    return {"traceEvents": stream_trace_events(path, _kept, max_events, max_bytes, too_many)}


# --- torch type names as record_shapes writes them ------------------------------------------------------

# "Input type" strings (c10's type names) -> (torch dtype name, bytes per element)
TYPE_NAMES: Mapping[str, tuple[str, int]] = {
    "float": ("float32", 4), "double": ("float64", 8), "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2), "long int": ("int64", 8), "long": ("int64", 8), "int64_t": ("int64", 8),
    "int": ("int32", 4), "short int": ("int16", 2), "short": ("int16", 2), "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1), "bool": ("bool", 1), "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16), "c10::complex<c10::Half>": ("complex32", 4),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1), "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "c10::Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "c10::Float8_e8m0fnu": ("float8_e8m0fnu", 1), "c10::Float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),
    "unsigned short": ("uint16", 2), "unsigned int": ("uint32", 4), "unsigned long": ("uint64", 8),
}


def dtype_named(type_name: str) -> DType | None:
    known = TYPE_NAMES.get(type_name)
    return torch_dtype(*known) if known else None


# ops that move nothing (views, allocations, queries): never a kernel of their own
VIEWS = frozenset((
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand", "expand_as",
    "unsqueeze", "squeeze", "slice", "select", "narrow", "split", "split_with_sizes", "chunk", "unbind", "detach",
    "detach_", "alias", "lift_fresh", "view_as", "unflatten", "numpy_T", "movedim", "diagonal", "unfold",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_", "set_", "item",
    "_local_scalar_dense", "size", "stride", "is_nonzero", "result_type", "is_same_size", "_fused_sdp_choice",
    "_has_compatible_shallow_copy_type", "lift_fresh_copy", "requires_grad_", "retain_grad", "record_stream",
    "view_as_complex", "view_as_real", "real", "imag", "conj", "_conj", "_neg_view", "swapaxes", "swapdims",
    "adjoint", "mT", "mH", "tensor_split", "hsplit", "vsplit", "positive", "as_strided_",
))
# ops that are views unless they had to copy (then a copy op runs inside them)
MAYBE_VIEW = frozenset(("reshape", "contiguous", "to", "type_as", "flatten", "dropout", "expand_copy", "clone"))
COPIES_INSIDE = frozenset(("aten::copy_", "aten::_to_copy", "aten::clone", "aten::_unsafe_view"))
# a fused backend ran attention (scores never written) when one of these ran inside it
FUSED_INSIDE = ("flash", "efficient", "cudnn", "fused_attention", "fmha")


# --- the events as a forest ---------------------------------------------------------------------------------

@dataclass
class _Event:
    name: str
    ts: float
    dur: float
    args: Mapping[str, Any]
    children: list[_Event] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def walk(self) -> Iterable[_Event]:
        """This event and everything inside it, parents first, in time order. A loop, not recursion:
        a trace may nest events thousands deep (issue 24)."""
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children))


def _forest(events: Iterable[Mapping[str, Any]]) -> list[_Event]:
    """Complete events of one thread nested by time: a child lies within its parent."""
    items = sorted((_Event(str(e.get("name", "")), float(e["ts"]), float(e.get("dur", 0.0)), e.get("args") or {})
                    for e in events), key=lambda e: (e.ts, -e.dur))
    roots: list[_Event] = []
    stack: list[_Event] = []
    for e in items:
        while stack and e.ts >= stack[-1].end:
            stack.pop()
        (stack[-1].children if stack else roots).append(e)
        stack.append(e)
    return roots


def _top_ops(roots: Iterable[_Event]) -> list[_Event]:
    """The outermost aten op of each call stack (user annotations and wrappers are looked through)."""
    out: list[_Event] = []
    stack = list(reversed(list(roots)))  # a loop, not recursion: annotations may nest thousands deep
    while stack:
        r = stack.pop()
        if r.name.startswith("aten::"):
            out.append(r)
        else:
            stack.extend(reversed(r.children))
    return out


def _timed(e: _Event) -> _Event:
    """The event that timed the op itself: under the tracer's dispatch mode, the inner call of the same
    op (the outer one also holds the tracer's Python bookkeeping)."""
    for c in e.children:
        if c.name == "PythonDispatchMode":
            inner = [g for g in c.children if g.name == e.name]
            if inner:
                return inner[0]
    return e


# --- one recorded call -> OpCall -------------------------------------------------------------------------

def _scalar(text: Any) -> Arg:
    if not isinstance(text, str) or text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        number = int(text)
        return number if abs(number) <= 2**53 else text  # past any size: kept as text, never a huge int
    except ValueError:
        pass
    try:
        value = float(text)
        return value if math.isfinite(value) else text
    except ValueError:
        return text


def _int_list(text: Any) -> tuple[int, ...] | None:
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        return tuple(int(x) for x in text.strip("[]").split(",") if x.strip())
    except ValueError:
        return None


def _distinct(shape: Sequence[int], strides: Any) -> tuple[int, ...]:
    """Stride-0 (broadcast) dimensions read once, as the tracer counts them."""
    if isinstance(strides, list) and len(strides) == len(shape) and all(isinstance(s, int) for s in strides):
        return tuple(1 if st == 0 else int(n) for n, st in zip(shape, strides, strict=True))
    return tuple(int(n) for n in shape)


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and all(isinstance(x, int) for x in d)


@dataclass
class _Call:
    aten: str
    args: tuple[Arg, ...]
    reads: tuple[ArgShape, ...]


def _arguments(name: str, ev: _Event, fallback: DType) -> _Call | None:
    """The call's schema arguments from record_shapes' lists; None when the trace has no shapes."""
    dims = ev.args.get("Input Dims")
    types = ev.args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    concrete = ev.args.get("Concrete Inputs") or []
    strides = ev.args.get("Input Strides") or []
    aten = ev.name.removeprefix("aten::")
    args: list[Arg] = []
    reads: list[ArgShape] = []

    def shaped(shape: list[int], dt: DType, st: Any) -> ArgShape:
        t = Tensor(f"{name}.in{len(reads)}", _distinct(shape, st), dt)
        a = ArgShape(tuple(int(s) for s in shape), dt, t)
        reads.append(a)
        return a

    for i, d in enumerate(dims):
        tname = types[i] if i < len(types) else ""
        value = concrete[i] if i < len(concrete) else ""
        st = strides[i] if i < len(strides) else None
        dt = dtype_named(tname)
        if tname == "TensorList" and isinstance(d, list):
            sts = st if isinstance(st, list) else [None] * len(d)
            args.append(tuple(shaped(x, fallback, s) for x, s in zip(d, sts, strict=False) if _is_shape(x)))
        elif dt is not None and _is_shape(d) and (d or value == ""):
            args.append(shaped(d, dt, st))  # a tensor (a 0-d tensor has dims [])
        elif tname == "ScalarList":
            args.append(_int_list(value))
        else:
            args.append(_scalar(value))
    return _Call(aten, tuple(args), tuple(reads))


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, v in enumerate((1,) * (n - len(s)) + tuple(s)):
            out[i] = max(out[i], v) if v != 0 else 0
    return tuple(out)


def _dim(d: Arg, rank: int) -> int:
    return int(d) % rank if isinstance(d, int) and rank else 0


def result_shape(aten: str, args: Sequence[Arg]) -> tuple[tuple[int, ...], str]:
    """The result's shape, which a profile does not record, from the op and its arguments; and a note
    when it is an assumption (an op this table does not know: the broadcast of its tensor arguments)."""
    tensors = [a for a in args if isinstance(a, ArgShape)]
    s = [a.shape for a in tensors]

    def t(i: int) -> tuple[int, ...]:
        a = args[i] if i < len(args) else None
        return a.shape if isinstance(a, ArgShape) else ()

    if aten == "linear":
        return (*t(0)[:-1], t(1)[0]), ""
    if aten in ("mm", "addmm", "_addmm_activation"):
        a, b = (t(0), t(1)) if aten == "mm" else (t(1), t(2))
        return (a[0], b[-1]), ""
    if aten in ("bmm", "baddbmm"):
        a, b = (t(0), t(1)) if aten == "bmm" else (t(1), t(2))
        return (a[0], a[1], b[2]), ""
    if aten == "addbmm":
        return (t(1)[1], t(2)[2]), ""
    if aten == "matmul":
        a, b = t(0), t(1)
        if len(a) == 1 and len(b) == 1:
            return (), ""
        if len(b) == 1:
            return a[:-1], ""
        if len(a) == 1:
            return (*b[:-2], b[-1]), ""
        return (*_broadcast([a[:-2], b[:-2]]), a[-2], b[-1]), ""
    if aten in ("dot", "vdot"):
        return (), ""
    if aten in ("mv", "addmv"):
        return (t(0)[0],) if aten == "mv" else (t(1)[0],), ""
    if aten in ATTENTION:
        q, v = t(0), t(2)
        return (*q[:-1], v[-1]), ""
    if aten == "embedding":
        return (*t(1), t(0)[-1]), ""
    if aten in ("cat", "stack") and args and isinstance(args[0], tuple):
        parts = [a.shape for a in args[0] if isinstance(a, ArgShape) and math.prod(a.shape) > 0]
        if not parts:
            return (0,), ""
        rank = len(parts[0])
        d = args[1] if len(args) > 1 else 0
        if aten == "stack":
            k = int(d) % (rank + 1) if isinstance(d, int) else 0
            return (*parts[0][:k], len(parts), *parts[0][k:]), ""
        k = _dim(d, rank)
        return (*parts[0][:k], sum(p[k] for p in parts), *parts[0][k + 1:]), ""
    if aten.rstrip("_") in REDUCTIONS and s:
        dims = args[1] if len(args) > 1 else None
        keep = bool(args[2]) if len(args) > 2 and isinstance(args[2], bool) else False
        rank = len(s[0])
        if isinstance(dims, int):
            dims = (dims,)
        if isinstance(dims, tuple) and dims and all(isinstance(x, int) for x in dims) and rank:
            gone = {int(x) % rank for x in dims if isinstance(x, int)}
            return tuple(1 if i in gone else n for i, n in enumerate(s[0]) if keep or i not in gone), ""
        return (), ""
    if not s:
        return (), f"aten::{aten}: no tensor argument; its result is taken as a scalar"
    return _broadcast(s), ("" if aten in FORMULAS or aten.rstrip("_") in FORMULAS
                           else f"aten::{aten}: result shape assumed the broadcast of its inputs")


_BOOL_RESULT = ("eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_not", "logical_and",
                "logical_or", "any", "all")


def _tags(aten: str) -> tuple[bool, bool]:
    """(pointwise, reduction) from PyTorch's op tags when torch is installed; else from our lists."""
    try:
        import torch

        packet = getattr(torch.ops.aten, aten)
        overloads = packet.overloads()
        first = getattr(packet, "default" if "default" in overloads else overloads[0])
        tags = set(getattr(first, "tags", ()))
        return torch.Tag.pointwise in tags, torch.Tag.reduction in tags
    except Exception:  # no torch, or no such op in this torch: counted as bytes only
        return False, aten.rstrip("_") in REDUCTIONS


def call_ops(name: str, call: _Call, fused: bool, formulas: Registry = FORMULAS) -> tuple[list[Op], bool, str]:
    """The ops one recorded call counts as (the registry's formula over its shapes), whether a formula
    or a tag counted it, and a note when its result shape was assumed."""
    shape, note = result_shape(call.aten, call.args)
    pointwise, reduction = _tags(call.aten.rstrip("_")) if call.aten not in formulas else (False, False)
    if pointwise:
        note = ""  # a pointwise op's result is the broadcast of its inputs
    first = call.reads[0].dtype if call.reads else None
    if call.aten == "embedding" and call.reads:
        first = call.reads[0].dtype
    base = call.aten.rstrip("_")
    dt = torch_dtype("bool", 1) if base in _BOOL_RESULT else (first or torch_dtype("float32", 4))
    out = ArgShape(shape, dt, Tensor(f"{name}.out", shape, dt))
    key = formulas.key(call.aten)
    op_call = OpCall(name, key, call.args, call.reads, (out,), fused)
    handler = formulas.get(key)
    if handler is not None:
        return handler(op_call), True, note
    ops, counted = generic(op_call, pointwise=pointwise, reduction=reduction)
    return ops, counted, note


# --- the whole trace -----------------------------------------------------------------------------------

def _common_dtype(ops: Iterable[_Event]) -> DType:
    counts: dict[str, int] = {}
    for e in ops:
        for tname in e.args.get("Input type") or []:
            if tname in TYPE_NAMES and TYPE_NAMES[tname][0].startswith(("float", "bfloat")):
                counts[tname] = counts.get(tname, 0) + 1
    best = max(counts, key=lambda k: counts[k]) if counts else "float"
    return dtype_named(best) or torch_dtype("float32", 4)


def _is_view(e: _Event) -> bool:
    aten = e.name.removeprefix("aten::")
    if aten in VIEWS:
        return True
    if aten in MAYBE_VIEW:
        return not any(c.name in COPIES_INSIDE for c in e.walk() if c is not e)
    return False


def parse_kineto(data: Mapping[str, Any], source: str = "", formulas: Registry = FORMULAS) -> Profile:
    """A Chrome/Kineto trace's ops, counted from their recorded shapes and timed (see the module doc)."""
    events = checked_events(data.get("traceEvents", []), source)
    cpu = [e for e in events if e.get("cat") in CPU_CATEGORIES]
    kernels = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    runtime = [e for e in events if e.get("cat") in RUNTIME_CATEGORIES]
    if not cpu and not kernels:
        raise RooflineError(f"{source or 'the trace'} has no operator or kernel events; record it with "
                            "torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True)")
    by_thread: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
    for e in cpu + runtime:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    tops: list[tuple[_Event, tuple[Any, Any]]] = []
    for key, evs in by_thread.items():
        tops += [(t, key) for t in _top_ops(_forest(evs))]
    tops.sort(key=lambda te: te[0].ts)

    # CUDA: each kernel's launch (correlation id) -> the op whose call stack launched it
    on_gpu = bool(kernels)
    kernel_of: dict[Any, list[Mapping[str, Any]]] = {}
    for k in kernels:
        corr = (k.get("args") or {}).get("correlation")
        kernel_of.setdefault(corr, []).append(k)
    gap_before = _gaps(kernels)

    profile = Profile(Trace(name=Path(source).stem if source else "profile"),
                      device="cuda" if on_gpu else "cpu", source=source)
    t = profile.trace
    fallback = _common_dtype(e for e, _ in tops)
    seen_shapes = any(isinstance(e.args.get("Input Dims"), list) for e, _ in tops)
    profile.shapes = seen_shapes
    counter: dict[str, int] = {}
    claimed: set[int] = set()
    for ev, _thread in tops:
        aten = ev.name.removeprefix("aten::")
        launched: list[Mapping[str, Any]] = []
        if on_gpu:
            for inner in ev.walk():
                corr = inner.args.get("correlation")
                if corr is not None and corr in kernel_of:
                    launched += kernel_of[corr]
            if not launched:
                continue  # nothing ran on the GPU for it (a view, a CPU-side query)
        elif _is_view(ev):
            continue
        nth = counter.get(aten, 0) + 1
        counter[aten] = nth
        name = aten if nth == 1 else f"{aten}#{nth}"
        names_inside = [c.name for c in ev.walk()] + [str(x.get("name", "")) for x in launched]
        fused = aten in ATTENTION and (aten != SDPA or any(w in n.lower() for n in names_inside[1:]
                                                            for w in FUSED_INSIDE))
        call = _arguments(name, ev, fallback) if seen_shapes else None
        if call is None:
            ops = [Op(name, aten, (), (), {}, note="time only: the trace has no shapes (record_shapes=False)")]
        else:
            try:
                ops, counted, note = call_ops(name, call, fused, formulas)
            except (RooflineError, IndexError, TypeError, ValueError) as exc:
                t.errors.setdefault(f"aten::{aten}", f"{type(exc).__name__}: {exc}")
                continue
            if not counted:
                t.unknown[aten] = t.unknown.get(aten, 0) + 1
            if note and note not in profile.notes:
                profile.notes.append(note)
        t.ops.extend(ops)
        if len(ops) > 1 and fused:
            t.groups[name] = tuple(op.name for op in ops)
        kernel_name = name if len(ops) > 1 and fused else ops[0].name
        if on_gpu:
            ids = [id(x) for x in launched if id(x) not in claimed]
            claimed.update(ids)
            seconds = sum(float(x.get("dur", 0.0)) for x in launched) * US
            profile.launches[kernel_name] = len(launched)
            first = min(launched, key=lambda x: float(x["ts"]))
            profile.gaps_s[kernel_name] = gap_before.get(id(first), 0.0)
            profile.gpu_kernels += [(kernel_name, str(x.get("name", "")), float(x["ts"])) for x in launched]
        else:
            seconds = _timed(ev).dur * US
        if len(ops) == 1 or kernel_name == name:
            t.times_s[kernel_name] = seconds
        else:  # one call that became several unfused ops (math attention): one time for all, not attributable
            profile.notes.append(f"{name}: {len(ops)} unfused ops share one measured time; left unplaced")
    # kernels no op launched (CUDA graphs, NCCL, a trace without CPU events): time only, by kernel name
    count_by: dict[str, int] = {}
    for kev in kernels:
        if id(kev) in claimed:
            continue
        base = str(kev.get("name", "kernel"))[:60]
        count_by[base] = count_by.get(base, 0) + 1
        kname = base if count_by[base] == 1 else f"{base}#{count_by[base]}"
        t.ops.append(Op(kname, "gpu_kernel", (), (), {}, note="a GPU kernel no recorded op launched: time only"))
        t.times_s[kname] = float(kev.get("dur", 0.0)) * US
        profile.gaps_s[kname] = gap_before.get(id(kev), 0.0)
        profile.launches[kname] = 1
        profile.gpu_kernels.append((kname, str(kev.get("name", "")), float(kev["ts"])))
    profile.gpu_kernels.sort(key=lambda k: k[2])
    if not seen_shapes:
        profile.notes.append("the trace has no shapes (recorded without record_shapes=True): kernels are placed "
                             "by measured time only, with no FLOPs or bytes")
    if not t.ops:
        raise RooflineError(f"{source or 'the trace'} holds no operator that ran a kernel")
    return profile


def _gaps(kernels: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """Per GPU kernel (by id), the idle time on its stream since the previous kernel ended (seconds)."""
    by_stream: dict[Any, list[Mapping[str, Any]]] = {}
    for k in kernels:
        a = k.get("args") or {}
        by_stream.setdefault((a.get("device", k.get("pid")), a.get("stream", k.get("tid"))), []).append(k)
    out: dict[int, float] = {}
    for ks in by_stream.values():
        ks = sorted(ks, key=lambda x: float(x["ts"]))
        end = None
        for k in ks:
            ts, dur = float(k["ts"]), float(k.get("dur", 0.0))
            out[id(k)] = max(0.0, ts - end) * US if end is not None else 0.0
            end = ts + dur if end is None else max(end, ts + dur)
    return out


def load_kineto(path: str | Path, formulas: Registry = FORMULAS) -> Profile:
    """A Chrome/Kineto trace JSON file (torch.profiler's export_chrome_trace) as a Profile."""
    return parse_kineto(read_trace_json(path), str(path), formulas)


__all__ = ["TYPE_NAMES", "Profile", "dtype_named", "load_kineto", "parse_kineto", "read_trace_json", "result_shape"]
