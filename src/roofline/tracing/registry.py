"""One registry of FLOP formulas for ATen ops, keyed by the op's name; formulas see shapes only.

A formula takes an `OpCall`: the op's name, its arguments in schema order (a tensor is an `ArgShape`,
its shape and roofline dtype; a tensor list a tuple of them; anything else a plain value), the
tensors it reads and writes, and the few facts about the run a shape cannot tell (`fused`: the
attention backend PyTorch chose; `kept_pairs`: the (query, key) pairs an attention mask keeps;
`ArgShape.values`: a grouped matmul's offsets). It returns the core `Op`s the call counts as. No formula sees a
live tensor, so the same formulas serve the live tracer (roofline.tracing.recorder) and recorded shapes
(a torch.profiler trace's "Input Dims" and "Input type", which list the same schema arguments).

The conventions are ours, the same ones the analytic builders use (roofline.kernels):

    matmul family (mm, bmm, addmm, baddbmm, matmul, linear, mv)   2·batch·M·N·K     (matmul_op)
    convolution                      2·out elements·(C_in/groups)·kernel elements
    grouped matmul (_grouped_mm, the MoE experts path)          2·rows·K·N; reads only the groups
                                     (experts) its offsets give rows to
    scaled_dot_product_attention and its CPU/CUDA flash, efficient, cuDNN variants:
                                     attention_ops: q·kᵀ, softmax, p·v over the KEPT pairs (below);
                                     a fused backend runs the three as one kernel (the trace's plan)
    softmax, rms_norm, layer_norm, add, mul, silu, gelu, relu   FLOP_PER_ELEMENT per element
    complex mul / add (RoPE as Llama writes it)                 6 / 2 real FLOPs per complex element
    other pointwise ops                                         1 per element (flagged)   `generic`
    reductions                                                  1 per input element (flagged)
    triangular solve (linalg_solve_triangular)                  m²·n a system (LAPACK's xTRSM)
    copies, casts, cat, embedding gathers                       0 (bytes only)
    in-place indexed writes (index_copy_, index_put_, scatter_, index_fill_)   0; index_add_,
                                     scatter_add_, scatter_reduce_, index_put_(accumulate) 1 per element
                                     written; bytes: the index and source read, only the rows written
                                     (accumulating ones also read those rows), never the whole tensor;
                                     their out-of-place twins return a new tensor: a whole copy

Attention convention (one for every path, the analytic models' one: roofline.kernels.attention_ops,
used by roofline.models for naive and flash attention alike): FLOPs count the (query, key) pairs the
mask KEEPS, 2·d + 5 + 2·dv per kept pair per head. A causal flag keeps Nq·(Nkv−Nq) + Nq·(Nq+1)/2 pairs
(≈ N²/2 in prefill; PyTorch's top-left alignment when Nq ≠ Nkv); a boolean or additive mask keeps the
pairs it does not mask, counted from its values by whoever built the record (`OpCall.kept_pairs`; a
recorded profile without the values counts every pair). The math backend computes the whole square
and discards the masked part; that work is not counted, so that fusing attention (flash) changes its
bytes and never its FLOPs. The tracer applies the same count to eager attention (an explicit
q·kᵀ matmul, an added mask, softmax, p·v). torch.utils.flop_counter counts the whole square.

One decorator, `FORMULAS.register(*names)`, is the only way in; a name registered twice raises, and
the registry is a read-only Mapping (no item assignment, no update).

It never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from roofline.dtypes import ALIASES, DTYPES, DType
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Op, Tensor
from roofline.kernels import attention_ops, elementwise_op, matmul_op
from roofline.vocab import Unit

# --- the shape-only call record --------------------------------------------------------------------


@frozen
class ArgShape:
    """A tensor argument as a formula sees it: its shape and dtype, never the tensor.

    `record` is the graph tensor it is (named, versioned, with its role and its distinct elements: an
    expanded dimension counts once), for the ops' data flow; None where only shapes are known."""

    shape: tuple[int, ...]
    dtype: DType
    record: Tensor | None = None
    values: tuple[int, ...] | None = None  # a small index tensor's values, where a formula needs them

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def is_complex(self) -> bool:
        return self.dtype.name.startswith("complex")

    @property
    def tensor(self) -> Tensor:
        """The graph tensor this argument is; without a record, one named by its dtype and shape."""
        if self.record is not None:
            return self.record
        return Tensor(f"{self.dtype.name}[{','.join(str(s) for s in self.shape)}]", self.shape, self.dtype)


