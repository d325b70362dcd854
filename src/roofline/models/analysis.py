"""A transformer step on a machine: every kernel placed, the totals, memory fit, decode limit,
crossover batch, and sweeps over batch × context × dtype × machine.

Per kernel the placement is the core's (`roofline.placement.place` through `analyze_graph`); the
step's time floor is the sum of its kernels' floors (kernels run one after another).

Decode limit (the seed's formula). Decode with B sequences reads every weight once per step and
each sequence's whole KV cache. As B grows the weight bytes are shared by more and more sequences
and vanish per sequence, while FLOPs and KV bytes both grow with B:

    I → (2·P + Σ_layers 2·H·(d_qk + d_v)·L) / (L · KV bytes per token)        as B → ∞

P is the parameters a token multiplies (active, without the gathered embedding table), the second
term the attention arithmetic (the seed's 4·L·h per layer when d_qk = d_v = d and H·d = h). A
windowed layer reads min(L, W) tokens instead of L. Llama 3 70B at 8k context: (2·69.5e9 +
4·8192·8192·80) / (8192·327,680) = 59.8 FLOP/B; at 128k, 11.2.

Sweeps. Every FLOP and byte count of a step's kernels is a linear combination of a few features of
(batch B, length S): 1, B, B·S, B·S² (prefill), B·min(S, W) (windowed decode), B·pairs_W(S)
(windowed prefill) and the number of experts hit (MoE). `StepModel` builds the real graph at a
handful of sample points, solves for those coefficients exactly, checks the fit reproduces every
sample, and then evaluates any grid of (B, S) with numpy: the same kernels, the same max(compute,
memory) per kernel, without rebuilding the graph per point.

Layering: imports roofline.placement, roofline.graph, roofline.hardware, roofline.dtypes,
roofline.errors, roofline.models; numpy is imported inside the sweep functions. Charts and notebook
methods are attached by roofline.report.notebook.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.graph import Kernel
from roofline.hardware import Machine, get_machine
from roofline.models.build import (
    DEFAULT_PLAN,
    PLANS,
    ModelDtypes,
    ModelGraph,
    build_graph,
    experts_hit,
    model_dtypes,
    windowed_pairs,
)
from roofline.models.config import GLOBAL, LOCAL, ModelConfig, load_config
from roofline.placement import GraphAnalysis, Placement, analyze_graph, crossover
from roofline.units import finite_or_none
from roofline.vocab import Bound, Level, Phase, Plan, Resource, Role, Unit, bound_class

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


def compute_dtype(dtypes: ModelDtypes, machine: Machine) -> DType:
    """The dtype whose matrix peak the step runs at: the one asked for, else the activation dtype
    where the machine has a peak for it, else the machine's default (bf16 on GPUs)."""
    if dtypes.compute is not None:
        if not machine.has_peak(dtypes.compute):
            raise RooflineError(f"{machine.id} lists no matrix peak for {dtypes.compute.peak_key}; "
                                f"it has: {', '.join(machine.dtypes())}")
        return dtypes.compute
    if machine.has_peak(dtypes.activations):
        return dtypes.activations
    return get_dtype(machine.default_dtype())


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
        return sum(self.config.cached_tokens(kind, self.context) for kind in self.config.layer_kinds)

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


# --- crossover -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Crossover:
    """The smallest batch at which the step's intensity reaches the ridge, or None ("never")."""

    batch: int | None
    ridge_flop_per_byte: float
    limit_flop_per_byte: float  # the step's intensity as the batch grows without bound (graph totals)
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "never": self.batch is None, "ridge_flop_per_byte": self.ridge_flop_per_byte,
                "limit_flop_per_byte": finite_or_none(self.limit_flop_per_byte), "reason": self.reason}


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
    def phase(self) -> str:
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


