"""Which expected-time model a command uses, and the band it gives a placed kernel.

    no --calibration        the shipped fit of the machine (expectation/data/), picked by --engine
                            (default: the engine with most rows); a machine without tables takes the
                            nearest architecture's fit and says so
    --calibration FILE      a user's own: an expected-time file (`roofline calibrate --save`), or a
                            bench calibration (`roofline bench --save-calibration`: the 25th-75th
                            percentile shares of the roof per bound class, band = floor / share).
                            Measured on another device than the one placed: a warning says so.

The floor is the placement's and never changes here.

Layering: imports roofline.errors, roofline.measure.calibration, roofline.expectation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.expectation.model import BAND_SPLIT_S
from roofline.expectation.placed import expect, shape_of
from roofline.expectation.shipped import for_machine, parse
from roofline.expectation.times import FORMAT, MODEL, ExpectedTimes
from roofline.frozen import frozen

if TYPE_CHECKING:
    from roofline.measure.calibration import Calibration
    from roofline.placement import Placement


@frozen
class Band:
    """One kernel's expected time: (low, high) ≥ the floor, the calibration used (`calibration`, made
    when it is read: `about`), warnings to print, and the derivation in words (for --explain), written
    when it is read (`words`): serve bands every kernel of each layout it tries and only sums them."""

    floor_s: float
    low_s: float
    high_s: float
    about: Callable[[], dict[str, Any]] = field(compare=False, repr=False)
    warnings: tuple[str, ...] = ()
    words: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def calibration(self) -> dict[str, Any]:
        """The fit's file, machine, engine, kind and coefficients (a bench file's: its class and shares)."""
        return self.about()

    @property
    def derivation(self) -> tuple[str, ...]:
        return () if self.words is None else self.words()

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low_s, "high": self.high_s}


@frozen
class Chosen:
    """An expected-time model: a fit (shipped or a user's file), or a bench calibration."""

    times: ExpectedTimes | None = None
    bench: Calibration | None = None
    file: str = ""

    def describe(self) -> dict[str, Any]:
        """The file used and where it came from, for JSON `calibration` and the totals' line."""
        if self.times is not None:
            t = self.times
            return {"file": t.file, "machine": t.machine, "engine": t.engine, "engine_version": t.engine_version,
                    "source": dict(t.source), "model": MODEL, "note": t.origin}
        assert self.bench is not None
        return {"file": self.file, "machine": self.bench.machine, "produced_by": self.bench.produced_by,
                "date": self.bench.date, "note": "floor / the measured share of the roof of each bound class"}

    def band(self, p: Placement) -> Band:
        if self.times is not None:
            return _fit_band(p, self.times)
        assert self.bench is not None
        return _bench_band(p, self.bench, self.file)


def choose(machine: str, engine: str | None = None, calibration: str | None = None) -> Chosen:
    """The shipped fit of `machine` (by `engine`), or the user's file."""
    if calibration is None:
        return Chosen(for_machine(machine, engine))
    from roofline.fileio import read_text_file

    try:
        raw = json.loads(read_text_file(calibration, "calibration"))
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{calibration}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if isinstance(raw, dict) and raw.get("format") == FORMAT:
        times = parse(raw, calibration)
        from dataclasses import replace

        if times.machine != machine:
            times = replace(times, borrowed_for=machine)
        return Chosen(times, file=calibration)
    # the measure room (and what it loads) only for a bench file: the shipped path stays light
    from roofline.measure.calibration import FORMAT as BENCH_FORMAT
    from roofline.measure.calibration import parse_calibration

    if isinstance(raw, dict) and raw.get("format") == BENCH_FORMAT:
        return Chosen(bench=parse_calibration(raw, calibration), file=calibration)
    raise RooflineError(f"{calibration}: neither an expected-time file ({FORMAT}, from `roofline calibrate --save`) "
                        f"nor a bench calibration ({BENCH_FORMAT}, from `roofline bench --save-calibration`)")


def _fit_band(p: Placement, times: ExpectedTimes) -> Band:
    shape = shape_of(p)
    e = expect(p, times, shape)
    f, floor = e.fit, shape.floor_s  # the placement's time_s, read once
    warnings = []
    if times.file and not times.file.startswith("expectation/data/") and times.machine != p.machine.id:
        warnings.append(f"--calibration {times.file} was measured on {times.machine}, not {p.machine.id}: "
                        "its band may not hold here")
    def words() -> tuple[str, ...]:
        t = f.expected_s(shape)
        terms = f.terms_s(shape)
        small = f.small_band is not None and floor < BAND_SPLIT_S
        lo, hi = f.small_band if small and f.small_band else (f.low, f.high)
        memory = shape.dram_s
        steps = [f"expected time ({MODEL})",
                 f"  kind {e.kind}" + (f" ({e.note})" if e.note else "") + f": e = {f.efficiency:.3f}, "
                 f"t0 = {f.t0_s * 1e6:.2f} µs",
                 f"  roofline term = max(memory {memory * 1e6:.4g} µs, {f.compute_ratio:.2f} × compute "
                 f"{shape.compute_s * 1e6:.4g} µs" + (f" × waves in {f.tile[0]}x{f.tile[1]} tiles on {shape.sms} SMs"
                                                     if f.tile else "")
                 + (f" × waves in DeepGEMM's blocks on {shape.sms} SMs" if f.deepgemm_blocks else "")
                 + "".join(f", {what} {v * 1e6:.4g} µs" for what, v in (
                     ("decode's latency roof", f.latency_s(shape)), ("streaming roof", f.stream_s(shape)),
                     ("query-tile roof", f.query_tile_s(shape))) if v)
                 + f") = {f.stretched_floor_s(shape) * 1e6:.4g} µs (floor {floor * 1e6:.4g} µs)",
                 "  t = " + " + ".join(f"{name} {v * 1e6:.4g}" for name, v in terms.items() if v)
                 + " µs" + (f", at least the host floor {f.host_s(shape) * 1e6:.4g} µs (the launch path's)"
                            if f.host_floors else "") + f" = {t * 1e6:.4g} µs  (roofline = the term / e)",
                 f"  band = t × [{lo:.3f}, {hi:.3f}] (Wilks's tolerance interval of measured / t, each ratio "
                 f"cross-fitted, over {f.rows} rows: half of new kernels at 99% confidence; "
                 f"floors {'below' if small else 'of at least'} 10 µs), at least the floor = "
                 f"{e.low_s * 1e6:.4g}-{e.high_s * 1e6:.4g} µs",
                 f"  source: {times.origin}"]
        return tuple(steps)

    return Band(floor, e.low_s, e.high_s, e.calibration_dict, tuple(warnings), words)


def _bench_band(p: Placement, cal: Calibration, file: str) -> Band:
    cls = str(p.bound_class)
    ranges = cal.efficiency_ranges()
    if cls not in ranges:
        raise RooflineError(f"--calibration {file} has no {cls} class (it has {', '.join(ranges) or 'none'})")
    lo_share, hi_share = ranges[cls]
    warnings = []
    if cal.machine and cal.machine != p.machine.id:
        warnings.append(f"--calibration {file} was measured on {cal.machine}, not {p.machine.id}: "
                        "its shares of the roof may not hold here")
    low, high = p.time_s / hi_share, p.time_s / lo_share
    steps = (f"expected time from {file}: floor / share of the roof ({cls}: {lo_share:.3g}-{hi_share:.3g}, "
             f"25th-75th percentile measured by {cal.produced_by} on {cal.machine or 'an unnamed machine'})",
             f"  band = {p.time_s * 1e6:.4g} µs / [{hi_share:.3g}, {lo_share:.3g}] = "
             f"{low * 1e6:.4g}-{high * 1e6:.4g} µs")
    info = {"file": file, "machine": cal.machine, "produced_by": cal.produced_by, "date": cal.date,
            "class": cls, "share_of_roof": [lo_share, hi_share]}
    return Band(p.time_s, low, high, lambda: info, tuple(warnings), lambda: steps)


def total(placements: Sequence[Placement], bands: Sequence[Band]) -> dict[str, float]:
    """A step's expected time: the sum over kernels of count × each end of its band (kernels run one
    after another; an overlapped collective is counted in full, so the sum is the high side of overlap)."""
    pairs = list(zip(placements, bands, strict=True))
    return {"low": sum(p.count * b.low_s for p, b in pairs), "high": sum(p.count * b.high_s for p, b in pairs)}


def total_overlapped(placements: Sequence[Placement], bands: Sequence[Band], every: bool) -> dict[str, float]:
    """The expected step with communication hidden, at each end of the band: `every` (--overlap):
    max(compute, every collective); else (--two-batch-overlap) max(compute, the MoE all-to-all) + the
    other collectives."""
    out = {}
    for end in ("low", "high"):
        compute = a2a = other = 0.0
        for p, b in zip(placements, bands, strict=True):
            t = p.count * (b.low_s if end == "low" else b.high_s)
            if p.kind == "all_to_all":
                a2a += t
            elif p.kind in ("all_reduce", "all_gather", "reduce_scatter", "send_recv"):
                other += t
            else:
                compute += t
        out[end] = max(compute, a2a + other) if every else max(compute, a2a) + other
    return out


__all__ = ["Band", "Chosen", "choose", "total", "total_overlapped"]