Scalar = bool | int | float | str | None
Arg = ArgShape | Scalar | tuple["Arg", ...]  # a tensor, a plain value, or a list of either


@frozen
class OpCall:
    """One ATen call as the formulas see it.

    name     the op's unique name in the graph ("layers.0.attn.qkv.linear")
    aten     the registry key it is counted under: the overload packet name ("mm", "addmm")
    args     every schema argument in schema order, defaults filled in (as the dispatcher's stack and a
             profiler's "Input Dims" hold them): ArgShape for a tensor, a tuple for a list
    reads    the tensors the call reads, in argument order (an `out=` argument is written, not read)
    writes   the tensors it writes: arguments changed in place, then its results
    fused    the call ran as one fused kernel: for scaled_dot_product_attention the backend PyTorch
             chose at run time, resolved by whoever built the record
    kept_pairs  attention with a mask tensor: the (query, key) pairs it keeps over the whole
             [B, H, Nq, Nkv] score tensor, counted from the mask's values; None: unknown (all pairs)
    """

    name: str
    aten: str
    args: tuple[Arg, ...] = ()
    reads: tuple[ArgShape, ...] = ()
    writes: tuple[ArgShape, ...] = ()
    fused: bool = False
    kept_pairs: int | None = None

    def arg(self, i: int) -> Arg:
        return self.args[i] if i < len(self.args) else None

    def shape_arg(self, i: int) -> ArgShape:
        a = self.arg(i)
        if not isinstance(a, ArgShape):
            raise RooflineError(f"aten::{self.aten}: argument {i} is not a tensor")
        return a

    @property
    def out(self) -> ArgShape:
        """The first tensor written (the result, or the tensor changed in place)."""
        if not self.writes:
            raise RooflineError(f"aten::{self.aten} writes no tensor")
        return self.writes[0]

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        """The graph tensors read, each once."""
        return tuple(dict.fromkeys(a.tensor for a in self.reads))

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        """The graph tensors written, each once."""
        return tuple(dict.fromkeys(a.tensor for a in self.writes))


Formula = Callable[[OpCall], list[Op]]


class Registry(Mapping[str, Formula]):
    """ATen op name -> its FLOP formula. Read-only: `register` is the only way in, and it refuses a
    name that already has a formula."""

    __slots__ = ("_formulas",)

    def __init__(self) -> None:
        self._formulas: dict[str, Formula] = {}

    def register(self, *names: str) -> Callable[[Formula], Formula]:
        """Decorator: `f` counts every call of these ATen ops; a name registered twice is a bug."""
        if not names:
            raise RuntimeError("register a formula under at least one ATen op name")
        twice = sorted({n for n in names if names.count(n) > 1 or n in self._formulas})
        if twice:
            raise RuntimeError(f"two FLOP formulas for aten::{', aten::'.join(twice)}")

        def add(f: Formula) -> Formula:
            for n in names:
                if n in self._formulas:  # registered between the decorator's call and its use
                    raise RuntimeError(f"two FLOP formulas for aten::{n}")
                self._formulas[n] = f
            return f
        return add

    def key(self, aten: str) -> str:
        """The name a call is counted under: its own when it has a formula (index_copy_, whose bytes
        differ from index_copy's), else an in-place variant (add_) under its op (add)."""
        if aten in self._formulas:
            return aten
        base = aten.rstrip("_")
        return base if base in self._formulas else aten

    def __getitem__(self, name: str) -> Formula:
        return self._formulas[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._formulas)

    def __len__(self) -> int:
        return len(self._formulas)

    def __repr__(self) -> str:
        return f"Registry({len(self)} ATen ops)"


FORMULAS = Registry()
register = FORMULAS.register


# --- torch dtype names -> our dtypes ---------------------------------------------------------------

