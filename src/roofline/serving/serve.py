"""The serving view of a model split over devices: time to first token, inter-token latency,
throughput against latency, the batches memory and a latency target allow, and cost.

Built only on roofline.models, so every number is the same graph and placement as `roofline model`:

    TTFT        the prefill step of one request's prompt (analyze_model, phase prefill, batch 1; with
                dp replicas one request per replica, batch dp): per request, no queueing
    ITL         the decode step (the numpy step model, StepModel.fit(..., split, devices_per_node)) at the
                batch and each context of the generation, prompt + 1 ... prompt + output:
                mean = their mean, last = the step at prompt + output
    e2e         TTFT + (output − 1) × ITL mean
    throughput  the workload's output tokens over the run's time, prefill counted, as engines' benchmarks
                report it: in the steady state of continuous batching each replica decodes its batch/dp
                sequences `output` times and prefills as many new prompts (chunked prefill: the chunks
                ride the decode steps), so tokens/s = 1 / (1/decode + TTFT × share / (dp × output))
                (roofline.serving.decode.workload_rate); decode = batch / ITL mean (output tokens/s over
                every replica, prefill left out: `decode_alone`); with pp stages the batch runs as pp
                micro-batches (ModelAnalysis.tokens_per_s): (batch / pp) / (micro-batch ITL × ⌈L/pp⌉/L);
                per device = system / (tp × pp × dp)
    max batch (memory)  ⌊(usable − weights − workspace) / (KV bytes per token × (prompt + output))⌋ per
                replica, × dp; per device, with the split; usable = capacity × utilization; workspace =
                the largest set of activations one kernel of the prompt's prefill reads and writes
    max batch (SLO)     the largest batch ≤ the memory's with ITL mean ≤ the target (per all-reduce regime)
    goodput     throughput at that batch (the memory's without an ITL target) when TTFT meets its target;
                its expected band from the batches the band's times allow: low = the throughput with the
                band's high times at the largest batch meeting the targets with them, high = with its low
                times at theirs (0 where TTFT at that end of the band misses its target)
    cost        output: price/3600 × devices / output tokens/s × 1e6 per million output tokens;
                input:  price/3600 × devices × TTFT / (prompt × requests prefilled at once) × 1e6
    knee        the smallest batch b of the curve (1, 2, 4, ... 1024, then on to the first doubling at or
                past the memory's largest batch) whose doubling gains < 10% of throughput:
                T(2b) < 1.1 × T(b), on the roofline ceiling
    expected    every time is a floor (the roofline) and an expected band: each kernel's calibrated band, as
                `roofline model` gives it (roofline.expectation: the device's shipped fit by engine, or
                --calibration FILE), summed over the step, + the per-step overhead (a constant;
                roofline.serving.efficiency)

numpy is imported only inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType
from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.hardware import DEFAULT_MACHINE, Machine, System
from roofline.models.analysis import ModelAnalysis, analyze
from roofline.models.build import DEFAULT_PLAN
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes
from roofline.models.memory import DEFAULT_UTILIZATION, device_kv_bytes, device_weights_bytes, sequences_that_fit
from roofline.models.split import stage_share
from roofline.models.step import Step, describe_step
from roofline.models.stepmodel import StepModel, batch_unit
from roofline.models.transformer import ModelConfig
from roofline.parallel import Deployment, Split, deploy
from roofline.serving.chunked import ChunkedPrefill, check_chunk, chunked_prefill, step_band
from roofline.serving.decode import Decode, first_look, slo_batches, throughputs, workload_rate
from roofline.serving.disaggregate import Disaggregation, check_groups, disaggregate, parse_ratio
from roofline.serving.efficiency import Band, Efficiency, Rate
from roofline.serving.speculative import Speculative, check_draft, mtp_draft, speculative
from roofline.serving.speculative import check as check_speculative
from roofline.units import format_time, require_positive_int
from roofline.vocab import Phase, Plan

if TYPE_CHECKING:  # pragma: no cover
    from roofline.calibration.choose import Band as KernelBand

CURVE_MAX_BATCH = 1024
KNEE_GAIN = 0.10  # the knee: the batch past which one more doubling gains less than this share

FORMULAS = {
    "ttft_s": "prefill step of one request's prompt at batch 1 (per request, no queueing)",
    "itl_s": "decode step at the batch and each context prompt+1 ... prompt+output: mean and last",
    "e2e_s": "TTFT + (output - 1) x ITL mean",
    "throughput_tokens_per_s": "the workload's output tokens over the run's time, prefill counted (continuous "
                               "batching with chunked prefill, steady state): 1 / (1/decode + TTFT x share / "
                               "(dp x output)), decode = batch / ITL mean (pipeline: batch/pp / (micro-batch ITL x "
                               "ceil(L/pp)/L)); per device = system / devices",
    "max_batch_memory": "floor((usable - weights - workspace) / (KV bytes per token x (prompt + output))) per "
                        "device, which is per replica (each device of a replica holds its share of every "
                        "sequence), rounded down to the batch unit's share of a replica, x dp replicas",
    "max_batch_slo": "largest batch <= max_batch_memory whose ITL mean <= --itl-slo (floor)",
    "goodput_tokens_per_s": "throughput at max_batch_slo (max_batch_memory without an ITL target) when TTFT "
                            "<= --ttft-slo; expected: low = throughput with the band's high times at the batch "
                            "that meets the targets with them (max_batch_slo_expected.low), high = with the low "
                            "times at max_batch_slo_expected.high; 0 where TTFT at that end misses --ttft-slo",
    "cost_per_million_tokens.output": "price / 3600 x devices / output tokens per s x 1e6",
    "cost_per_million_tokens.input": "price / 3600 x devices x TTFT / (prompt x requests prefilled at once) x 1e6",
    "knee_batch": "smallest curve batch b with throughput(2b) < 1.1 x throughput(b) (roofline ceiling); the "
                  "curve: 1, 2, 4, ... 1024, then on to the first doubling at or past max_batch_memory",
    "expected": "sum over kernels of runs x each kernel's calibrated band (roofline.expectation, as roofline model "
                "gives it) + per-step overhead (a constant: no measured table applies)",
}


@frozen
class CurvePoint:
    batch: int
    itl: Band  # mean over the generation
    throughput: Rate  # system
    fits: bool | None
    meets_slo: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "itl_s": self.itl.to_dict(), "throughput_tokens_per_s": self.throughput.to_dict(),
                "fits": self.fits, "meets_itl_slo": self.meets_slo}


@frozen
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
    machine_arg: str | Machine | System = DEFAULT_MACHINE  # as given: a system, a device or a file
    decoder: Any = field(default=None, repr=False, compare=False)  # the decode step model over the generation
    chunked: ChunkedPrefill | None = None  # --chunk: roofline.serving.chunked
    disaggregated: Disaggregation | None = None  # --disaggregate: roofline.serving.disaggregate
    speculative: Speculative | None = None  # --draft: roofline.serving.speculative
    decode_throughput: Rate | None = None  # batch / ITL mean: decode alone, the prefill left out (system)
    split_search: Any = field(default=None, repr=False, compare=False)  # serving.splits.ServeSearch, no split given

    def itl_at(self, batch: int) -> tuple[Band, Band]:
        """(mean, last) ITL at another batch, from the same step model."""
        means, lasts = self.decoder.itl([batch])
        return means[0], lasts[0]

    def decode_analysis(self, batch: int | None = None) -> ModelAnalysis:
        """The graph path's decode step at the batch and the last context (prompt + output): its time
        is ITL last's floor."""
        step = replace(self.prefill.step, phase=Phase.DECODE, batch=batch or self.batch, seq=self.context)
        return analyze(step, self.prefill.deployment, self.utilization, self.overlap)

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
        return stage_share(self.config, self.split)

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
                                        "per_device": self.throughput_per_device.to_dict(),
                                        "decode_alone": opt(self.decode_throughput)},
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
                                           ("speculative", self.speculative), ("split_search", self.split_search))
               if v is not None},
        }


