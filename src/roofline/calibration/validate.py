"""Validation: our floor and expected band beside every measured row, summarised per GPU × engine × kind.

Per group of rows (one catalog machine, one engine, one kind: gemm.bf16, context_attention.bf16, ...):

    share of roof     floor / measured, its median, 10th and 90th percentiles (type 7 quantiles)
    MAPE              mean |t − measured| / measured of the expected time t (roofline.expectation)
    inside band       share of rows with low ≤ measured ≤ high
    ≥ 10 µs           the same MAPE and share over the rows whose floor is at least 10 µs
    faster than floor every row with measured < floor, each explained or flagged:
                      explained when its working set (the bytes our kernel moves to and from DRAM) fits
                      in the machine's L2: the benchmark reran one shape, so the operands stayed in L2
                      between runs and DRAM was never the limit (an H100 bf16 GEMM 32768×64×512 ran
                      8.8 µs against an 11.3 µs DRAM floor); or, for a DRAM-bound stream larger than L2,
                      when it is no faster than (working set − L2) / bandwidth, within TIMING_TOLERANCE
                      (the stream's last L2-sized part is still in L2 when the next run starts);
                      flagged as our error otherwise

Layering: imports roofline.errors, roofline.units, roofline.measure.calibration (quantile),
roofline.expectation and this room's tables, join and fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.calibration.fit import ATTENTION_TILES, GEMM_TILES, fit_kind
from roofline.calibration.join import Joined
from roofline.expectation.model import ExpectedTimes, Fit
from roofline.measure.calibration import quantile
from roofline.units import format_bytes, format_time
from roofline.vocab import Level

BIG_FLOOR_S = 10e-6  # the Done-when's "kernels whose floor is at least 10 µs"
# CUDA-event timings of a kernel rerun in a loop scatter by about 1% (launch jitter, clocks): a point
# within 2% of a floor that L2 reuse lowers is that floor, not an error
TIMING_TOLERANCE = 0.02


@dataclass(frozen=True)
class Faster:
    """One measured row faster than our floor, explained or flagged."""

    name: str
    measured_s: float
    floor_s: float
    explained: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.name, "measured_s": self.measured_s, "floor_s": self.floor_s,
                "explained": self.explained, "why": self.why}


@dataclass(frozen=True)
class Point:
    """One row for the chart and the CSV: measured, floor, expected and band."""

    name: str
    kind: str
    measured_s: float
    floor_s: float
    expected_s: float
    low_s: float
    high_s: float


@dataclass(frozen=True)
class Group:
    """The summary of one machine × engine × kind."""

    machine: str
    engine: str
    engine_version: str
    kind: str
    rows: int
    share_median: float
    share_p10: float
    share_p90: float
    mape: float
    inside: float
    big_rows: int
    big_mape: float | None
    big_inside: float | None
    faster: tuple[Faster, ...]
    fit: Fit
    fit_origin: str
    points: tuple[Point, ...] = field(default=(), repr=False)

    @property
    def unexplained(self) -> int:
        return sum(not f.explained for f in self.faster)

    def to_dict(self, with_points: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "machine": self.machine, "engine": self.engine, "engine_version": self.engine_version,
            "kind": self.kind, "rows": self.rows,
            "share_of_roof": {"median": self.share_median, "p10": self.share_p10, "p90": self.share_p90},
            "mape": self.mape, "inside_band": self.inside,
            "floor_at_least_10us": {"rows": self.big_rows, "mape": self.big_mape, "inside_band": self.big_inside},
            "faster_than_floor": [f.to_dict() for f in self.faster], "unexplained": self.unexplained,
            "fit": self.fit.to_dict(), "fit_origin": self.fit_origin}
        if with_points:
            d["points"] = [vars(p) for p in self.points]
        return d


def explain_faster(j: Joined) -> Faster:
    """Explained when the DRAM working set fits in L2 (module docstring), flagged otherwise."""
    p = j.placement
    working = p.cost.bytes_by_level.get(Level.DRAM, p.bytes)
    l2 = p.machine.memory.get(Level.L2)
    cap = l2.capacity_bytes if l2 is not None else None
    gap = f"{format_time(j.measured_s)} measured against a {format_time(j.floor_s)} floor"
    if cap and working <= cap:
        return Faster(p.name, j.measured_s, j.floor_s, True,
                      f"{gap}: its working set, {format_bytes(working)}, fits in the {format_bytes(cap, binary=True)} "
                      "L2; the benchmark reran one shape, so the operands stayed in L2 and DRAM never limited it")
    dram = p.level_times_s.get(Level.DRAM, 0.0)
    if cap and working > cap and dram >= j.floor_s * (1 - 1e-9):
        # rerun in a loop, the last L2-sized part of the stream is still in L2 when the next run starts
        partial = dram * (1 - cap / working)
        if j.measured_s >= partial * (1 - TIMING_TOLERANCE):
            return Faster(p.name, j.measured_s, j.floor_s, True,
                          f"{gap}: the benchmark reran one shape, so the last {format_bytes(cap, binary=True)} "
                          f"of its {format_bytes(working)} stream stayed in L2: (working set − L2) / DRAM "
                          f"bandwidth = {format_time(partial)}, within {TIMING_TOLERANCE:.0%} of the measured time")
    if cap is None and p.bound_class == "memory" and j.measured_s >= p.compute_time_s:
        return Faster(p.name, j.measured_s, j.floor_s, False,
                      f"{gap}: {p.machine.id} has no L2 size in the catalog, so L2 reuse cannot be checked; "
                      "flagged")
    return Faster(p.name, j.measured_s, j.floor_s, False,
                  f"{gap} with a {format_bytes(working)} working set beyond L2: our error (floor too high)")


def fit_rows(kind: str, joined: Sequence[Joined]) -> Fit:
    """The fit of one kind over its joined rows (wave tiles tried where the kind has them)."""
    tiles = GEMM_TILES if kind.startswith("gemm") else ATTENTION_TILES if kind.startswith("context") else (None,)
    return fit_kind(kind, [j.shape for j in joined], [j.measured_s for j in joined], tiles,
                    per_tile="attention" in kind)


def summarise(machine: str, engine: str, version: str, kind: str, joined: Sequence[Joined], fit: Fit,
              origin: str) -> Group:
    shares = [j.floor_s / j.measured_s for j in joined]
    points: list[Point] = []
    for j in joined:
        t = fit.expected_s(j.shape)
        points.append(Point(j.placement.name, kind, j.measured_s, j.floor_s, t, *fit.band_around(t, j.floor_s)))

    def stats(ps: Sequence[Point]) -> tuple[float | None, float | None]:
        if not ps:
            return None, None
        err = sum(abs(p.expected_s - p.measured_s) / p.measured_s for p in ps) / len(ps)
        return err, sum(p.low_s <= p.measured_s <= p.high_s for p in ps) / len(ps)

    mape_all, inside_all = stats(points)
    big = [p for p in points if p.floor_s >= BIG_FLOOR_S]
    big_mape, big_inside = stats(big)
    faster = tuple(explain_faster(j) for j in joined if j.measured_s < j.floor_s)
    return Group(machine, engine, version, kind, len(joined), quantile(shares, 0.5), quantile(shares, 0.1),
                 quantile(shares, 0.9), mape_all or 0.0, inside_all or 0.0, len(big), big_mape, big_inside, faster,
                 fit, origin, tuple(points))


def validate(joined: Iterable[Joined], shipped: Mapping[tuple[str, str], ExpectedTimes]) -> list[Group]:
    """Groups by machine × engine × kind; each scored with the shipped fit of its machine and engine
    where there is one, else with a fit made here on the same rows (and said so)."""
    groups: dict[tuple[str, str, str, str], list[Joined]] = {}
    for j in joined:
        groups.setdefault((j.row.machine, j.row.engine, j.row.version, j.kind), []).append(j)
    out = []
    for (machine, engine, version, kind), js in sorted(groups.items()):
        times = shipped.get((machine, engine))
        if times is not None and kind in times.fits:
            fit, origin = times.fits[kind], f"shipped: {times.file}"
        else:
            fit, origin = fit_rows(kind, js), "fitted here on these rows (no shipped fit for this engine and kind)"
        out.append(summarise(machine, engine, version, kind, js, fit, origin))
    return out


__all__ = ["BIG_FLOOR_S", "Faster", "Group", "Point", "explain_faster", "fit_rows", "summarise", "validate"]
