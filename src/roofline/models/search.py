"""The split search: every split of one step over a system's devices, each valid one deployed,
analysed and ranked (`roofline plan` on the command line; "plan" in the library is the fusion plan).

    s = search_splits("llama-3-70b", "dgx-h100", "decode", 64, 8192)                 # lowest step time
    s = search_splits("deepseek-v3", "gb200-nvl72", "decode", 256, 8192, objective="throughput")
    s = search_splits("llama-3-70b", "dgx-h100", "decode", 64, 8192, objective="latency", latency_target_s=0.02)
    s.winner.split, [(str(r.split), r.reason) for r in s.rows]

Candidates: every split (tp, pp, ep, dp) of at most `devices` devices (default: one node of the
system) that the model can run (roofline.models.split.valid_splits, the one split enumerator):

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

Each analysed split has its floor and its expected band: Σ runs × each kernel's calibrated band
(roofline.expectation, as `roofline model` gives it: the device's shipped fit, or the `band` the
caller passes, e.g. a --calibration file's). Splits are ranked by their EXPECTED step time, the middle
of that band, (low + high) / 2, and its tokens/s (tokens/s at the floor × floor / expected): a split
whose kernels run nearer their roofs wins over one whose floor alone is lower. Objectives, among the
splits that fit:

    time        the lowest expected step time (a token's latency: a pipeline's stages in turn)
    throughput  the most expected tokens/s per device: ÷ the split's devices
    latency     the most expected tokens/s per device among the splits whose step time ≤ latency_target_s
                (at the floor, as serve's --itl-slo compares the floor)

Ties go to the other measure (tokens/s per device for time, step time for the others), then to
fewer devices. Every candidate gets a row and a one-line reason why it loses to the winner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.hardware import DEFAULT_MACHINE, Machine, System, get_system
from roofline.models.analysis import analyze
from roofline.models.build import DEFAULT_PLAN, as_phase
from roofline.models.dtypes import ModelDtypes
from roofline.models.memory import DEFAULT_UTILIZATION, device_kv_bytes, device_weights_bytes, gib, workspace_bytes
from roofline.models.split import valid_splits
from roofline.models.step import Step, describe_step
from roofline.models.stepband import Band, shipped_band, shipped_description
from roofline.models.transformer import ModelConfig
from roofline.parallel import MOST_DEVICES, NODE_DEVICES, Deployment, Split, deploy
from roofline.units import format_time
from roofline.vocab import Bound, Objective, Phase, Plan, Resource, bound_class

OBJECTIVES = tuple(str(o) for o in Objective)


@frozen
class SplitRow:
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
    expected_time_s: tuple[float, float] | None = None  # (low, high): Σ runs × each kernel's calibrated band

    @property
    def expected_s(self) -> float | None:
        """The expected step time the ranking uses: the middle of the band, (low + high) / 2."""
        if self.expected_time_s is None:
            return self.time_s
        return (self.expected_time_s[0] + self.expected_time_s[1]) / 2

    @property
    def expected_tokens_per_s_per_device(self) -> float | None:
        """Tokens/s per device at the expected step time: the floor's × floor / expected."""
        tpd, t, e = self.tokens_per_s_per_device, self.time_s, self.expected_s
        return None if tpd is None or not t or not e else tpd * t / e

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
                "expected_time_s": None if self.expected_time_s is None else
                {"low": self.expected_time_s[0], "high": self.expected_time_s[1]},
                "expected_tokens_per_s_per_device": self.expected_tokens_per_s_per_device,
                "bound": self.bound, "bound_class": self.bound_class, "rank": self.rank, "reason": self.reason,
                "warnings": list(self.warnings)}