def _prefill_band(a: ModelAnalysis, eff: Efficiency, bands: Sequence[KernelBand] | None = None) -> Band:
    """The prefill step's floor (analyze_model's time, exactly) and band: Σ runs × each kernel's
    calibrated band (`bands`, one a placement, when already taken) + the per-step overhead
    (chunked.step_band, the one place that sum is written); --two-batch-overlap hides the MoE
    all-to-all under compute in both, as in the decode steps."""
    b = step_band(a.placements, eff, a.overlap, two_batch=a.two_batch_overlap, bands=bands)
    host = eff.prefill_dispatch_per_layer_s * a.config.num_layers  # the engine's prefill dispatch (vLLM's)
    return Band(a.time_s, b.low + host, b.high + host)


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


@frozen
class _Memory:
    """One device's memory for serving (roofline.models.memory): the weights and one workspace stay,
    each sequence of prompt + output tokens adds its KV cache; `max_batch` the sequences that fit."""

    weights_bytes: float
    kv_bytes_per_sequence: float
    workspace_bytes: float
    capacity_bytes: float | None
    max_batch: int | None  # None without a capacity


def _checked_inputs(prompt: int, output: int, price: float | None, ttft_slo_s: float | None,
                    itl_slo_s: float | None, utilization: float) -> tuple[int, int, float | None, float | None,
                                                                          float | None]:
    """(prompt, output, price, TTFT target, ITL target), each a positive number, and the utilization in (0, 1]."""
    checked = (require_positive_int(prompt, T.prompt), require_positive_int(output, T.output),
               _positive(price, T.price_per_device_hour), _positive(ttft_slo_s, T.ttft_slo_s),
               _positive(itl_slo_s, T.itl_slo_s))
    if not 0 < utilization <= 1:
        raise RooflineError(f"{T.utilization} must be in (0, 1], got {utilization}")
    return checked


