"""A transformer step on a machine: every kernel placed, the totals, memory fit, decode limit and
crossover batch.

Per kernel the placement is the core's (`roofline.placement.place` through `analyze_graph`); the
step's time floor is the sum of its kernels' floors (kernels run one after another).

Decode limit (the seed's formula). Decode with B sequences reads every weight once per step and
each sequence's whole KV cache. As B grows the weight bytes are shared by more and more sequences
and vanish per sequence, while FLOPs and KV bytes both grow with B:

    I → (2·P + Σ_layers 2·H·(d_qk + d_v)·L) / (L · KV bytes per token)        as B → ∞

P is the parameters a token multiplies (active, without the gathered embedding table), the second
term the attention arithmetic (the seed's 4·L·h per layer when d_qk = d_v = d and H·d = h). A
windowed layer reads min(L, W) tokens instead of L (`ModelConfig.attended_tokens`). Llama 3 70B at
8k context: (2·69.5e9 + 4·8192·8192·80) / (8192·327,680) = 59.8 FLOP/B; at 128k, 11.2.

The crossover batch comes from the vectorised step model (`roofline.models.stepmodel`); sweeps
over batch × context × dtype × machine are in `roofline.models.sweep`.

Layering: imports roofline.placement, roofline.hardware, roofline.dtypes, roofline.units and the
models room's transformer, config, build, dtypes and stepmodel. Charts and notebook methods are
attached by roofline.report.notebook.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.hardware import DEFAULT_MACHINE, Machine, get_machine
from roofline.models.build import DEFAULT_PLAN, PLANS, ModelGraph, as_plan, build_graph
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, compute_dtype, model_dtypes
from roofline.models.stepmodel import Crossover, StepModel, find_crossover
from roofline.models.transformer import ModelConfig
from roofline.placement import GraphAnalysis, Placement, analyze_graph
from roofline.units import finite_or_none
from roofline.vocab import Bound, Phase, Plan, Resource, Role

# --- memory fit -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryFit:
    """Weights plus KV cache against one device's memory, and the fewest devices that hold them
    (capacity only: no activation workspace, no parallelism overhead)."""

    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float | None
    machine: str

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes

    @property
    def devices(self) -> int | None:
        """ceil(total / capacity): the smallest number of devices whose memory holds it all."""
        if not self.capacity_bytes:
            return None
        return max(1, math.ceil(self.total_bytes / self.capacity_bytes))

    @property
    def fits(self) -> bool | None:
        return None if self.devices is None else self.devices == 1

    @property
    def warning(self) -> str:
        from roofline.units import format_bytes

        if self.capacity_bytes is None:
            return f"{self.machine} lists no memory capacity: cannot check that the model fits"
        if self.fits:
            return ""
        return (f"does not fit on one {self.machine}: weights {format_bytes(self.weights_bytes, binary=True)} "
                f"+ KV cache {format_bytes(self.kv_cache_bytes, binary=True)} = "
                f"{format_bytes(self.total_bytes, binary=True)} > "
                f"{format_bytes(self.capacity_bytes, binary=True)}; needs at least {self.devices} devices "
                f"(the time floors assume one device's bandwidth)")

    def to_dict(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "total_bytes": self.total_bytes, "capacity_bytes": self.capacity_bytes,
                "devices": self.devices, "fits": self.fits, "warning": self.warning or None}


def memory_fit(cfg: ModelConfig, batch: int, context: int, dtypes: ModelDtypes, machine: Machine) -> MemoryFit:
    weights = cfg.total_params * dtypes.weights.bytes_per_element
    kv = cfg.kv_cache_bytes(batch, context, dtypes.kv_cache.bytes_per_element)
    return MemoryFit(weights, kv, machine.memory_capacity_bytes, machine.id)


# --- decode limit ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeLimit:
    """The seed's limit of decode intensity as the batch grows, with its pieces for --explain."""

    config: ModelConfig
    context: int
    kv_bytes_per_element: float

    @property
    def matmul_flop_per_token(self) -> float:
        """2·P: a multiply and an add per parameter a token multiplies."""
        return 2.0 * self.config.matmul_params

    @property
    def attended_tokens(self) -> int:
        """Σ over layers of the tokens each reads: L per global layer, min(L, W) per windowed one."""
        return self.config.attended_tokens(self.context)

    @property
    def attention_flop_per_token(self) -> float:
        """Σ_layers 2·H·(d_qk + d_v)·L: the seed's 4·L·h·layers for Llama."""
        return self.config.attention_flop_per_pair() * self.attended_tokens

    @property
    def kv_bytes_per_sequence(self) -> float:
        """L · KV bytes per token (windowed layers read min(L, W))."""
        return self.config.kv_elements_per_token_per_layer() * self.kv_bytes_per_element * self.attended_tokens

    @property
    def flop_per_byte(self) -> float:
        return (self.matmul_flop_per_token + self.attention_flop_per_token) / self.kv_bytes_per_sequence