# a dtype we have no name for is stored as the one of the same width: its bytes stay exact
_BY_WIDTH = {1: "int8", 2: "int16", 4: "int32", 8: "int64", 16: "complex128"}


def torch_dtype(name: str, itemsize: int) -> DType:
    """Our dtype for a torch dtype ("float32", "torch.bfloat16") of `itemsize` bytes per element.

    A name roofline.dtypes knows (directly or through ALIASES) is that dtype when its storage is
    `itemsize` bytes; otherwise (float8_e8m0fnu, uint16, a packed float4_e2m1fn_x2 holding two
    values per byte) the dtype of the same width, so the bytes stay exact."""
    key = name.removeprefix("torch.")
    known = DTYPES.get(ALIASES.get(key, key))
    if known is not None and known.storable and known.bytes_per_element == itemsize:
        return known
    if itemsize in _BY_WIDTH:
        return DTYPES[_BY_WIDTH[itemsize]]
    raise RooflineError(f"the tracer has no storage size for torch.{key} tensors")


# --- formulas --------------------------------------------------------------------------------------

def _shaped(name: str, shape: Sequence[int], dtype: DType) -> Tensor:
    return Tensor(name, tuple(int(s) for s in shape), dtype)


def _broadcast(x: Sequence[int], y: Sequence[int]) -> tuple[int, ...]:
    n = max(len(x), len(y))
    xs = (1,) * (n - len(x)) + tuple(x)
    ys = (1,) * (n - len(y)) + tuple(y)
    return tuple(max(p, q) for p, q in zip(xs, ys, strict=True))


def _matmul(call: OpCall, a: ArgShape, b: ArgShape, a_shape: Sequence[int] | None = None) -> list[Op]:
    """2·batch·M·N·K through matmul_op, with the shapes the operands have (a 1-D operand is a row
    or a column), then pointed at the graph's tensors."""
    a_dims = tuple(a.shape if a_shape is None else a_shape)
    a_s = (1, *a_dims) if len(a_dims) == 1 else a_dims
    b_s = (*b.shape, 1) if len(b.shape) == 1 else b.shape
    m, k = a_s[-2], a_s[-1]
    n = b_s[-1]
    batch = math.prod(_broadcast(a_s[:-2], b_s[:-2]))
    lead = (batch,) if batch != 1 else ()
    dt = a.dtype
    # no compute_dtype: the roof's dtype is the analysis' choice, as for the analytic models (an fp32
    # CPU trace can then be placed on a GPU that lists no fp32 matrix peak)
    op = matmul_op(call.name, _shaped("a", (*lead, m, k), dt), _shaped("b", (*lead, k, n), dt),
                   _shaped("c", (*lead, m, n), dt))
    return [replace(op, inputs=call.inputs, outputs=call.outputs)]


@register("mm", "bmm", "matmul", "dot", "mv", "vdot")
def _f_mm(call: OpCall) -> list[Op]:
    return _matmul(call, call.shape_arg(0), call.shape_arg(1))  # (self, mat2 | other | vec | tensor)


@register("addmm", "addmv", "_addmm_activation", "baddbmm", "addbmm")
def _f_addmm(call: OpCall) -> list[Op]:
    return _matmul(call, call.shape_arg(1), call.shape_arg(2))  # (self, mat1 | batch1, mat2 | batch2)


@register("linear")
def _f_linear(call: OpCall) -> list[Op]:
    """input [..., K] · weightᵀ [K, N]: the leading dims are the rows M."""
    x, w = call.shape_arg(0), call.shape_arg(1)  # (input, weight, bias)
    rows = (math.prod(x.shape[:-1]), x.shape[-1]) if len(x.shape) > 2 else x.shape
    return _matmul(call, x, ArgShape(tuple(reversed(w.shape)), w.dtype), rows)


@register("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
          "conv_transpose3d")