@frozen
class SplitSearch:
    """Every candidate split of a step, ranked by `objective`; `winner` is None when none qualifies
    (`problem` says why)."""

    step: Step
    system: str
    system_name: str
    objective: Objective
    latency_target_s: float | None
    utilization: float
    overlap: bool
    devices: int  # the most devices a candidate may use
    devices_per_node: int
    rows: tuple[SplitRow, ...]  # the winner first, then by rank, then those over the target, then those that do not fit
    problem: str = ""
    warnings: tuple[str, ...] = field(default=())
    calibration: Mapping[str, Any] = field(default_factory=dict)  # the expected-time model's file and source

    @property
    def ranked_by(self) -> str:
        """How the rows are ranked, in words."""
        what = {Objective.TIME: "the expected step time", Objective.THROUGHPUT: "the expected tokens/s per device",
                Objective.LATENCY: "the expected tokens/s per device within the target (the floor meets it)"}
        src = self.calibration.get("file") or "the calibration"
        return (f"ranked by {what[self.objective]}: the middle of each split's band, Σ each kernel's calibrated "
                f"band ({src})")

    @property
    def config(self) -> ModelConfig:
        return self.step.config

    @property
    def phase(self) -> Phase:
        return self.step.phase

    @property
    def batch(self) -> int:
        return self.step.batch

    @property
    def seq(self) -> int:
        return self.step.seq

    @property
    def plan(self) -> Plan:
        return self.step.plan

    @property
    def dtypes(self) -> ModelDtypes:
        return self.step.dtypes

    @property
    def winner(self) -> SplitRow | None:
        return self.rows[0] if self.rows and self.rows[0].rank == 1 else None

    def row(self, split: Split) -> SplitRow:
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
                "candidates": len(self.rows), "ranked_by": self.ranked_by, "calibration": dict(self.calibration),
                "winner": None if w is None else w.to_dict(),
                "problem": self.problem or None, "warnings": list(self.warnings),
                "rows": [r.to_dict() for r in self.rows]}


class _Evaluator:
    """Builds and places candidate splits exactly as analyze_model does (roofline.parallel.deploy and
    roofline.models.analysis.analyze, under the headline plan only), each deployment and closed-form
    memory resolved once."""

    def __init__(self, step: Step, machine: str | System | Machine, utilization: float, overlap: bool,
                 band: Band | None = None) -> None:
        self.step, self.machine, self.utilization, self.overlap = step, machine, utilization, overlap
        self.band = band
        self._deployments: dict[Split, Deployment] = {}
        self._weights: dict[tuple[int, int, int], float] = {}
        self._kv: dict[tuple[int, int, int, int], float] = {}

    def deployment(self, sp: Split) -> Deployment:
        d = self._deployments.get(sp)
        if d is None:
            d = self._deployments[sp] = deploy(self.machine, sp)
        return d

    def closed_form(self, sp: Split) -> tuple[float, float]:
        """Weights and KV cache per device (roofline.models.memory), cached by the split's degrees they depend on."""
        cfg, dt = self.step.config, self.step.dtypes
        wk = (sp.tp, sp.pp, sp.ep)
        w = self._weights.get(wk)
        if w is None:
            w = self._weights[wk] = device_weights_bytes(cfg, sp, dt)
        kk = (sp.tp, sp.pp, sp.ep, sp.dp)
        kv = self._kv.get(kk)
        if kv is None:
            kv = self._kv[kk] = device_kv_bytes(cfg, sp, self.step.batch, self.step.seq, dt)
        return w, kv

    def workspace(self, sp: Split) -> float:
        """The activation workspace of the headline plan's kernels under `sp` (roofline.models.memory)."""
        mg = self.step.graph(self.deployment(sp))
        return workspace_bytes(mg.graph.kernels(mg.plans[self.step.plan]))

    def row(self, sp: Split, prune: bool) -> SplitRow:
        w, kv = self.closed_form(sp)
        cap = self.deployment(sp).machine.memory_capacity_bytes
        usable = None if cap is None else cap * self.utilization
        if prune and usable is not None and w + kv > usable:
            return SplitRow(sp, w, kv, usable)  # weights + KV cache alone exceed the usable memory
        a = analyze(self.step, self.deployment(sp), self.utilization, self.overlap, plans=(self.step.plan,))
        band = self.band or shipped_band(a.machine.id)
        bands = [band(p) for p in a.placements]
        expected = (sum(p.count * b[0] for p, b in zip(a.placements, bands, strict=True)),
                    sum(p.count * b[1] for p, b in zip(a.placements, bands, strict=True)))
        return SplitRow(sp, w, kv, usable, a.workspace_bytes, a.time_s, a.tokens_per_s, a.communication_time_s,
                        a.bound, tuple(a.warnings), expected_time_s=expected)


def _pct(x: float) -> str:
    return f"{x:.1f}%" if x < 10 else f"{x:.0f}%"