def decode_limit(cfg: ModelConfig, context: int, kv_dtype: str | DType = "bf16") -> DecodeLimit:
    return DecodeLimit(cfg, context, get_dtype(kv_dtype).bytes_per_element)


# --- the analysis ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelAnalysis:
    """One step of one model on one machine, under every fusion plan; `plan` picks the headline one."""

    model: ModelGraph
    machine: Machine
    dtype: DType  # compute dtype: whose peak the matmuls run at
    plan: Plan
    plans: Mapping[Plan, GraphAnalysis]
    warnings: tuple[str, ...] = field(default=())

    # --- shape ---------------------------------------------------------------------------------
    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def phase(self) -> Phase:
        return self.model.shape.phase

    @property
    def batch(self) -> int:
        return self.model.shape.batch

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
        return self.analysis.time_s

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
        """Tokens the step produces or consumes: B in decode, B·P in prefill."""
        return self.model.shape.tokens

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.time_s if self.time_s else math.inf

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
        return self.config.kv_cache_bytes_per_token(self.model.dtypes.kv_cache.bytes_per_element)

    @cached_property
    def memory(self) -> MemoryFit:
        return memory_fit(self.config, self.batch, self.seq, self.model.dtypes, self.machine)

    @property
    def decode_limit(self) -> DecodeLimit:
        return decode_limit(self.config, self.seq, self.model.dtypes.kv_cache)

    @cached_property
    def step_model(self) -> StepModel:
        return StepModel.fit(self.config, self.phase, self.model.dtypes, self.plan,
                             experts_hit_override=self.model.experts_hit_override)

    @cached_property
    def crossover(self) -> Crossover:
        """The smallest batch whose step reaches the ridge at this length, or never, and why."""
        return find_crossover(self.step_model, self.seq, self.machine, self.dtype)

    @property
    def ratios(self) -> dict[str, dict[str, float]]:
        """Each plan against `none`: same FLOPs, fewer bytes, and the time it buys."""
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
        return {"flop": a.flop, "bytes": a.bytes, "time_s": a.time_s, "flop_per_byte": finite_or_none(a.flop_per_byte),
                "tokens_per_s": self.tokens / a.time_s if a.time_s else None,
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
            "experts_hit": self.model.experts_hit,
            "ridge_flop_per_byte": self.ridge_flop_per_byte,
            "kernels": self.kernel_rows(),
            "totals": self.totals(),
            "plans": {name: self.totals(name) for name in self.plans},
            "plan_ratios": self.ratios,
            "memory": self.memory.to_dict(),
            "warnings": list(self.warnings) + ([self.memory.warning] if self.memory.warning else []),
        }
        if self.phase == Phase.DECODE:
            d["decode_limit_flop_per_byte"] = self.decode_limit.flop_per_byte
        if with_crossover:
            d["crossover"] = self.crossover.to_dict()
        return d

    @property
    def title(self) -> str:
        what = "prompt" if self.phase == Phase.PREFILL else "context"
        return f"{self.config.name} {self.phase}, batch {self.batch}, {what} {self.seq}, on {self.machine.name}"


def analyze_model(model: str | ModelConfig, machine: str | Machine = DEFAULT_MACHINE, phase: Phase | str = Phase.DECODE,
                  batch: int = 1, seq: int | None = None, plan: Plan | str = DEFAULT_PLAN,
                  dtypes: ModelDtypes | None = None, experts_hit: int | None = None,
                  overrides: Mapping[str, str] | None = None) -> ModelAnalysis:
    """Build the step's graph and place every kernel under every fusion plan.

    `seq` is the prompt length in prefill and the context length in decode; None: DEFAULT_LENGTH
    (2048) capped at the model's max_position_embeddings, as the command line does."""
    plan = as_plan(plan)
    cfg = load_config(model, overrides)
    m = get_machine(machine)
    dt = dtypes or model_dtypes()
    mg = build_graph(cfg, phase, batch, cfg.length(seq), dt, experts_hit)
    cdt = compute_dtype(dt, m)
    plans = {name: analyze_graph(mg.graph, m, cdt, mg.plans[name]) for name in PLANS}
    return ModelAnalysis(mg, m, cdt, plan, MappingProxyType(plans), mg.warnings)


__all__ = ["Crossover", "DecodeLimit", "MemoryFit", "ModelAnalysis", "analyze_model", "compute_dtype", "decode_limit",
           "memory_fit"]
