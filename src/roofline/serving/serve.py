"""The serving view of a model split over devices: time to first token, inter-token latency,
throughput against latency, the batches memory and a latency target allow, and cost.

Built only on roofline.models, so every number is the same graph and placement as `roofline model`:

    TTFT        the prefill step of one request's prompt (analyze_model, phase prefill, batch 1; with
                dp replicas one request per replica, batch dp): per request, no queueing
    ITL         the decode step (the numpy step model, StepModel.fit(..., split, devices_per_node)) at the
                batch and each context of the generation, prompt + 1 ... prompt + output:
                mean = their mean, last = the step at prompt + output
    e2e         TTFT + (output − 1) × ITL mean
    throughput  batch / ITL mean (output tokens/s over every replica); with pp stages the batch runs as
                pp micro-batches (ModelAnalysis.tokens_per_s): (batch / pp) / (micro-batch ITL × ⌈L/pp⌉/L);
                per device = system / (tp × pp × dp)
    max batch (memory)  ⌊(usable − weights − workspace) / (KV bytes per token × (prompt + output))⌋ per
                replica, × dp; per device, with the split; usable = capacity × utilization; workspace =
                the largest set of activations one kernel of the prompt's prefill reads and writes
    max batch (SLO)     the largest batch ≤ the memory's whose ITL mean ≤ the ITL target (binary search on
                the step model; ITL grows with the batch)
    goodput     throughput at that batch (the memory's without an ITL target) when TTFT meets its target;
                its expected band from the batches the band's times allow: low = the throughput with the
                band's high times at the largest batch meeting the targets with them, high = with its low
                times at theirs (0 where TTFT at that end of the band misses its target)
    cost        output: price/3600 × devices / output tokens/s × 1e6 per million output tokens;
                input:  price/3600 × devices × TTFT / (prompt × requests prefilled at once) × 1e6
    knee        the smallest batch b of the curve (1, 2, 4, ... 1024) whose doubling gains < 10% of
                throughput: T(2b) < 1.1 × T(b), on the roofline ceiling
    expected    every time is a floor (the roofline) and an expected band (roofline.serving.efficiency)

Layering: imports the models room (analysis, build, config, dtypes, memory, split, stepmodel, sweep),
roofline.parallel, roofline.units, roofline.vocab and this room's efficiency; numpy only inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from roofline.dtypes import DType
from roofline.errors import RooflineError
from roofline.hardware import DEFAULT_MACHINE, Machine
from roofline.models.analysis import ModelAnalysis, analyze_model
from roofline.models.build import DEFAULT_PLAN, as_plan
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, compute_dtype, for_checkpoint, model_dtypes
from roofline.models.memory import DEFAULT_UTILIZATION, device_kv_bytes, device_weights_bytes
from roofline.models.split import stage_layers
from roofline.models.stepmodel import StepModel, batch_unit
from roofline.models.sweep import resolve
from roofline.models.transformer import ModelConfig
from roofline.parallel import Split
from roofline.serving.chunked import ChunkedPrefill, check_chunk, chunked_prefill, step_band
from roofline.serving.disaggregate import Disaggregation, disaggregate, parse_ratio
from roofline.serving.efficiency import Band, Efficiency, Rate, per_rate
from roofline.serving.speculative import Speculative, speculative
from roofline.serving.speculative import check as check_speculative
from roofline.units import format_time, require_positive_int
from roofline.vocab import Phase, Plan, Role

CURVE_MAX_BATCH = 1024
KNEE_GAIN = 0.10  # the knee: the batch past which one more doubling gains less than this share
NO_CAPACITY_SEARCH = 1 << 24  # how far the SLO search looks on a machine without a memory capacity

FORMULAS = {
    "ttft_s": "prefill step of one request's prompt at batch 1 (per request, no queueing)",
    "itl_s": "decode step at the batch and each context prompt+1 ... prompt+output: mean and last",
    "e2e_s": "TTFT + (output - 1) x ITL mean",
    "throughput_tokens_per_s": "batch / ITL mean (pipeline: batch/pp / (micro-batch ITL x ceil(L/pp)/L)); "
                               "per device = system / devices",
    "max_batch_memory": "floor((usable - weights - workspace) / (KV bytes per token x (prompt + output))) per "
                        "replica, x dp; per device",
    "max_batch_slo": "largest batch <= max_batch_memory whose ITL mean <= --itl-slo (floor)",
    "goodput_tokens_per_s": "throughput at max_batch_slo (max_batch_memory without an ITL target) when TTFT "
                            "<= --ttft-slo; expected: low = throughput with the band's high times at the batch "
                            "that meets the targets with them (max_batch_slo_expected.low), high = with the low "
                            "times at max_batch_slo_expected.high; 0 where TTFT at that end misses --ttft-slo",
    "cost_per_million_tokens.output": "price / 3600 x devices / output tokens per s x 1e6",
    "cost_per_million_tokens.input": "price / 3600 x devices x TTFT / (prompt x requests prefilled at once) x 1e6",
    "knee_batch": "smallest curve batch b with throughput(2b) < 1.1 x throughput(b) (roofline ceiling)",
    "expected": "sum over kernels of floor / efficiency of its bound class + per-step overhead",
}


@dataclass(frozen=True)
class CurvePoint:
    batch: int
    itl: Band  # mean over the generation
    throughput: Rate  # system
    fits: bool | None
    meets_slo: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "itl_s": self.itl.to_dict(), "throughput_tokens_per_s": self.throughput.to_dict(),
                "fits": self.fits, "meets_itl_slo": self.meets_slo}


@dataclass(frozen=True)
class ServingReport:
    """Serving one model on one machine and split: every number a floor and an expected band."""

    config: ModelConfig
    machine: Machine
    system: str
    split: Split
    dtypes: ModelDtypes
    dtype: DType
    plan: Plan
    prompt: int
    output: int
    batch: int
    batch_chosen: str  # how the batch was chosen: given, the SLO's, or the smallest
    efficiency: Efficiency
    utilization: float
    overlap: bool
    ttft: Band
    itl_mean: Band
    itl_last: Band
    e2e: Band
    throughput: Rate
    pipeline_filled: bool  # at the batch: pp micro-batches in flight
    max_batch_memory: int | None
    max_batch_slo: int | None
    max_batch_slo_expected: tuple[int | None, int | None] | None  # (with the band's high times, with its low)
    goodput: Rate | None
    cost_input: Band | None
    cost_output: Band | None
    curve: tuple[CurvePoint, ...]
    knee_batch: int | None
    ttft_slo_s: float | None
    itl_slo_s: float | None
    price_per_device_hour: float | None
    weights_bytes: float
    kv_bytes_per_sequence: float  # per device, one sequence of prompt + output tokens
    workspace_bytes: float
    capacity_bytes: float | None
    prefill: ModelAnalysis = field(repr=False)
    warnings: tuple[str, ...] = ()
    machine_arg: str | Machine = DEFAULT_MACHINE  # as given: a system, a device or a file
    decoder: Any = field(default=None, repr=False, compare=False)  # the decode step model over the generation
    chunked: ChunkedPrefill | None = None  # --chunk: roofline.serving.chunked
    disaggregated: Disaggregation | None = None  # --disaggregate: roofline.serving.disaggregate
    speculative: Speculative | None = None  # --draft: roofline.serving.speculative

    def itl_at(self, batch: int) -> tuple[Band, Band]:
        """(mean, last) ITL at another batch, from the same step model."""
        means, lasts = self.decoder.itl([batch])
        return means[0], lasts[0]

    def decode_analysis(self, batch: int | None = None) -> ModelAnalysis:
        """The graph path's decode step at the batch and the last context (prompt + output): its time
        is ITL last's floor."""
        return analyze_model(self.config, self.machine_arg, Phase.DECODE, batch or self.batch, self.context,
                             self.plan, self.dtypes, self.prefill.model.experts_hit_override, None, self.split,
                             self.utilization, self.overlap)

    @property
    def devices(self) -> int:
        return self.split.devices

    @property
    def batch_unit(self) -> int:
        return batch_unit(self.split)

    @property
    def requests_prefilled(self) -> int:
        """Requests one TTFT step prefills: one per data-parallel replica."""
        return self.split.dp

    @property
    def usable_bytes(self) -> float | None:
        return None if self.capacity_bytes is None else self.capacity_bytes * self.utilization

    @property
    def context(self) -> int:
        return self.prompt + self.output

    @property
    def kv_bytes_per_token(self) -> float:
        """Per device: one token of context's KV cache under the split."""
        return self.kv_bytes_per_sequence / self.context

    @property
    def stage_share(self) -> float:
        return stage_layers(self.config, self.split) / self.config.num_layers

    @property
    def throughput_per_device(self) -> Rate:
        return self.throughput.scaled(1 / self.devices)

    @property
    def ttft_met(self) -> bool | None:
        return None if self.ttft_slo_s is None else self.ttft.floor <= self.ttft_slo_s

    @property
    def title(self) -> str:
        on = self.machine.name if self.split.trivial else f"{self.split} of {self.system or self.machine.name}"
        return (f"{self.config.name} serving on {on}: prompt {self.prompt}, output {self.output}, "
                f"batch {self.batch}")

    def assumptions(self) -> dict[str, Any]:
        return {"efficiency": self.efficiency.to_dict(), "formulas": dict(FORMULAS),
                "ttft": "per request: one prompt's prefill at batch 1 (one per replica with dp), no queueing, "
                        "no chunked prefill",
                "itl_contexts": [self.prompt + 1, self.prompt + self.output],
                "memory": f"usable = {self.utilization:g} x capacity; the workspace is the prompt's prefill's "
                          f"largest kernel activations; the decode activations are left out",
                "knee": f"smallest b with throughput(2b) < {1 + KNEE_GAIN:g} x throughput(b)",
                "overlap": self.overlap}

    def to_dict(self) -> dict[str, Any]:
        def opt(x: Band | Rate | None) -> dict[str, Any] | None:
            return None if x is None else x.to_dict()

        slo_exp = self.max_batch_slo_expected
        return {
            "model": self.config.name, "machine": self.machine.id, "system": self.system or None,
            "prompt": self.prompt, "output": self.output, "batch": self.batch, "batch_chosen": self.batch_chosen,
            "plan": self.plan, "dtypes": {**self.dtypes.to_dict(), "compute": self.dtype.name},
            "parallel": {**self.split.to_dict(), "system": self.system or self.machine.id,
                         "pipeline_filled": self.pipeline_filled},
            "ttft_s": self.ttft.to_dict(),
            "itl_s": {"mean": self.itl_mean.to_dict(), "last": self.itl_last.to_dict()},
            "e2e_s": self.e2e.to_dict(),
            "throughput_tokens_per_s": {"system": self.throughput.to_dict(),
                                        "per_device": self.throughput_per_device.to_dict()},
            "max_batch_memory": self.max_batch_memory,
            "max_batch_slo": self.max_batch_slo,
            "max_batch_slo_expected": None if slo_exp is None else {"low": slo_exp[0], "high": slo_exp[1]},
            "goodput_tokens_per_s": opt(self.goodput),
            "cost_per_million_tokens": {"input": opt(self.cost_input), "output": opt(self.cost_output),
                                        "price_per_device_hour": self.price_per_device_hour},
            "slo": {"ttft_s": self.ttft_slo_s, "itl_s": self.itl_slo_s, "ttft_met": self.ttft_met},
            "memory": {"weights_bytes": self.weights_bytes, "kv_bytes_per_token": self.kv_bytes_per_token,
                       "kv_bytes_per_sequence": self.kv_bytes_per_sequence, "workspace_bytes": self.workspace_bytes,
                       "capacity_bytes": self.capacity_bytes, "usable_bytes": self.usable_bytes,
                       "utilization": self.utilization},
            "curve": [p.to_dict() for p in self.curve],
            "knee_batch": self.knee_batch,
            "assumptions": self.assumptions(),
            "warnings": list(self.warnings),
            **{k: v.to_dict() for k, v in (("chunked", self.chunked), ("disaggregated", self.disaggregated),
                                           ("speculative", self.speculative)) if v is not None},
        }