def _rank(rows: list[SplitRow], objective: Objective, target: float | None) -> tuple[list[SplitRow], str]:
    """Rows ordered winner first, each with its rank and reason; and the problem when none qualifies."""

    def fits(r: SplitRow) -> bool:
        return r.analysed and r.fits is not False

    def tpd(r: SplitRow) -> float:
        return r.expected_tokens_per_s_per_device or 0.0

    def key(r: SplitRow) -> tuple[float, ...]:
        t = r.expected_s or 0.0
        lead = (t, -tpd(r)) if objective is Objective.TIME else (-tpd(r), t)
        return (*lead, r.devices, r.split.tp, r.split.pp, r.split.ep, r.split.dp)

    fitting = sorted((r for r in rows if fits(r)), key=key)
    if objective is Objective.LATENCY:
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
    out: list[SplitRow] = []
    best = eligible[0] if eligible else None
    for i, r in enumerate(eligible):
        out.append(replace(r, rank=i + 1, reason=_loses(r, best, objective, target) if i else _wins(objective, target)))
    for r in over:
        out.append(replace(r, reason=f"over the latency target: {format_time(r.time_s or 0.0)} > "
                                     f"{format_time(target or 0.0)}"))
    for r in misfits:
        out.append(replace(r, reason=_misfit(r)))
    return out, problem


def _closest(r: SplitRow) -> tuple[float, ...]:
    """Nearest to fitting first: the least memory per device, then fewer devices and pipeline stages."""
    return (r.memory_bytes, r.devices, r.split.pp, r.split.dp, r.split.ep, r.split.tp)


def _wins(objective: Objective, target: float | None) -> str:
    if objective is Objective.TIME:
        return "best: the lowest expected step time"
    if objective is Objective.THROUGHPUT:
        return "best: the most expected tokens/s per device"
    return f"best: the most expected tokens/s per device within {format_time(target or 0.0)} a step"


def _loses(r: SplitRow, best: SplitRow | None, objective: Objective, target: float | None) -> str:
    assert best is not None and r.expected_s is not None and best.expected_s is not None
    t, bt = r.expected_s, best.expected_s
    tpd, btpd = r.expected_tokens_per_s_per_device or 0.0, best.expected_tokens_per_s_per_device or 0.0
    if objective is Objective.TIME:
        if t > bt:
            return f"slower by {_pct((t / bt - 1) * 100)} (expected {format_time(t)} vs {format_time(bt)})"
        if tpd < btpd:
            return f"as fast, fewer expected tokens/s per device ({tpd:,.0f} vs {btpd:,.0f})"
    else:
        if tpd < btpd:
            return (f"fewer expected tokens/s per device: {tpd:,.0f} vs {btpd:,.0f} "
                    f"({_pct((1 - tpd / btpd) * 100)} fewer)")
        if t > bt:
            return f"as many expected tokens/s per device, slower by {_pct((t / bt - 1) * 100)}"
    if r.devices > best.devices:
        return f"ties with {best.split} on {r.devices - best.devices} more devices"
    return f"ties with {best.split}"


def _misfit(r: SplitRow) -> str:
    usable = gib(r.usable_bytes or 0.0)
    if r.workspace_bytes is None:
        return f"does not fit: weights + KV cache {gib(r.weights_bytes + r.kv_cache_bytes)} > {usable} usable"
    return f"does not fit: {gib(r.memory_bytes)} > {usable} usable"


def _no_fit(ev: _Evaluator, rows: list[SplitRow], base: System, devices: int) -> str:
    """One line: how close the nearest split comes, and the fewest devices of a valid split that fits."""
    step, bare = ev.step, base.from_device
    closest = min(rows, key=_closest)
    usable = closest.usable_bytes or 0.0
    need = closest.memory_bytes
    what = "weights + KV cache" if closest.workspace_bytes is None else "weights + KV cache + workspace"
    text = (f"no valid split of up to {devices} devices of {base.id} fits {step.config.name}: the closest, "
            f"{closest.split}, needs {gib(need)} per device ({what}) > {gib(usable)} usable "
            f"({ev.utilization:.0%} of {gib(usable / ev.utilization)}), so a device holds at most "
            f"{usable / need:.0%} of its share; ")
    most = MOST_DEVICES if bare else base.max_devices
    if most > devices:
        larger = [sp for sp in valid_splits(step.config, most, NODE_DEVICES if bare else base.devices_per_node,
                                            step.batch, step.phase, step.seq) if sp.devices > devices]
        held = sorted(((sp.devices, sum(ev.closed_form(sp)), i, sp) for i, sp in enumerate(larger)
                       if sum(ev.closed_form(sp)) <= usable), key=lambda x: x[:3])
        for _n, w_kv, _i, sp in held:  # the fewest devices, the least memory first; then with the workspace
            w, kv = ev.closed_form(sp)
            if w_kv + ev.workspace(sp) <= usable:
                flags = SplitRow(sp, w, kv, usable).flags
                return text + (f"the fewest devices that hold it: {sp} ({sp.devices} devices; --devices "
                               f"{sp.devices}, or `roofline model` with {flags})")
    return text + (f"no valid split of up to {most} devices holds it: a system with more memory per device, "
                   f"a smaller batch or length, or narrower dtypes (--weights-dtype fp8, --kv-dtype fp8)")