def _checked_what_ifs(chunk: int | None, disaggregate_devices: str | tuple[int, int] | None,
                      draft: str | ModelConfig | None, draft_tokens: int | None,
                      acceptance: float | None) -> tuple[int | None, tuple[int, int] | None, Any]:
    """(chunk, P:D, (k, a)) of the what-ifs asked for, each checked (None where not asked)."""
    chunk = check_chunk(chunk)
    ratio = parse_ratio(disaggregate_devices)
    spec = None
    if draft is not None:
        spec = check_speculative(draft_tokens, acceptance)
    elif draft_tokens is not None or acceptance is not None:
        raise RooflineError(f"{T.draft_tokens} and {T.acceptance} need {T.draft} MODEL (speculative decoding)")
    return chunk, ratio, spec


def check_what_ifs(cfg: ModelConfig, machine: str | Machine | System, prompt: int, output: int, split: Split | None,
                   chunk: int | None = None, disaggregate_devices: str | tuple[int, int] | None = None,
                   draft: str | ModelConfig | None = None, draft_tokens: int | None = None,
                   acceptance: float | None = None, mtp: int | None = None) -> tuple[Any, Any, Any, Any]:
    """(chunk, P:D, (k, a), the draft) with everything about them checked before any step is built (a
    draft or a P:D that cannot run is named in a second, not after the serving report): the draft's
    config, context and split beside the target (speculative.check_draft), P:D's groups on the system
    (disaggregate.check_groups); `split` None: not chosen yet; `mtp` k: the model's own MTP layers as the draft."""
    if mtp is not None:
        draft, draft_tokens = mtp_draft(cfg, mtp, draft, draft_tokens, acceptance)
    chunk, ratio, spec = _checked_what_ifs(chunk, disaggregate_devices, draft, draft_tokens, acceptance)
    if ratio is not None:
        check_groups(cfg, machine, ratio)
    if spec is not None and draft is not None:
        check_draft(draft, spec[0], prompt, output, split)
    return chunk, ratio, spec, draft


def _checked_batch(cfg: ModelConfig, prompt: int, output: int, batch: int | None, sp: Split) -> int | None:
    """The generation within the model's context, and a given batch a multiple of the split's unit."""
    if prompt + output > cfg.max_position_embeddings:
        raise RooflineError(f"{T.prompt} {prompt} + {T.output} {output} = {prompt + output} tokens exceeds "
                            f"{cfg.name}'s context of {cfg.max_position_embeddings} (max_position_embeddings)")
    if batch is None:
        return None
    unit = batch_unit(sp)
    batch = require_positive_int(batch, T.batch)
    if batch % unit:
        raise RooflineError(f"{T.batch} {batch} is not a multiple of {unit} (each of the {sp.dp} replicas runs "
                            f"batch/dp sequences" + (f", a multiple of tp under {T.ep} with {T.tp})" if unit > sp.dp
                                                     else ")"))
    return batch