def _f_conv(call: OpCall) -> list[Op]:
    """2·(output elements)·(C_in/groups)·(kernel elements); transposed: per input element instead."""
    x, w = call.shape_arg(0), call.shape_arg(1)  # (input, weight, bias, stride, padding, dilation, ...)
    # convolution and _convolution: (..., dilation, transposed, output_padding, groups, ...)
    transposed = call.aten.startswith("conv_transpose") or (call.aten in CONVOLUTION and bool(call.arg(6)))
    per = w.shape[1] * math.prod(w.shape[2:])
    elements = x.elements if transposed else call.out.elements
    what = "input" if transposed else "output"
    return [Op(call.name, "conv", call.inputs, call.outputs, {Unit.MATRIX: 2.0 * elements * per},
               formula=f"2·{what} elements·(C_in/groups)·kernel = 2·{elements}·{per}")]


CONVOLUTION = ("convolution", "_convolution")  # the two with a `transposed` argument, at position 6

# the attention convention (module docstring) in one line, for the trace report and its JSON
ATTENTION_CONVENTION = ("attention FLOPs count the (query, key) pairs the mask keeps, 2·d + 5 + 2·dv per pair "
                        "per head: causal Nq·(Nkv−Nq) + Nq·(Nq+1)/2 ≈ N²/2 in prefill, a mask tensor what it "
                        "keeps; on every backend (flash, math, eager), as roofline.kernels.attention_ops counts "
                        "naive and flash attention alike (torch.utils.flop_counter counts the whole square)")

SDPA = "scaled_dot_product_attention"  # the composite: its backend is chosen at run time
# where each variant keeps its mask and its causal flag in the schema (PyTorch 2.13; a test checks
# them against torch): aten -> (mask position or None, causal position). The flash and efficient
# variants of the forward take [B, L, H, E]; _efficient_attention_forward's causal argument is its
# custom_mask_type (0: no mask) and its `bias` is not read as a mask.
ATTENTION: Mapping[str, tuple[int | None, int]] = {
    SDPA: (3, 5),  # (query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
    "_scaled_dot_product_flash_attention_for_cpu": (5, 4),  # (..., dropout_p, is_causal, *, attn_mask, scale)
    "_scaled_dot_product_flash_attention": (None, 4),  # (..., dropout_p, is_causal, return_debug_mask, *, scale)
    "_scaled_dot_product_efficient_attention": (3, 6),  # (..., attn_bias, compute_log_sumexp, dropout_p, is_causal)
    "_scaled_dot_product_cudnn_attention": (3, 6),  # (..., attn_bias, compute_log_sumexp, dropout_p, is_causal)
    "_scaled_dot_product_fused_attention_overrideable": (3, 5),  # (..., attn_bias, dropout_p, is_causal)
    "_flash_attention_forward": (None, 8),  # (..., cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal)
    "_efficient_attention_forward": (None, 9),  # (..., bias, cu_seqlens_q/k, max_seqlen_q/k, dropout_p,
    #                                               custom_mask_type)
}
FUSED_ATTENTION = tuple(name for name in ATTENTION if name != SDPA)  # always one kernel
_BLHE = ("_flash_attention_forward", "_efficient_attention_forward")  # [B, L, H, E] layout


@register(*ATTENTION)
def _f_attention(call: OpCall) -> list[Op]:
    """attention_ops over [B, H, L, E] views of q, k, v, over the pairs the mask keeps (the module's
    attention convention): causal with PyTorch's top-left alignment (query i sees keys 0..i), a mask
    tensor by `call.kept_pairs`. `call.fused`: the three ops ran as one kernel (noted on each; the
    recorder makes them one kernel of the trace's plan)."""
    q, k, v = call.shape_arg(0), call.shape_arg(1), call.shape_arg(2)
    mask_at, causal_at = ATTENTION[call.aten]
    shapes = [a.shape for a in (q, k, v, call.out)]
    if call.aten in _BLHE:  # [B, L, H, E] -> [B, H, L, E]
        shapes = [(*s[:-3], s[-2], s[-3], s[-1]) for s in shapes]
    flag = call.arg(causal_at)
    causal = bool(flag)  # is_causal, or a custom_mask_type other than 0 (none)
    mask = call.arg(mask_at) if mask_at is not None else None
    qs, ks, vs, os_ = (_four(s) for s in shapes)
    dt = q.dtype
    nq, nkv = qs[2], ks[2]
    # q: [b, h, s_q, d] @ k: [b, g, d, s_kv] -> scores [b, h, s_q, s_kv]; probs @ v -> [b, h, s_q, d_v]
    qk, sm, pv = attention_ops(call.name, _shaped("q", qs, dt), _shaped("k", ks, dt), _shaped("v", vs, dt),
                               _shaped("o", os_, dt), causal, kv_offset=0 if causal and nq != nkv else None)
    extra = (mask.tensor,) if isinstance(mask, ArgShape) else ()
    if not causal and extra and call.kept_pairs is not None:
        qk, sm, pv = _kept(call.kept_pairs, qs[0] * qs[1] * nq * nkv, (qk, sm, pv))
    notes = [n for n in (qk.note, "causal: PyTorch's top-left alignment" if causal and nq != nkv else "") if n]
    qk = replace(qk, inputs=(q.tensor, k.tensor, *extra), note="; ".join(notes))
    pv = replace(pv, inputs=(pv.inputs[0], v.tensor), outputs=call.outputs)
    if not call.fused:
        return [qk, sm, pv]
    return [replace(o, note=(o.note + "; " if o.note else "") + "ran fused") for o in (qk, sm, pv)]