class _Decode:
    """Decode steps over the generation's contexts for any batches: floors and bands, with numpy."""

    def __init__(self, sm: StepModel, machine: Machine, dtype: DType, eff: Efficiency, overlap: bool,
                 prompt: int, output: int) -> None:
        import numpy as np

        self.sm, self.machine, self.dtype, self.eff, self.overlap = sm, machine, dtype, eff, overlap
        self.contexts = np.arange(prompt + 1, prompt + output + 1, dtype=np.int64)
        self.lo_eff = np.array([eff.compute[0], eff.memory[0], eff.communication[0]])
        self.hi_eff = np.array([eff.compute[1], eff.memory[1], eff.communication[1]])
        comm = None
        if sm.link_mask is not None:
            comm = np.asarray(sm.link_mask) | np.asarray(sm.network_mask)
        self.comm = comm if overlap and comm is not None and comm.any() else None

    def steps(self, batches: Any) -> tuple[Any, Any, Any]:
        """Step times [batches, contexts]: floor, expected low, expected high."""
        import numpy as np

        b = np.asarray(batches, dtype=np.int64)
        nb, nc = b.size, self.contexts.size
        r = self.sm.evaluate(np.repeat(b, nc), np.tile(self.contexts, nb), self.machine, self.dtype)
        kt, kb = r["kernel_time_s"], r["kernel_bound"]
        # compute, memory, communication, by SWEPT_RESOURCES' codes (matrix, vector, dram, link, network, exp)
        cls = np.array([0, 0, 1, 2, 2, 0])[kb]
        fast, slow = kt / self.hi_eff[cls], kt / self.lo_eff[cls]
        oh_lo, oh_hi = self.eff.step_overhead_s
        if self.comm is None:
            floor, low, high = r["time_s"], fast.sum(axis=1) + oh_lo, slow.sum(axis=1) + oh_hi
        else:
            c = self.comm

            def over(t: Any) -> Any:
                return np.maximum(t[:, ~c].sum(axis=1), t[:, c].sum(axis=1))

            floor, low, high = over(kt), over(fast) + oh_lo, over(slow) + oh_hi
        return floor.reshape(nb, nc), low.reshape(nb, nc), high.reshape(nb, nc)

    def itl(self, batches: Any) -> tuple[list[Band], list[Band]]:
        """(mean, last) over the generation per batch."""
        f, lo, hi = self.steps(batches)
        means = [Band(float(a), float(b), float(c)) for a, b, c in
                 zip(f.mean(axis=1), lo.mean(axis=1), hi.mean(axis=1), strict=True)]
        lasts = [Band(float(a), float(b), float(c)) for a, b, c in zip(f[:, -1], lo[:, -1], hi[:, -1], strict=True)]
        return means, lasts