def _memory(pre: ModelAnalysis, context: int, utilization: float, unit: int) -> _Memory:
    """Weights and KV cache per device (roofline.models.memory), the prefill's workspace, and the most
    sequences of `context` tokens that fit; an error when not one does."""
    cfg, sp, dt, m = pre.config, pre.split, pre.model.dtypes, pre.machine
    weights = device_weights_bytes(cfg, sp, dt)
    kv_seq = device_kv_bytes(cfg, sp, sp.dp, context, dt)
    workspace = pre.workspace_bytes
    capacity = m.memory_capacity_bytes
    if capacity is None:
        return _Memory(weights, kv_seq, workspace, None, None)
    max_mem = sequences_that_fit(weights, workspace, kv_seq, capacity * utilization, sp.dp, unit)
    if max_mem < unit:
        raise RooflineError(
            f"{cfg.name} on {sp} of {m.name}: weights {weights / 2**30:.1f} GiB + workspace "
            f"{workspace / 2**30:.2f} GiB + one sequence's KV cache of {context} tokens "
            f"{kv_seq / 2**30:.2f} GiB exceed the usable {capacity * utilization / 2**30:.1f} GiB per device "
            f"({utilization:g} of {capacity / 2**30:.1f} GiB); take a larger split (roofline plan)")
    return _Memory(weights, kv_seq, workspace, capacity, max_mem)


def _check_targets_met(first_mean: Band, ttft: Band, itl_slo: float | None, ttft_slo: float | None,
                       unit: int) -> None:
    """An error when even the smallest batch misses the ITL target, or TTFT (per request) misses its own."""
    _check_itl_met(first_mean, itl_slo, unit)
    _check_ttft_met(ttft, ttft_slo)


def _check_itl_met(first_mean: Band, itl_slo: float | None, unit: int) -> None:
    """An error when even the smallest batch misses the ITL target (`first_mean`: its ITL mean)."""
    if itl_slo is not None and first_mean.floor > itl_slo:
        raise RooflineError(f"{T.itl_slo_s} {format_time(itl_slo)}: no batch meets it; the closest is batch {unit}, "
                            f"whose "
                            f"ITL (mean over the generation) is {format_time(first_mean.floor)} at the roofline "
                            f"floor (expected {format_time(first_mean.low)}-{format_time(first_mean.high)})")


def _check_ttft_met(ttft: Band, ttft_slo: float | None) -> None:
    """An error when TTFT (per request) misses its target."""
    if ttft_slo is not None and ttft.floor > ttft_slo:
        raise RooflineError(f"{T.ttft_slo_s} {format_time(ttft_slo)}: no batch meets it; TTFT is per request (one "
                            f"prompt's prefill at batch 1, no queueing) and its floor is {format_time(ttft.floor)} "
                            f"(expected {format_time(ttft.low)}-{format_time(ttft.high)}) even at batch 1")


def _chosen_batch(batch: int | None, max_slo: int | None, unit: int) -> tuple[int, str]:
    """The batch and how it was chosen: given, the ITL target's largest, or the smallest."""
    if batch is not None:
        return batch, "given"
    if max_slo is not None:
        return max_slo, "the largest batch meeting --itl-slo"
    return unit, "the smallest (give --batch or --itl-slo)"


def _goodput(good_at: tuple[int | None, int | None, int | None], by_batch: Mapping[int, Any], ttft: Band,
             ttft_slo: float | None) -> Rate | None:
    """Throughput at goodput's batches (floor, expected low, expected high); an end of the band counts
    only where TTFT meets its target with that end's times."""
    if good_at[0] is None:
        return None
    slow_ok = ttft_slo is None or ttft.high <= ttft_slo
    fast_ok = ttft_slo is None or ttft.low <= ttft_slo
    low = by_batch[good_at[1]][2].low if good_at[1] is not None and slow_ok else 0.0
    high = by_batch[good_at[2]][2].high if good_at[2] is not None and fast_ok else 0.0
    return Rate(by_batch[good_at[0]][2].ceiling, low, high)