def _kept(kept: int, square: int, ops: Sequence[Op]) -> list[Op]:
    """The three attention ops over the `kept` of `square` (query, key) pairs a mask keeps: each
    op's FLOPs × kept / square (the pairs are the only thing the count depends on)."""
    share = kept / square if square else 1.0
    note = f"mask keeps {kept} of {square} (query, key) pairs: FLOPs count those"
    return [scaled_op(o, share, formula=f"({o.formula})·kept/all = ·{kept}/{square}", note=note) for o in ops]


def scaled_op(op: Op, share: float, **changes: object) -> Op:
    """`op` doing `share` of its work: its FLOPs and its on-chip work (exponentials) × share."""
    onchip = op.onchip.scaled(share) if op.onchip is not None else None
    return replace(op, flop_by_unit={u: f * share for u, f in op.flop_by_unit.items()}, onchip=onchip,
                   **changes)  # type: ignore[arg-type]


def kept_pairs_of_mask(mask_kept: int, mask_elements: int, q_shape: Sequence[int], k_shape: Sequence[int]) -> int:
    """The pairs a mask keeps over the whole score tensor [B, H, Nq, Nkv] (q [.., H, Nq, d], k [.., Nkv,
    d]): the count over the mask's own elements times the times broadcasting repeats it."""
    qs, ks = _four(tuple(q_shape)), _four(tuple(k_shape))
    square = qs[0] * qs[1] * qs[2] * ks[2]
    return mask_kept * square // mask_elements if mask_elements else square


def _four(s: tuple[int, ...]) -> tuple[int, int, int, int]:
    """[B, H, L, E]: leading dims fold into B; a 3-D tensor is one head per batch entry."""
    if len(s) >= 4:
        return (math.prod(s[:-3]), s[-3], s[-2], s[-1])
    if len(s) == 3:
        return (s[0], 1, s[1], s[2])
    return (1, 1, s[-2], s[-1])


def _elementwise(call: OpCall, kind: str) -> list[Op]:
    out = call.out
    outputs = call.outputs
    if len(outputs) == 1 and outputs[0].shape == out.shape:  # the record is the output: no copy to make
        return [elementwise_op(call.name, kind, call.inputs, outputs[0])]
    op = elementwise_op(call.name, kind, call.inputs, _shaped(out.tensor.name, out.shape, out.dtype))
    return [replace(op, outputs=outputs)]


@register("_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax")
def _f_softmax(call: OpCall) -> list[Op]:
    return _elementwise(call, "softmax")


@register("rms_norm", "_fused_rms_norm")
def _f_rms(call: OpCall) -> list[Op]:
    return _elementwise(call, "rmsnorm")


@register("layer_norm", "native_layer_norm")
def _f_layernorm(call: OpCall) -> list[Op]:
    return _elementwise(call, "layernorm")


@register("group_norm", "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
          "_native_batch_norm_legit_no_training", "instance_norm")
def _f_other_norm(call: OpCall) -> list[Op]:
    return [replace(o, note="counted with the LayerNorm convention") for o in _elementwise(call, "layernorm")]


