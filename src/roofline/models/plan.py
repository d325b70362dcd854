"""The splits of one step over a system's devices, every valid one analysed and ranked.

    s = search_splits("llama-3-70b", "dgx-h100", "decode", 64, 8192)                 # lowest step time
    s = search_splits("deepseek-v3", "gb200-nvl72", "decode", 256, 8192, objective="throughput")
    s = search_splits("llama-3-70b", "dgx-h100", "decode", 64, 8192, objective="latency", latency_target_s=0.02)
    s.winner.split, [(str(r.split), r.reason) for r in s.rows]

Candidates: every split (tp, pp, ep, dp) of at most `devices` devices (default: one node of the
system) that the model can run (roofline.models.split.check_split):

    tp   divides the query heads (KV heads divided, or replicated as engines do), within one node
    pp   divides the layers (stages of equal depth)
    ep   mixtures of experts only: divides the experts and tp × dp (with tp > 1, a replica's tokens a
         multiple of tp: the MoE splits them over the tp ranks)
         (data-parallel attention, expert-parallel MoE)
    dp   divides the batch

Memory per device is closed-form (roofline.models.memory: weights + KV cache), so a split whose
weights and KV cache alone exceed the usable memory (capacity × utilization) cannot fit and is not
built; every other split is built and placed exactly as `analyze_model(..., split=...)` does it,
under the headline fusion plan only, and its activation workspace (the largest set of activations
one kernel reads and writes) completes its memory.

Objectives, among the splits that fit:

    time        the lowest step time (a token's latency: a pipeline's stages in turn)
    throughput  the most tokens/s per device: tokens/s ÷ the split's devices
    latency     the most tokens/s per device among the splits whose step time ≤ latency_target_s

Ties go to the other measure (tokens/s per device for time, step time for the others), then to
fewer devices. Every candidate gets a row and a one-line reason why it loses to the winner.

Layering: imports roofline.hardware, roofline.parallel, roofline.placement, roofline.units,
roofline.vocab and the models room's analysis, build, config, dtypes, memory, split, transformer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware import DEFAULT_MACHINE, Machine, System, get_machine, get_system
from roofline.models.analysis import ModelAnalysis
from roofline.models.build import DEFAULT_PLAN, as_phase, as_plan, build_graph
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, compute_dtype, for_checkpoint, model_dtypes
from roofline.models.memory import DEFAULT_UTILIZATION, device_kv_bytes, device_weights_bytes, gib
from roofline.models.split import check_moe_rows, check_split
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split
from roofline.placement import analyze_graph
from roofline.units import format_time
from roofline.vocab import Bound, Phase, Plan, Resource, Role, bound_class

OBJECTIVES = ("time", "throughput", "latency")
BOARD = 8  # a bare device is one node of this many (an HGX board), as analyze_model makes it
SUGGEST_BARE_DEVICES = 64  # how far a search on a bare device looks for a split that fits


@dataclass(frozen=True)
class PlanRow:
    """One candidate split: its memory per device and, unless it cannot fit, its step on the system."""

    split: Split
    weights_bytes: float
    kv_cache_bytes: float
    usable_bytes: float | None  # capacity × utilization; None: the device lists no capacity
    workspace_bytes: float | None = None  # None: not built (weights + KV cache alone exceed the usable memory)
    time_s: float | None = None
    tokens_per_s: float | None = None
    communication_time_s: float | None = None
    bound: Resource | None = None
    warnings: tuple[str, ...] = ()
    reason: str = ""  # why it loses to the winner ("" until ranked; the winner's says it is the best)
    rank: int | None = None  # 1 for the winner, then the others that fit (and meet the target), in order

    @property
    def devices(self) -> int:
        return self.split.devices

    @property
    def analysed(self) -> bool:
        return self.time_s is not None

    @property
    def memory_bytes(self) -> float:
        """Per device: weights + KV cache (+ the workspace when built)."""
        return self.weights_bytes + self.kv_cache_bytes + (self.workspace_bytes or 0.0)

    @property
    def fits(self) -> bool | None:
        if self.usable_bytes is None:
            return None
        return self.analysed and self.memory_bytes <= self.usable_bytes

    @property
    def tokens_per_s_per_device(self) -> float | None:
        return None if self.tokens_per_s is None else self.tokens_per_s / self.devices

    @property
    def communication_share(self) -> float | None:
        if self.communication_time_s is None or not self.time_s:
            return None
        return self.communication_time_s / self.time_s

    @property
    def bound_class(self) -> Bound | None:
        return None if self.bound is None else bound_class(self.bound)

    @property
    def flags(self) -> str:
        """The `roofline model` flags of this split ("--tp 8 --pp 2"; "" for one device)."""
        return " ".join(f"--{k} {v}" for k, v in self.split.to_dict().items() if k != "devices" and v > 1)

    def to_dict(self) -> dict[str, Any]:
        return {"split": str(self.split), **self.split.to_dict(), "fits": self.fits,
                "memory_bytes_per_device": self.memory_bytes, "weights_bytes": self.weights_bytes,
                "kv_cache_bytes": self.kv_cache_bytes, "workspace_bytes": self.workspace_bytes,
                "usable_bytes_per_device": self.usable_bytes, "time_s": self.time_s,
                "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_device": self.tokens_per_s_per_device,
                "communication_time_s": self.communication_time_s, "communication_share": self.communication_share,
                "bound": self.bound, "bound_class": self.bound_class, "rank": self.rank, "reason": self.reason,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class PlanSearch:
    """Every candidate split of a step, ranked by `objective`; `winner` is None when none qualifies
    (`problem` says why)."""

    config: ModelConfig
    system: str
    system_name: str
    phase: Phase
    batch: int
    seq: int
    plan: Plan
    dtypes: ModelDtypes
    objective: str
    latency_target_s: float | None
    utilization: float
    overlap: bool
    devices: int  # the most devices a candidate may use
    devices_per_node: int
    rows: tuple[PlanRow, ...]  # the winner first, then by rank, then those over the target, then those that do not fit
    problem: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def winner(self) -> PlanRow | None:
        return self.rows[0] if self.rows and self.rows[0].rank == 1 else None

    def row(self, split: Split) -> PlanRow:
        for r in self.rows:
            if r.split == split:
                return r
        raise RooflineError(f"the split {split} is not among the candidates")

    def to_dict(self) -> dict[str, Any]:
        w = self.winner
        return {"model": self.config.name, "system": self.system, "phase": self.phase, "batch": self.batch,
                ("prompt" if self.phase == Phase.PREFILL else "context"): self.seq, "plan": self.plan,
                "dtypes": self.dtypes.to_dict(), "objective": self.objective,
                "latency_target_s": self.latency_target_s, "memory_utilization": self.utilization,
                "overlap": self.overlap, "devices": self.devices, "devices_per_node": self.devices_per_node,
                "candidates": len(self.rows), "winner": None if w is None else w.to_dict(),
                "problem": self.problem or None, "warnings": list(self.warnings),
                "rows": [r.to_dict() for r in self.rows]}


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, min(n, most) + 1) if n % d == 0]


def enumerate_splits(cfg: ModelConfig, batch: int, devices: int, tp_most: int, phase: Phase | str = Phase.DECODE,
                     seq: int = 1) -> list[Split]:
    """Every valid split of at most `devices` devices: tp ≤ `tp_most` (the devices of a node) dividing
    the heads, pp dividing the layers, ep dividing the experts (MoE) and tp × dp, dp dividing the batch,
    each accepted by check_split (and, for expert parallel with tensor parallel, check_moe_rows: a
    replica's tokens a multiple of tp). In order of devices, then tp, pp, ep, dp."""
    out: list[Split] = []
    eps = _divisors(cfg.num_experts, devices) if cfg.is_moe else [1]
    for tp in _divisors(cfg.num_heads, min(tp_most, devices)):
        for pp in _divisors(cfg.num_layers, devices // tp):
            for dp in _divisors(batch, devices // (tp * pp)):
                for ep in eps:
                    if ep > 1 and (tp * dp) % ep:
                        continue  # the experts are spread over the tp × dp devices of a stage
                    sp = Split(tp=tp, pp=pp, ep=ep, dp=dp)
                    try:
                        check_split(cfg, sp, batch)
                        check_moe_rows(sp, as_phase(phase), batch // dp, seq)
                    except RooflineError:
                        continue
                    out.append(sp)
    return sorted(out, key=lambda s: (s.devices, s.tp, s.pp, s.ep, s.dp))


class _Evaluator:
    """Builds and places candidate splits exactly as analyze_model does, resolving each system,
    device machine, and closed-form memory once."""

    def __init__(self, cfg: ModelConfig, system: str | System | Machine, phase: Phase, batch: int, seq: int,
                 dtypes: ModelDtypes, plan: Plan, experts_hit: int | None, utilization: float,
                 overlap: bool) -> None:
        self.cfg, self.system_arg, self.phase, self.batch, self.seq = cfg, system, phase, batch, seq
        self.dtypes, self.plan, self.hit = dtypes, plan, experts_hit
        self.utilization, self.overlap = utilization, overlap
        self._systems: dict[int, System] = {}
        self._machines: dict[tuple[int, int], Machine] = {}
        self._weights: dict[tuple[int, int, int], float] = {}
        self._kv: dict[tuple[int, int, int, int], float] = {}

    def system_for(self, sp: Split) -> System | None:
        """analyze_model's system: a bare device made one node of max(devices, 8); None for one bare device."""
        need = max(sp.devices, BOARD)
        s = self._systems.get(need)
        if s is None:
            s = self._systems[need] = get_system(self.system_arg, devices=need)
        if s.from_device and sp.trivial:
            return None
        if sp.devices > s.max_devices:
            raise RooflineError(f"the split {sp} needs {sp.devices} devices; {s.id} has {s.max_devices}")
        return s

    def machine_for(self, sp: Split, system: System | None) -> Machine:
        if system is None:
            return get_machine(self.system_arg if not isinstance(self.system_arg, System) else self.system_arg.device)
        group = min(max(sp.tp, sp.ep), system.devices_per_node)
        key = (id(system), group)
        m = self._machines.get(key)
        if m is None:
            m = self._machines[key] = system.device_machine(group)
        return m

    def closed_form(self, sp: Split) -> tuple[float, float]:
        """Weights and KV cache per device (roofline.models.memory), cached by the split's degrees they depend on."""
        wk = (sp.tp, sp.pp, sp.ep)
        w = self._weights.get(wk)
        if w is None:
            w = self._weights[wk] = device_weights_bytes(self.cfg, sp, self.dtypes)
        kk = (sp.tp, sp.pp, sp.ep, sp.dp)
        kv = self._kv.get(kk)
        if kv is None:
            kv = self._kv[kk] = device_kv_bytes(self.cfg, sp, self.batch, self.seq, self.dtypes)
        return w, kv

    def capacity(self, sp: Split) -> float | None:
        return self.machine_for(sp, self.system_for(sp)).memory_capacity_bytes

    def analyse(self, sp: Split) -> ModelAnalysis:
        """analyze_model(cfg, system, phase, batch, seq, plan, dtypes, experts_hit, split=sp, ...) with
        the headline plan only: the same graph, machine and placements, so the same numbers."""
        system = self.system_for(sp)
        m = self.machine_for(sp, system)
        dpn = system.devices_per_node if system is not None else 1
        mg = build_graph(self.cfg, self.phase, self.batch, self.seq, self.dtypes, self.hit, sp,
                         dpn if not sp.trivial else None)
        cdt = compute_dtype(self.dtypes, m)
        ga = analyze_graph(mg.graph, m, cdt, mg.plans[self.plan])
        return ModelAnalysis(mg, m, cdt, self.plan, MappingProxyType({self.plan: ga}), mg.warnings,
                             system.id if system is not None else "", dpn if system is not None else BOARD,
                             system.max_devices if system is not None else SUGGEST_BARE_DEVICES, self.utilization,
                             self.overlap)

    def workspace(self, sp: Split) -> float:
        """The largest set of activations one kernel of the headline plan reads and writes (per device)."""
        system = self.system_for(sp)
        dpn = system.devices_per_node if system is not None else 1
        mg = build_graph(self.cfg, self.phase, self.batch, self.seq, self.dtypes, self.hit, sp,
                         dpn if not sp.trivial else None)
        return _largest_activations(k for k in mg.graph.kernels(mg.plans[self.plan]))

    def row(self, sp: Split, prune: bool) -> PlanRow:
        w, kv = self.closed_form(sp)
        cap = self.capacity(sp)
        usable = None if cap is None else cap * self.utilization
        if prune and usable is not None and w + kv > usable:
            return PlanRow(sp, w, kv, usable)  # weights + KV cache alone exceed the usable memory
        a = self.analyse(sp)
        ws = _largest_activations(p.kernel for p in a.placements if p.kernel is not None)
        return PlanRow(sp, w, kv, usable, ws, a.time_s, a.tokens_per_s, a.communication_time_s, a.bound,
                       tuple(a.warnings))


def _largest_activations(kernels: Any) -> float:
    return max((sum(t.bytes for t in (*k.reads, *k.writes) if t.role is Role.ACTIVATION) for k in kernels),
               default=0.0)


def _pct(x: float) -> str:
    return f"{x:.1f}%" if x < 10 else f"{x:.0f}%"


def _rank(rows: list[PlanRow], objective: str, target: float | None) -> tuple[list[PlanRow], str]:
    """Rows ordered winner first, each with its rank and reason; and the problem when none qualifies."""

    def fits(r: PlanRow) -> bool:
        return r.analysed and r.fits is not False

    def tpd(r: PlanRow) -> float:
        return r.tokens_per_s_per_device or 0.0

    def key(r: PlanRow) -> tuple[float, ...]:
        t = r.time_s or 0.0
        lead = (t, -tpd(r)) if objective == "time" else (-tpd(r), t)
        return (*lead, r.devices, r.split.tp, r.split.pp, r.split.ep, r.split.dp)

    fitting = sorted((r for r in rows if fits(r)), key=key)
    if objective == "latency":
        assert target is not None
        eligible = [r for r in fitting if (r.time_s or 0.0) <= target]
        over = [r for r in fitting if (r.time_s or 0.0) > target]
    else:
        eligible, over = fitting, []
    misfits = sorted((r for r in rows if not fits(r)), key=_closest)
    problem = ""
    if not fitting:
        problem = "none fits"
    elif not eligible:
        fastest = min(fitting, key=lambda r: (r.time_s or 0.0, r.devices))
        problem = (f"no split that fits meets the latency target {format_time(target or 0.0)}: the fastest, "
                   f"{fastest.split}, takes {format_time(fastest.time_s or 0.0)} a step")
    out: list[PlanRow] = []
    best = eligible[0] if eligible else None
    for i, r in enumerate(eligible):
        out.append(replace(r, rank=i + 1, reason=_loses(r, best, objective, target) if i else _wins(objective, target)))
    for r in over:
        out.append(replace(r, reason=f"over the latency target: {format_time(r.time_s or 0.0)} > "
                                     f"{format_time(target or 0.0)}"))
    for r in misfits:
        out.append(replace(r, reason=_misfit(r)))
    return out, problem


def _closest(r: PlanRow) -> tuple[float, ...]:
    """Nearest to fitting first: the least memory per device, then fewer devices and pipeline stages."""
    return (r.memory_bytes, r.devices, r.split.pp, r.split.dp, r.split.ep, r.split.tp)


def _wins(objective: str, target: float | None) -> str:
    if objective == "time":
        return "best: the lowest step time"
    if objective == "throughput":
        return "best: the most tokens/s per device"
    return f"best: the most tokens/s per device within {format_time(target or 0.0)} a step"


def _loses(r: PlanRow, best: PlanRow | None, objective: str, target: float | None) -> str:
    assert best is not None and r.time_s is not None and best.time_s is not None
    t, bt = r.time_s, best.time_s
    tpd, btpd = r.tokens_per_s_per_device or 0.0, best.tokens_per_s_per_device or 0.0
    if objective == "time":
        if t > bt:
            return f"slower by {_pct((t / bt - 1) * 100)} ({format_time(t)} vs {format_time(bt)})"
        if tpd < btpd:
            return f"as fast, fewer tokens/s per device ({tpd:,.0f} vs {btpd:,.0f})"
    else:
        if tpd < btpd:
            return f"fewer tokens/s per device: {tpd:,.0f} vs {btpd:,.0f} ({_pct((1 - tpd / btpd) * 100)} fewer)"
        if t > bt:
            return f"as many tokens/s per device, slower by {_pct((t / bt - 1) * 100)}"
    if r.devices > best.devices:
        return f"ties with {best.split} on {r.devices - best.devices} more devices"
    return f"ties with {best.split}"


def _misfit(r: PlanRow) -> str:
    usable = gib(r.usable_bytes or 0.0)
    if r.workspace_bytes is None:
        return f"does not fit: weights + KV cache {gib(r.weights_bytes + r.kv_cache_bytes)} > {usable} usable"
    return f"does not fit: {gib(r.memory_bytes)} > {usable} usable"


def _no_fit(ev: _Evaluator, rows: list[PlanRow], cfg: ModelConfig, system: System, devices: int,
            bare: bool) -> str:
    """One line: how close the nearest split comes, and the fewest devices of a valid split that fits."""
    closest = min(rows, key=_closest)
    usable = closest.usable_bytes or 0.0
    need = closest.memory_bytes
    what = "weights + KV cache" if closest.workspace_bytes is None else "weights + KV cache + workspace"
    text = (f"no valid split of up to {devices} devices of {system.id} fits {cfg.name}: the closest, "
            f"{closest.split}, needs {gib(need)} per device ({what}) > {gib(usable)} usable "
            f"({ev.utilization:.0%} of {gib(usable / ev.utilization)}), so a device holds at most "
            f"{usable / need:.0%} of its share; ")
    most = SUGGEST_BARE_DEVICES if bare else system.max_devices
    if most > devices:
        larger = [sp for sp in enumerate_splits(cfg, ev.batch, most, BOARD if bare else system.devices_per_node,
                                                ev.phase, ev.seq) if sp.devices > devices]
        held = sorted(((sp.devices, sum(ev.closed_form(sp)), i, sp) for i, sp in enumerate(larger)
                       if sum(ev.closed_form(sp)) <= usable), key=lambda x: x[:3])
        for _n, w_kv, _i, sp in held:  # the fewest devices, the least memory first; then with the workspace
            w, kv = ev.closed_form(sp)
            if w_kv + ev.workspace(sp) <= usable:
                flags = PlanRow(sp, w, kv, usable).flags
                return text + (f"the fewest devices that hold it: {sp} ({sp.devices} devices; --devices "
                               f"{sp.devices}, or `roofline model` with {flags})")
    return text + (f"no valid split of up to {most} devices holds it: a system with more memory per device, "
                   f"a smaller batch or length, or narrower dtypes (--weights-dtype fp8, --kv-dtype fp8)")


def search_splits(model: str | ModelConfig, system: str | System | Machine = DEFAULT_MACHINE,
                  phase: Phase | str = Phase.DECODE, batch: int = 1, seq: int | None = None,
                  dtypes: ModelDtypes | None = None, objective: str = "time", latency_target_s: float | None = None,
                  utilization: float = DEFAULT_UTILIZATION, overlap: bool = False, plan: Plan | str = DEFAULT_PLAN,
                  devices: int | None = None, experts_hit: int | None = None,
                  overrides: Mapping[str, str] | None = None, prune: bool = True) -> PlanSearch:
    """Every valid split of at most `devices` devices of `system` (default: one node of it; a bare
    device is one node of 8), analysed as analyze_model would and ranked by `objective`. With `prune`
    (the default) a split whose weights and KV cache alone exceed the usable memory is not built."""
    if objective not in OBJECTIVES:
        raise RooflineError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    if objective == "latency":
        if latency_target_s is None:
            raise RooflineError("the latency objective needs a latency target (--latency-target, e.g. 50ms)")
        if not (latency_target_s > 0 and math.isfinite(latency_target_s)):
            raise RooflineError(f"the latency target must be a positive time, got {latency_target_s!r}")
    elif latency_target_s is not None:
        raise RooflineError(f"a latency target applies to the latency objective, not to {objective!r}")
    if not 0 < utilization <= 1:
        raise RooflineError(f"--memory-utilization must be in (0, 1], got {utilization}")
    phase = as_phase(phase)
    plan = as_plan(plan)
    cfg = load_config(model, overrides)
    dt = for_checkpoint(dtypes or model_dtypes(), cfg.weights_dtype, cfg.unquantized)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise RooflineError(f"batch must be a positive integer, got {batch!r}")
    length = cfg.length(seq)
    base = get_system(system, devices=devices)
    bare = base.from_device
    n = devices if devices is not None else base.devices_per_node
    ev = _Evaluator(cfg, system, phase, batch, length, dt, plan, experts_hit, utilization, overlap)
    splits = enumerate_splits(cfg, batch, n, n if bare else base.devices_per_node, phase, length)
    rows = [ev.row(sp, prune) for sp in splits]
    ranked, problem = _rank(rows, objective, latency_target_s)
    if problem == "none fits":
        problem = _no_fit(ev, rows, cfg, base, n, bare)
    warnings: tuple[str, ...] = ()
    if rows and rows[0].usable_bytes is None:
        warnings = (f"{base.device.id} lists no memory capacity: every split is taken to fit",)
    return PlanSearch(cfg, base.id, base.name, phase, batch, length, plan, dt, objective, latency_target_s,
                      utilization, overlap, n, n if bare else base.devices_per_node, tuple(ranked), problem,
                      warnings)


__all__ = ["OBJECTIVES", "PlanRow", "PlanSearch", "enumerate_splits", "search_splits"]
