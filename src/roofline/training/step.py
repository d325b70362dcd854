"""A training step as kernels on one device of the split: what runs, which pass it belongs to, and how
often it runs in a step.

One micro-batch on one device is the forward graph of the inference room (roofline.models.build, a
prefill over the micro-batch's b sequences of S/cp tokens, logits at every position, tp and ep shares
of the widths) with its backward (roofline.training.backward), the recompute --recompute asks for, and
the loss; a step runs m micro-batches of it and then, once, the gradient reduction, the gradient norm
and the optimizer.

    scope LAYER   a layer's kernel: ⌈L/pp⌉ of its L runs on the fullest stage, each micro-batch
    scope EDGE    the embedding, final norm, LM head and loss: once a micro-batch (the first and the
                  last stage hold them; the slower of the two paces the pipeline, counted as if one
                  stage held both: an upper bound of one edge's time)
    scope MICRO   once a micro-batch, already the stage's (pipeline sends, FSDP's gathers)
    scope STEP    once a step (the data-parallel reduction, the gradient norm, the optimizer)

Changes to the inference graph, and why:
- the logits' all-gather is dropped: Megatron-LM's vocab-parallel cross-entropy reduces the row max
  and sum over tp (two [N] all-reduces, `loss.all_reduce`) instead of gathering [N, V];
- with sequence parallelism (Korthikanti et al. 2022) each tensor-parallel all-reduce is a
  reduce-scatter and an all-gather of the same buffer (the same bytes on the link, two latencies);
  the norms and residual adds between them are still counted on all N rows (a small overcount);
- context parallelism (ring attention, Liu et al. 2023, arXiv 2310.01889; Megatron-LM's causal load
  balance) gives each rank S/cp tokens; its attention does the rank's 1/cp share of the sequence's
  S(S+1)/2 pairs (FLOPs scaled from the local graph's), and receives the other ranks' K and V in
  cp − 1 ring steps a layer (K, V and their gradients in the backward: twice the bytes);
- expert-parallel all-to-alls go over the link when the ep group (stride tp) sits in a node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from enum import StrEnum
from types import MappingProxyType

from roofline.dtypes import DType, get_dtype
from roofline.frozen import frozen
from roofline.graph import FusionPlan, Graph, Kernel, OnChip, Op, Tensor
from roofline.models.build import build_graph
from roofline.models.dtypes import model_dtypes
from roofline.parallel import Collective, CollectiveCall, collective_op
from roofline.parallel.algorithms import AllReduceRule, all_reduce_op
from roofline.training.backward import backward_ops
from roofline.training.setup import Optimizer, Recompute, TrainSetup, TrainSplit, Zero, group_level
from roofline.vocab import Level, Phase, Plan, Role, Unit


class Pass(StrEnum):
    FORWARD = "forward"
    BACKWARD = "backward"
    RECOMPUTE = "recompute"
    OPTIMIZER = "optimizer"


class Scope(StrEnum):
    LAYER = "layer"
    EDGE = "edge"
    MICRO = "micro_batch"
    STEP = "step"


class Family(StrEnum):
    """Which parallelism a collective serves; `overlaps_backward` says where --overlap hides it."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    PP = "pp"
    DP = "dp"
    FSDP = "fsdp"
    NORM = "grad_norm"


EDGE_OPS = frozenset({"embedding", "embedding.all_reduce", "final_norm", "lm_head", "loss", "loss.all_reduce"})
ATTENTION_KINDS = ("attention_qk", "softmax", "attention_pv")

# AdamW per parameter (mixed precision, ZeRO's K = 12): reads the FP32 master, the BF16 gradient and the
# two FP32 moments, writes the master, the moments and the BF16 working copy: 4+2+4+4 + 4+4+4+2 = 28 bytes;
# ~14 vector FLOPs (two moment updates 7, the bias-corrected step and weight decay 6, the clipping scale 1)
# and one reciprocal square root. SGD: reads master and gradient, writes master and copy, 12 bytes, 4 FLOPs.
OPTIMIZER_STEP = {Optimizer.ADAMW: (4 + 2 + 4 + 4, 4 + 4 + 4 + 2, 14.0, 1.0),
                  Optimizer.SGD: (4 + 2, 4 + 2, 4.0, 0.0)}