def as_objective(objective: Objective | str, latency_target_s: float | None, utilization: float) -> Objective:
    """`objective` as an Objective, checked against the latency target (given exactly with LATENCY),
    and the memory utilization checked in (0, 1]."""
    if objective not in OBJECTIVES:
        raise RooflineError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    obj = Objective(objective)
    if obj is Objective.LATENCY:
        if latency_target_s is None:
            raise RooflineError(f"the latency objective needs a latency target ({T.latency_target_s}, e.g. 50ms)")
        if not (latency_target_s > 0 and math.isfinite(latency_target_s)):
            raise RooflineError(f"the latency target must be a positive time, got {latency_target_s!r}")
    elif latency_target_s is not None:
        raise RooflineError(f"a latency target applies to the latency objective, not to {str(obj)!r}")
    if not 0 < utilization <= 1:
        raise RooflineError(f"{T.utilization} must be in (0, 1], got {utilization}")
    return obj


def search(step: Step, machine: str | System | Machine, objective: Objective = Objective.TIME,
           latency_target_s: float | None = None, utilization: float = DEFAULT_UTILIZATION, overlap: bool = False,
           devices: int | None = None, prune: bool = True, band: Band | None = None,
           calibration: Mapping[str, Any] | None = None) -> SplitSearch:
    """Every valid split of `step` over at most `devices` devices of `machine` (default: one node of
    it; a bare device is one node of NODE_DEVICES), each deployed and analysed as analyze_model would
    and ranked by `objective` on its expected time. With `prune` (the default) a split whose weights and
    KV cache alone exceed the usable memory is not built. `band`: a placed kernel's (low, high) expected
    time (default: the device's shipped fit, roofline.expectation), `calibration` what it is (for the output)."""
    obj = as_objective(objective, latency_target_s, utilization)
    if isinstance(step.batch, bool) or not isinstance(step.batch, int) or step.batch < 1:
        raise RooflineError(f"batch must be a positive integer, got {step.batch!r}")
    base = get_system(machine, devices=devices)
    n = devices if devices is not None else base.devices_per_node
    ev = _Evaluator(step, machine, utilization, overlap, band)
    splits = valid_splits(step.config, n, n if base.from_device else base.devices_per_node, step.batch, step.phase,
                          step.seq)
    rows = [ev.row(sp, prune) for sp in splits]
    ranked, problem = _rank(rows, obj, latency_target_s)
    if problem == "none fits":
        problem = _no_fit(ev, rows, base, n)
    warnings: tuple[str, ...] = ()
    if rows and rows[0].usable_bytes is None:
        warnings = (f"{base.device.id} lists no memory capacity: every split is taken to fit",)
    if calibration is None:
        calibration = shipped_description(base.device.id)
    return SplitSearch(step, base.id, base.name, obj, latency_target_s, utilization, overlap, n,
                       n if base.from_device else base.devices_per_node, tuple(ranked), problem, warnings,
                       calibration)


def search_splits(model: str | ModelConfig, system: str | System | Machine = DEFAULT_MACHINE,
                  phase: Phase | str = Phase.DECODE, batch: int = 1, seq: int | None = None,
                  dtypes: ModelDtypes | None = None, objective: Objective | str = Objective.TIME,
                  latency_target_s: float | None = None, utilization: float = DEFAULT_UTILIZATION,
                  overlap: bool = False, plan: Plan | str = DEFAULT_PLAN, devices: int | None = None,
                  experts_hit: int | None = None, overrides: Mapping[str, str] | None = None,
                  prune: bool = True, band: Band | None = None,
                  calibration: Mapping[str, Any] | None = None) -> SplitSearch:
    """`search(describe_step(...), system, ...)`: the step from names, as the command line gives them."""
    obj = as_objective(objective, latency_target_s, utilization)
    step = describe_step(model, as_phase(phase), batch, seq, dtypes, plan, experts_hit, overrides)
    return search(step, system, obj, latency_target_s, utilization, overlap, devices, prune, band, calibration)


__all__ = ["OBJECTIVES", "SplitRow", "SplitSearch", "as_objective", "search", "search_splits"]