def serve(step: Step, deployment: Deployment, *, output: int, batch: int | None = None,
          ttft_slo_s: float | None = None, itl_slo_s: float | None = None,
          price_per_device_hour: float | None = None, utilization: float = DEFAULT_UTILIZATION,
          overlap: bool = False, efficiency: Efficiency | None = None, chunk: int | None = None,
          disaggregate_devices: str | tuple[int, int] | None = None, draft: str | ModelConfig | None = None,
          draft_tokens: int | None = None, acceptance: float | None = None, mtp: int | None = None) -> ServingReport:
    """Serve `step`'s model on `deployment` (roofline.parallel.deploy): prompts of `step.seq` tokens
    (the step is the prompt's prefill: its model, dtypes, fusion plan and experts hit; serve runs it
    at batch dp, one request a replica) generating `output` tokens each.

    `batch` None: the largest batch meeting `itl_slo_s` when given, else the smallest (1, or the
    split's batch unit). Formulas in the module docstring; the cost formulas:

        output cost per 1M tokens = price_per_device_hour / 3600 × devices / (output tokens/s) × 1e6
        input cost per 1M tokens  = price_per_device_hour / 3600 × devices × TTFT / (prompt × dp) × 1e6

    What-ifs on the same graph and placement, each in its own module and its own report field:
    `chunk` (chunked prefill, roofline.serving.chunked), `disaggregate_devices` "P:D" (prefill and
    decode on separate groups, roofline.serving.disaggregate), `draft` with `draft_tokens` k (default
    4) and `acceptance` a (speculative decoding, roofline.serving.speculative); `mtp` k: the model's own
    multi-token-prediction layers as the draft (speculative.mtp_draft).

    Raises RooflineError (one line) for targets no batch meets (naming the closest: batch 1), a
    prompt + output beyond the model's max_position_embeddings, a non-positive price, target,
    prompt or output, and a model whose weights leave no room for one sequence's KV cache; and for
    a non-positive chunk, a malformed P:D, k < 1 or a outside (0, 1]."""
    prompt, output, price, ttft_slo, itl_slo = _checked_inputs(step.seq, output, price_per_device_hour, ttft_slo_s,
                                                               itl_slo_s, utilization)
    cfg, sp = step.config, deployment.split
    batch = _checked_batch(cfg, prompt, output, batch, sp)
    chunk, ratio, spec, draft = check_what_ifs(cfg, deployment.given if deployment.given is not None else
                                               deployment.machine, prompt, output, sp, chunk, disaggregate_devices,
                                               draft, draft_tokens, acceptance, mtp)
    eff = (efficiency or Efficiency()).for_device(deployment.machine.id)
    # TTFT: one request's prompt (one per replica): the prefill step at batch dp on the deployment
    step = replace(step, phase=Phase.PREFILL, batch=sp.dp)
    report = _serve_step(step, deployment, output, batch, ttft_slo, itl_slo, price, eff, utilization, overlap)
    if chunk is None and ratio is None and spec is None:
        return report

    def run(what: ModelConfig, split: Split, b: int) -> ServingReport:
        other = step if what is cfg else describe_step(what, Phase.PREFILL, split.dp, prompt, step.dtypes,
                                                         step.plan, step.experts_hit)
        return serve(replace(other, batch=split.dp), deployment.with_split(split), output=output, batch=b,
                     utilization=utilization, overlap=overlap, efficiency=eff)

    if chunk is not None:
        report = replace(report, chunked=chunked_prefill(report, chunk))
    if ratio is not None:
        report = replace(report, disaggregated=disaggregate(report, ratio, lambda s, b: run(cfg, s, b)))
    if spec is not None and draft is not None:
        report = _with_draft(report, draft, spec, run)
    return report


def serve_model(model: str | ModelConfig, machine: str | Machine = DEFAULT_MACHINE, split: Split | None = None, *,
                prompt: int, output: int, dtypes: ModelDtypes | None = None, plan: Plan | str = DEFAULT_PLAN,
                experts_hit: int | None = None, overrides: Mapping[str, str] | None = None,
                **options: Any) -> ServingReport:
    """serve() from a model name and a machine name, as analyze_model is analyze() from them: the
    prompt's prefill step (describe_step) and the deployment (deploy) resolved once, every other
    keyword passed to serve()."""
    # the inputs checked before the model is read, so a bad number is named first
    _checked_inputs(prompt, output, options.get("price_per_device_hour"), options.get("ttft_slo_s"),
                    options.get("itl_slo_s"), options.get("utilization", DEFAULT_UTILIZATION))
    sp = split or Split()
    step = describe_step(model, Phase.PREFILL, sp.dp, prompt, dtypes, plan, experts_hit, overrides)
    return serve(step, deploy(machine, sp), output=output, **options)


