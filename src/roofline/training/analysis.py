"""A training step on a system: every kernel placed, the step assembled, MFU, memory and the cost.

Per micro-batch, on the fullest pipeline stage (layers × ⌈L/pp⌉/L, the edge kernels once):

    compute_mb  = Σ the floors of its forward, recompute and backward kernels
    comm_mb     = Σ its collectives (tp or sp, ep, cp, pp sends, FSDP's gathers)
    t_mb        = compute_mb + comm_mb          (--overlap: max(compute_mb, comm_mb), comm at best hidden)

The 1F1B schedule (Narayanan et al. 2021, SC21) runs m micro-batches through p stages in (m + p − 1)
micro-batch times; the idle share of a stage, the bubble, is (p − 1)/(m + p − 1). The interleaved
schedule (v model chunks a device, --virtual-stages) divides the bubble's time by v: (p − 1)/(v·m + p − 1)
of the pipeline, at v times the stage-to-stage sends. Then once a step:

    step = (m + (p − 1)/v)·t_mb + exposed data-parallel communication + gradient norm + optimizer

the data-parallel reduction (an all-reduce of the gradients; ZeRO 1–2: a reduce-scatter and an
all-gather, ZeRO's 2Ψ; ZeRO 3 / FSDP gathers every micro-batch instead: 3Ψ each) exposed in full, or
with --overlap only what outlasts one micro-batch's backward (DDP's buckets overlap the last backward).

The expected band is the same assembly over each kernel's expected band (roofline.expectation, the
calibrated model `kernel` and `model` print), low with low, high with high; the floor never depends on it.

    MFU = model FLOPs a token (roofline.training.flops, PaLM's 6·N + 12·L·h·s) × tokens/s ÷ (devices × peak)
    HFU = the kernels' FLOPs a step (recompute included) ÷ (step time × devices × peak)

peak: the matrix peak of the compute dtype (BF16, or FP8 with --precision fp8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from typing import Any

from roofline.expectation.placed import expect
from roofline.expectation.shipped import for_machine
from roofline.expectation.times import ExpectedTimes
from roofline.frozen import frozen
from roofline.graph import Kernel
from roofline.hardware import Machine
from roofline.models.dtypes import compute_dtype, model_dtypes
from roofline.models.memory import workspace_bytes
from roofline.models.split import stage_layers
from roofline.parallel import Deployment, deploy
from roofline.placement import Placement, place
from roofline.training.flops import model_flop_per_token
from roofline.training.memory import TrainMemory, train_memory
from roofline.training.setup import Precision, TrainSetup
from roofline.training.step import Family, Pass, Scope, TrainKernel, TrainStep, build_step, micro_key, step_kernels

DEFAULT_UTILIZATION = 0.9  # the usable share of a device's memory (the rest: CUDA context, NCCL buffers, fragments)
MICRO_FAMILIES = (Family.TP, Family.CP, Family.EP, Family.PP, Family.FSDP)


@frozen
class Placed:
    """A training kernel on the device: its placement and expected band (per run), and its runs a step."""

    kernel: TrainKernel
    placement: Placement
    floor_s: float  # the placement's time floor, one run
    low_s: float
    high_s: float
    runs_per_micro_batch: float  # LAYER: count × ⌈L/pp⌉/L; EDGE, MICRO: count; STEP: 0
    runs_per_step: float

    @property
    def is_comm(self) -> bool:
        return self.kernel.comm is not None


@frozen
class StepTime:
    """One assembly of the step (floor, low or high): its total and its breakdown."""

    step_s: float
    compute_s: float  # m × compute_mb
    exposed_comm_s: float
    bubble_s: float
    optimizer_s: float
    micro_batch_s: float
    comm_s: float  # every collective's time, hidden or not
    exposed_dp_s: float = 0.0  # the once-a-step collectives' part of exposed_comm_s

    def to_dict(self) -> dict[str, float]:
        return {"step_s": self.step_s, "compute_s": self.compute_s, "exposed_communication_s": self.exposed_comm_s,
                "bubble_s": self.bubble_s, "optimizer_s": self.optimizer_s, "micro_batch_s": self.micro_batch_s}


def assemble(placed: tuple[Placed, ...], setup: TrainSetup, t: Callable[[Placed], float]) -> StepTime:
    """The module docstring's step from each kernel's time `t` (its floor, or an end of its band)."""
    m, p = setup.micro_batches, setup.split.pp
    compute = sum(x.runs_per_micro_batch * t(x) for x in placed if not x.is_comm)
    comm = sum(x.runs_per_micro_batch * t(x) for x in placed if x.is_comm)
    backward = sum(x.runs_per_micro_batch * t(x) for x in placed if not x.is_comm and x.kernel.pass_ is Pass.BACKWARD)
    t_mb = max(compute, comm) if setup.overlap else compute + comm
    dp = sum(x.runs_per_step * t(x) for x in placed if x.is_comm)
    exposed_dp = max(0.0, dp - backward) if setup.overlap else dp
    optimizer = sum(x.runs_per_step * t(x) for x in placed if not x.is_comm)
    bubble = (p - 1) / setup.virtual_stages * t_mb  # interleaving v chunks divides the bubble by v
    return StepTime(m * t_mb + bubble + exposed_dp + optimizer, m * compute, m * (t_mb - compute) + exposed_dp,
                    bubble, optimizer, t_mb, m * comm + dp, exposed_dp)


@frozen
class TrainAnalysis:
    """A training step of `setup` on `deployment`: kernels, step time, MFU, memory, communication."""

    setup: TrainSetup
    deployment: Deployment
    step: TrainStep
    placed: tuple[Placed, ...]
    times: ExpectedTimes
    utilization: float = DEFAULT_UTILIZATION
    tokens: float | None = None  # --tokens to train
    price_per_device_hour: float | None = None

    # --- where ---------------------------------------------------------------------------------
    @property
    def machine(self) -> Machine:
        return self.deployment.machine

    @property
    def devices(self) -> int:
        return self.setup.split.devices

    @cached_property
    def dtype(self) -> Any:
        return compute_dtype(_dtypes(self.setup), self.machine)

    @property
    def peak_flop_per_s(self) -> float:
        return self.machine.peak_flop_per_s(self.dtype)

    # --- time ----------------------------------------------------------------------------------
    @cached_property
    def floor(self) -> StepTime:
        return assemble(self.placed, self.setup, lambda x: x.floor_s)

    @cached_property
    def low(self) -> StepTime:
        return assemble(self.placed, self.setup, lambda x: x.low_s)

    @cached_property
    def high(self) -> StepTime:
        return assemble(self.placed, self.setup, lambda x: x.high_s)

    @property
    def bubble(self) -> float:
        """(p − 1)/(m + p − 1): the share of the pipeline's time a stage idles (1F1B); with v virtual
        stages a device (the interleaved schedule) (p − 1)/(v·m + p − 1)."""
        p, m, v = self.setup.split.pp, self.setup.micro_batches, self.setup.virtual_stages
        return (p - 1) / (v * m + p - 1)

    @property
    def tokens_per_step(self) -> int:
        return self.setup.tokens_per_step

    @property
    def tokens_per_s(self) -> float:
        """At the floor."""
        return self.tokens_per_step / self.floor.step_s

    # --- FLOPs and MFU -------------------------------------------------------------------------
    @property
    def model_flop_per_token(self) -> float:
        return model_flop_per_token(self.setup.config, self.setup.seq)

    @cached_property
    def hardware_flop_per_step(self) -> float:
        """Every device's kernels: (tp·cp·dp) slices × m micro-batches × all L layers and the edge, and each
        device's optimizer step."""
        sp, m = self.setup.split, self.setup.micro_batches
        per_mb = sum(x.placement.flop * x.kernel.kernel.count for x in self.placed
                     if not x.is_comm and x.kernel.scope in (Scope.LAYER, Scope.EDGE))
        once = sum(x.placement.flop * x.runs_per_step for x in self.placed if not x.is_comm)
        return sp.tp * sp.cp * sp.dp * m * per_mb + sp.devices * once

    @property
    def hardware_flop_per_token(self) -> float:
        return self.hardware_flop_per_step / self.tokens_per_step

    def mfu(self, step_s: float) -> float:
        return self.model_flop_per_token * self.tokens_per_step / (step_s * self.devices * self.peak_flop_per_s)

    def hfu(self, step_s: float) -> float:
        return self.hardware_flop_per_step / (step_s * self.devices * self.peak_flop_per_s)

    # --- memory --------------------------------------------------------------------------------
    @cached_property
    def memory(self) -> TrainMemory:
        ws = workspace_bytes(x.kernel.kernel for x in self.placed if x.kernel.scope in (Scope.LAYER, Scope.EDGE))
        return train_memory(self.setup, self.machine.memory_capacity_bytes, self.utilization,
                            self.step.scores_stored, ws)

    # --- communication -------------------------------------------------------------------------
    def communication(self) -> list[dict[str, Any]]:
        """Each collective: kind, the message, its group and roof, and its time a step (floor)."""
        rows = []
        for x in self.placed:
            c = x.kernel.comm
            if c is None:
                continue
            runs = x.runs_per_micro_batch * self.setup.micro_batches + x.runs_per_step
            rows.append({"name": x.kernel.name, "parallelism": str(c.family), "kind": str(c.kind),
                         "bytes": c.message_bytes, "group_size": c.group, "link": str(c.level),
                         "pass": str(x.kernel.pass_), "runs_per_step": runs, "time_s": x.floor_s * runs,
                         "overlapped": self.setup.overlap, **({"algorithm": c.algorithm} if c.algorithm else {})})
        return rows

    # --- what to train -------------------------------------------------------------------------
    def training_run(self) -> dict[str, Any] | None:
        if self.tokens is None:
            return None
        flop = self.model_flop_per_token * self.tokens
        out: dict[str, Any] = {"tokens": self.tokens, "model_flop": flop,
                               "time_s": {"floor": self.tokens / self.tokens_per_s,
                                          "expected": {"low": self.tokens / self.tokens_per_step * self.low.step_s,
                                                       "high": self.tokens / self.tokens_per_step * self.high.step_s}}}
        if self.price_per_device_hour is not None:
            rate = self.devices * self.price_per_device_hour / 3600.0
            out["cost"] = {"floor": out["time_s"]["floor"] * rate,
                           "expected": {"low": out["time_s"]["expected"]["low"] * rate,
                                        "high": out["time_s"]["expected"]["high"] * rate},
                           "price_per_device_hour": self.price_per_device_hour}
        return out

    def kernel_rows(self) -> list[dict[str, Any]]:
        rows = []
        for x in self.placed:
            d = x.placement.to_dict()
            d.update({"pass": str(x.kernel.pass_), "scope": str(x.kernel.scope),
                      "runs_per_micro_batch": x.runs_per_micro_batch, "runs_per_step": x.runs_per_step,
                      "expected_time_s": {"low": x.low_s, "high": x.high_s}})
            rows.append(d)
        return rows

    def to_dict(self) -> dict[str, Any]:
        s, cfg = self.setup, self.setup.config
        fl, lo, hi = self.floor, self.low, self.high
        return {
            "model": cfg.name, "machine": self.machine.id, "system": self.deployment.system_id or self.machine.id,
            "seq": s.seq, "global_batch": s.global_batch, "micro_batch": s.micro_batch,
            "micro_batches": s.micro_batches, "tokens_per_batch": s.tokens_per_step,
            "parallel": s.split.to_dict(), "sequence_parallel": s.sp, "zero": int(s.zero),
            "recompute": str(s.recompute), "optimizer": str(s.optimizer), "precision": str(s.precision),
            "overlap": s.overlap, "plan": str(s.plan), "compute_dtype": self.dtype.name,
            "peak_flop_per_s": self.peak_flop_per_s,
            "flop_per_token": {"model": self.model_flop_per_token, "hardware": self.hardware_flop_per_token},
            "step_time_s": {"floor": fl.step_s, "expected": {"low": lo.step_s, "high": hi.step_s}},
            "mfu": {"floor": self.mfu(fl.step_s),
                    "expected": {"low": self.mfu(hi.step_s), "high": self.mfu(lo.step_s)}},
            "hfu": {"floor": self.hfu(fl.step_s),
                    "expected": {"low": self.hfu(hi.step_s), "high": self.hfu(lo.step_s)}},
            "pipeline_bubble": self.bubble, "virtual_stages": s.virtual_stages,
            "breakdown_s": {"floor": fl.to_dict(), "expected_low": lo.to_dict(), "expected_high": hi.to_dict()},
            "memory": self.memory.to_dict(),
            "communication": self.communication(),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_expected": {"low": self.tokens_per_step / hi.step_s,
                                      "high": self.tokens_per_step / lo.step_s},
            "training": self.training_run(),
            "kernels": self.kernel_rows(),
            "calibration": {"machine": self.times.machine, "engine": self.times.engine, "note": self.times.origin},
            "conventions": CONVENTIONS,
            "warnings": list(self.warnings),
        }

    @property
    def warnings(self) -> tuple[str, ...]:
        out = list(dict.fromkeys((*self.setup.warnings, *self.step.warnings)))
        if self.memory.fits is False:
            out.append(f"does not fit: {self.memory.summary()}")
        return tuple(out)

    @property
    def title(self) -> str:
        s = self.setup
        return (f"{s.config.name} training step, {s.global_batch} × {s.seq} tokens, {s.split} of "
                f"{self.deployment.system_id or self.machine.name}")