def _throughputs(dec: _Decode, batches: list[int], means: list[Band], split: Split, share: float,
                 unit: int) -> tuple[list[Rate], list[bool]]:
    """Output tokens/s over every replica per batch, as ModelAnalysis.tokens_per_s counts them: with pp
    stages and at least pp sequences a replica, pp micro-batches of batch/pp are in flight."""
    pp, dp = split.pp, split.dp
    ranks = unit // dp  # a micro-batch's sequences a replica must be a multiple of this (sequence split)
    filled = [pp > 1 and b // dp >= pp and (b // dp // pp) % ranks == 0 for b in batches]
    micro_batches = [b // dp // pp * dp for b, f in zip(batches, filled, strict=True) if f]
    micro = iter(dec.itl(micro_batches)[0] if micro_batches else [])
    out = []
    for b, m, f in zip(batches, means, filled, strict=True):
        out.append(per_rate(b / pp, next(micro).scaled(share)) if f else per_rate(float(b), m))
    return out, filled


def _largest_meeting(dec: _Decode, unit: int, most: int, target: float,
                     known: Mapping[int, tuple[float, float, float]]) -> list[int | None]:
    """The largest n in [1, most] whose batch n × unit has ITL mean ≤ target, for the floor, the
    expected high and the expected low times. `known`: n → (floor, low, high) means already evaluated
    (the curve's), which bracket each search. ITL mean is increasing and convex in the batch (each
    kernel's time is the larger of two linear functions of it), so the chord across a bracket crosses
    the target at or below the answer: each round tries that crossing, the next n and the midpoint of
    every search in one numpy call; exact, and a round or two in practice."""
    import numpy as np

    order = (0, 2, 1)  # floor, expected high, expected low
    seen = [{n: v[k] for n, v in known.items()} for k in order]
    lo = [max((n for n, t in sn.items() if n <= most and t <= target), default=0) for sn in seen]
    hi = [min([most, *(n - 1 for n, t in sn.items() if t > target)]) for sn in seen]
    while any(h > lo_ for lo_, h in zip(lo, hi, strict=True)):
        picks: list[set[int]] = []
        for sn, lo_, h in zip(seen, lo, hi, strict=True):
            if h <= lo_:
                picks.append(set())
                continue
            p = {(lo_ + h + 1) // 2}
            if lo_ in sn and h + 1 in sn and sn[h + 1] > sn[lo_]:
                g = lo_ + int((target - sn[lo_]) / (sn[h + 1] - sn[lo_]) * (h + 1 - lo_))
                p |= {min(max(g, lo_ + 1), h), min(max(g + 1, lo_ + 1), h)}
            picks.append(p)
        ns = sorted(set().union(*picks))
        times = dec.steps(np.array(ns) * unit)
        for which, k in enumerate(order):
            seen[which].update(zip(ns, times[k].mean(axis=1).tolist(), strict=True))
        for which, p in enumerate(picks):
            for n in p:
                if seen[which][n] <= target:
                    lo[which] = max(lo[which], n)
                else:
                    hi[which] = min(hi[which], n - 1)
    return [n or None for n in lo]


def _prefill_band(a: ModelAnalysis, eff: Efficiency) -> Band:
    """The prefill step's floor (analyze_model's time, exactly) and band: Σ kernel floor / its class's
    efficiency + the per-step overhead (chunked.step_band, the one place that sum is written)."""
    b = step_band(a.placements, eff, a.overlap)
    return Band(a.time_s, b.low, b.high)


def _largest_activations(a: ModelAnalysis) -> float:
    return max((sum(t.bytes for t in (*p.kernel.reads, *p.kernel.writes) if t.role is Role.ACTIVATION)
                for p in a.placements if p.kernel is not None), default=0.0)


def _positive(value: float | None, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise RooflineError(f"{label} must be a positive number, got {value!r}")
    return float(value)


def _add(a: Band, b: Band, k: float = 1.0) -> Band:
    return Band(a.floor + k * b.floor, a.low + k * b.low, a.high + k * b.high)


def _cost_output(price: float, devices: int, rate: Rate) -> Band:
    per_s = price / 3600 * devices * 1e6
    return Band(per_s / rate.ceiling, per_s / rate.high, per_s / rate.low)


def serve(model: str | ModelConfig, machine: str | Machine = DEFAULT_MACHINE, split: Split | None = None, *,
          prompt: int, output: int, batch: int | None = None, ttft_slo_s: float | None = None,
          itl_slo_s: float | None = None, price_per_device_hour: float | None = None,
          dtypes: ModelDtypes | None = None, plan: Plan | str = DEFAULT_PLAN,
          utilization: float = DEFAULT_UTILIZATION, overlap: bool = False, efficiency: Efficiency | None = None,
          experts_hit: int | None = None, overrides: Mapping[str, str] | None = None, chunk: int | None = None,
          disaggregate_devices: str | tuple[int, int] | None = None, draft: str | ModelConfig | None = None,
          draft_tokens: int | None = None, acceptance: float | None = None) -> ServingReport:
    """Serve `model` on `machine` under `split` with prompts of `prompt` tokens generating `output`.

    `batch` None: the largest batch meeting `itl_slo_s` when given, else the smallest (1, or the
    split's batch unit). Formulas in the module docstring; the cost formulas:

        output cost per 1M tokens = price_per_device_hour / 3600 × devices / (output tokens/s) × 1e6
        input cost per 1M tokens  = price_per_device_hour / 3600 × devices × TTFT / (prompt × dp) × 1e6

    What-ifs on the same graph and placement, each in its own module and its own report field:
    `chunk` (chunked prefill, roofline.serving.chunked), `disaggregate_devices` "P:D" (prefill and
    decode on separate groups, roofline.serving.disaggregate), `draft` with `draft_tokens` k (default
    4) and `acceptance` a (speculative decoding, roofline.serving.speculative).

    Raises RooflineError (one line) for targets no batch meets (naming the closest: batch 1), a
    prompt + output beyond the model's max_position_embeddings, a non-positive price, target,
    prompt or output, and a model whose weights leave no room for one sequence's KV cache; and for
    a non-positive chunk, a malformed P:D, k < 1 or a outside (0, 1]."""
    prompt = require_positive_int(prompt, "--prompt")
    output = require_positive_int(output, "--output")
    price = _positive(price_per_device_hour, "--price-per-device-hour")
    ttft_slo = _positive(ttft_slo_s, "--ttft-slo")
    itl_slo = _positive(itl_slo_s, "--itl-slo")
    if not 0 < utilization <= 1:
        raise RooflineError(f"--memory-utilization must be in (0, 1], got {utilization}")
    chunk = check_chunk(chunk)
    ratio = parse_ratio(disaggregate_devices)
    spec = None
    if draft is not None:
        spec = check_speculative(draft_tokens, acceptance)
    elif draft_tokens is not None or acceptance is not None:
        raise RooflineError("--draft-tokens and --acceptance need --draft MODEL (speculative decoding)")
    eff = efficiency or Efficiency()
    cfg = load_config(model, overrides)
    if prompt + output > cfg.max_position_embeddings:
        raise RooflineError(f"--prompt {prompt} + --output {output} = {prompt + output} tokens exceeds "
                            f"{cfg.name}'s context of {cfg.max_position_embeddings} (max_position_embeddings)")
    sp = split or Split()
    unit = batch_unit(sp)
    if batch is not None:
        batch = require_positive_int(batch, "--batch")
        if batch % unit:
            raise RooflineError(f"--batch {batch} is not a multiple of {unit} (each of the {sp.dp} replicas runs "
                                f"batch/dp sequences" + (", a multiple of tp under --ep with --tp)" if unit > sp.dp
                                                         else ")"))
    pl = as_plan(plan)
    dt = for_checkpoint(dtypes or model_dtypes(), cfg.weights_dtype, cfg.unquantized)
    m, dpn = resolve(machine, sp)
    cdt = compute_dtype(dt, m)

    # TTFT: one request's prompt (one per replica), exactly analyze_model's prefill step
    pre = analyze_model(cfg, machine, Phase.PREFILL, sp.dp, prompt, pl, dt, experts_hit, None, sp, utilization,
                        overlap)
    ttft = _prefill_band(pre, eff)
    warnings = list(pre.warnings)

    # memory: weights stay; each sequence of prompt + output tokens adds its KV cache (per device)
    weights = device_weights_bytes(cfg, sp, dt)
    kv_seq = device_kv_bytes(cfg, sp, sp.dp, prompt + output, dt)
    workspace = _largest_activations(pre)
    capacity = m.memory_capacity_bytes
    max_mem: int | None = None
    if capacity is not None:
        room = capacity * utilization - weights - workspace
        per_replica = int(room // kv_seq) if room > 0 else 0
        max_mem = per_replica // (unit // sp.dp) * unit
        if max_mem < unit:
            raise RooflineError(
                f"{cfg.name} on {sp} of {m.name}: weights {weights / 2**30:.1f} GiB + workspace "
                f"{workspace / 2**30:.2f} GiB + one sequence's KV cache of {prompt + output} tokens "
                f"{kv_seq / 2**30:.2f} GiB exceed the usable {capacity * utilization / 2**30:.1f} GiB per device "
                f"({utilization:g} of {capacity / 2**30:.1f} GiB); take a larger split (roofline plan)")

    # decode: the step model once, every batch and context with numpy
    sm = StepModel.fit(cfg, Phase.DECODE, dt, pl, experts_hit, sp, dpn)
    dec = _Decode(sm, m, cdt, eff, overlap, prompt, output)
    share = stage_layers(cfg, sp) / cfg.num_layers

    top = max(CURVE_MAX_BATCH, unit)
    curve_b = [unit << k for k in range(64) if unit << k <= top]
    curve_means, curve_lasts = dec.itl(curve_b)
    first_mean = curve_means[0]
    if itl_slo is not None and first_mean.floor > itl_slo:
        raise RooflineError(f"--itl-slo {format_time(itl_slo)}: no batch meets it; the closest is batch {unit}, whose "
                            f"ITL (mean over the generation) is {format_time(first_mean.floor)} at the roofline "
                            f"floor (expected {format_time(first_mean.low)}-{format_time(first_mean.high)})")
    if ttft_slo is not None and ttft.floor > ttft_slo:
        raise RooflineError(f"--ttft-slo {format_time(ttft_slo)}: no batch meets it; TTFT is per request (one "
                            f"prompt's prefill at batch 1, no queueing) and its floor is {format_time(ttft.floor)} "
                            f"(expected {format_time(ttft.low)}-{format_time(ttft.high)}) even at batch 1")

    curve_f, curve_lo, curve_hi = ([getattr(m, k) for m in curve_means] for k in ("floor", "low", "high"))
    most = (max_mem if max_mem is not None else NO_CAPACITY_SEARCH * unit) // unit
    max_slo = slo_exp = None
    if itl_slo is not None:
        known = {b // unit: (f, lo, hi) for b, f, lo, hi in zip(curve_b, curve_f, curve_lo, curve_hi, strict=True)}
        found, lo_n, hi_n = _largest_meeting(dec, unit, most, itl_slo, known)  # floor; expected high, low times
        max_slo = None if found is None else found * unit
        slo_exp = (None if lo_n is None else lo_n * unit, None if hi_n is None else hi_n * unit)

    if batch is not None:
        chosen = "given"
    elif max_slo is not None:
        batch, chosen = max_slo, "the largest batch meeting --itl-slo"
    else:
        batch, chosen = unit, "the smallest (give --batch or --itl-slo)"
    if max_mem is not None and batch > max_mem:
        warnings.append(f"batch {batch} does not fit: at most {max_mem} sequences of {prompt + output} tokens fit "
                        f"in memory")

    # goodput's batches (floor, expected low, expected high): the ITL target's with the floor's, the band's
    # high and the band's low times; without an ITL target, the memory's
    good_at: tuple[int | None, int | None, int | None] = (None, None, None)
    if itl_slo is not None:
        good_at = (max_slo, *(slo_exp or (None, None)))
    elif ttft_slo is not None:
        good_at = (max_mem, max_mem, max_mem)
    extra = [b for b in dict.fromkeys((batch, *good_at)) if b is not None and b not in curve_b]
    batches = [*curve_b, *extra]
    more = dec.itl(extra) if extra else ([], [])
    means, lasts = [*curve_means, *more[0]], [*curve_lasts, *more[1]]
    rates, filled = _throughputs(dec, batches, means, sp, share, unit)
    by_batch = {b: (mn, la, r, f) for b, mn, la, r, f in zip(batches, means, lasts, rates, filled, strict=True)}
    curve = tuple(CurvePoint(b, by_batch[b][0], by_batch[b][2], None if max_mem is None else b <= max_mem,
                             None if itl_slo is None else by_batch[b][0].floor <= itl_slo) for b in curve_b)
    knee = next((p.batch for p, q in pairwise(curve)
                 if q.throughput.ceiling < (1 + KNEE_GAIN) * p.throughput.ceiling), None)

    itl_mean, itl_last, rate, pipe = by_batch[batch]
    if chosen == "given" and itl_slo is not None and itl_mean.floor > itl_slo:
        warnings.append(f"batch {batch} misses --itl-slo {format_time(itl_slo)}: its ITL mean is "
                        f"{format_time(itl_mean.floor)} at the floor; the largest batch meeting it is {max_slo}")
    e2e = _add(ttft, itl_mean, output - 1)
    goodput = None
    if good_at[0] is not None:
        # the band's ends: a batch meets the targets only with the times at that end (TTFT's too)
        slow_ok = ttft_slo is None or ttft.high <= ttft_slo
        fast_ok = ttft_slo is None or ttft.low <= ttft_slo
        low = by_batch[good_at[1]][2].low if good_at[1] is not None and slow_ok else 0.0
        high = by_batch[good_at[2]][2].high if good_at[2] is not None and fast_ok else 0.0
        goodput = Rate(by_batch[good_at[0]][2].ceiling, low, high)
    cost_in = cost_out = None
    if price is not None:
        cost_in = ttft.scaled(price / 3600 * sp.devices / (prompt * sp.dp) * 1e6)
        cost_out = _cost_output(price, sp.devices, rate)
    report = ServingReport(cfg, m, pre.system, sp, dt, cdt, pl, prompt, output, batch, chosen, eff, utilization,
                           overlap, ttft, itl_mean, itl_last, e2e, rate, pipe, max_mem, max_slo, slo_exp, goodput,
                           cost_in, cost_out, curve, knee, ttft_slo, itl_slo, price, weights, kv_seq, workspace,
                           capacity, pre, tuple(warnings), machine, dec)
    if chunk is None and ratio is None and spec is None:
        return report

    def run(what: str | ModelConfig, split: Split, b: int) -> ServingReport:
        return serve(what, machine, split, prompt=prompt, output=output, batch=b, dtypes=dt, plan=pl,
                     utilization=utilization, overlap=overlap, efficiency=eff, experts_hit=experts_hit)

    if chunk is not None:
        report = replace(report, chunked=chunked_prefill(report, chunk))
    if ratio is not None:
        report = replace(report, disaggregated=disaggregate(report, ratio, lambda s, b: run(cfg, s, b)))
    if spec is not None and draft is not None:
        name = draft if isinstance(draft, str) else draft.name
        draft_cfg = load_config(draft)

        def run_draft(b: int) -> ServingReport:
            try:
                return run(draft_cfg, sp, b)
            except RooflineError as exc:
                raise RooflineError(f"--draft {name} runs beside the target on {sp}, and {exc}") from None

        report = replace(report, speculative=speculative(report, name, spec[0], spec[1], run_draft))
        if draft_cfg.vocab_size != cfg.vocab_size:
            report = replace(report, warnings=(*report.warnings, (
                f"the draft {draft_cfg.name}'s vocabulary ({draft_cfg.vocab_size:,} tokens) is not {cfg.name}'s "
                f"({cfg.vocab_size:,}): speculative decoding needs the target's tokenizer, so this pair is a timing "
                f"exercise only")))
    return report


__all__ = ["CURVE_MAX_BATCH", "FORMULAS", "KNEE_GAIN", "CurvePoint", "ServingReport", "serve"]