def curve_batches(unit: int, max_mem: int | None) -> list[int]:
    """The curve's batches: the unit doubled up to CURVE_MAX_BATCH (the unit alone past it), then on to
    the first doubling at or past the memory's largest batch, so the curve reaches what memory allows."""
    top = max(CURVE_MAX_BATCH, unit)
    out = [unit << k for k in range(64) if unit << k <= top]
    while max_mem is not None and out[-1] < max_mem:
        out.append(out[-1] * 2)
    return out


@frozen
class Prepared:
    """One deployment's request, checked, and what every answer about it starts from (serve's report,
    a split search's quote: roofline.serving.quote): the prompt's prefill (TTFT's analysis and band),
    the warnings so far, the memory, the decode step model."""

    step: Step  # the prompt's prefill at batch dp
    deployment: Deployment
    output: int
    batch: int | None  # as given
    ttft_slo: float | None
    itl_slo: float | None
    price: float | None
    eff: Efficiency
    utilization: float
    overlap: bool
    pre: ModelAnalysis
    ttft: Band
    warnings: tuple[str, ...]
    mem: _Memory
    sm: StepModel

    def decode(self) -> Decode:
        """The decode steps over the generation's contexts (a new one: its rows are evaluated as asked)."""
        return Decode(self.sm, self.deployment.machine, self.pre.dtype, self.eff, self.overlap, self.step.seq,
                      self.output)


def prepare(step: Step, d: Deployment, output: int, batch: int | None, ttft_slo: float | None,
            itl_slo: float | None, price: float | None, eff: Efficiency, utilization: float,
            overlap: bool) -> Prepared:
    """TTFT from the prefill `step`, the memory, and the decode step model, once per deployment."""
    cfg, sp, prompt = step.config, d.split, step.seq
    unit = batch_unit(sp)
    pre = analyze(step, d, utilization, overlap, plans=(step.plan,))  # TTFT's plan alone: the others unused
    bands = [eff.band(p) for p in pre.placements]
    ttft = _prefill_band(pre, eff, bands)
    warnings = list(pre.warnings) + list(dict.fromkeys(w for b in bands for w in b.warnings))
    mem = _memory(pre, prompt + output, utilization, unit)
    # decode: the step model once, every batch and context with numpy
    sm = StepModel.fit(cfg, Phase.DECODE, step.dtypes, step.plan, step.experts_hit, sp, d.graph_devices_per_node,
                       d.nvls)
    return Prepared(step, d, output, batch, ttft_slo, itl_slo, price, eff, utilization, overlap, pre, ttft,
                    tuple(warnings), mem, sm)


def _serve_step(step: Step, d: Deployment, output: int, batch: int | None,
                ttft_slo: float | None, itl_slo: float | None, price: float | None, eff: Efficiency,
                utilization: float, overlap: bool) -> ServingReport:
    """The serving report of one deployment: TTFT from the prefill `step`, then memory, the decode
    curve, the batches the targets allow, the chosen batch, goodput and cost, in that order."""
    return report_of(prepare(step, d, output, batch, ttft_slo, itl_slo, price, eff, utilization, overlap))


