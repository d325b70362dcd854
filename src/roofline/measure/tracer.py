"""Trace any PyTorch program onto the graph the analytic models produce.

    with roofline.trace(model) as t:
        model(x)
    t.graph, t.plan            # a core Graph and the fusion plan it ran under
    t.analyze("h100")          # every table, chart and fusion plan works on it

A `TorchDispatchMode` sees every ATen op the program runs. Each op that computes becomes one core
`Op` over named tensors; views and aliases (an output sharing storage with an input, from an op
that writes nothing) are skipped: they move no bytes. FLOPs come from our own conventions, the same
ones the analytic builders use (roofline.kernels):

    matmul family (mm, bmm, addmm, baddbmm, matmul, linear, mv)   2·batch·M·N·K     (matmul_op)
    convolution                      2·out elements·(C_in/groups)·kernel elements
    scaled_dot_product_attention and its CPU/CUDA flash, efficient, cuDNN variants:
                                     attention_ops: q·kᵀ, softmax, p·v over the unmasked pairs;
                                     a fused backend runs the three as one kernel (the trace's plan)
    softmax, rms_norm, layer_norm, add, mul, silu, gelu, relu   FLOP_PER_ELEMENT per element
    complex mul / add (RoPE as Llama writes it)                 6 / 2 real FLOPs per complex element
    other pointwise ops                                         1 per element (flagged)
    reductions                                                  1 per input element (flagged)
    copies, casts, cat, embedding gathers                       0 (bytes only)

Bytes are the tensors each op reads and writes, at their dtype; a view's bytes are its distinct
elements (an expanded dimension is read once), an embedding reads only the rows it gathers, and an
op's `out=` argument is written, not read. A tensor written in place gets a new version name, so a
kernel that reads x and writes x is not mistaken for one that keeps x on chip.

By default the trace runs under `torch.inference_mode()`, where PyTorch dispatches composite ops
(linear, rms_norm, scaled_dot_product_attention, softmax) before decomposing them: one op per call
the program made, as the analytic models count. `inference=False` traces the decomposed ops
(autograd on, backward included when the program runs it).

Layering: imports the core (graph, kernels, dtypes, analysis); torch only inside functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.graph import FusionPlan, Graph, Op, Tensor
from roofline.hardware import Machine
from roofline.kernels import attention_ops, elementwise_op, matmul_op
from roofline.measure.ceilings import need_torch
from roofline.placement import GraphAnalysis, analyze_graph
from roofline.vocab import Plan, Role, Unit


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


# --- torch dtype -> our dtype -------------------------------------------------------------------

_TORCH_DTYPES = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
                 "float8_e4m3fn": "fp8_e4m3", "float8_e4m3fnuz": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
                 "float8_e5m2fnuz": "fp8_e5m2", "int8": "int8", "uint8": "int8", "int16": "int16",
                 "int32": "int32", "int64": "int64", "bool": "bool", "complex64": "complex64",
                 "complex128": "complex128"}


# a dtype we have no name for is stored as the one of the same width: its bytes stay exact
_BY_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64", 16: "complex128"}


def dtype_of(t: Any) -> DType:
    key = str(t.dtype).removeprefix("torch.")
    if key in _TORCH_DTYPES:
        return get_dtype(_TORCH_DTYPES[key])
    width = int(getattr(t.dtype, "itemsize", 0) or 0)
    if width in _BY_WIDTH:
        return get_dtype(_BY_WIDTH[width])
    raise RooflineError(f"the tracer has no storage size for torch.{key} tensors")


def _distinct_shape(t: Any) -> tuple[int, ...]:
    """The shape with broadcast (stride-0) dimensions collapsed: what a kernel actually reads."""
    try:
        strides = t.stride()
    except (RuntimeError, NotImplementedError):  # sparse and other layouts without strides
        return tuple(int(s) for s in t.shape)
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


# --- the registry of FLOP formulas ---------------------------------------------------------------

@dataclass
class Call:
    """One ATen call as the formulas see it: bound arguments, the records it reads and writes."""

    name: str  # the op's unique name in the graph
    aten: str  # "mm", "scaled_dot_product_attention"
    bound: Mapping[str, Any]
    reads: list[tuple[Any, Tensor]]  # (torch tensor, record) read, in argument order
    writes: list[tuple[Any, Tensor]]  # (torch tensor, record) written
    record_of: Callable[[Any], Tensor]

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(dict.fromkeys(r for _, r in self.reads))

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(dict.fromkeys(r for _, r in self.writes))

    def tensor(self, *names: str) -> Any:
        import torch

        for n in names:
            value = self.bound.get(n)
            if isinstance(value, torch.Tensor):
                return value
        return None


Formula = Callable[[Call], list[Op]]
FORMULAS: dict[str, Formula] = {}


def formula(*names: str) -> Callable[[Formula], Formula]:
    """Register one formula for some ATen op names; a name registered twice is a bug."""
    def register(f: Formula) -> Formula:
        for n in names:
            if n in FORMULAS:
                raise RuntimeError(f"two FLOP formulas for aten::{n}")
            FORMULAS[n] = f
        return f
    return register


def _shaped(name: str, shape: Sequence[int], dtype: DType) -> Tensor:
    return Tensor(name, tuple(int(s) for s in shape), dtype)


def _matmul(call: Call, a_shape: Sequence[int], b_shape: Sequence[int], dt: DType) -> list[Op]:
    """2·batch·M·N·K through matmul_op, with the shapes the operands have (a 1-D operand is a row
    or a column), then pointed at the graph's tensor records."""
    a_s = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b_s = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    m, k = a_s[-2], a_s[-1]
    n = b_s[-1]
    batch = math.prod(_broadcast(a_s[:-2], b_s[:-2]))
    lead = (batch,) if batch != 1 else ()
    # no compute_dtype: the roof's dtype is the analysis' choice, as for the analytic models (an fp32
    # CPU trace can then be placed on a GPU that lists no fp32 matrix peak)
    op = matmul_op(call.name, _shaped("a", (*lead, m, k), dt), _shaped("b", (*lead, k, n), dt),
                   _shaped("c", (*lead, m, n), dt))
    return [replace(op, inputs=call.inputs, outputs=call.outputs)]


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _broadcast(x: Sequence[int], y: Sequence[int]) -> tuple[int, ...]:
    n = max(len(x), len(y))
    xs = (1,) * (n - len(x)) + tuple(x)
    ys = (1,) * (n - len(y)) + tuple(y)
    return tuple(max(p, q) for p, q in zip(xs, ys, strict=True))