GRAD_NORM_FLOP = 2.0  # a square and an add per gradient element


@frozen
class Comm:
    """A collective of the step, for the report and the overlap rule."""

    family: Family
    kind: Collective
    group: int
    level: Level
    message_bytes: float
    algorithm: str = ""  # an all-reduce's algorithm (roofline.parallel.algorithms)


@frozen
class TrainKernel:
    kernel: Kernel
    pass_: Pass
    scope: Scope
    comm: Comm | None = None

    @property
    def name(self) -> str:
        return self.kernel.name


@frozen
class TrainStep:
    """Every kernel of a step on the fullest stage's device, in the order they run."""

    setup: TrainSetup
    kernels: tuple[TrainKernel, ...]
    plan: Plan
    scores_stored: bool  # the plan keeps attention's scores in memory (naive attention)
    warnings: tuple[str, ...] = ()


def _family(name: str, call: CollectiveCall) -> Family:
    if "all_to_all" in name:
        return Family.EP
    return Family.TP


def _relevel(op: Op, level: Level) -> Op:
    moved = sum(op.traffic.values())
    return replace(op, traffic=MappingProxyType({level: moved}))


def _cp_scale(op: Op, factor: float) -> Op:
    """An attention op with `factor` times its pairs: FLOPs, on-chip bytes and on-chip work scaled."""
    onchip = op.onchip.scaled(factor) if op.onchip is not None else None
    return replace(op, flop_by_unit={u: f * factor for u, f in op.flop_by_unit.items()},
                   traffic={lv: b * factor for lv, b in op.traffic.items()}, onchip=onchip,
                   note=(op.note + "; " if op.note else "") + f"context parallel: this rank's 1/cp of the pairs "
                        f"({factor:.3g}× the local graph's)")