def analyze_model(model: str | ModelConfig, machine: str | Machine = "h100", phase: str = Phase.DECODE, batch: int = 1,
                  seq: int = 2048, plan: Plan | str = DEFAULT_PLAN, dtypes: ModelDtypes | None = None,
                  experts_hit: int | None = None, overrides: Mapping[str, str] | None = None) -> ModelAnalysis:
    """Build the step's graph and place every kernel under every fusion plan.

    `seq` is the prompt length in prefill and the context length in decode."""
    if plan not in PLANS:
        raise RooflineError(f"unknown fusion plan {plan!r}; plans: {', '.join(PLANS)}")
    plan = Plan(plan)
    cfg = load_config(model, overrides)
    m = get_machine(machine)
    dt = dtypes or model_dtypes()
    mg = build_graph(cfg, phase, batch, seq, dt, experts_hit)
    cdt = compute_dtype(dt, m)
    plans = {name: analyze_graph(mg.graph, m, cdt, mg.plans[name]) for name in PLANS}
    return ModelAnalysis(mg, m, cdt, plan, MappingProxyType(plans), mg.warnings)


# --- the vectorised step model -----------------------------------------------------------------------

def _features(cfg: ModelConfig, phase: str, batch: np.ndarray, seq: np.ndarray,
              hit_override: int | None) -> np.ndarray:
    """The columns every kernel's FLOPs and bytes are linear in (see the module docstring)."""
    import numpy as np

    b = batch.astype(np.float64)
    s = seq.astype(np.float64)
    cols = [np.ones_like(b), b, b * s]
    window = cfg.sliding_window if cfg.attention_layers(LOCAL) else None
    if phase == Phase.PREFILL:
        cols.append(b * s * s)
        if window:
            w = float(window)
            wp = np.where(s <= w, s * (s + 1) / 2, w * (w + 1) / 2 + (s - w) * w)
            cols.append(b * wp)
    elif window:
        cols.append(b * np.minimum(s, float(window)))
    if cfg.is_moe:
        tokens = b * (s if phase == Phase.PREFILL else 1.0)
        if hit_override is not None:
            hit = np.full_like(b, float(hit_override))
        else:
            e, k = float(cfg.num_experts), float(cfg.experts_per_token)
            expected = np.round(e * (1.0 - (1.0 - k / e) ** tokens))
            hit = np.maximum(k, np.minimum(np.minimum(e, tokens * k), expected))
        cols.append(hit)
    return np.stack(cols, axis=1)


