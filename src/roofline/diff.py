"""A program's kernels against the analytic model of the same config.json: kind by kind, each
difference named.

    d = diff_program(profile.trace, load_config("./my-model/config.json"))
    d.rows            # FLOPs and bytes per kernel family, program beside model
    d.differences     # what the program does that the model does not, each with its cost

The program is any recorded graph (roofline.tracing: the tracer, a torch.profiler trace, `roofline
profile`); the model is roofline.models' step graph of the same config at the program's shape
(batch and tokens from its embedding gather; decode when one token per sequence, its context from
the keys its attention reads) in the program's dtype, under the flash plan (attention one kernel).

Differences looked for, each with its extra FLOPs and bytes by arithmetic:

    logits for every position    the LM head projects N rows where prefill needs B (one per sequence):
                                 2·(N − B)·h·V extra FLOPs; (N − B)·V logits written
    unfused q/k/v (gate/up)      separate GEMMs where the model runs one: same FLOPs, the normed
                                 activation read once per GEMM instead of once: (GEMMs − 1)·N·h·bytes
    cat-grown KV cache           torch.cat builds a new cache each step: the whole cache read and written
                                 where an in-place cache writes only the new token
    masked window / explicit     attention computing the full square: the model counts the causal
    mask                         pairs (or the W-wide window's), the program all of them
    MLA re-expanded              attention over per-head K and V (d_nope + d_rope wide) instead of
                                 the absorbed latent (kv_lora_rank + d_rope)
    routed experts hit           distinct experts a layer read against the model's expectation under
                                 uniform routing, E·(1 − (1 − k/E)^N)

The join needs both a recorded program (roofline.tracing) and the analytic model (roofline.models),
two rooms that never import each other, so it is a room of its own above both; it renders nothing
(roofline.report.text.profile prints it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Graph, Kernel, Op
from roofline.models import ModelConfig, ModelGraph, build_graph, model_dtypes
from roofline.tracing.analysis import Trace
from roofline.units import format_bytes, format_flop
from roofline.vocab import MlaForm, Phase, Plan

FAMILY = {"matmul": "matmul", "grouped_matmul": "matmul", "conv": "matmul", "attention_qk": "attention",
          "attention_pv": "attention", "softmax": "attention"}
MOVES = ("copy", "fill", "embedding", "kv_write", "gather", "gpu_kernel")


def family(kind: str) -> str:
    """The family a kernel kind is compared under: matmul, attention, data movement, elementwise."""
    parts = kind.split("+")
    if any(FAMILY.get(p) == "attention" for p in parts) and any(p.startswith("attention") for p in parts):
        return "attention"
    if any(FAMILY.get(p) == "matmul" for p in parts):
        return "matmul"
    if all(p in MOVES for p in parts):
        return "data movement"
    return "elementwise and norms"


@frozen
class FamilyRow:
    family: str
    program_kernels: int
    model_kernels: int
    program_flop: float
    model_flop: float
    program_bytes: float
    model_bytes: float


@frozen
class Difference:
    """One thing the program does that the model does not, with what it costs."""

    name: str
    detail: str
    extra_flop: float = 0.0
    extra_bytes: float = 0.0


@dataclass
class Diff:
    program: str
    model: ModelGraph
    rows: list[FamilyRow]
    differences: list[Difference]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "program": self.program, "model": self.model.config.name, "phase": str(self.model.shape.phase),
            "batch": self.model.shape.batch, "seq": self.model.shape.seq,
            "families": [r.__dict__ for r in self.rows],
            "differences": [d.__dict__ for d in self.differences], "notes": self.notes,
        }


# --- reading the program's shape ---------------------------------------------------------------------

def _matmuls(g: Graph) -> list[Op]:
    return [op for op in g.ops if op.kind == "matmul"]


def _n_k(op: Op) -> tuple[int, int]:
    """A matmul's output width N and reduction width K (its first input's last dimension)."""
    out = op.outputs[0].shape if op.outputs else ()
    k = op.inputs[0].shape[-1] if op.inputs and op.inputs[0].shape else 0
    return (out[-1] if out else 0), k


def _rows(op: Op) -> int:
    out = op.outputs[0].shape if op.outputs else ()
    return math.prod(out[:-1]) if out else 0


def program_shape(t: Trace) -> tuple[int, int, DType]:
    """(batch, tokens per sequence, dtype) from the program's first embedding gather."""
    for op in t.ops:
        if op.kind == "embedding" and op.outputs:
            shape = op.outputs[0].shape
            b, s = (shape[0], shape[1]) if len(shape) >= 3 else (1, shape[0])
            return int(b), int(s), op.outputs[0].dtype
    raise RooflineError("the program has no embedding gather to read its batch and tokens from; give "
                        "--batch and --seq (the prompt in prefill, the context in decode)")