def report_of(prep: Prepared) -> ServingReport:
    """_serve_step from its prepared deployment: the decode curve, the batches the targets allow, the
    chosen batch, goodput and cost."""
    step, d, output, ttft, itl_slo, max_mem = prep.step, prep.deployment, prep.output, prep.ttft, prep.itl_slo, \
        prep.mem.max_batch
    cfg, sp, m, prompt = step.config, d.split, d.machine, step.seq
    unit = batch_unit(sp)
    warnings = list(prep.warnings)
    dec = prep.decode()
    curve_b = curve_batches(unit, max_mem)
    regimes = first_look(dec, unit, max_mem, curve_b) if itl_slo is not None else None  # with the curve
    curve_means, curve_lasts = dec.itl(curve_b)
    _check_targets_met(curve_means[0], ttft, itl_slo, prep.ttft_slo, unit)
    max_slo, slo_exp = slo_batches(dec, unit, max_mem, itl_slo, curve_b, curve_means, regimes)
    batch, chosen = _chosen_batch(prep.batch, max_slo, unit)
    if max_mem is not None and batch > max_mem:
        warnings.append(f"batch {batch} does not fit: at most {max_mem} sequences of {prompt + output} tokens fit "
                        f"in memory")

    # goodput's batches (floor, expected low, expected high): the ITL target's with the floor's, the band's
    # high and the band's low times; without an ITL target, the memory's
    good_at: tuple[int | None, int | None, int | None] = (None, None, None)
    if itl_slo is not None:
        good_at = (max_slo, *(slo_exp or (None, None)))
    elif prep.ttft_slo is not None:
        good_at = (max_mem, max_mem, max_mem)
    extra = [b for b in dict.fromkeys((batch, *good_at)) if b is not None and b not in curve_b]
    batches = [*curve_b, *extra]
    more = dec.itl(extra) if extra else ([], [])
    means, lasts = [*curve_means, *more[0]], [*curve_lasts, *more[1]]
    decode_rates, filled = throughputs(dec, batches, means, sp, stage_share(cfg, sp), unit)
    # the workload's throughput counts each new request's prefill in the steady state (workload_rate)
    rates = [workload_rate(r, ttft, output, sp.dp, stage_share(cfg, sp) if f else 1.0)
             for r, f in zip(decode_rates, filled, strict=True)]
    decode_of = dict(zip(batches, decode_rates, strict=True))
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
    cost_in = cost_out = None
    price, mem, pre = prep.price, prep.mem, prep.pre
    if price is not None:
        cost_in = ttft.scaled(price / 3600 * sp.devices / (prompt * sp.dp) * 1e6)
        cost_out = _cost_output(price, sp.devices, rate)
    return ServingReport(cfg, m, pre.system, sp, step.dtypes, pre.dtype, step.plan, prompt, output, batch, chosen,
                         prep.eff, prep.utilization, prep.overlap, ttft, itl_mean, itl_last, e2e, rate, pipe, max_mem,
                         max_slo, slo_exp, _goodput(good_at, by_batch, ttft, prep.ttft_slo), cost_in, cost_out, curve,
                         knee, prep.ttft_slo, itl_slo, price, mem.weights_bytes, mem.kv_bytes_per_sequence,
                         mem.workspace_bytes, mem.capacity_bytes, pre, tuple(warnings),
                         d.given if d.given is not None else m, dec, decode_throughput=decode_of[batch])


def _with_draft(report: ServingReport, draft: str | ModelConfig, spec: tuple[int, float],
                run: Callable[[ModelConfig, Split, int], ServingReport]) -> ServingReport:
    """The speculative-decoding what-if: the draft served beside the target on the same split."""
    cfg, sp = report.config, report.split
    name = draft if isinstance(draft, str) else draft.name
    draft_cfg = load_config(draft)

    def checked(b: int) -> ServingReport:
        try:  # an MTP draft sits on the last pipeline stage: one layer, no stages of its own
            return run(draft_cfg, replace(sp, pp=1) if draft_cfg.mtp_draft else sp, b)
        except RooflineError as exc:
            raise RooflineError(f"{T.draft} {name} runs beside the target on {sp}, and {exc.marked}") from None

    report = replace(report, speculative=speculative(report, name, spec[0], spec[1], checked, draft_cfg.mtp_draft),
                     warnings=(*report.warnings, *(draft_cfg.load_warnings if draft_cfg.mtp_draft else ())))
    if draft_cfg.vocab_size != cfg.vocab_size:
        report = replace(report, warnings=(*report.warnings, (
            f"the draft {draft_cfg.name}'s vocabulary ({draft_cfg.vocab_size:,} tokens) is not {cfg.name}'s "
            f"({cfg.vocab_size:,}): speculative decoding needs the target's tokenizer, so this pair is a timing "
            f"exercise only")))
    return report


__all__ = ["CURVE_MAX_BATCH", "FORMULAS", "KNEE_GAIN", "CurvePoint", "ServingReport", "check_what_ifs",
           "curve_batches", "serve", "serve_model"]
