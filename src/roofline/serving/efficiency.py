"""Expected, not only ideal: how serve's expected bands are made.

The floor is the roofline: every kernel at its bound's peak. Each kernel's expected band is the
calibrated expected-time model `roofline kernel` and `roofline model` use (roofline.expectation, chosen
by roofline.calibration.choose): the shipped fit of the device on an engine's measured kernels
(`--engine`, default the engine with most rows; a device without tables takes the nearest
architecture's and says so), or your own `--calibration FILE` (an expected-time file from `roofline
calibrate --save`, or a bench calibration: floor / the measured share of the roof of each bound class).

The host's time beside the kernels (Python dispatch, launches, the scheduler) is taken per engine from
aiconfigurator-core 0.12.0's backends, whose end-to-end estimates are calibrated against measured
serving runs ("the silicon corpus"; ENGINE_OVERHEAD below): vLLM pays a fixed CPU-side dispatch of
0.8 ms per layer on each request's prefill (sdk/backends/vllm_backend.py, _prefill_dispatch_overhead_ms:
"not captured in silicon benchmarks ... recalibrated at ~0.8ms/layer against the full silicon corpus"),
TensorRT-LLM and SGLang none (the base backend's default, "no correction"), and none of the three a
per-step decode term beyond the kernels' own launch cost (t0 of each kernel fit). Two constants remain
where no measured source applies, and every output says so:

    per-step overhead   20–50 µs a step           (only with a bench --calibration, which names no engine:
                                                   an assumption; --step-overhead overrides either)
    KV transfer         80–90% of the link        (--disaggregate's KV cache over the link: nccl-tests' busbw
                                                   sits below the link's figure; no table measures a transfer)

Expected time of a step:

    low  = Σ over kernels of runs × its band's low  + the overhead's low
    high = Σ over kernels of runs × its band's high + the overhead's high

so floor ≤ low ≤ high. With communication overlapped (--overlap) the two sums are taken apart and the
step is the larger of them, as the floor is.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.units import MIN_SHARE, format_time

if TYPE_CHECKING:
    from roofline.calibration.choose import Band as KernelBand
    from roofline.calibration.choose import Chosen
    from roofline.placement import Placement

SOURCES = {
    "kernels": "each kernel's calibrated band (roofline.expectation): the shipped fit of the device on an engine's "
               "measured kernels (aiconfigurator-core's tables), or --calibration FILE",
    "communication": "the KV transfer of --disaggregate only: 80-90% of the link (nccl-tests' busbw is below the "
                     "link's figure); no measured table applies",
    "step_overhead_s": "an assumption: kernel launches and the engine's scheduler, 20-50 us per step; no measured "
                       "table applies",
}


def check_share(label: str, band: tuple[float, float]) -> tuple[float, float]:
    """(low, high) shares of the roofline, each in (0, 1] and at least units.MIN_SHARE (a subnormal 1e-320
    would make floor / share infinite), low ≤ high; one line naming `label` otherwise."""
    lo, hi = (float(band[0]), float(band[1]))
    for v in (lo, hi):
        if not 0 < v <= 1:
            raise RooflineError(f"{label}: an efficiency is a share of the roofline in (0, 1], got {v:g}")
        if v < MIN_SHARE:
            raise RooflineError(f"{label}: an efficiency is a share of the roofline in (0, 1], at least {MIN_SHARE:g}; "
                                f"got {v:g}")
    if lo > hi:
        raise RooflineError(f"{label}: low {lo:g} is above high {hi:g}; write LOW:HIGH")
    return lo, hi


# per engine: (decode step overhead (low, high) in s, prefill dispatch per request per layer in s), from
# aiconfigurator-core 0.12.0 sdk/backends/{vllm,trtllm,sglang}_backend.py and base_backend.py
ENGINE_OVERHEAD: dict[str, tuple[tuple[float, float], float]] = {
    "vllm": ((0.0, 0.0), 0.8e-3),
    "trtllm": ((0.0, 0.0), 0.0),
    "sglang": ((0.0, 0.0), 0.0),
}
ENGINE_OVERHEAD_SOURCE = ("aiconfigurator-core 0.12.0 sdk/backends (calibrated against measured serving runs): vLLM "
                          "0.8 ms a layer of prefill dispatch per request, TensorRT-LLM and SGLang none; no per-step "
                          "decode term")
ASSUMED_STEP_OVERHEAD = (20e-6, 50e-6)


@frozen
class Efficiency:
    """Where serve's bands come from: each kernel's calibrated band (`engine`, `calibration`: as
    roofline.calibration.choose takes them; `kernels` the model chosen for the device, resolved by
    serve), and the two constants no table measures: the KV transfer's share of the link, (low, high),
    and the overhead per step in seconds, (low, high)."""

    engine: str | None = None
    calibration: str | None = None
    communication: tuple[float, float] = (0.80, 0.90)
    step_overhead_s: tuple[float, float] | None = None  # None: the engine's (ENGINE_OVERHEAD), or the assumption
    kernels: Chosen | None = field(default=None, compare=False)
    fallback: Chosen | None = field(default=None, compare=False)  # a bench file's missing classes: the shipped fit

    def __post_init__(self) -> None:
        object.__setattr__(self, "communication", check_share("KV transfer (link) efficiency", self.communication))
        if self.step_overhead_s is None:
            return
        lo, hi = (float(self.step_overhead_s[0]), float(self.step_overhead_s[1]))
        if lo < 0 or hi < 0:
            raise RooflineError(f"{T.step_overhead_s} must not be negative, got {format_time(min(lo, hi))}")
        if lo > hi:
            raise RooflineError(f"{T.step_overhead_s}: low {format_time(lo)} is above high {format_time(hi)}")
        object.__setattr__(self, "step_overhead_s", (lo, hi))

    def for_device(self, machine_id: str) -> Efficiency:
        """With the kernels' model chosen for the device (its shipped fit, or the calibration file)."""
        if self.kernels is not None:
            return self
        from roofline.calibration.choose import choose

        chosen = choose(machine_id, self.engine, self.calibration)
        fallback = choose(machine_id, self.engine) if chosen.bench is not None else None
        out = replace(self, kernels=chosen, fallback=fallback)
        if self.step_overhead_s is None:
            engine = chosen.times.engine if chosen.times is not None else None
            step = ENGINE_OVERHEAD[engine][0] if engine in ENGINE_OVERHEAD else ASSUMED_STEP_OVERHEAD
            object.__setattr__(out, "step_overhead_s", step)
        return out

    @property
    def engine_of_fit(self) -> str | None:
        """The engine the kernels' fit was measured on (None for a bench calibration)."""
        c = self.kernels
        return c.times.engine if c is not None and c.times is not None else None

    @property
    def prefill_dispatch_per_layer_s(self) -> float:
        """The engine's fixed CPU-side prefill dispatch per request and layer (ENGINE_OVERHEAD; vLLM's 0.8 ms)."""
        engine = self.engine_of_fit
        return ENGINE_OVERHEAD[engine][1] if engine in ENGINE_OVERHEAD else 0.0

    @property
    def overhead_source(self) -> str:
        if self.engine_of_fit in ENGINE_OVERHEAD and self.step_overhead_s == ENGINE_OVERHEAD[self.engine_of_fit][0]:
            return f"{self.engine_of_fit}'s, from {ENGINE_OVERHEAD_SOURCE}"
        return "a constant (no measured source for this calibration, or --step-overhead)"

    @property
    def chosen(self) -> Chosen:
        if self.kernels is None:
            raise RooflineError("the expected-time model is chosen per device: call for_device first")
        return self.kernels

    def band(self, p: Placement) -> KernelBand:
        """One placed kernel's band (one run), as `roofline model` gives it; a kernel whose bound class a
        bench calibration does not have (a CPU bench measures no link) takes the shipped fit, and says so."""
        chosen = self.chosen
        if chosen.bench is not None and self.fallback is not None and str(p.bound_class) not in self.shares:
            b = self.fallback.band(p)
            note = (f"--calibration {chosen.file} has no {p.bound_class} class: those kernels take the shipped fit "
                    f"({self.fallback.describe().get('file')})")
            return replace(b, warnings=(*b.warnings, note))
        return chosen.band(p)

    @property
    def shares(self) -> dict[str, tuple[float, float]]:
        """A bench calibration's (low, high) share of the roof by bound class ({} for a fit)."""
        c = self.chosen
        return c.bench.efficiency_ranges() if c.bench is not None else {}

    @property
    def measured_on(self) -> str:
        """The machine a --calibration file measured ("" for the shipped fits)."""
        if self.kernels is None or not self.calibration:
            return ""
        return str(self.kernels.describe().get("machine") or "")

    @property
    def source_file(self) -> str:
        """The calibration file the kernels' bands come from (a shipped one: expectation/data/...)."""
        return "" if self.kernels is None else str(self.kernels.describe().get("file") or "")

    @property
    def overhead(self) -> tuple[float, float]:
        """The per-step overhead (low, high), resolved (the assumption before for_device)."""
        return self.step_overhead_s if self.step_overhead_s is not None else ASSUMED_STEP_OVERHEAD

    @property
    def label(self) -> str:
        """The band's source in a few words, for a header, a legend or a subtitle."""
        lo, hi = self.overhead
        where = self.source_file or "the calibration"
        host = (f"the host: {self.engine_of_fit}'s measured overhead (aiconfigurator-core)"
                if self.overhead_source.startswith(str(self.engine_of_fit)) else
                f"+ {format_time(lo)}–{format_time(hi)} a step, a constant")
        return f"each kernel's band fitted on measured kernels, {where}; {host}"

    @property
    def origin(self) -> str:
        """In words: the kernels' model and file, and the constants."""
        if self.kernels is None:
            kernels = "each kernel's calibrated band"
        else:
            d = self.kernels.describe()
            kernels = f"each kernel's calibrated band, {d.get('file') or 'the calibration'}: {d.get('note', '')}"
        lo, hi = self.overhead
        return (f"{kernels}; the host: + {format_time(lo)}–{format_time(hi)} a step and "
                f"{self.prefill_dispatch_per_layer_s * 1e3:g} ms a layer of prefill dispatch, {self.overhead_source}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kernels": None if self.kernels is None else self.kernels.describe(),
                             "engine": self.engine, "calibration": self.calibration,
                             "communication": list(self.communication), "step_overhead_s": list(self.overhead),
                             "prefill_dispatch_per_layer_s": self.prefill_dispatch_per_layer_s,
                             "overhead_source": self.overhead_source,
                             "sources": dict(SOURCES)}
        return d


@frozen
class Band:
    """A time or a cost: the roofline floor and the expected band, floor ≤ low ≤ high."""

    floor: float
    low: float
    high: float

    def scaled(self, k: float) -> Band:
        return Band(self.floor * k, self.low * k, self.high * k)

    def to_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "expected": {"low": self.low, "high": self.high}}


@frozen
class Rate:
    """A rate (tokens/s): the roofline ceiling and the expected band, low ≤ high ≤ ceiling."""

    ceiling: float
    low: float
    high: float

    def scaled(self, k: float) -> Rate:
        return Rate(self.ceiling * k, self.low * k, self.high * k)

    def to_dict(self) -> dict[str, Any]:
        return {"ceiling": self.ceiling, "expected": {"low": self.low, "high": self.high}}


def per_rate(amount: float, t: Band) -> Rate:
    """amount / time: the ceiling from the floor, the band from the band (a longer time, a lower rate)."""
    return Rate(amount / t.floor, amount / t.high, amount / t.low)


__all__ = ["SOURCES", "Band", "Efficiency", "Rate", "per_rate"]