@formula("mm", "bmm", "matmul", "dot", "mv", "vdot")
def _f_mm(call: Call) -> list[Op]:
    a = call.tensor("self", "input")
    return _matmul(call, _shape(a), _shape(call.tensor("mat2", "other", "vec", "tensor")), dtype_of(a))


@formula("addmm", "addmv", "_addmm_activation")
def _f_addmm(call: Call) -> list[Op]:
    a = call.tensor("mat1", "mat")
    return _matmul(call, _shape(a), _shape(call.tensor("mat2", "vec")), dtype_of(a))


@formula("baddbmm", "addbmm")
def _f_baddbmm(call: Call) -> list[Op]:
    a = call.tensor("batch1")
    return _matmul(call, _shape(a), _shape(call.tensor("batch2")), dtype_of(a))


@formula("linear")
def _f_linear(call: Call) -> list[Op]:
    """input [..., K] · weightᵀ [K, N]: the leading dims are the rows M."""
    x, w = call.tensor("input"), call.tensor("weight")
    xs = _shape(x)
    rows = (math.prod(xs[:-1]), xs[-1]) if len(xs) > 2 else xs
    return _matmul(call, rows, tuple(reversed(_shape(w))), dtype_of(x))


@formula("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d")
def _f_conv(call: Call) -> list[Op]:
    """2·(output elements)·(C_in/groups)·(kernel elements); transposed: per input element instead."""
    x, w = call.tensor("input"), call.tensor("weight")
    out = call.writes[0][0]
    transposed = bool(call.bound.get("transposed", False)) or call.aten.startswith("conv_transpose")
    per = int(w.shape[1]) * math.prod(int(s) for s in w.shape[2:])
    elements = x.numel() if transposed else out.numel()
    flop = 2.0 * elements * per
    what = "input" if transposed else "output"
    return [Op(call.name, "conv", call.inputs, call.outputs, {Unit.MATRIX: flop},
               formula=f"2·{what} elements·(C_in/groups)·kernel = 2·{elements}·{per}")]


_SDPA_FUSED = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
               "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
               "_scaled_dot_product_fused_attention_overrideable")
_BHLE_LAST = ("_flash_attention_forward", "_efficient_attention_forward")  # [B, L, H, E] layout