def program_dtype(t: Trace) -> DType:
    """The dtype of the program's first matmul's activation (bf16 when it ran none)."""
    for op in t.ops:
        if op.kind == "matmul" and op.inputs:
            return op.inputs[0].dtype
    return get_dtype("bf16")


def _keys(t: Trace) -> int:
    """The most keys any attention of the program read (its context in decode)."""
    most = 0
    for op in t.ops:
        if op.kind == "attention_qk" and len(op.inputs) > 1 and len(op.inputs[1].shape) >= 2:
            most = max(most, op.inputs[1].shape[-2])
    return most


# --- the comparison ------------------------------------------------------------------------------------

def _by_family(kernels: Sequence[Kernel]) -> dict[str, tuple[int, float, float]]:
    out: dict[str, tuple[int, float, float]] = {}
    for k in kernels:
        f = family(k.kind)
        n, fl, by = out.get(f, (0, 0.0, 0.0))
        out[f] = (n + k.count, fl + k.flop * k.count, by + k.bytes * k.count)
    return out


def forward_steps(t: Trace) -> list[Trace]:
    """The program cut at each embedding gather: one forward step each (a generate loop's prefill, then
    its decode steps). A program without an embedding gather is one step."""
    starts = [i for i, op in enumerate(t.ops) if op.kind == "embedding"]
    if len(starts) <= 1:
        return [t]
    bounds = [*starts[1:], len(t.ops)]
    steps = []
    for k, (a, b) in enumerate(zip([0, *starts[1:]], bounds, strict=True), start=1):
        ops = t.ops[a:b]
        names = {op.name for op in ops}
        steps.append(Trace(name=f"{t.name} step {k}", ops=list(ops),
                           groups={g: m for g, m in t.groups.items() if set(m) <= names},
                           times_s={n: v for n, v in t.times_s.items() if n in names or n in t.groups},
                           module_of={n: v for n, v in t.module_of.items() if n in names}))
    return steps


def diff_program(program: Trace, config: ModelConfig, phase: Phase | str | None = None,
                 batch: int | None = None, seq: int | None = None, dtype: DType | str | None = None,
                 step: int = 1) -> Diff:
    """The program's forward step `step` (1: the first; a generate loop runs one per token) against
    roofline.models' step graph of `config` at that step's shape."""
    steps = forward_steps(program)
    if not 1 <= step <= len(steps):
        raise RooflineError(f"the program ran {len(steps)} forward step{'s' if len(steps) != 1 else ''}; "
                            f"--step must be 1 to {len(steps)}")
    ran = len(steps)
    program = steps[step - 1]
    try:
        b, s, dt = program_shape(program)
    except RooflineError:
        if batch is None or seq is None:
            raise
        b, s, dt = batch, (seq if phase != Phase.DECODE else 1), program_dtype(program)
    b = batch or b
    ph = Phase(phase) if phase else (Phase.PREFILL if s > 1 else Phase.DECODE)
    length = seq or (s if ph is Phase.PREFILL else max(_keys(program), 1))
    dts = model_dtypes(dtype or dt, dtype or dt)
    mg = build_graph(config, ph, b, length, dts)
    model_kernels = mg.graph.kernels(mg.plan(Plan.FLASH))
    prog_kernels = program.graph.kernels(program.plan)
    mine, theirs = _by_family(prog_kernels), _by_family(model_kernels)
    order = ["matmul", "attention", "elementwise and norms", "data movement"]
    rows = [FamilyRow(f, mine.get(f, (0, 0, 0))[0], theirs.get(f, (0, 0, 0))[0], mine.get(f, (0, 0, 0))[1],
                      theirs.get(f, (0, 0, 0))[1], mine.get(f, (0, 0, 0))[2], theirs.get(f, (0, 0, 0))[2])
            for f in order if f in mine or f in theirs]
    notes: list[str] = []
    if ran > 1:
        notes.append(f"the program ran {ran} forward steps (one embedding gather each); step {step} is compared "
                     "(--step K for another)")
    if ph is Phase.DECODE and seq is None:
        notes.append(f"decode: context {length} read from the keys the program's attention read")
    differences = [d for d in (_logits(program, mg), *_unfused(program, mg), _cat_cache(program, mg),
                               _attention_square(program, mg), _mla(program, mg), _experts(program, mg))
                   if d is not None]
    return Diff(program.name, mg, rows, differences, notes)


