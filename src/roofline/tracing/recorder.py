"""The live recorder: any PyTorch program traced onto the graph the analytic models produce.

    with roofline.trace(model) as t:
        model(x)
    t.graph, t.plan            # a core Graph and the fusion plan it ran under (roofline.tracing.analysis)

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

The facts a formula cannot read from shapes come from the live call: the pairs an attention mask
keeps (`OpCall.kept_pairs`), a grouped matmul's offsets (`ArgShape.values`), and eager attention
(q·kᵀ by matmul, + mask, softmax, ·v: its matmuls rescaled to the kept pairs, the registry's one
attention convention).

Names: global module hooks keep the path of the module running each op ("model.layers.3.mlp.
down_proj.linear"); the first module to run outside any other is a root, and its weights are named
by their paths under it, so a script traced whole (`trace_script`) reads like a module handed over.

Overhead: the recording is two steps (roofline.tracing.capture): while the program runs, each call is
written down (the op overload, a `Seen` per tensor: its shape, strides, dtype, version); the graph is
built from those when the block ends, so the program runs under the mode at little more than the
mode's own cost. What an op overload is (its arguments, which it writes, its formula, its tags) is
worked out once per overload and registry and kept across traces; an inference tensor's version is
never asked (asking raises, slowly).

By default the trace runs under `torch.inference_mode()`, where PyTorch dispatches composite ops
(linear, rms_norm, scaled_dot_product_attention, softmax) before decomposing them: one op per call
the program made, as the analytic models count. `inference=False` traces the decomposed ops
(autograd on, backward included when the program runs it).

The Trace it fills, and everything read off it, is torch-free (roofline.tracing.analysis); running a
script under the recorder is roofline.tracing.script. torch is imported only inside functions.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any

from roofline.dtypes import DType
from roofline.errors import need_torch
from roofline.frozen import frozen
from roofline.graph import Op, Tensor
from roofline.tracing import memo
from roofline.tracing.analysis import Trace
from roofline.tracing.capture import Capture, Seen
from roofline.tracing.registry import (
    ATTENTION,
    FORMULAS,
    FUSED_ATTENTION,
    SDPA,
    Arg,
    ArgShape,
    Formula,
    OpCall,
    Registry,
    generic,
    kept_pairs_of_mask,
    scaled_op,
    torch_dtype,
)
from roofline.vocab import Role

# --- live tensors -> shapes -------------------------------------------------------------------------

@functools.cache  # torch dtypes are few and fixed: each is looked up once
def _dtype_for(torch_dtype_: Any) -> DType:
    return torch_dtype(str(torch_dtype_), int(getattr(torch_dtype_, "itemsize", 0) or 0))


def dtype_of(t: Any) -> DType:
    """Our dtype for a torch tensor's dtype (roofline.tracing.registry.torch_dtype)."""
    return _dtype_for(t.dtype)


def _distinct_shape(t: Seen) -> tuple[int, ...]:
    """The shape with broadcast (stride-0) dimensions collapsed: what a kernel actually reads."""
    strides = t.strides
    if strides is None or 0 not in strides:  # sparse and other layouts without strides: as is
        return tuple(t.shape)
    return tuple(int(s) if st != 0 else 1 for s, st in zip(t.shape, strides, strict=True))


def _bumped(t: Seen) -> int:
    """The version a tensor written in place will have: PyTorch bumps the counter after the op
    returns through this mode (ADInplaceOrView sits above the Python dispatch key)."""
    return t.version + 1 if t.version >= 0 else t.version


def _untaken(base: str, k: int, taken: set[str]) -> str:
    """`base` (k = 1) or `base#k`, k counted up until the name is not in `taken` (a module run twice, a
    tensor name seen before), then added to it: every recorded op and tensor has a name of its own."""
    name = base if k == 1 else f"{base}#{k}"
    while name in taken:
        k += 1
        name = f"{base}#{k}"
    taken.add(name)
    return name


def _plain(value: Any, shape_of: Callable[[Seen], ArgShape]) -> Arg:
    """An argument as the formulas see it: a tensor's shape, a list's items, a plain value as is;
    anything else (a torch.dtype, a device, a memory format) as its text."""
    if isinstance(value, Seen):
        return shape_of(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):  # a list as the call had it (written down as a tuple)
        return tuple(_plain(v, shape_of) for v in value)
    return str(value)