def _complex_aware(kind: str, per_complex: int) -> Formula:
    def f(call: OpCall) -> list[Op]:
        out = call.out
        if out.is_complex:
            elements = out.elements
            return [Op(call.name, f"complex_{kind}", call.inputs, call.outputs,
                       {Unit.VECTOR: float(per_complex * elements)},
                       formula=f"{per_complex}·complex elements = {per_complex}·{elements}",
                       note=f"a complex {kind} is {per_complex} real FLOPs")]
        return _elementwise(call, kind)
    return f


def _pointwise(kind: str) -> Formula:
    return lambda call: _elementwise(call, kind)


register("add", "sub", "rsub")(_complex_aware("add", 2))
register("mul")(_complex_aware("mul", 6))
for _kind in ("relu", "silu", "gelu"):
    register(_kind)(_pointwise(_kind))

_COPIES = ("_to_copy", "to", "type_as", "copy", "clone", "contiguous", "cat", "stack", "repeat", "repeat_interleave",
           "index_select", "gather", "index_copy", "index_fill",
           "index", "triu", "tril", "_unsafe_view", "reshape", "flip", "roll", "masked_fill", "where", "scatter",
           "index_put", "_reshape_alias", "view_copy", "expand_copy", "permute_copy", "transpose_copy",
           "slice_copy", "constant_pad_nd", "pad", "flatten")
_FILLS = ("fill", "zero", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "full",
          "zeros", "ones", "arange", "linspace", "eye", "scalar_tensor", "randn", "rand", "randint", "randn_like",
          "rand_like", "randint_like", "normal", "uniform", "bernoulli", "randperm", "polar")


@register("linalg_solve_triangular")
def _f_solve_triangular(call: OpCall) -> list[Op]:
    """A·X = B, A [..., m, m], B [..., m, n]: LAPACK's xTRSM count m²·n a system (LAWN 41), on the vector
    lanes as our chunked DeltaNet and KDA count their solves (transformers' Gated DeltaNet solves so)."""
    m, x = call.shape_arg(0).shape[-1], call.out.shape  # X has B's shape [..., m, n]
    n, systems = x[-1], math.prod(x[:-2])
    return [Op(call.name, "solve_triangular", call.inputs, call.outputs, {Unit.VECTOR: float(m * m * n * systems)},
               formula=f"m²·n a system = {m}²·{n}·{systems}")]


@register(*_COPIES)
def _f_copy(call: OpCall) -> list[Op]:
    return [Op(call.name, "copy", call.inputs, call.outputs, {}, formula="data movement: no FLOPs")]


@register(*_FILLS)
def _f_fill(call: OpCall) -> list[Op]:
    """Creating or filling a tensor writes it: bytes, no FLOPs counted (random draws included)."""
    return [Op(call.name, "fill", call.inputs, call.outputs, {}, formula="writes its output: no FLOPs counted")]


@register("embedding")
def _f_embedding(call: OpCall) -> list[Op]:
    """Gathers rows: reads only the rows it returns (and the ids), never the whole table."""
    weight, ids = call.shape_arg(0), call.arg(1)  # (weight, indices, padding_idx, ...)
    table = weight.tensor
    rows = Tensor(f"{table.name}.rows#{call.name}", call.out.shape, table.dtype, table.role)
    ins = (rows, ids.tensor) if isinstance(ids, ArgShape) else (rows,)
    gathered = ids.elements if isinstance(ids, ArgShape) else "?"
    return [Op(call.name, "embedding", ins, call.outputs, {},
               formula=f"gather {gathered} rows: no FLOPs; only those rows are read")]