@formula("scaled_dot_product_attention", *_SDPA_FUSED, *_BHLE_LAST)
def _f_attention(call: Call) -> list[Op]:
    """attention_ops over [B, H, L, E] views of q, k, v; causal counts the unmasked pairs with
    PyTorch's top-left alignment (query i sees keys 0..i)."""
    import torch

    q, k, v = call.tensor("query"), call.tensor("key"), call.tensor("value")
    shapes = [_shape(t) for t in (q, k, v, call.writes[0][0])]
    if call.aten in _BHLE_LAST:  # [B, L, H, E] -> [B, H, L, E]
        shapes = [(*s[:-3], s[-2], s[-3], s[-1]) for s in shapes]
    causal = bool(call.bound.get("is_causal", call.bound.get("causal", False)))
    if call.aten == "_efficient_attention_forward":
        causal = int(call.bound.get("custom_mask_type", 0) or 0) != 0
    mask = call.tensor("attn_mask", "attn_bias")
    fused = call.aten != "scaled_dot_product_attention"
    if not fused:
        try:
            choice = torch._fused_sdp_choice(q, k, v, mask, float(call.bound.get("dropout_p", 0.0) or 0.0), causal,
                                             scale=call.bound.get("scale"),
                                             enable_gqa=bool(call.bound.get("enable_gqa", False)))
            fused = int(choice) != 0  # 0: the math backend, which writes the scores
        except (RuntimeError, TypeError, AttributeError):
            fused = True
    qs, ks, vs, os_ = (_four(s) for s in shapes)
    dt = dtype_of(q)
    nq, nkv = qs[2], ks[2]
    ops = attention_ops(call.name, _shaped("q", qs, dt), _shaped("k", ks, dt), _shaped("v", vs, dt),
                        _shaped("o", os_, dt), causal, kv_offset=0 if causal and nq != nkv else None)
    q_rec, k_rec, v_rec = (call.record_of(t) for t in (call.tensor("query"), call.tensor("key"),
                                                         call.tensor("value")))
    extra = (call.record_of(mask),) if mask is not None else ()
    qk, sm, pv = ops
    notes = [n for n in (qk.note, "causal: PyTorch's top-left alignment" if causal and nq != nkv else "") if n]
    qk = replace(qk, inputs=(q_rec, k_rec, *extra), note="; ".join(notes))
    pv = replace(pv, inputs=(pv.inputs[0], v_rec), outputs=call.outputs)
    return [qk, sm, pv] if not fused else [replace(o, note=(o.note + "; " if o.note else "") + "ran fused")
                                           for o in (qk, sm, pv)]


def _four(s: tuple[int, ...]) -> tuple[int, int, int, int]:
    """[B, H, L, E]: leading dims fold into B; a 3-D tensor is one head per batch entry."""
    if len(s) >= 4:
        return (math.prod(s[:-3]), s[-3], s[-2], s[-1])
    if len(s) == 3:
        return (s[0], 1, s[1], s[2])
    return (1, 1, s[-2], s[-1])


def _elementwise(call: Call, kind: str) -> list[Op]:
    out_t, out_rec = call.writes[0]
    op = elementwise_op(call.name, kind, call.inputs, _shaped(out_rec.name, out_t.shape, out_rec.dtype))
    return [replace(op, outputs=call.outputs)]


@formula("_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax")
def _f_softmax(call: Call) -> list[Op]:
    return _elementwise(call, "softmax")


@formula("rms_norm", "_fused_rms_norm")
def _f_rms(call: Call) -> list[Op]:
    return _elementwise(call, "rmsnorm")


@formula("layer_norm", "native_layer_norm")
def _f_layernorm(call: Call) -> list[Op]:
    return _elementwise(call, "layernorm")


@formula("group_norm", "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
         "_native_batch_norm_legit_no_training", "instance_norm")
def _f_other_norm(call: Call) -> list[Op]:
    return [replace(o, note="counted with the LayerNorm convention") for o in _elementwise(call, "layernorm")]


def _complex_aware(kind: str, per_complex: int) -> Formula:
    def f(call: Call) -> list[Op]:
        out_t, _ = call.writes[0]
        if out_t.is_complex():
            elements = out_t.numel()
            return [Op(call.name, f"complex_{kind}", call.inputs, call.outputs,
                       {Unit.VECTOR: float(per_complex * elements)},
                       formula=f"{per_complex}·complex elements = {per_complex}·{elements}",
                       note=f"a complex {kind} is {per_complex} real FLOPs")]
        return _elementwise(call, kind)
    return f


FORMULAS.update({"add": _complex_aware("add", 2), "sub": _complex_aware("add", 2), "rsub": _complex_aware("add", 2),
                 "mul": _complex_aware("mul", 6)})
for _name in ("relu", "silu", "gelu"):
    FORMULAS[_name] = (lambda kind: lambda call: _elementwise(call, kind))(_name)

_COPIES = ("_to_copy", "to", "type_as", "copy", "clone", "contiguous", "cat", "stack", "repeat", "repeat_interleave",
           "index_select", "gather",
           "index", "triu", "tril", "_unsafe_view", "reshape", "flip", "roll", "masked_fill", "where", "scatter",
           "index_put", "_reshape_alias", "view_copy", "expand_copy", "permute_copy", "transpose_copy",
           "slice_copy", "constant_pad_nd", "pad")