def _tensors(value: Any) -> list[Seen]:
    """The tensors in an argument or a result: itself, or the items of a (nested) list."""
    if isinstance(value, Seen):
        return [value]
    if isinstance(value, tuple):
        return [t for v in value for t in _tensors(v)]
    return []


# --- the recorder ---------------------------------------------------------------------------------

# ops that move no data: allocations (their tensor is named when first used) and queries. detach,
# alias and lift_fresh are not here: they share storage, so the alias rule keeps their data flow
_NO_OP = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_fused_sdp_choice",
          "_local_scalar_dense", "item", "is_same_size", "size", "stride", "sym_size", "sym_stride", "sym_numel",
          "_has_compatible_shallow_copy_type", "set_", "detach_")


# the in-place random fills torch.nn.init builds weights with (kaiming_uniform_ and xavier_ call uniform_,
# normal_ and trunc_normal_ call normal_ or uniform_): outside any module's forward they build the model,
# once, and are no part of its step: left out, and counted (Trace.initialisation); inside a forward
# (noise drawn in the step) they are recorded as any op
_INIT_FILLS = ("uniform_", "normal_")


# views whose schema does not say so (a composite such as type_as returning its argument itself is
# caught by identity)
_UNANNOTATED_VIEWS = ("_unsafe_view",)

# these write self without reading it
_OVERWRITES = ("copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_")

# eager attention (q·kᵀ by matmul, + mask, softmax, ·v): the ops a score tensor passes through between
# its matmul and the mask, and between the mask and p·v, unchanged in shape
_SCORE_PASS = frozenset(("mul", "div", "add", "sub", "_to_copy", "to", "dropout", "clone", "contiguous", "_softmax",
                         "softmax", "_safe_softmax", "tanh"))
_SCORE_MATMULS = frozenset(("matmul", "bmm"))


@frozen
class _Arg:
    name: str
    default: Any
    has_default: bool
    write: bool  # the op writes it
    read: bool  # the op reads it (not an out= argument nor a tensor it only overwrites)


@frozen
class _Schema:
    """What the recorder needs to know about an op overload, worked out on its first call."""

    aten: str
    key: str
    formula: Formula | None
    args: tuple[_Arg, ...]
    no_op: bool
    may_alias: bool  # a result may share an argument's storage (a view): the schema says so
    pointwise: bool
    reduction: bool
    fused_always: bool
    sdpa: bool
    mask_at: int | None  # an attention op's mask argument
    offsets_at: int | None  # a grouped matmul's offsets, whose values its formula reads
    writes: bool  # some argument is written (in place or out=)
    text: str  # the overload as str() writes it ("aten.add.Tensor"), for errors
    # what the hot path (roofline.tracing.capture) asks, worked out here once
    needs_ptrs: bool  # the alias test may read storage addresses: a view, or an op that writes
    needs_values: bool  # an attention op (its backend, its mask) or a grouped matmul (its offsets)
    adds: bool  # an add: eager attention's mask may be one of its arguments
    score_matmul: bool  # a matmul whose 4-D result may be eager attention's scores


# what each op overload is, per formula registry, kept across traces (an overload is one object for the
# life of the process; the registry and the overload are held, so their ids stay theirs)
_SCHEMAS: dict[int, tuple[Registry, dict[int, tuple[Any, _Schema]]]] = {}


def _schemas_for(formulas: Registry) -> dict[int, tuple[Any, _Schema]]:
    known = _SCHEMAS.get(id(formulas))
    if known is None:
        known = _SCHEMAS[id(formulas)] = (formulas, {})
    return known[1]


