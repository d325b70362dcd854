"""A transformer step on a machine: every kernel placed, the totals, memory fit, decode limit and
crossover batch.

Per kernel the placement is the core's (`roofline.placement.place` through `analyze_graph`); the
step's time floor is the sum of its kernels' floors (kernels run one after another).

Decode limit. Decode with B sequences reads every weight once per step and
each sequence's whole KV cache, and reads and writes each sequence's recurrent state (Gated DeltaNet,
Mamba2: S bytes, `ModelConfig.state_bytes_per_sequence`). As B grows the weight bytes are shared by
more and more sequences and vanish per sequence, while FLOPs, KV and state bytes all grow with B:

    I → (2·P + Σ_layers 2·H·(d_qk + d_v)·L + R) / (L · KV bytes per token + 2·S)        as B → ∞

R is the recurrent layers' state update per token (7·dk·dv per value head for Gated DeltaNet,
5·P·N_s per head for Mamba2), 2·S the state read and written once a step.

P is the parameters a token multiplies (active, without the gathered embedding table), the second
term the attention arithmetic (the textbook 4·L·h per layer when d_qk = d_v = d and H·d = h). A
windowed layer reads min(L, W) tokens instead of L (`ModelConfig.attended_tokens`). Llama 3 70B at
8k context: (2·69.5e9 + 4·8192·8192·80) / (8192·327,680) = 59.8 FLOP/B; at 128k, 11.2.

The crossover batch comes from the vectorised step model (`roofline.models.stepmodel`); sweeps
over batch × context × dtype × machine are in `roofline.models.sweep`.

Its `.plot()` and `_repr_html_` are roofline.placement.Drawable's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import DEFAULT_MACHINE, Machine
from roofline.models.build import DEFAULT_PLAN, PLANS, ModelGraph, build_graph
from roofline.models.crossover import step_crossover
from roofline.models.dtypes import ModelDtypes, compute_dtype
from roofline.models.memory import DEFAULT_UTILIZATION, MemoryFit, memory_fit, workspace_bytes
from roofline.models.split import stage_layers
from roofline.models.step import Step, describe_step
from roofline.models.stepmodel import Crossover, StepModel
from roofline.models.transformer import AttentionKind, ModelConfig
from roofline.parallel import Collective, Deployment, Split, deploy
from roofline.placement import Drawable, GraphAnalysis, Placement, analyze_graph, analyze_plans
from roofline.units import finite_or_none
from roofline.vocab import Bound, Phase, Plan, Resource, Role

# --- decode limit ----------------------------------------------------------------------------------

@frozen
class DecodeLimit:
    """The limit of decode intensity as the batch grows, with its pieces for --explain."""

    config: ModelConfig
    context: int
    kv_bytes_per_element: float
    activation_bytes: float = 2.0  # the conv state's dtype (the activations')

    @property
    def matmul_flop_per_token(self) -> float:
        """2·P: a multiply and an add per parameter a token multiplies."""
        return 2.0 * self.config.matmul_params

    @property
    def attended_tokens(self) -> int:
        """Σ over layers of the tokens each reads: L per global layer, min(L, W) per windowed one,
        (L − 1) mod C + 1 per chunked one (ModelConfig.decode_read_tokens)."""
        return int(self.config.decode_read_tokens(self.context))

    @property
    def attention_flop_per_token(self) -> float:
        """Σ_layers 2·H·(d_qk + d_v)·L: 4·L·h·layers for Llama; DeepSeek-V3.2 adds its indexer's
        (2·d_I + 3)·H_I per cached token and layer (roofline.models.dsa), MiniMax-M3 its indexer's."""
        ix = self.config.indexer
        index = 0.0 if ix is None else (2 * ix.head_dim + 3) * ix.heads * self.context * self.config.indexer_layers
        bs = self.config.block_sparse  # MiniMax-M3: (2·d_I + 1)·H_I a cached token, H_I a block ranked (models/msa)
        if bs is not None:
            index += bs.index_heads * ((2 * bs.index_dim + 1) * self.context + bs.blocks(self.context)) * \
                self.config.attention_layers(AttentionKind.SPARSE)
        cp = self.config.compressed  # DeepSeek-V4: CSA's indexer over its ⌊L/4⌋ index keys
        if cp is not None:
            index += (2 * cp.index_dim + 3) * cp.index_heads * (self.context // cp.csa) * cp.layers(cp.csa)
            return self.config.attention_flop_per_pair() * self.attended_tokens + index
        return float(self.config.attention_flop_read(self.context)) + index  # per layer kind at its shape

    @property
    def kv_bytes_per_sequence(self) -> float:
        """L · KV bytes per token (windowed layers read min(L, W)); DeepSeek-V3.2's indexer reads its
        whole key cache, L · index bytes per token."""
        cp, bpe = self.config.compressed, self.kv_bytes_per_element
        if cp is not None:  # DeepSeek-V4: the window and entries attended, and the CSA layers' ⌊L/4⌋ index keys of d_I
            return (self.config.kv_elements_per_token_per_layer() * bpe * self.attended_tokens
                    + cp.layers(cp.csa) * (self.context // cp.csa) * cp.index_dim * bpe)
        return self.config.kv_elements_read(self.context) * bpe + self.config.index_bytes_per_token * self.context

    @property
    def recurrent_flop_per_token(self) -> float:
        """R: Σ over the recurrent layers of their state update per token (LinearAttention and
        Mamba2 .decode_flop_per_token); 0 without them."""
        c = self.config
        la, mb = c.linear_attention, c.mamba
        return float((0 if la is None else c.attention_layers(AttentionKind.LINEAR) * la.decode_flop_per_token)
                     + (0 if mb is None else c.attention_layers(AttentionKind.MAMBA) * mb.decode_flop_per_token))

    @property
    def state_bytes_per_sequence(self) -> float:
        """2·S: each sequence's recurrent and conv state, read and written once a step (the conv state in
        the activations' dtype)."""
        return 2.0 * self.config.state_bytes_per_sequence(self.activation_bytes)

    @property
    def flop_per_byte(self) -> float:
        return ((self.matmul_flop_per_token + self.attention_flop_per_token + self.recurrent_flop_per_token)
                / (self.kv_bytes_per_sequence + self.state_bytes_per_sequence))


def decode_limit(cfg: ModelConfig, context: int, kv_dtype: str | DType = "bf16",
                 activations: str | DType = "bf16") -> DecodeLimit:
    return DecodeLimit(cfg, context, get_dtype(kv_dtype).bytes_per_element, get_dtype(activations).bytes_per_element)


# --- the analysis ----------------------------------------------------------------------------------

@frozen
class ModelAnalysis(Drawable):
    """One step of one model on one machine, under every fusion plan; `plan` picks the headline one."""

    model: ModelGraph
    step: Step
    deployment: Deployment
    dtype: DType  # compute dtype: whose peak the matmuls run at
    plans: Mapping[Plan, GraphAnalysis]
    warnings: tuple[str, ...] = field(default=())
    utilization: float = DEFAULT_UTILIZATION
    overlap: bool = False  # communication hidden behind compute (at best)

    # --- where ---------------------------------------------------------------------------------
    @property
    def machine(self) -> Machine:
        return self.deployment.machine

    @property
    def plan(self) -> Plan:
        """The headline fusion plan."""
        return self.step.plan

    @property
    def system(self) -> str:
        """The system the split runs on ("" for one device)."""
        return self.deployment.system_id

    @property
    def devices_per_node(self) -> int:
        return self.deployment.devices_per_node

    @property
    def max_devices(self) -> int:
        return self.deployment.max_devices

    # --- shape ---------------------------------------------------------------------------------
    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def phase(self) -> Phase:
        return self.model.shape.phase

    @property
    def split(self) -> Split:
        return self.model.split

    @property
    def batch(self) -> int:
        """Sequences in the step, over every replica (each of dp replicas runs batch / dp)."""
        return self.model.shape.batch * self.split.dp

    @property
    def seq(self) -> int:
        """The prompt length (prefill) or the context length (decode)."""
        return self.model.shape.seq

    @property
    def analysis(self) -> GraphAnalysis:
        return self.plans[self.plan]

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self.analysis.placements

    # --- totals --------------------------------------------------------------------------------
    @property
    def flop(self) -> float:
        return self.analysis.flop

    @property
    def bytes(self) -> float:
        return self.analysis.bytes

    @property
    def time_s(self) -> float:
        """The step time: one device's kernels one after another (a pipeline's stages in turn). With
        `overlap`, communication runs under compute: max(Σ compute and memory, Σ communication)."""
        return self.step_time_s(self.analysis)

    def step_time_s(self, a: GraphAnalysis) -> float:
        """Kernels in turn; --overlap: max(compute, every collective); --two-batch-overlap (and no
        --overlap): max(compute, the MoE all-to-all) + the other collectives (two_batch_overlap)."""
        comm = sum(p.total_time_s for p in a.placements if p.kind in COLLECTIVES)
        if self.overlap:
            return max(a.time_s - comm, comm)
        if self.two_batch_overlap:
            a2a = sum(p.total_time_s for p in a.placements if p.kind == ALL_TO_ALL)
            return max(a.time_s - comm, a2a) + comm - a2a
        return a.time_s

    @property
    def two_batch_overlap(self) -> bool:
        """--two-batch-overlap on an expert-parallel MoE step (it hides the all-to-all; nothing else)."""
        return self.config.two_batch_overlap and self.config.is_moe and self.split.ep > 1

    def overlap_summary(self) -> dict[str, Any] | None:
        """What --overlap or --two-batch-overlap hides and the step floor with and without it (None:
        neither asked for; never a default). --overlap: every collective under compute; two-batch
        overlap: the batch as two micro-batches, one's MoE dispatch and combine all-to-all under the
        other's compute (DeepSeek-V3's deployment; SGLang --enable-two-batch-overlap)."""
        if not (self.overlap or self.two_batch_overlap):
            return None
        a = self.analysis
        comm = sum(p.total_time_s for p in a.placements if p.kind in COLLECTIVES)
        a2a = sum(p.total_time_s for p in a.placements if p.kind == ALL_TO_ALL)
        if self.overlap:
            option, hides, hidden = "--overlap", "every collective under the step's compute (at best)", comm
        else:
            option, hides, hidden = ("--two-batch-overlap", "the MoE all-to-all (dispatch and combine) of one "
                                     "micro-batch under the other micro-batch's compute", a2a)
        with_ = self.step_time_s(a)
        return {"option": option, "hides": hides, "hidden_collectives_s": hidden, "compute_s": a.time_s - comm,
                "hidden_s": a.time_s - with_, "time_with_s": with_, "time_without_s": a.time_s,
                **({"all_to_all_s": a2a} if not self.overlap else {})}

    @property
    def communication_time_s(self) -> float:
        return sum(p.total_time_s for p in self.placements if p.kind in COLLECTIVES)

    @property
    def flop_per_byte(self) -> float:
        return self.analysis.flop_per_byte

    @property
    def ridge_flop_per_byte(self) -> float:
        return self.machine.ridge_flop_per_byte(self.dtype)

    @property
    def bound(self) -> Resource:
        """The resource that binds the step: the one whose kernels take the most of its time floor
        (`roofline.vocab.binding`, the rule every placement uses)."""
        return self.analysis.bound

    @property
    def bound_class(self) -> Bound:
        return self.analysis.bound_class

    @property
    def tokens(self) -> int:
        """Tokens the step produces or consumes, over every replica: B in decode, B·P in prefill."""
        return self.model.shape.tokens * self.split.dp

    @property
    def tokens_per_s(self) -> float:
        """Tokens / step time. With pp pipeline stages the batch runs as pp micro-batches of batch/pp
        sequences, one in each stage (vLLM's virtual engines): every stage time a micro-batch's tokens
        come out, so tokens/s = (tokens / pp) / the stage time of a micro-batch, a stage being ⌈L/pp⌉
        of the L layers. A batch smaller than pp cannot fill the pipeline: tokens / step time."""
        if not self.time_s:
            return math.inf
        micro = self.micro_batch_time_s
        if micro is None:
            return self.tokens / self.time_s
        stage = micro * stage_layers(self.config, self.split) / self.config.num_layers
        return self.tokens / self.split.pp / stage

    @cached_property
    def micro_batch_time_s(self) -> float | None:
        """The step time of one micro-batch of batch/pp sequences (None without pipeline stages, when
        the batch per replica is smaller than pp, or when such micro-batches cannot run the split:
        then the pipeline is not filled and tokens/s is tokens / step time)."""
        pp, per_replica = self.split.pp, self.model.shape.batch
        if pp == 1 or per_replica < pp:
            return None
        try:
            mg = self.step.with_batch(per_replica // pp * self.split.dp).graph(self.deployment)
        except RooflineError:  # micro-batches the split cannot run (tokens not a multiple of tp under EP)
            return None
        return self.step_time_s(analyze_graph(mg.graph, self.machine, self.dtype, mg.plans[self.plan]))

    @property
    def memory_bound_share(self) -> float:
        """Share of the step's time floor spent in memory-bound kernels."""
        return self.analysis.memory_bound_time_s / self.time_s if self.time_s else 0.0

    def bytes_by_role(self, plan: Plan | None = None) -> dict[Role, float]:
        """Bytes of the step by tensor role (weight, kv_cache, activation), kernels × their counts."""
        out = dict.fromkeys(tuple(Role), 0.0)
        for p in self.plans[plan or self.plan].placements:
            if p.kernel is not None:
                for role, b in p.kernel.bytes_by_role().items():
                    out[role] = out.get(role, 0.0) + b * p.count
        return out

    @property
    def params(self) -> dict[str, int]:
        return {"total": self.config.total_params, "active": self.config.active_params}

    @property
    def kv_cache_bytes_per_token(self) -> float:
        """Uncapped: every KV layer counts every token (ModelConfig.kv_cache_bytes_per_token)."""
        return self.config.kv_cache_bytes_per_token(self.model.dtypes.kv_cache.bytes_per_element)

    @property
    def kv_cache(self) -> dict[str, float | int | None]:
        """The three KV figures, each named: per token uncapped; per token at this length, windowed
        layers capped at their window (what one sequence's cache holds ÷ its length); the fixed state
        one sequence keeps (linear attention), whatever its length."""
        cfg, bpe = self.config, self.model.dtypes.kv_cache.bytes_per_element
        at = (bpe * cfg.kv_elements_cached(self.seq) / self.seq + cfg.index_bytes_per_token
              if cfg.compressed is None else cfg.compressed.cache_bytes(self.seq, bpe) / self.seq)
        return {"bytes_per_token_uncapped": self.kv_cache_bytes_per_token,
                "bytes_per_token_at_length": float(at),
                "window_tokens": cfg.sliding_window if cfg.attention_layers(AttentionKind.LOCAL) else None,
                "state_bytes_per_sequence": cfg.state_bytes_per_sequence(bpe)}

    @cached_property
    def memory(self) -> MemoryFit:
        return memory_fit(self.config, self.batch, self.seq, self.model.dtypes, self.machine.memory_capacity_bytes,
                          self.machine.id, self.split, self._workspace, self.utilization, self.devices_per_node,
                          self.max_devices)

    @property
    def workspace_bytes(self) -> float:
        """The largest set of activations one kernel of the headline plan reads and writes (per device)."""
        return workspace_bytes(p.kernel for p in self.placements if p.kernel is not None)

    def _workspace(self, split: Split) -> float:
        """The workspace of the step under another split (memory_fit's candidates), on this system."""
        mg = self.model if split == self.split else build_graph(
            self.config, self.phase, self.batch, self.seq, self.model.dtypes, self.model.experts_hit_override,
            split, self.devices_per_node, self.deployment.nvls)
        return workspace_bytes(mg.graph.kernels(mg.plans[self.plan]))

    def communication(self) -> dict[str, Any]:
        """Every collective of the step: what it moves, over which roof, in how long."""
        rows: list[dict[str, Any]] = []
        time_s = moved = 0.0
        for p in self.placements:
            call = self.model.collectives.get(p.name)
            if call is None:
                continue
            on_link = p.cost.bytes_by_level.get(call.level, 0.0)
            rows.append({"name": p.name, "kind": call.kind, "count": p.count, "bytes": call.message_bytes,
                         "bytes_on_link": on_link, "group_size": call.group, "link": call.level,
                         "time_s": p.time_s, "total_time_s": p.total_time_s,
                         **({"algorithm": call.algorithm, "why": call.why} if call.algorithm else {})})
            time_s += p.total_time_s
            moved += on_link * p.count
        return {"time_s": time_s, "bytes_per_device": moved, "overlap": self.overlap, "collectives": rows}

    def per_device(self) -> dict[str, Any]:
        """One device's share: FLOPs and bytes of its stage (the step's over pp stages), its memory."""
        pp = self.split.pp
        return {"flop": self.flop / pp, "bytes": self.bytes / pp, "weights_bytes": self.memory.weights_bytes,
                "kv_cache_bytes": self.memory.kv_cache_bytes, "workspace_bytes": self.memory.workspace_bytes,
                "time_s": self.time_s / pp}

    @property
    def decode_limit(self) -> DecodeLimit:
        return decode_limit(self.config, self.seq, self.model.dtypes.kv_cache, self.model.dtypes.activations)

    @cached_property
    def step_model(self) -> StepModel:
        """The step's kernels as linear functions of (batch, length): one device's under a split."""
        if self.split.trivial:
            return StepModel.fit(self.config, self.phase, self.model.dtypes, self.plan,
                                 experts_hit_override=self.model.experts_hit_override)
        return StepModel.fit(self.config, self.phase, self.model.dtypes, self.plan,
                             self.model.experts_hit_override, self.split, self.devices_per_node,
                             self.deployment.nvls)

    @cached_property
    def crossover(self) -> Crossover:
        """The smallest batch whose step reaches the ridge at this length, or never, and why."""
        return step_crossover(self.config, self.phase, self.model.dtypes, self.plan, self.seq, self.machine, self.dtype,
                              self.model.experts_hit_override, self.split,
                              None if self.split.trivial else self.devices_per_node)

    @property
    def ratios(self) -> dict[str, dict[str, float]]:
        """Each plan against `none`: same FLOPs, fewer bytes, and the time it buys ({} when `none` was not
        analysed: serve's prefill places its headline plan alone)."""
        if Plan.NONE not in self.plans:
            return {}
        base = self.plans[Plan.NONE]
        return {name: {"bytes_ratio": a.bytes / base.bytes, "time_ratio": a.time_s / base.time_s,
                       "time_saved_s": base.time_s - a.time_s}
                for name, a in self.plans.items()}

    # --- output --------------------------------------------------------------------------------
    def kernel_rows(self, plan: Plan | None = None) -> list[dict[str, Any]]:
        a = self.plans[plan or self.plan]
        total = a.time_s
        rows = []
        for p in a.placements:
            d = p.to_dict()
            d["share"] = p.total_time_s / total if total else 0.0
            d["ops"] = [op.name for op in p.kernel.ops] if p.kernel is not None else []
            rows.append(d)
        return rows

    def totals(self, plan: Plan | None = None) -> dict[str, Any]:
        a = self.plans[plan or self.plan]
        t = self.step_time_s(a)
        return {"flop": a.flop, "bytes": a.bytes, "time_s": t, "flop_per_byte": finite_or_none(a.flop_per_byte),
                "tokens_per_s": self.tokens / t if t else None,
                "memory_bound_time_s": a.memory_bound_time_s,
                "memory_bound_share": a.memory_bound_time_s / a.time_s if a.time_s else 0.0,
                "bytes_by_role": self.bytes_by_role(plan), "kernels": len(a.placements),
                "bound": a.bound, "bound_class": a.bound_class}

    def to_dict(self, with_crossover: bool = True) -> dict[str, Any]:
        cfg = self.config
        d: dict[str, Any] = {
            "model": cfg.name,
            "architecture": cfg.architecture,
            "source": cfg.source,
            "machine": self.machine.id,
            "phase": self.phase,
            "batch": self.batch,
            ("prompt" if self.phase == Phase.PREFILL else "context"): self.seq,
            "plan": self.plan,
            "dtypes": {**self.model.dtypes.to_dict(), "compute": self.dtype.name},
            "params": self.params,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache": self.kv_cache,
            "experts_hit": self.model.experts_hit,
            "ridge_flop_per_byte": self.ridge_flop_per_byte,
            "kernels": self.kernel_rows(),
            "totals": self.totals(),
            "plans": {name: self.totals(name) for name in self.plans},
            "plan_ratios": self.ratios,
            "memory": self.memory.to_dict(),
            "warnings": list(self.warnings) + ([self.memory.warning] if self.memory.warning else []),
        }
        if not self.split.trivial or self.system:
            m = self.memory
            d["parallel"] = {**self.split.to_dict(), "system": self.system or self.machine.id,
                             "devices_per_node": self.devices_per_node}
            d["per_device"] = self.per_device()
            d["communication"] = self.communication()
            if (hidden := self.overlap_summary()) is not None:
                d["two_batch_overlap" if hidden["option"] == "--two-batch-overlap" else "overlap"] = hidden
            d["memory_fit"] = {"fits": m.fits, "bytes_per_device": m.total_bytes,
                               "usable_bytes_per_device": m.usable_bytes, "min_devices": m.devices,
                               "max_batch": m.max_batch,
                               "min_split": None if m.min_split is None else m.min_split.to_dict()}
        if self.phase == Phase.DECODE:
            d["decode_limit_flop_per_byte"] = self.decode_limit.flop_per_byte
        if with_crossover:
            d["crossover"] = self.crossover.to_dict()
        return d

    @property
    def title(self) -> str:
        what = "prompt" if self.phase == Phase.PREFILL else "context"
        on = self.machine.name if self.split.trivial else f"{self.split} of {self.system or self.machine.name}"
        return f"{self.config.name} {self.phase}, batch {self.batch}, {what} {self.seq}, on {on}"


def analyze(step: Step, deployment: Deployment, utilization: float = DEFAULT_UTILIZATION, overlap: bool = False,
            plans: tuple[Plan, ...] = PLANS) -> ModelAnalysis:
    """Build the step's graph on one device of the deployment and place every kernel under each of
    `plans` (default: every fusion plan; the headline, step.plan, among them). With a split the graph
    is one device's, its collectives placed on the system's link and network."""
    mg = step.graph(deployment)
    cdt = compute_dtype(step.dtypes, deployment.machine)
    placed = analyze_plans(mg.graph, deployment.machine, cdt, [mg.plans[name] for name in plans])
    return ModelAnalysis(mg, step, deployment, cdt, MappingProxyType(placed), mg.warnings, utilization, overlap)


def analyze_model(model: str | ModelConfig, machine: str | Machine = DEFAULT_MACHINE, phase: Phase | str = Phase.DECODE,
                  batch: int = 1, seq: int | None = None, plan: Plan | str = DEFAULT_PLAN,
                  dtypes: ModelDtypes | None = None, experts_hit: int | None = None,
                  overrides: Mapping[str, str] | None = None, split: Split | None = None,
                  utilization: float = DEFAULT_UTILIZATION, overlap: bool = False) -> ModelAnalysis:
    """`analyze(describe_step(...), deploy(machine, split), ...)`: the step and the deployment from
    names, as the command line gives them.

    `seq` is the prompt length in prefill and the context length in decode; None: DEFAULT_LENGTH
    (2048) capped at the model's max_position_embeddings. `machine` is a device or a system
    (roofline.hardware.get_system), resolved with the split by roofline.parallel.deploy."""
    step = describe_step(model, phase, batch, seq, dtypes, plan, experts_hit, overrides)
    return analyze(step, deploy(machine, split), utilization, overlap)


COLLECTIVES = frozenset(str(c) for c in Collective)
ALL_TO_ALL = str(Collective.ALL_TO_ALL)


__all__ = ["COLLECTIVES", "Crossover", "DecodeLimit", "MemoryFit", "ModelAnalysis", "analyze", "analyze_model",
           "compute_dtype", "decode_limit", "memory_fit"]