def _sequence_parallel(op: Op, call: CollectiveCall, tp: int) -> list[tuple[Op, CollectiveCall]]:
    """An all-reduce of [N, h] as a reduce-scatter to [N/tp, h] and an all-gather back."""
    partial, out = op.inputs[0], op.outputs[0]
    rows = -(-out.shape[0] // tp)
    shard = Tensor(f"{op.name}.shard", (rows, *out.shape[1:]), out.dtype)
    rs = collective_op(f"{op.name}.reduce_scatter", Collective.REDUCE_SCATTER, partial, shard, tp, call.level, op.count)
    ag = collective_op(f"{op.name}.all_gather", Collective.ALL_GATHER, shard, out, tp, call.level, op.count)
    return [(rs, CollectiveCall(Collective.REDUCE_SCATTER, tp, call.level, partial.bytes)),
            (ag, CollectiveCall(Collective.ALL_GATHER, tp, call.level, out.bytes))]


def _levels(split: TrainSplit, devices_per_node: int) -> dict[Family, Level]:
    tp, cp, dp = split.tp, split.cp, split.dp
    stage = tp * cp * dp
    crosses = any((b * stage) % devices_per_node == 0 for b in range(1, split.pp))
    return {Family.TP: group_level(1, tp, devices_per_node), Family.CP: group_level(tp, cp, devices_per_node),
            Family.EP: group_level(tp, split.ep, devices_per_node),
            Family.DP: group_level(tp, cp * dp, devices_per_node),
            Family.FSDP: group_level(tp, cp * dp, devices_per_node),
            Family.PP: Level.NETWORK if crosses or stage > devices_per_node else Level.LINK,
            Family.NORM: group_level(1, split.devices, devices_per_node)}


def forward_ops(setup: TrainSetup, devices_per_node: int, dtypes_compute: DType | None, nvls: bool = False
                ) -> tuple[list[Op], dict[str, Comm], dict[str, tuple[str, ...]], FusionPlan, tuple[str, ...]]:
    """One micro-batch's forward on one device: ops, their collectives, the attention groups, the plan."""
    sp, cfg = setup.split, setup.config
    dpe = sp.data_ranks
    s_local = setup.seq // sp.cp
    dtypes = model_dtypes("bf16", "bf16", "bf16", dtypes_compute)
    mg = build_graph(cfg, Phase.PREFILL, setup.micro_batch * dpe, s_local, dtypes, None,
                     replace(sp.inference_split(), pp=1), devices_per_node, nvls)
    levels = _levels(sp, devices_per_node)
    rule = AllReduceRule(cfg.allreduce, nvls)
    ops: list[Op] = []
    comms: dict[str, Comm] = {}
    pairs_all = setup.seq * (setup.seq + 1) / 2
    pairs_local = s_local * (s_local + 1) / 2
    factor = pairs_all / sp.cp / pairs_local
    for op in mg.graph.ops:
        call = mg.collectives.get(op.name)
        if op.name == "logits.all_gather":
            continue
        if call is not None:
            fam = _family(op.name, call)
            level = levels[fam] if fam is Family.EP else call.level
            op = _relevel(op, level)
            call = replace(call, level=level)
            if setup.sp and call.kind is Collective.ALL_REDUCE and op.name != "embedding.all_reduce":
                for piece, c in _sequence_parallel(op, call, sp.tp):
                    ops.append(piece)
                    comms[piece.name] = Comm(Family.TP, c.kind, c.group, c.level, c.message_bytes)
                continue
            ops.append(op)
            comms[op.name] = Comm(fam, call.kind, call.group, level, call.message_bytes, call.algorithm)
            continue
        if sp.cp > 1 and op.kind in ATTENTION_KINDS:
            op = _cp_scale(op, factor)
        ops.append(op)
    logits = next(t for op in ops if op.name == "lm_head" for t in op.outputs)
    ops.append(Op("loss", "cross_entropy", (logits,), (Tensor("d.logits", logits.shape, logits.dtype),),
                  {Unit.VECTOR: 7.0 * logits.elements}, 1,
                  formula=f"softmax 5 + the gradient (p − onehot) 2 FLOPs a logit: 7·N·V/tp = 7·{logits.elements}",
                  onchip=OnChip({Unit.EXP: float(logits.elements)})))
    if sp.tp > 1:
        stats = Tensor("loss.stats", (logits.shape[0], 2), get_dtype("fp32"))
        loss_op, loss_call = all_reduce_op("loss.all_reduce", stats, Tensor("loss.stats.sum", stats.shape, stats.dtype),
                                           sp.tp, levels[Family.TP], rule)
        ops.append(loss_op)
        comms["loss.all_reduce"] = Comm(Family.TP, Collective.ALL_REDUCE, sp.tp, levels[Family.TP], stats.bytes,
                                        loss_call.algorithm)
    if sp.cp > 1:
        for op in list(ops):
            if op.kind != "attention_qk":
                continue
            k = op.inputs[1]
            prefix = op.name.rsplit(".", 1)[0]
            pv = next(o for o in ops if o.kind == "attention_pv" and o.name.rsplit(".", 1)[0] == prefix)
            kv = Tensor(f"{op.name}.cp_kv", (k.elements + pv.inputs[1].elements,), k.dtype)
            name = f"{op.name.rsplit('.', 1)[0]}.cp_ring"
            ring = collective_op(name, Collective.SEND_RECV, kv, Tensor(f"{name}.received", kv.shape, kv.dtype), 1,
                                 levels[Family.CP], op.count * (sp.cp - 1))
            ops.insert(ops.index(op), ring)
            comms[name] = Comm(Family.CP, Collective.SEND_RECV, sp.cp, levels[Family.CP], kv.bytes)
    plan = mg.plans[setup.plan]
    warnings = list(mg.warnings)
    if sp.cp > 1 and (cfg.sliding_window or cfg.linear_attention is not None or cfg.mamba is not None):
        warnings.append(f"--cp {sp.cp}: each rank's attention is counted as 1/cp of full causal attention's pairs; "
                        f"{cfg.name}'s windowed, chunked or linear-attention layers do fewer (their state passed "
                        "between ranks is not counted): an overcount of their time")
    return ops, comms, dict(plan.groups), plan, tuple(warnings)


def _kernels(ops: Iterable[Op], plan: FusionPlan, pass_: Pass, comms: Mapping[str, Comm],
             scope_of: Callable[[Kernel], Scope]) -> list[TrainKernel]:
    ks = Graph(list(ops), name=str(pass_)).kernels(plan)
    return [TrainKernel(k, pass_, scope_of(k), comms.get(k.ops[0].name) if len(k.ops) == 1 else None) for k in ks]


def micro_key(setup: TrainSetup, devices_per_node: int, nvls: bool = False) -> tuple[object, ...]:
    """What one micro-batch's kernels depend on: two setups with the same key run the same forward,
    recompute and backward kernels (a split search builds each once)."""
    sp, lv = setup.split, _levels(setup.split, devices_per_node)
    return (setup.config, setup.seq, setup.micro_batch, setup.recompute, setup.precision, setup.plan, setup.sp,
            sp.tp, sp.cp, sp.ep, lv[Family.TP], lv[Family.CP], lv[Family.EP], devices_per_node, nvls)


def build_step(setup: TrainSetup, devices_per_node: int, compute: DType | None, once: bool = True,
               nvls: bool = False) -> TrainStep:
    """The kernels of the module docstring, in the order they run on the fullest stage (without
    `once`: only the micro-batch's, the forward, recompute and backward). `nvls`: the system's switch
    reduces (its all-reduces may run NVLink SHARP; roofline.parallel.algorithms)."""
    plan = setup.plan
    fwd, comms, groups, fplan, warnings = forward_ops(setup, devices_per_node, compute, nvls)
    act = get_dtype("bf16")
    flash = plan is not Plan.NONE
    by_name = {op.name: op for op in fwd}
    attention = {p: tuple(by_name[n] for n in names) for p, names in groups.items()
                 if flash and any(by_name.get(n) is not None and by_name[n].kind == "attention_qk" for n in names)}
    origin: dict[str, str] = {}

    def scope_of(k: Kernel) -> Scope:
        bases = {origin.get(op.name, op.name) for op in k.ops}
        return Scope.EDGE if bases <= EDGE_OPS else Scope.LAYER

    out = _kernels(fwd, fplan, Pass.FORWARD, comms, scope_of)
    if setup.recompute is Recompute.FULL:  # the whole layer forward again before its backward
        out += [replace(k, pass_=Pass.RECOMPUTE) for k in out if k.scope is Scope.LAYER]
    elif setup.recompute is Recompute.SELECTIVE and not flash:  # the attention core again (Korthikanti)
        core = [op for op in fwd if op.kind in ATTENTION_KINDS]
        out += _kernels(core, FusionPlan(Plan.NONE), Pass.RECOMPUTE, {}, scope_of)
    bwd: list[Op] = []
    bcomms: dict[str, Comm] = {}
    for base, op in backward_ops(fwd, {n: CollectiveCall(c.kind, c.group, c.level, c.message_bytes)
                                       for n, c in comms.items()}, attention, act,
                                AllReduceRule(setup.config.allreduce, nvls)):
        origin[op.name] = base
        bwd.append(op)
        if base in comms:
            c = comms[base]
            kind = Collective(op.kind)
            factor = 2.0 if c.family is Family.CP else 1.0  # K, V and their gradients around the ring
            bcomms[op.name] = replace(c, kind=kind, message_bytes=c.message_bytes * factor,
                                      algorithm=c.algorithm if kind is Collective.ALL_REDUCE else "")
            if factor != 1.0:
                bwd[-1] = replace(op, traffic={lv: b * factor for lv, b in op.traffic.items()})
    out += _kernels(bwd, FusionPlan(Plan.NONE), Pass.BACKWARD, bcomms, scope_of)
    if once:
        out += step_kernels(setup, devices_per_node, nvls)
    return TrainStep(setup, tuple(out), plan, not flash, tuple(warnings))


def step_kernels(setup: TrainSetup, devices_per_node: int, nvls: bool = False) -> list[TrainKernel]:
    """Pipeline sends, FSDP's gathers, the data-parallel reduction, the gradient norm and the optimizer."""
    from roofline.training.memory import device_params

    sp = setup.split
    levels = _levels(sp, devices_per_node)
    rule = AllReduceRule(setup.config.allreduce, nvls)
    psi = device_params(setup)
    nd = sp.data_ranks
    bf16, fp32 = get_dtype("bf16"), get_dtype("fp32")
    out: list[TrainKernel] = []

    def coll(name: str, kind: Collective, message: Tensor, result: Tensor, group: int, fam: Family, scope: Scope,
             count: int = 1) -> None:
        algorithm = ""
        if kind is Collective.ALL_REDUCE:
            op, call = all_reduce_op(name, message, result, group, levels[fam], rule, count)
            algorithm = call.algorithm
        else:
            op = collective_op(name, kind, message, result, group, levels[fam], count)
        k = Graph([op], name=name).kernels()[0]
        size = result.bytes if kind is Collective.ALL_GATHER else message.bytes
        out.append(TrainKernel(k, Pass.BACKWARD if fam in (Family.DP, Family.NORM) else Pass.FORWARD, scope,
                               Comm(fam, kind, group, levels[fam], size, algorithm)))

    if sp.pp > 1:  # one activation forward and one gradient back per micro-batch, each stage boundary
        rows = setup.micro_batch * setup.seq // sp.cp // (sp.tp if setup.sp else 1)
        x = Tensor("pp.activation", (rows, setup.config.hidden_size), bf16)
        coll("pp.send_recv", Collective.SEND_RECV, x, Tensor("pp.received", x.shape, bf16), 1, Family.PP,
             Scope.MICRO, 2 * setup.virtual_stages)
    whole = Tensor("params.bf16", (int(psi),), bf16)
    shard = Tensor("params.shard", (max(1, int(psi // nd)),), bf16)
    if nd > 1:
        if setup.zero is Zero.NONE:
            coll("dp.grads.all_reduce", Collective.ALL_REDUCE, whole, Tensor("grads.reduced", whole.shape, bf16), nd,
                 Family.DP, Scope.STEP)
        elif setup.zero in (Zero.OPTIMIZER, Zero.GRADIENTS):
            coll("dp.grads.reduce_scatter", Collective.REDUCE_SCATTER, whole, shard, nd, Family.DP, Scope.STEP)
            coll("dp.params.all_gather", Collective.ALL_GATHER, shard, whole, nd, Family.DP, Scope.STEP)
        else:  # ZeRO-3 / FSDP: gathered for the forward and again for the backward, every micro-batch
            coll("fsdp.params.all_gather", Collective.ALL_GATHER, shard, whole, nd, Family.FSDP, Scope.MICRO, 2)
            coll("fsdp.grads.reduce_scatter", Collective.REDUCE_SCATTER, whole, shard, nd, Family.FSDP, Scope.MICRO)
    local = psi / nd if setup.zero >= Zero.OPTIMIZER else psi  # the parameters this device updates
    grads = psi / nd if setup.zero >= Zero.GRADIENTS else psi
    g = Tensor("grads.local", (max(1, int(grads)),), bf16, Role.WEIGHT)
    norm = Op("grad_norm", "grad_norm", (g,), (Tensor("grad_norm.partial", (1,), fp32),),
              {Unit.VECTOR: GRAD_NORM_FLOP * g.elements}, 1,
              formula=f"Σ g²: {GRAD_NORM_FLOP:g} FLOPs a gradient element, {g.elements:,} here")
    out.append(TrainKernel(Graph([norm]).kernels()[0], Pass.OPTIMIZER, Scope.STEP))
    if sp.devices > 1:
        scalar = Tensor("grad_norm.partial", (1,), fp32)
        coll("grad_norm.all_reduce", Collective.ALL_REDUCE, scalar, Tensor("grad_norm.total", (1,), fp32),
             sp.devices, Family.NORM, Scope.STEP)
    read, write, flop, rsqrt = OPTIMIZER_STEP[setup.optimizer]
    n = max(1, int(local))
    reads = Tensor("optimizer.reads", (n * read,), get_dtype("int8"), Role.WEIGHT)
    writes = Tensor("optimizer.writes", (n * write,), get_dtype("int8"), Role.WEIGHT)
    opt = Op("optimizer", f"{setup.optimizer}_step", (reads,), (writes,), {Unit.VECTOR: flop * n}, 1,
             formula=(f"{setup.optimizer}: reads {read} and writes {write} bytes a parameter, {flop:g} FLOPs a "
                      f"parameter, over the {n:,} this device updates (gradient clipping's scale folded in)"),
             onchip=OnChip({Unit.EXP: rsqrt * n}) if rsqrt else None)
    out.append(TrainKernel(Graph([opt]).kernels()[0], Pass.OPTIMIZER, Scope.STEP))
    return out


__all__ = ["EDGE_OPS", "OPTIMIZER_STEP", "Comm", "Family", "Pass", "Scope", "TrainKernel", "TrainStep", "build_step",
           "micro_key", "step_kernels"]