_FILLS = ("fill", "zero", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "full",
          "zeros", "ones", "arange", "linspace", "eye", "scalar_tensor", "randn", "rand", "randint", "randn_like",
          "rand_like", "randint_like", "normal", "uniform", "bernoulli", "randperm", "polar")


@formula(*_COPIES)
def _f_copy(call: Call) -> list[Op]:
    return [Op(call.name, "copy", call.inputs, call.outputs, {}, formula="data movement: no FLOPs")]


@formula(*_FILLS)
def _f_fill(call: Call) -> list[Op]:
    """Creating or filling a tensor writes it: bytes, no FLOPs counted (random draws included)."""
    return [Op(call.name, "fill", call.inputs, call.outputs, {}, formula="writes its output: no FLOPs counted")]


@formula("embedding")
def _f_embedding(call: Call) -> list[Op]:
    """Gathers rows: reads only the rows it returns (and the ids), never the whole table."""
    weight, ids = call.tensor("weight"), call.tensor("indices")
    table = call.record_of(weight)
    out_t, _ = call.writes[0]
    rows = Tensor(f"{table.name}.rows#{call.name}", tuple(int(s) for s in out_t.shape), table.dtype, table.role)
    ins = (rows, call.record_of(ids)) if ids is not None else (rows,)
    return [Op(call.name, "embedding", ins, call.outputs, {},
               formula=f"gather {ids.numel() if ids is not None else '?'} rows: no FLOPs; only those rows are read")]


_REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean", "norm",
               "linalg_vector_norm", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "any", "all", "topk",
               "sort")


def _generic(call: Call, func: Any) -> tuple[list[Op], bool]:
    """Ops without a formula: pointwise 1 FLOP per element, reductions 1 per input element, else 0."""
    import torch

    tags = set(getattr(func, "tags", ()))
    out_t, _ = call.writes[0]
    if torch.Tag.pointwise in tags:
        n = out_t.numel()
        return [Op(call.name, call.aten.rstrip("_"), call.inputs, call.outputs, {Unit.VECTOR: float(n)},
                   formula=f"1·elements = {n}", note="generic pointwise op: 1 FLOP per element")], True
    if torch.Tag.reduction in tags or call.aten.rstrip("_") in _REDUCTIONS:
        src = call.reads[0][0] if call.reads else out_t
        n = src.numel()
        return [Op(call.name, "reduce", call.inputs, call.outputs, {Unit.VECTOR: float(n)},
                   formula=f"1·input elements = {n}", note=f"{call.aten}: 1 FLOP per input element")], True
    return [Op(call.name, call.aten, call.inputs, call.outputs, {},
               note=f"no FLOP formula for aten::{call.aten}: bytes only")], False


# --- the recorder ---------------------------------------------------------------------------------

# ops that move no data: allocations (their tensor is named when first used) and queries. detach,
# alias and lift_fresh are not here: they share storage, so the alias rule keeps their data flow
_NO_OP = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_fused_sdp_choice",
          "_local_scalar_dense", "item", "is_same_size", "size", "stride", "sym_size", "sym_stride", "sym_numel",
          "_has_compatible_shallow_copy_type", "set_")


# these write self without reading it
_OVERWRITES = ("copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_")


class _Recorder:
    def __init__(self, trace: Trace, names: Mapping[int, str], time_ops: bool) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self.trace = trace
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
        bound: dict[str, Any] = {}
        read_args: list[Any] = []
        written: list[Any] = []
        for i, arg in enumerate(schema.arguments):
            if i < len(args):
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            else:
                continue
            bound[arg.name] = value
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
        call = Call(name, aten.rstrip("_") if aten.rstrip("_") in FORMULAS else aten, bound, reads, writes,
                    self.record_of)
        handler = FORMULAS.get(call.aten)
        if handler is not None:
            ops = handler(call)
        else:
            ops, known = _generic(call, func)
            if not known:
                self.trace.unknown[aten] = self.trace.unknown.get(aten, 0) + 1
        self.trace.ops.extend(ops)
        where = self.path[-1] if self.path else ""
        for op in ops:
            self.trace.module_of[op.name] = where
        if len(ops) > 1 and any("ran fused" in op.note for op in ops):
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
          time_ops: bool = False) -> Iterator[Trace]:
    """Record every ATen op run inside the block. `module` (optional) names the weights by their
    parameter paths and the ops by the module that ran them. `time_ops` times each op (the device is
    synchronized around it, so the program runs slower)."""
    torch = need_torch("roofline.trace")
    from torch.utils._python_dispatch import TorchDispatchMode

    result = Trace(name=name)
    recorder = _Recorder(result, _parameter_names(module), time_ops)

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