class _Recorder:
    def __init__(self, trace: Trace, names: Mapping[int, str], time_ops: bool, formulas: Registry) -> None:
        import torch

        self.torch = torch
        self.trace = trace
        self.formulas = formulas
        self.records: dict[int, tuple[Tensor, int]] = {}  # a live tensor's token (Seen.token) -> (record, version)
        self.param_names = dict(names)  # id(tensor) -> "layers.0.attn.wq.weight"
        self.time_ops = time_ops
        self.path: list[str] = []
        self.counter: dict[str, int] = {}
        self.op_names: set[str] = set()
        self.inputs = 0
        self.versions: dict[str, int] = {}
        self.tensor_names: set[str] = set()
        self.schemas = _schemas_for(formulas)  # id(op overload) -> (it, what it is)
        # eager attention: score tensor name -> (index in trace.ops of its q·kᵀ op, pairs kept or None,
        # softmax applied)
        self.scores: dict[str, tuple[int, int | None, bool]] = {}
        self.module_paths: dict[int, str] = {}  # id(module) -> its path, for module hooks
        self.memo: dict[Any, tuple[memo.Template, bool]] = {}  # a call's formula key -> its ops (tracing.memo)
        self.capture = Capture(self.schema, self.schemas, self.param_names, self.path)

    # schemas -------------------------------------------------------------------------------------
    def schema(self, func: Any) -> _Schema:
        known = self.schemas.get(id(func))  # by id: an OpOverload's own hash is slower; it is held below
        if known is not None:
            return known[1]
        torch = self.torch
        sch = func._schema
        aten = sch.name.split("::")[-1]
        key = self.formulas.key(aten)
        args = []
        for arg in sch.arguments:
            alias = arg.alias_info
            write = bool(alias is not None and alias.is_write)
            only_written = write and (bool(getattr(arg, "is_out", False)) or aten in _OVERWRITES)
            has_default = arg.has_default_value()
            args.append(_Arg(arg.name, arg.default_value if has_default else None, has_default, write,
                             not only_written))
        tags = set(getattr(func, "tags", ()))
        mask_at = ATTENTION[key][0] if key in ATTENTION else None
        may_alias = any(r.alias_info is not None for r in sch.returns) or aten in _UNANNOTATED_VIEWS
        made = _Schema(aten, key, self.formulas.get(key), tuple(args), aten in _NO_OP, may_alias,
                       torch.Tag.pointwise in tags,
                       torch.Tag.reduction in tags, key in FUSED_ATTENTION, key == SDPA, mask_at,
                       2 if key == "_grouped_mm" else None, any(a.write for a in args), str(func),
                       may_alias or any(a.write for a in args), key == SDPA or mask_at is not None or
                       key == "_grouped_mm", key == "add", key in _SCORE_MATMULS)
        self.schemas[id(func)] = (func, made)
        return made

    # names ---------------------------------------------------------------------------------------
    def _unique_tensor(self, base: str) -> str:
        return _untaken(base, 1, self.tensor_names)

    def _op_name(self, aten: str, where: str) -> str:
        base = f"{where}.{aten}" if where else aten  # the innermost module's full path
        k = self.counter.get(base, 0) + 1
        self.counter[base] = k
        return _untaken(base, k, self.op_names)

    def enter_module(self, module: Any) -> None:
        """A module's forward starts: its path (a module first seen outside any other is a root: its
        submodules and parameters are named by their paths under it)."""
        path = self.module_paths.get(id(module))
        if path is None:
            if self.path:  # a module its root does not hold: named by its class under its caller
                path = f"{self.path[-1]}.{type(module).__name__}"
            else:
                path = ""
                for n, sub in module.named_modules(remove_duplicate=False):
                    self.module_paths.setdefault(id(sub), n)
                    for tensors in (sub._parameters, sub._buffers):
                        for leaf, t in tensors.items():
                            if t is not None and id(t) not in self.param_names:
                                self.param_names[id(t)] = f"{n}.{leaf}" if n else leaf
                                # seen before its module ran (a script initializing its weights): named
                                # by its path from here on
                                self.capture.forget(t)
            self.module_paths[id(module)] = path
        self.path.append(path if path or not self.path else self.path[-1])

    def leave_module(self) -> None:
        if self.path:
            self.path.pop()

    def record_of(self, t: Seen) -> Tensor:
        """The record of a tensor the program holds; new ones are named (parameters by their module path)."""
        entry = self.records.get(t.token)
        version = t.version
        if entry is not None and (entry[1] == version or version < 0):
            return entry[0]
        if entry is not None:  # changed in place by something the trace did not see
            rec = self._fresh(entry[0].name.split("@")[0], t, entry[0].role)
        else:
            known = t.param
            is_param = known is not None or t.is_param
            if known is None:
                self.inputs += 1
                known = f"{'param' if is_param else 'input'}{self.inputs}"
            rec = Tensor(self._unique_tensor(known), _distinct_shape(t), dtype_of(t),
                         Role.WEIGHT if is_param else Role.ACTIVATION)
        self.records[t.token] = (rec, version)
        return rec

    def _fresh(self, base: str, t: Seen, role: Role) -> Tensor:
        k = self.versions.get(base, 0) + 1
        self.versions[base] = k
        return Tensor(self._unique_tensor(f"{base}@{k}"), _distinct_shape(t), dtype_of(t), role)

    def _alias(self, out: Seen, base: Seen) -> None:
        rec = self.record_of(base)
        shape = _distinct_shape(out)
        dt = dtype_of(out)
        # a view shares its base's version counter, but only once the dispatcher returns from here
        version = base.version
        if math.prod(shape) * dt.bytes_per_element == rec.bytes:
            self.records[out.token] = (rec, version)  # same bytes: the same tensor seen another way
        else:
            part = Tensor(self._unique_tensor(f"{rec.name}[part]"), shape, dt, rec.role)
            self.records[out.token] = (part, version)
            if rec.name in self.scores:  # eager attention's probabilities, their sink column sliced off
                self.scores[part.name] = self.scores[rec.name]

    # one call ------------------------------------------------------------------------------------
    def replay(self) -> None:
        """The calls written down while the program ran (roofline.tracing.capture), recorded in order."""
        log, self.capture.log = self.capture.log, []
        for entry in log:
            if entry[0] == "error":
                self.trace.errors.setdefault(entry[1], f"{type(entry[2]).__name__}: {entry[2]}")
            else:
                try:
                    self.record(*entry)
                except Exception as exc:  # never break the trace; say what was left uncounted
                    self.trace.errors.setdefault(entry[0].text, f"{type(exc).__name__}: {exc}")

    def record(self, sch: _Schema, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any, where: str | None,
               seconds: float | None, fused: bool) -> None:
        """One call as capture wrote it down (each tensor a Seen); `where` is the innermost module's
        path, None outside any module; `fused`: a scaled_dot_product_attention call ran fused."""
        outs = _tensors(out)
        if not outs or sch.no_op:
            for t in outs:  # empty tensors are named when first used
                self.records.pop(t.token, None)
            return
        if sch.aten in _INIT_FILLS and where is None:  # building the model's weights, not running it
            self.trace.initialisation[sch.aten] = self.trace.initialisation.get(sch.aten, 0) + 1
            return
        stack: list[Any] = []  # every schema argument in order, defaults filled in
        read_args: list[Any] = []
        written: list[Any] = []
        n_args = len(args)
        for i, arg in enumerate(sch.args):
            if i < n_args:
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            else:
                stack.append(arg.default)
                continue
            stack.append(value)
            tensors = _tensors(value)
            if arg.write:
                written += tensors
            if arg.read:
                read_args += tensors
        mutable = bool(written)
        if not mutable and read_args and (sch.may_alias or any(o is t for o in outs for t in read_args)):
            ptrs = {t.ptr: t for t in read_args}
            out_ptrs = [o.ptr for o in outs]
            if all(p is not None and p in ptrs for p in out_ptrs):
                for o, p in zip(outs, out_ptrs, strict=True):
                    self._alias(o, ptrs[p])
                return
        where = where or ""
        name = self._op_name(sch.aten, where)
        reads = [(t, self.record_of(t)) for t in read_args]
        writes: list[tuple[Any, Tensor]] = []
        for t in written:
            old = self.record_of(t)
            new = self._fresh(old.name.split("@")[0], t, old.role)
            self.records[t.token] = (new, _bumped(t))
            writes.append((t, new))
        for o in outs:
            if any(o is w for w, _ in writes):
                continue
            if mutable and any(o.ptr == w.ptr for w, _ in writes):
                self.records[o.token] = (next(r for w, r in writes if o.ptr == w.ptr), _bumped(o))
                continue
            rec = Tensor(self._unique_tensor(f"{name}.out"), _distinct_shape(o), dtype_of(o), Role.ACTIVATION)
            self.records[o.token] = (rec, o.version)
            writes.append((o, rec))

        # the live call as the formulas see it: shapes, dtypes and the graph's records, no tensors
        known = {id(t): r for t, r in writes}
        known.update((id(t), r) for t, r in reads)  # an argument read and written is, to the formula, what it read
        offsets: Any = stack[sch.offsets_at] if sch.offsets_at is not None else None

        def shape_of(t: Seen) -> ArgShape:
            values = t.values if offsets is not None and t is offsets else None
            return ArgShape(tuple(t.shape), dtype_of(t), known.get(id(t)), values)

        # the facts a shape cannot tell, read at the call: which attention backend PyTorch picked, what a
        # mask keeps
        fused = sch.fused_always or fused
        kept = None
        if sch.mask_at is not None and isinstance(stack[sch.mask_at], Seen):
            mask = stack[sch.mask_at]
            kept = kept_pairs_of_mask(mask.keeps, mask.numel(), tuple(stack[0].shape), tuple(stack[1].shape))
        graph_tensors = [r for _, r in reads] + [r for _, r in writes]
        memo_key = memo.key(sch, stack, graph_tensors[:len(reads)], graph_tensors[len(reads):], known, offsets, fused,
                            kept)
        remembered = self.memo.get(memo_key) if memo_key is not None else None
        if remembered is not None:  # the same op on the same shapes, counted before in this trace
            ops = memo.rebuild(remembered[0], name, graph_tensors)
            counted = remembered[1]
        else:
            call = OpCall(name, sch.key, tuple(_plain(v, shape_of) for v in stack),
                          tuple(ArgShape(tuple(t.shape), r.dtype, r) for t, r in reads),
                          tuple(ArgShape(tuple(t.shape), r.dtype, r) for t, r in writes), fused, kept)
            counted = True
            if sch.formula is not None:
                ops = sch.formula(call)
            else:
                ops, counted = generic(call, pointwise=sch.pointwise, reduction=sch.reduction)
            made = memo.template(ops, name, graph_tensors) if memo_key is not None else None
            if made is not None:
                self.memo[memo_key] = (made, counted)
        if not counted:
            self.trace.unknown[sch.aten] = self.trace.unknown.get(sch.aten, 0) + 1
        first = len(self.trace.ops)
        self.trace.ops.extend(ops)
        if self.scores or sch.key in _SCORE_MATMULS:
            self._eager_attention(sch.key, first, reads, writes)
        for op in ops:
            self.trace.module_of[op.name] = where
        if fused and len(ops) > 1:
            self.trace.groups[name] = tuple(op.name for op in ops)
        if seconds is not None and (len(ops) == 1 or name in self.trace.groups):
            # a call that became several unfused ops has one time for all of them: not attributable
            self.trace.times_s[name if len(ops) > 1 else ops[0].name] = seconds

    # eager attention -----------------------------------------------------------------------------
    def _eager_attention(self, key: str, at: int, reads: Sequence[tuple[Any, Tensor]],
                         writes: Sequence[tuple[Any, Tensor]]) -> None:
        """Attention written out (q·kᵀ, + mask, softmax, ·v) counted as attention_ops counts it: over
        the pairs the mask keeps (the registry's attention convention). A matmul's 4-D output may be
        scores; ops that keep its shape pass it on; an added additive mask counts what it keeps (the
        q·kᵀ op is rescaled then), softmax is rescaled as it runs, and a matmul of softmaxed scores
        is p·v: rescaled, and it and q·kᵀ are named attention_pv and attention_qk."""
        if len(self.trace.ops) != at + 1 or len(writes) != 1:
            return
        source = next(((r.name, self.scores[r.name]) for _, r in reads if r.name in self.scores), None)
        out_t, out_rec = writes[0]
        if source is None:
            if key in _SCORE_MATMULS and out_t.dim() == 4:
                self.scores[out_rec.name] = (at, None, False)
            return
        qk_at, kept, softmaxed = source[1]
        qk = self.trace.ops[qk_at]
        square = qk.outputs[0].elements if qk.outputs else 0
        if key in _SCORE_MATMULS:
            if softmaxed and square:  # probabilities · v
                self.trace.ops[at] = self._rescaled(self.trace.ops[at], kept, square, "attention_pv")
                if qk.kind != "attention_qk":
                    self.trace.ops[qk_at] = self._rescaled(qk, None, square, "attention_qk")
            return
        shape, scores = tuple(out_t.shape), tuple(qk.outputs[0].shape)
        # attention sinks (gpt-oss, MiMo-V2-Flash: transformers' eager_attention_forward) append a column of
        # per-head logits to the scores, cat([scores, sinks], -1), subtract the row max, softmax, then drop
        # the column (a view) before p·v: the widened scores pass on
        widened = shape[:-1] == scores[:-1] and shape[-1] > scores[-1]
        if (key not in _SCORE_PASS and key != "cat") or (shape != scores and not widened) \
                or (key == "cat" and not widened):
            return
        if key == "add" and kept is None and not softmaxed:
            masks = [t for t, r in reads if r.name != source[0]]
            if len(masks) == 1 and masks[0].is_floating_point():
                kept = masks[0].keeps * square // max(masks[0].numel(), 1)
                if kept < square:
                    self.trace.ops[qk_at] = self._rescaled(qk, kept, square, "attention_qk")
                else:
                    kept = None  # nothing masked: every pair counts
        elif key in ("_softmax", "softmax", "_safe_softmax"):
            softmaxed = True
            if kept is not None:
                self.trace.ops[at] = self._rescaled(self.trace.ops[at], kept, square, "softmax")
        self.scores[out_rec.name] = (qk_at, kept, softmaxed)

    @staticmethod
    def _rescaled(op: Op, kept: int | None, square: int, kind: str) -> Op:
        """`op` as eager attention's `kind`, its FLOPs × kept / square when a mask dropped pairs."""
        if kept is None:
            return replace(op, kind=kind, note="eager attention (matmuls written out): every pair kept")
        return scaled_op(op, kept / square, kind=kind, formula=f"({op.formula})·kept/all = ·{kept}/{square}",
                         note=f"eager attention: the mask keeps {kept} of {square} (query, key) pairs; FLOPs "
                              "count those (the attention convention)")