@register("_grouped_mm")
def _f_grouped_mm(call: OpCall) -> list[Op]:
    """torch._grouped_mm(a, b, offs): G matmuls in one call, the MoE experts path.

    a [M, K] @ b [G, K, N] with offs [G] (each group's end row, cumulative): group g multiplies rows
    offs[g−1]..offs[g] by b[g], so FLOPs = 2·rows·K·N, rows = offs[−1] (M where the offsets are not
    known), and only the groups given rows are read: b's bytes are those experts' [K, N] slices.
    a [G, M, K] @ b [G, K, N]: a batched matmul, 2·G·M·K·N. a [M, K] @ b [K, N] with offs over K
    (a weight gradient): 2·M·K·N."""
    a, b = call.shape_arg(0), call.shape_arg(1)  # (self, mat2, offs, bias, out_dtype)
    offs = call.arg(2)
    ends = offs.values if isinstance(offs, ArgShape) else None
    out = call.out
    weights = b.tensor
    if len(a.shape) == 2 and len(b.shape) == 3:  # rows routed to groups
        k, n = b.shape[1], b.shape[2]
        rows = a.shape[0] if not ends else min(int(ends[-1]), a.shape[0])
        flop = 2.0 * rows * k * n
        text = f"2·rows·K·N = 2·{rows}·{k}·{n}"
        if ends:
            starts = (0, *ends[:-1])
            used = sum(1 for lo, hi in zip(starts, ends, strict=True) if hi > lo)
            if used < b.shape[0]:
                weights = Tensor(f"{weights.name}.groups#{call.name}", (used, k, n), weights.dtype, weights.role)
            text += f"; {used} of {b.shape[0]} groups have rows: only their weights are read"
    elif len(a.shape) == 2 and len(b.shape) == 2:  # offsets split K
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
        flop = 2.0 * m * k * n
        text = f"2·M·K·N = 2·{m}·{k}·{n} (the groups split K)"
    else:  # a 3-D operand: one matmul per group
        k = a.shape[-1]
        flop = 2.0 * out.elements * k
        text = f"2·out elements·K = 2·{out.elements}·{k}"
    ins = [x.tensor for x in call.reads if x.tensor != b.tensor]
    ins.insert(1, weights)
    return [Op(call.name, "grouped_matmul", tuple(dict.fromkeys(ins)), call.outputs, {Unit.MATRIX: flop},
               formula=text)]


def _rows_written(call: OpCall, name: str, shape: Sequence[int]) -> Tensor:
    """The part of the destination (argument 0) an indexed write touches: `shape` elements at its dtype."""
    dest = call.shape_arg(0).tensor
    return Tensor(f"{dest.name}.rows#{name}", tuple(int(s) for s in shape), dest.dtype, dest.role)


def _indexed_write(call: OpCall, touched: Sequence[int], sources: Sequence[Arg], accumulate: bool) -> list[Op]:
    """An in-place write of `touched` elements of the destination: reads the index and the source,
    writes those rows (reads them too when it accumulates: 1 FLOP per element), never the rest."""
    rows = _rows_written(call, call.name, touched)
    ins = [a.tensor for a in sources if isinstance(a, ArgShape)]
    if accumulate:
        ins.append(rows)
    n = math.prod(touched)
    flop = {Unit.VECTOR: float(n)} if accumulate else {}
    text = (f"1·elements written = {n}; reads and writes only those rows" if accumulate
            else f"writes {n} elements: no FLOPs; only those rows are written")
    return [Op(call.name, call.aten.rstrip("_"), tuple(dict.fromkeys(ins)), (rows,), flop, formula=text)]


def _row_shape(dest: Sequence[int], dim: int, index_len: int) -> tuple[int, ...]:
    d = dim % len(dest) if dest else 0
    return tuple(index_len if i == d else s for i, s in enumerate(dest))


@register("index_copy_", "index_add_", "index_fill_")
def _f_index_inplace(call: OpCall) -> list[Op]:
    """self.index_copy_(dim, index, source): rows index of self along dim; index_add_ accumulates
    (alpha·source), index_fill_ writes a value."""
    dest, index = call.shape_arg(0), call.shape_arg(2)  # (self, dim, index, source | value, [alpha])
    dim = call.arg(1)
    dim = dim if isinstance(dim, int) else 0
    touched = _row_shape(dest.shape, dim, index.elements)
    return _indexed_write(call, touched, (index, call.arg(3)), accumulate=call.aten.startswith("index_add"))