def _sample_points(cfg: ModelConfig, phase: str) -> list[tuple[int, int]]:
    """(batch, length) points that separate every feature: small and large lengths, both sides of
    the window, and small token counts where the experts hit still grow with the batch."""
    lengths = {1, 2, 3, 5, 9, 33}
    if cfg.sliding_window and cfg.attention_layers(LOCAL):
        w = cfg.sliding_window
        lengths |= {max(1, w // 2), w + 1, w + 7, 2 * w + 3}
    return [(b, s) for b in (1, 2, 3, 5, 8) for s in sorted(lengths)]


@dataclass(frozen=True)
class StepModel:
    """Per-kernel coefficients: flop_matrix, flop_vector and bytes = features · coefficients."""

    config: ModelConfig
    phase: str
    dtypes: ModelDtypes
    plan: Plan
    names: tuple[str, ...]
    counts: tuple[int, ...]
    coef_matrix: Any  # numpy arrays [features, kernels]
    coef_vector: Any
    coef_bytes: Any
    experts_hit_override: int | None = None

    @classmethod
    def fit(cls, cfg: ModelConfig, phase: str, dtypes: ModelDtypes, plan: Plan = DEFAULT_PLAN,
            experts_hit_override: int | None = None) -> StepModel:
        import numpy as np

        points = _sample_points(cfg, phase)
        names: tuple[str, ...] = ()
        counts: tuple[int, ...] = ()
        rows_m, rows_v, rows_b = [], [], []
        for b, s in points:
            mg = build_graph(cfg, phase, b, s, dtypes, experts_hit_override)
            kernels: list[Kernel] = mg.graph.kernels(mg.plan(plan))
            if not names:
                names = tuple(k.name for k in kernels)
                counts = tuple(k.count for k in kernels)
            elif tuple(k.name for k in kernels) != names:
                raise RooflineError(f"{cfg.name}: the kernels of the step change with its shape; cannot sweep")
            rows_m.append([k.cost.flop_by_unit.get(Unit.MATRIX, 0.0) for k in kernels])
            rows_v.append([k.cost.flop_by_unit.get(Unit.VECTOR, 0.0) for k in kernels])
            rows_b.append([k.cost.bytes_by_level.get(Level.DRAM, 0.0) for k in kernels])
        x = _features(cfg, phase, np.array([p[0] for p in points]), np.array([p[1] for p in points]),
                      experts_hit_override)
        scale = np.abs(x).max(axis=0)
        scale[scale == 0] = 1.0
        xs = x / scale
        coefs = []
        for rows in (rows_m, rows_v, rows_b):
            y = np.array(rows, dtype=np.float64)
            c, *_ = np.linalg.lstsq(xs, y, rcond=None)
            c = c / scale[:, None]
            fitted = x @ c
            err = np.abs(fitted - y) / np.maximum(np.abs(y), 1.0)
            if err.size and float(err.max()) > 1e-6:
                raise RooflineError(f"{cfg.name}: the sweep model does not reproduce the graph "
                                    f"(error {float(err.max()):.2g}); use the graph path")
            coefs.append(c)
        return cls(cfg, phase, dtypes, plan, names, counts, coefs[0], coefs[1], coefs[2], experts_hit_override)

    def evaluate(self, batch: Iterable[int], seq: Iterable[int], machine: Machine, dtype: DType) -> dict[str, Any]:
        """Totals for every (batch[i], seq[i]): flop, bytes, time_s (Σ of the kernels' floors),
        memory_bound_time_s, flop_per_byte, as numpy arrays."""
        import numpy as np

        b = np.asarray(list(batch) if not hasattr(batch, "__array__") else batch)
        s = np.asarray(list(seq) if not hasattr(seq, "__array__") else seq)
        x = _features(self.config, self.phase, b, s, self.experts_hit_override)
        fm = x @ self.coef_matrix
        fv = x @ self.coef_vector
        by = x @ self.coef_bytes
        peak_m = machine.peak_flop_per_s(dtype, Unit.MATRIX)
        peak_v = machine.peak_flop_per_s(dtype, Unit.VECTOR)
        bw = machine.memory_bytes_per_s
        counts = np.array(self.counts, dtype=np.float64)
        t_matrix, t_vector, t_dram = fm / peak_m, fv / peak_v, by / bw
        compute = np.maximum(t_matrix, t_vector)
        t = np.maximum(compute, t_dram) * counts
        # `binding` per kernel (ties go to memory), then per point over the kernels' times
        kernel_bound = np.where(t_dram >= compute, 2, np.where(t_matrix >= t_vector, 0, 1))
        per = np.stack([np.where(kernel_bound == i, t, 0.0).sum(axis=1) for i in range(3)], axis=1)
        step_bound = np.where(per[:, 2] >= per[:, :2].max(axis=1), 2, np.where(per[:, 0] >= per[:, 1], 0, 1))
        flop = (fm + fv) @ counts
        byt = by @ counts
        return {"flop": flop, "bytes": byt, "time_s": t.sum(axis=1), "memory_bound_time_s": per[:, 2],
                "flop_per_byte": flop / byt, "kernel_time_s": t, "kernel_bound": kernel_bound, "bound": step_bound}

    def limit(self, seq: int) -> tuple[float, float, float]:
        """(FLOPs, bytes, FLOP/B) per extra sequence as the batch grows without bound."""
        import numpy as np

        big = np.array([1 << 30, 1 << 31])
        x = _features(self.config, self.phase, big, np.array([seq, seq]), self.experts_hit_override)
        counts = np.array(self.counts, dtype=np.float64)
        flop = (x @ (self.coef_matrix + self.coef_vector)) @ counts
        byt = (x @ self.coef_bytes) @ counts
        df, db = float(flop[1] - flop[0]), float(byt[1] - byt[0])
        per = 1 << 30
        return df / per, db / per, df / db if db else math.inf


def find_crossover(model: StepModel, seq: int, machine: Machine, dtype: DType) -> Crossover:
    ridge = machine.ridge_flop_per_byte(dtype)
    flop_seq, bytes_seq, limit = model.limit(seq)

    def intensity(b: int) -> float:
        return float(model.evaluate([b], [seq], machine, dtype)["flop_per_byte"][0])

    batch = crossover(intensity, ridge, 1, 1 << 24) if limit >= ridge or intensity(1 << 24) >= ridge else None
    if batch is not None:
        reason = (f"at batch {batch} the step's intensity {intensity(batch):.1f} FLOP/B reaches the ridge "
                  f"{ridge:.0f} FLOP/B")
    else:
        what = "KV cache and activation" if model.phase == Phase.DECODE else "activation"
        reason = (f"never: as the batch grows the intensity tends to {limit:.1f} FLOP/B, below the ridge "
                  f"{ridge:.0f} FLOP/B, because each sequence adds {bytes_seq:.4g} bytes of {what} traffic "
                  f"for {flop_seq:.4g} FLOPs: the bytes grow with the batch as fast as the FLOPs")
    return Crossover(batch, ridge, limit, reason)


# --- sweeps ------------------------------------------------------------------------------------------

SWEPT_RESOURCES: tuple[Resource, ...] = (Unit.MATRIX, Unit.VECTOR, Level.DRAM)  # the codes StepModel.evaluate returns
SWEEP_COLUMNS = ("model", "machine", "phase", "plan", "weights_dtype", "kv_dtype", "compute_dtype", "batch", "seq",
                 "flop", "bytes", "flop_per_byte", "time_s", "memory_bound_time_s", "tokens_per_s", "bound",
                 "bound_class",
                 "ridge_flop_per_byte", "memory_bytes", "devices")


def sweep(model: str | ModelConfig, machines: Sequence[str | Machine] = ("h100",), phase: str = Phase.DECODE,
          batches: Sequence[int] = (1,), seqs: Sequence[int] = (2048,), plan: Plan | str = DEFAULT_PLAN,
          weights_dtypes: Sequence[str] = ("bf16",), kv_dtypes: Sequence[str | None] = (None,),
          activation_dtype: str = "bf16", compute_dtypes: Sequence[str | None] = (None,),
          experts_hit_override: int | None = None, overrides: Mapping[str, str] | None = None,
          per_kernel: bool = False) -> list[dict[str, Any]]:
    """Every combination of machine × dtypes × batch × length, one row each (keys: SWEEP_COLUMNS;
    with `per_kernel`, also "kernels": each kernel's name, time per step and bound, for charts).

    Per dtype combination the step model is fitted once (a few dozen graph builds) and the
    batch × length grid is evaluated with numpy; per machine only the placement changes."""
    import numpy as np

    if plan not in PLANS:
        raise RooflineError(f"unknown fusion plan {plan!r}; plans: {', '.join(PLANS)}")
    plan = Plan(plan)
    cfg = load_config(model, overrides)
    for label, values in (("batch", batches), ("length", seqs)):
        if not values:
            raise RooflineError(f"sweep needs at least one {label}")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RooflineError(f"{label} must be a positive integer, got {v!r}")
    ms = [get_machine(m) for m in machines]
    grid_b, grid_s = np.meshgrid(np.array(batches), np.array(seqs), indexing="ij")
    flat_b, flat_s = grid_b.ravel(), grid_s.ravel()
    rows: list[dict[str, Any]] = []
    for wdt in weights_dtypes:
        for kdt in kv_dtypes:
            for cdt_name in compute_dtypes:
                dt = model_dtypes(wdt, activation_dtype, kdt, cdt_name)
                fitted = StepModel.fit(cfg, phase, dt, plan, experts_hit_override)
                kv_per_layer = cfg.kv_elements_per_token_per_layer() * dt.kv_cache.bytes_per_element
                # tokens held per sequence, summed over layers: L per global layer, min(L, W) per windowed one
                attended = cfg.attention_layers(GLOBAL) * flat_s + cfg.attention_layers(LOCAL) * (
                    np.minimum(flat_s, cfg.sliding_window) if cfg.sliding_window else flat_s)
                memory_bytes = cfg.total_params * dt.weights.bytes_per_element + flat_b * kv_per_layer * attended
                for m in ms:
                    cdt = compute_dtype(dt, m)
                    r = fitted.evaluate(flat_b, flat_s, m, cdt)
                    ridge = m.ridge_flop_per_byte(cdt)
                    tokens = flat_b * (flat_s if phase == Phase.PREFILL else 1)
                    cap = m.memory_capacity_bytes
                    for i in range(flat_b.size):
                        t = float(r["time_s"][i])
                        fpb = float(r["flop_per_byte"][i])
                        rows.append({
                            "model": cfg.name, "machine": m.id, "phase": phase, "plan": plan,
                            "weights_dtype": dt.weights.name, "kv_dtype": dt.kv_cache.name,
                            "compute_dtype": cdt.name, "batch": int(flat_b[i]), "seq": int(flat_s[i]),
                            "flop": float(r["flop"][i]), "bytes": float(r["bytes"][i]), "flop_per_byte": fpb,
                            "time_s": t, "memory_bound_time_s": float(r["memory_bound_time_s"][i]),
                            "tokens_per_s": float(tokens[i]) / t if t else None,
                            "bound": SWEPT_RESOURCES[int(r["bound"][i])],
                            "bound_class": bound_class(SWEPT_RESOURCES[int(r["bound"][i])]),
                            "ridge_flop_per_byte": ridge,
                            "memory_bytes": float(memory_bytes[i]),
                            "devices": max(1, math.ceil(float(memory_bytes[i]) / cap)) if cap else None,
                        })
                        if per_kernel:
                            rows[-1]["kernels"] = [
                                {"name": name, "total_time_s": float(r["kernel_time_s"][i, j]),
                                 "bound": SWEPT_RESOURCES[int(r["kernel_bound"][i, j])],
                                 "bound_class": bound_class(SWEPT_RESOURCES[int(r["kernel_bound"][i, j])])}
                                for j, name in enumerate(fitted.names)]
    return rows


def sweep_arrays(model: str | ModelConfig, machine: str | Machine, phase: str, batches: Any, seqs: Any,
                 plan: Plan | str = DEFAULT_PLAN, dtypes: ModelDtypes | None = None) -> dict[str, Any]:
    """The fast path for large grids: numpy arrays of totals for every (batch[i], seq[i]) pair."""
    import numpy as np

    cfg = load_config(model)
    m = get_machine(machine)
    dt = dtypes or model_dtypes()
    fitted = StepModel.fit(cfg, phase, dt, Plan(plan))
    return fitted.evaluate(np.asarray(batches), np.asarray(seqs), m, compute_dtype(dt, m))


def compare(models: Sequence[str], machines: Sequence[str], phase: str, batch: int, seq: int,
            plan: Plan | str = DEFAULT_PLAN, weights_dtypes: Sequence[str] = ("bf16",),
            kv_dtypes: Sequence[str | None] = (None,), activation_dtype: str = "bf16",
            compute_dtypes: Sequence[str | None] = (None,), experts_hit_override: int | None = None,
            overrides: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per model × machine × dtype: the step's totals, KV per token, decode limit,
    crossover and memory fit side by side (what GQA, MLA, an FP8 KV cache or a window change)."""
    rows = []
    for name in models:
        for mach in machines:
            for wdt in weights_dtypes:
                for kdt in kv_dtypes:
                    for cdt in compute_dtypes:
                        dt = model_dtypes(wdt, activation_dtype, kdt, cdt)
                        a = analyze_model(name, mach, phase, batch, seq, plan, dt, experts_hit_override, overrides)
                        cross = a.crossover
                        rows.append({
                            "model": a.config.name, "machine": a.machine.id, "phase": phase, "batch": batch,
                            "seq": seq, "plan": plan, "weights_dtype": dt.weights.name, "kv_dtype": dt.kv_cache.name,
                            "compute_dtype": a.dtype.name, "params_total": a.config.total_params,
                            "params_active": a.config.active_params,
                            "kv_cache_bytes_per_token": a.kv_cache_bytes_per_token,
                            "flop": a.flop, "bytes": a.bytes, "flop_per_byte": a.flop_per_byte, "time_s": a.time_s,
                            "tokens_per_s": a.tokens_per_s, "bound": a.bound, "bound_class": a.bound_class,
                            "ridge_flop_per_byte": a.ridge_flop_per_byte,
                            "decode_limit_flop_per_byte": (a.decode_limit.flop_per_byte
                                                           if phase == Phase.DECODE else None),
                            "crossover_batch": cross.batch, "crossover_reason": cross.reason,
                            "memory_bytes": a.memory.total_bytes, "devices": a.memory.devices,
                            "warnings": list(a.warnings) + ([a.memory.warning] if a.memory.warning else []),
                        })
    return rows


__all__ = ["SWEEP_COLUMNS", "Crossover", "DecodeLimit", "MemoryFit", "ModelAnalysis", "StepModel", "analyze_model",
           "compare", "compute_dtype", "decode_limit", "experts_hit", "find_crossover", "memory_fit", "sweep",
           "sweep_arrays", "windowed_pairs"]