def _logits(t: Trace, mg: ModelGraph) -> Difference | None:
    cfg, h, v = mg.config, mg.config.hidden_size, mg.config.vocab_size
    heads = [op for op in _matmuls(t.graph) if _n_k(op) == (v, h)]
    if not heads:
        return None
    rows = sum(_rows(op) * op.count for op in heads)
    expected = mg.shape.batch if mg.shape.phase is Phase.PREFILL and cfg.logits == "last" else mg.shape.tokens
    if rows <= expected:
        return None
    extra = rows - expected
    width = heads[0].outputs[0].dtype.bytes_per_element
    return Difference(
        "logits for every position instead of the last",
        f"the LM head projects {rows} rows where prefill needs {expected} (the last position of each sequence): "
        f"2·(N − B)·h·V = 2·{extra}·{h}·{v} = {2 * extra * h * v:.6g} extra FLOPs and (N − B)·V·bytes = "
        f"{format_bytes(extra * v * width)} of logits written (serving engines project the last position; "
        f"`roofline model --logits all` models this program)",
        2.0 * extra * h * v, float(extra * v * width))


def _unfused(t: Trace, mg: ModelGraph) -> list[Difference]:
    cfg, h = mg.config, mg.config.hidden_size
    layers = cfg.num_layers
    out: list[Difference] = []
    mm = [(op, *_n_k(op)) for op in _matmuls(t.graph)]
    n_rows = mg.shape.tokens
    if not cfg.is_mla:
        hd, gd = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        q = sum(op.count for op, n, k in mm if k == h and n == hd)
        kv = sum(op.count for op, n, k in mm if k == h and n == gd)
        if hd == gd:  # MHA: q, k and v have one width; the count tells them apart
            q, kv = q // 3, q - q // 3
        q = min(q, kv // 2)  # where H·d = h, o_proj has q's shape too: one q per (k, v) pair
        if q >= layers and kv >= 2 * layers:
            width = mm[0][0].inputs[0].dtype.bytes_per_element
            extra = 2.0 * layers * n_rows * h * width
            out.append(Difference(
                "unfused q/k/v GEMMs",
                f"{q + kv} projections ({(q + kv) // layers} per layer) where the model runs one GEMM of width "
                f"(H + 2G)·d = {hd + 2 * gd}: same FLOPs; the normed activation is read 3 times instead of once: "
                f"2·L·N·h·bytes = 2·{layers}·{n_rows}·{h}·{width:g} = {format_bytes(extra)} more",
                0.0, extra))
    f = cfg.intermediate_size
    if cfg.gated and f and cfg.dense_layers:
        up = sum(op.count for op, n, k in mm if k == h and n == f)
        if up >= 2 * cfg.dense_layers:
            width = mm[0][0].inputs[0].dtype.bytes_per_element
            extra = 1.0 * cfg.dense_layers * n_rows * h * width
            out.append(Difference(
                "unfused gate/up GEMMs",
                f"gate and up as {up} GEMMs of width f = {f} where the model runs one of 2f = {2 * f}: same FLOPs; "
                f"the normed activation read twice: L·N·h·bytes = {cfg.dense_layers}·{n_rows}·{h}·{width:g} = "
                f"{format_bytes(extra)} more", 0.0, extra))
    return out


def _cat_cache(t: Trace, mg: ModelGraph) -> Difference | None:
    cfg = mg.config
    shapes = [cfg.attention_shape(k) for k, _ in cfg.softmax_layer_kinds]  # each layer kind's own
    heads = {cfg.num_heads} if cfg.is_mla else {cfg.num_kv_heads, *(s.kv_heads for s in shapes)}
    dims = {cfg.head_dim, cfg.qk_head_dim, cfg.v_dim, *(s.head_dim for s in shapes), *(s.v_head_dim for s in shapes)}
    grown = [op for op in t.ops if op.kind == "copy" and op.name.split(".")[-1].split("#")[0] == "cat"
             and op.outputs and len(op.outputs[0].shape) == 4 and op.outputs[0].shape[1] in heads
             and op.outputs[0].shape[-1] in dims and op.outputs[0].shape[-2] > mg.shape.tokens_per_sequence]
    if not grown:
        return None
    moved = sum(sum(x.bytes for x in (*op.inputs, *op.outputs)) * op.count for op in grown)
    new_rows = sum(op.outputs[0].bytes * mg.shape.tokens_per_sequence / op.outputs[0].shape[-2] * op.count
                   for op in grown)
    length = grown[0].outputs[0].shape[-2]
    return Difference(
        "cat-grown KV cache read and rewritten each step",
        f"{len(grown)} torch.cat calls build a new [B, heads, {length}, d] cache each step: the whole cache read and "
        f"written ({format_bytes(moved)}) where an in-place cache writes only the new tokens "
        f"({format_bytes(new_rows)}); a static or paged cache avoids it", 0.0, moved - new_rows)


def _computed_qk(op: Op) -> float:
    """q·kᵀ FLOPs a kernel computes: with a mask tensor, the whole [B, H, Nq, Nkv] square (the mask
    discards pairs after they are computed; the registry counts only the kept ones)."""
    counted = op.flop * op.count
    if len(op.inputs) < 3 or len(op.inputs[0].shape) < 2 or len(op.inputs[1].shape) < 2:
        return counted
    q, k = op.inputs[0].shape, op.inputs[1].shape
    square = math.prod(q[:-1]) * k[-2]  # B·H·Nq query rows, each against all Nkv keys
    return max(counted, 2.0 * square * q[-1] * op.count)


def _attention_square(t: Trace, mg: ModelGraph) -> Difference | None:
    qks = [op for op in t.ops if op.kind == "attention_qk"]
    prog = sum(_computed_qk(op) for op in qks)
    model = sum(op.flop * op.count for op in mg.graph.ops if op.kind == "attention_qk")
    if not prog or not model or prog <= model * 1.01:
        return None
    q = qks[0].inputs[0].shape
    pv = [op for op in t.ops if op.kind == "attention_pv" and len(op.inputs) > 1]
    dv = pv[0].inputs[1].shape[-1] if pv else q[-1]
    extra = (prog - model) * (1 + dv / q[-1])  # q·kᵀ and p·v over the same extra pairs
    cfg, s = mg.config, mg.shape.seq
    window = cfg.sliding_window
    masked = any(len(op.inputs) >= 3 for op in qks)
    if window and mg.shape.phase is Phase.PREFILL and s > window:
        name = "masked sliding-window prefill computing the full square"
        why = (f"the model counts the pairs within the window of {window}, W(W+1)/2 + (N−W)·W per sequence and "
               f"head; the program's attention {'took a mask tensor and ' if masked else ''}computed the whole "
               f"score matrix, then masked it")
    else:
        name = "attention computing the full square"
        why = ("a mask tensor instead of is_causal: all Nq·Nkv pairs computed where causal attention needs "
               "N(N+1)/2" if masked else "more (query, key) pairs than causal attention needs")
    return Difference(name, f"{why}: q·kᵀ {format_flop(prog)} computed against {format_flop(model)}; with p·v, "
                            f"(computed − model)·(1 + d_v/d) = {extra:.6g} extra FLOPs", extra, 0.0)


def _mla(t: Trace, mg: ModelGraph) -> Difference | None:
    cfg = mg.config
    if not cfg.is_mla:
        return None
    widths = {op.inputs[0].shape[-1] for op in t.ops if op.kind == "attention_qk" and op.inputs}
    expanded, latent = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.kv_lora_rank + cfg.qk_rope_head_dim
    model_expanded = mg.shape.phase is Phase.PREFILL or cfg.mla == "expanded"
    if expanded not in widths or latent in widths or model_expanded:
        return None
    alt = build_graph(replace(cfg, mla=MlaForm.EXPANDED), mg.shape.phase, mg.shape.batch, mg.shape.seq, mg.dtypes)
    plan = alt.plan(Plan.FLASH)
    absorbed = sum(k.bytes * k.count for k in mg.graph.kernels(mg.plan(Plan.FLASH)))
    exp = sum(k.bytes * k.count for k in alt.graph.kernels(plan))
    return Difference(
        "MLA re-expanded instead of absorbed",
        f"attention over per-head K and V ({expanded} wide) where the model attends over the absorbed latent "
        f"({latent} wide): the cache holds H·(d_nope + d_rope + d_v) = "
        f"{cfg.num_heads * (expanded + cfg.v_head_dim)} values per token per layer instead of {latent}; the step "
        f"moves {format_bytes(exp)} instead of {format_bytes(absorbed)} (`roofline model --mla expanded` models "
        f"this program)", alt.graph.flop - mg.graph.flop, exp - absorbed)


def _experts_read(t: Trace, cfg: ModelConfig) -> float:
    """Routed experts whose weights the program's MoE layers read, per layer: a grouped GEMM reads the
    experts it is given (its weight's first dimension); per-expert GEMMs (gate and up, or gate_up) one each."""
    h, fe = cfg.hidden_size, cfg.moe_intermediate_size
    grouped = [op for op in t.ops if op.kind == "grouped_matmul" and len(op.inputs) > 1
               and len(op.inputs[1].shape) == 3 and op.inputs[0].shape[-1] == h]
    if grouped:
        return sum(op.inputs[1].shape[0] * op.count for op in grouped) / cfg.moe_layers
    mm = [(op, *_n_k(op)) for op in _matmuls(t.graph)]
    separate = sum(op.count for op, n, k in mm if k == h and n == fe)
    fused = sum(op.count for op, n, k in mm if k == h and n == 2 * fe)
    shared = cfg.moe_layers if cfg.num_shared_experts == 1 else 0  # a shared expert of the same width
    return (separate / 2 + fused - shared) / cfg.moe_layers


def _experts(t: Trace, mg: ModelGraph) -> Difference | None:
    cfg = mg.config
    if not cfg.is_moe or not cfg.moe_layers or mg.experts_hit is None:
        return None
    hits = _experts_read(t, cfg)
    if hits <= 0 or abs(hits - mg.experts_hit) < 0.5:
        return None
    h, fe = cfg.hidden_size, cfg.moe_intermediate_size
    width = mg.dtypes.weights.bytes_per_element
    mats = 3 if cfg.gated else 2  # gate, up, down; or up, down (ReLU² experts)
    extra = (hits - mg.experts_hit) * mats * h * fe * width * cfg.moe_layers
    return Difference(
        "routed experts hit",
        f"the program's MoE layers read the weights of {hits:g} of {cfg.num_experts} experts each, the model "
        f"expects {mg.experts_hit} for {mg.shape.tokens} tokens × {cfg.experts_per_token} picks under uniform "
        f"routing, E·(1 − (1 − k/E)^N): (read − expected)·{mats}·h·f·bytes·layers = "
        f"{format_bytes(abs(extra))} {'more' if extra > 0 else 'less'} (a grouped GEMM handed every expert reads "
        f"them all; `--experts-hit` sets the model's)", 0.0, extra)


__all__ = ["Diff", "Difference", "FamilyRow", "diff_program", "family", "forward_steps", "program_shape"]