@contextmanager
def trace(module: Any = None, *, name: str = "traced", inference: bool = True,
          time_ops: bool = False, formulas: Registry = FORMULAS) -> Iterator[Trace]:
    """Record every ATen op run inside the block. `module` (optional) names the weights by their
    parameter paths and the ops by the module that ran them. `time_ops` times each op (the device is
    synchronized around it, so the program runs slower). `formulas`: the registry to count with."""
    torch = need_torch("roofline.tracing")
    from torch.utils._python_dispatch import TorchDispatchMode

    result = Trace(name=name, tf32=torch.get_float32_matmul_precision() != "highest"
                   or bool(torch.backends.cuda.matmul.allow_tf32))
    recorder = _Recorder(result, {}, time_ops, formulas)
    capture = recorder.capture

    def sync() -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kw = kwargs or {}
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
                capture.call(func, args, kw, out, seconds)
            except Exception as exc:  # never break the traced program; say what was left uncounted
                capture.error(func, exc)
            return out

    def enter(module_: Any, _args: Any) -> None:
        recorder.enter_module(module_)

    def leave(_module: Any, _args: Any, _out: Any) -> None:  # a hook returning a value replaces the output
        recorder.leave_module()

    if module is not None:
        recorder.enter_module(module)  # the root: its submodules and weights named by their paths
        recorder.path.clear()
    with ExitStack() as stack:
        if inference:
            stack.enter_context(torch.inference_mode())
        # every module's forward, the script's own included (trace_script has no module to hand)
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        stack.callback(register_module_forward_pre_hook(enter).remove)
        stack.callback(register_module_forward_hook(leave, always_call=True).remove)
        stack.callback(recorder.replay)  # after the program: the calls it ran, made a graph
        stack.enter_context(Mode())
        yield result


def trace_call(fn: Callable[[], Any], module: Any = None, **options: Any) -> Trace:
    """Trace one call of `fn()`."""
    with trace(module, **options) as t:
        fn()
    return t


__all__ = ["dtype_of", "trace", "trace_call"]