@register("index_put_", "_index_put_impl_")
def _f_index_put_inplace(call: OpCall) -> list[Op]:
    """self[indices] = values (accumulate: +=): the indexed elements are the broadcast index shape
    times the dimensions not indexed (a boolean mask counts all it covers: an upper bound)."""
    dest, indices, values = call.shape_arg(0), call.arg(1), call.arg(2)  # (self, indices, values, accumulate)
    entries = indices if isinstance(indices, tuple) else (indices,)
    idx = [a for a in entries if isinstance(a, ArgShape)]
    lead: tuple[int, ...] = ()
    whole: list[int] = []  # dimensions an index leaves whole (None entries, then the trailing ones)
    at = 0
    for a in entries:
        if isinstance(a, ArgShape):
            lead = _broadcast(lead, a.shape)
            at += len(a.shape) if a.dtype.name in ("bool", "int8") else 1  # a bool/uint8 mask covers its dims
        else:
            whole += dest.shape[at:at + 1]
            at += 1
    touched = (*lead, *whole, *dest.shape[at:]) if idx else dest.shape
    return _indexed_write(call, touched, (*idx, values), accumulate=bool(call.arg(3)))


@register("index_add", "scatter_add", "scatter_reduce")
def _f_indexed_add_copy(call: OpCall) -> list[Op]:
    """The out-of-place twins return a new tensor: the whole destination read and the result written
    (a copy), plus 1 FLOP per source element accumulated."""
    src = call.arg(3)  # (self, dim, index, source | src, ...)
    n = src.elements if isinstance(src, ArgShape) else 0
    return [Op(call.name, call.aten, call.inputs, call.outputs, {Unit.VECTOR: float(n)},
               formula=f"1·source elements = {n}; a new tensor: the whole destination copied")]


@register("scatter_", "scatter_add_", "scatter_reduce_")
def _f_scatter_inplace(call: OpCall) -> list[Op]:
    """self.scatter_(dim, index, src): one element written per index element (src read there)."""
    index = call.shape_arg(2)  # (self, dim, index, src | value, [reduce])
    src = call.arg(3)
    accumulate = call.aten != "scatter_" or call.arg(4) is not None
    return _indexed_write(call, index.shape, (index, src), accumulate)


# --- ops without a formula -------------------------------------------------------------------------

REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean", "norm",
              "linalg_vector_norm", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "any", "all", "topk",
              "sort", "histc")
# pointwise but not tagged so: the Python operators' overloads (transformers' masks' `a & b`), floor division,
# torch.diff (a subtraction an output element: MiniMax-M3's block boundaries)
UNTAGGED_POINTWISE = ("__and__", "__or__", "__xor__", "floor_divide", "diff")


def generic(call: OpCall, pointwise: bool, reduction: bool) -> tuple[list[Op], bool]:
    """Ops without a formula: pointwise 1 FLOP per element, reductions 1 per input element, else 0.
    `pointwise` and `reduction` are the op's tags in PyTorch (torch.Tag); the bool returned says
    whether the op was counted at all (False: bytes only, no FLOP convention)."""
    if pointwise or call.aten in UNTAGGED_POINTWISE:
        n = call.out.elements
        kind = f"bitwise_{call.aten.strip('_')}" if call.aten.startswith("__") else call.aten.rstrip("_")
        return [Op(call.name, kind, call.inputs, call.outputs, {Unit.VECTOR: float(n)},
                   formula=f"1·elements = {n}", note="generic pointwise op: 1 FLOP per element")], True
    if reduction or call.aten.rstrip("_") in REDUCTIONS:
        n = (call.reads[0] if call.reads else call.out).elements
        return [Op(call.name, "reduce", call.inputs, call.outputs, {Unit.VECTOR: float(n)},
                   formula=f"1·input elements = {n}", note=f"{call.aten}: 1 FLOP per input element")], True
    return [Op(call.name, call.aten, call.inputs, call.outputs, {},
               note=f"no FLOP formula for aten::{call.aten}: bytes only")], False


__all__ = ["ATTENTION", "ATTENTION_CONVENTION", "FORMULAS", "FUSED_ATTENTION", "SDPA", "UNTAGGED_POINTWISE", "Arg",
           "ArgShape", "Formula", "OpCall", "Registry", "generic", "kept_pairs_of_mask", "register", "scaled_op",
           "torch_dtype"]