CONVENTIONS = {
    "mfu": "model FLOPs 6·N + 12·L·h·s a token (PaLM, Chowdhery et al. 2022, Appendix B; N without the input "
           "embedding) × tokens/s ÷ (devices × matrix peak)",
    "hfu": "the kernels' FLOPs (recompute included, causal attention as run) ÷ (step time × devices × peak)",
    "backward": "two matmuls per forward matmul, 2·m·n·k each; FlashAttention's backward 2.5 × its forward's matmul "
                "FLOPs (FlashAttention-2, arXiv 2307.08691)",
    "bubble": "(p − 1)/(m + p − 1), 1F1B (Narayanan et al. 2021)",
    "memory": "ZeRO (arXiv 1910.02054): 2 + 2 + 12 bytes a parameter, sharded by stage over dp·cp; activations "
              "Korthikanti et al. 2022 (arXiv 2205.05198) per layer by recompute mode",
}


def _dtypes(setup: TrainSetup) -> Any:
    return model_dtypes("bf16", "bf16", "bf16", "fp8" if setup.precision is Precision.FP8 else None)


MicroCache = dict[tuple[object, ...], tuple[TrainStep, tuple[tuple[Placement, float, float, float], ...]]]


def analyze_training(setup: TrainSetup, machine: str | Any, times: ExpectedTimes | None = None,
                     utilization: float = DEFAULT_UTILIZATION, tokens: float | None = None,
                     price_per_device_hour: float | None = None, deployment: Deployment | None = None,
                     cache: MicroCache | None = None) -> TrainAnalysis:
    """Build the step's kernels on the fullest stage's device, place each, and band it. A `cache`
    (a split search's) keeps each micro-batch's placed kernels by what they depend on (step.micro_key)."""
    d = deployment or deploy(machine, setup.split.inference_split())
    cdt = compute_dtype(_dtypes(setup), d.machine)
    fit = times or for_machine(d.machine.id)
    fp8 = cdt if setup.precision is Precision.FP8 else None
    key = (*micro_key(setup, d.devices_per_node, d.nvls), d.machine.id, d.system_id, fit.file)
    hit = cache.get(key) if cache is not None else None
    if hit is None:
        micro = build_step(setup, d.devices_per_node, fp8, once=False, nvls=d.nvls)
        hit = (micro, tuple(_placed(k.kernel, d.machine, _dtype_of(k.kernel, cdt), fit) for k in micro.kernels))
        if cache is not None:
            cache[key] = hit
    micro, bands = hit
    once = step_kernels(setup, d.devices_per_node, d.nvls)
    step = replace(micro, setup=setup, kernels=(*micro.kernels, *once))
    bands = (*bands, *(_placed(k.kernel, d.machine, cdt, fit) for k in once))
    share = stage_layers(setup.config, setup.split.inference_split()) / setup.config.num_layers
    placed = []
    for k, (p, floor, low, high) in zip(step.kernels, bands, strict=True):
        runs = {Scope.LAYER: k.kernel.count * share, Scope.EDGE: float(k.kernel.count),
                Scope.MICRO: float(k.kernel.count), Scope.STEP: 0.0}[k.scope]
        per_step = float(k.kernel.count) if k.scope is Scope.STEP else 0.0
        placed.append(Placed(k, p, floor, low, high, runs, per_step))
    return TrainAnalysis(setup, d, step, tuple(placed), fit, utilization, tokens, price_per_device_hour)


ATTENTION_KINDS = frozenset({"attention_qk", "attention_pv", "flash_attention_backward"})


def _dtype_of(kernel: Kernel, cdt: Any) -> Any:
    """Attention keeps BF16 under --precision fp8 (Transformer Engine's FP8 recipe casts the linear layers'
    GEMMs; the attention core runs in BF16): its kernels are placed on the BF16 roof."""
    if cdt.name.startswith("fp8") and any(op.kind in ATTENTION_KINDS for op in kernel.ops):
        from roofline.dtypes import get_dtype

        return get_dtype("bf16")
    return cdt


def _placed(kernel: Kernel, machine: Machine, dtype: Any, fit: ExpectedTimes
            ) -> tuple[Placement, float, float, float]:
    p = place(kernel, machine, dtype)
    e = expect(p, fit)
    return p, e.floor_s, e.low_s, e.high_s


__all__ = ["CONVENTIONS", "DEFAULT_UTILIZATION", "Placed", "StepTime", "TrainAnalysis", "analyze_training",
           "assemble"]
