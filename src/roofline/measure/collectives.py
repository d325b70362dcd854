"""Collectives measured on a real engine: the record and its arithmetic (nccl-tests' sizes and bus
factors, the alpha-beta fit, the system file a run writes). Running the processes that measure them
is roofline.measure.collectives_run.

Which size. As nccl-tests reports it (doc/PERFORMANCE.md and its *GetBw functions), S is:
  all-reduce       each rank's buffer (count × 4 bytes)
  all-gather       the gathered array: n × each rank's input (= each rank's output)
  reduce-scatter   the array being reduced: each rank's input (= n × each rank's output)
  all-to-all       each rank's whole send buffer (n chunks of S/n, one per peer)
  send/recv        the buffer each rank sends (and receives)
algbw = S / t and busbw = algbw × factor, with nccl-tests' factors: all-reduce 2(n−1)/n;
all-gather, reduce-scatter and all-to-all (n−1)/n; send/recv 1. busbw is then comparable with one
link's bandwidth per direction, whatever n is. Sizes are rounded down to a multiple of 4·n bytes so
every rank holds whole, equal fp32 chunks.

The fit. Per collective, time = α + bus_bytes / β with bus_bytes = factor × S (the bytes that cross
the busiest link), fitted by least squares on the relative error (each point weighted 1/t², so a
4 KiB point counts as much as a 64 MiB one: α comes from the small sizes, β from the large). α is
the latency in seconds, β the bandwidth in bytes/s per direction on the busiest link, comparable
with a link's per-direction figure (NVLink on an H100: 450 GB/s each way). A fit that puts α below
zero is refitted with α = 0 (said so: `clamped`). The residual reported is the root mean square of
the relative residuals, (fit − measured) / measured, and its worst one.

No torch, no processes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.measure.timing import Timing
from roofline.units import format_bytes, format_si

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV = (
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv")
COLLECTIVES = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, SEND_RECV)
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}
ITEM_BYTES = 4  # fp32
# the factor's formula as nccl-tests writes it, for reports
FACTOR_FORMULA = {ALL_REDUCE: "2(n-1)/n", ALL_GATHER: "(n-1)/n", REDUCE_SCATTER: "(n-1)/n",
                  ALL_TO_ALL: "(n-1)/n", SEND_RECV: "1"}
# what S is for each collective (see the module docstring)
SIZE_MEANS = {ALL_REDUCE: "each rank's buffer", ALL_GATHER: "the gathered array (n x each rank's input)",
              REDUCE_SCATTER: "the reduced array (each rank's input)",
              ALL_TO_ALL: "each rank's send buffer", SEND_RECV: "the buffer each rank sends"}

KiB, MiB, GiB = 2**10, 2**20, 2**30
LINK_COLLECTIVE = ALL_REDUCE  # the fit a system file's node link takes


def ladder(low: int, high: int, step: int = 4) -> tuple[int, ...]:
    """low, low·step, ... up to high (inclusive)."""
    out = [low]
    while out[-1] * step <= high:
        out.append(out[-1] * step)
    return tuple(out)


def default_sizes(device: str, quick: bool) -> tuple[int, ...]:
    """CPU: 4 KiB to 64 MiB (quick: to 1 MiB); CUDA: 4 KiB to 1 GiB (quick: to 64 MiB); x4 a step."""
    top = {("cpu", False): 64 * MiB, ("cpu", True): 1 * MiB,
           ("cuda", False): 1 * GiB, ("cuda", True): 64 * MiB}[(device, quick)]
    return ladder(4 * KiB, top)


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw: all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all (n−1)/n;
    send/recv 1."""
    if n < 1:
        raise RooflineError(f"a group has at least one rank, got {n}")
    if collective == ALL_REDUCE:
        return 2 * (n - 1) / n
    if collective in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):
        return (n - 1) / n
    if collective == SEND_RECV:
        return 1.0
    raise RooflineError(f"unknown collective {collective!r}; collectives: {', '.join(COLLECTIVES)}")


def round_size(size: int, n: int) -> int:
    """S rounded down to a multiple of 4·n bytes: every rank holds whole, equal fp32 chunks."""
    quantum = ITEM_BYTES * n
    return (int(size) // quantum) * quantum


# --- the record -----------------------------------------------------------------------------------

@frozen
class CollectivePoint:
    """One collective at one size S (as nccl-tests counts it), over `ranks` ranks; each sample is the
    slowest rank's time of one repeat."""

    collective: str
    size_bytes: int
    ranks: int
    timing: Timing

    @property
    def factor(self) -> float:
        return bus_factor(self.collective, self.ranks)

    @property
    def time_s(self) -> float:
        """The median repeat."""
        return self.timing.median_s

    @property
    def bus_bytes(self) -> float:
        """factor × S: the bytes over the busiest link, the fit's abscissa."""
        return self.factor * self.size_bytes

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.size_bytes / self.time_s

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.algbw_bytes_per_s * self.factor

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "size_bytes": self.size_bytes, "time_s": self.time_s,
                "algbw_bytes_per_s": self.algbw_bytes_per_s, "busbw_bytes_per_s": self.busbw_bytes_per_s,
                "bus_factor": self.factor, "bus_bytes": self.bus_bytes, **self.timing.to_dict()}


@frozen
class AlphaBeta:
    """time = alpha_s + bus_bytes / beta_bytes_per_s, fitted on `points` sizes of one collective."""

    collective: str
    alpha_s: float
    beta_bytes_per_s: float
    residual: float  # root mean square of (fit − measured) / measured
    max_residual: float  # the worst |fit − measured| / measured
    points: int
    clamped: bool = False  # the free fit put α below zero; refitted with α = 0

    def time_s(self, bus_bytes: float) -> float:
        return self.alpha_s + bus_bytes / self.beta_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "alpha_s": self.alpha_s, "beta_bytes_per_s": self.beta_bytes_per_s,
                "residual": self.residual, "max_residual": self.max_residual, "points": self.points,
                "clamped": self.clamped}


def fit_alpha_beta(bus_bytes: Sequence[float], times_s: Sequence[float], collective: str = "") -> AlphaBeta:
    """Least squares of time = α + bus_bytes / β on the relative error (weights 1/t²).

    Exact on exact data: times built as α + bytes/β give back α and β. Needs two distinct sizes and
    times that grow with size; α below zero is refitted as α = 0 (`clamped`)."""
    if len(bus_bytes) != len(times_s):
        raise RooflineError("a fit needs one time per size")
    pairs = [(float(x), float(y)) for x, y in zip(bus_bytes, times_s, strict=True)]
    if any(not (y > 0 and math.isfinite(y)) or not (x >= 0 and math.isfinite(x)) for x, y in pairs):
        raise RooflineError("a fit needs positive, finite times and sizes")
    if len({x for x, _ in pairs}) < 2:
        raise RooflineError(f"{collective or 'a fit'}: an alpha-beta fit needs at least two sizes")
    w = [1.0 / (y * y) for _, y in pairs]
    sw = math.fsum(w)
    mx = math.fsum(wi * x for wi, (x, _) in zip(w, pairs, strict=True)) / sw
    my = math.fsum(wi * y for wi, (_, y) in zip(w, pairs, strict=True)) / sw
    sxx = math.fsum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, pairs, strict=True))
    sxy = math.fsum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, pairs, strict=True))
    slope = sxy / sxx
    alpha = my - slope * mx
    clamped = False
    if alpha < 0:  # no negative latency: the best slope through the origin, same weights
        clamped = True
        alpha = 0.0
        slope = math.fsum(wi * x * y for wi, (x, y) in zip(w, pairs, strict=True)) / math.fsum(
            wi * x * x for wi, (x, _) in zip(w, pairs, strict=True))
    if not slope > 0:
        raise RooflineError(f"{collective or 'a fit'}: the times do not grow with size; no bandwidth to fit")
    rel = [(alpha + slope * x - y) / y for x, y in pairs]
    return AlphaBeta(collective, alpha, 1.0 / slope, math.sqrt(math.fsum(r * r for r in rel) / len(rel)),
                     max(abs(r) for r in rel), len(pairs), clamped)


@frozen
class Collectives:
    """A collectives run: every size measured per collective, their α-β fits, what was not measured."""

    device: str  # "cpu" | "cuda"
    backend: str  # "gloo" | "nccl"
    ranks: int
    device_name: str
    sizes: tuple[int, ...]  # the ladder planned (S, rounded to the ranks)
    points: tuple[CollectivePoint, ...]
    not_measured: Mapping[str, str] = field(default_factory=dict)  # collective (or "collective S") -> why
    catalog_id: str | None = None  # the catalog machine of the GPU, where it is one
    quick: bool = False
    budget_s: float = 0.0
    wall_s: float = 0.0
    complete: bool = True
    repeats: int = 0
    warmup: int = 0
    date: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "not_measured", MappingProxyType(dict(self.not_measured)))
        object.__setattr__(self, "versions", MappingProxyType(dict(self.versions)))

    def points_of(self, collective: str) -> tuple[CollectivePoint, ...]:
        return tuple(sorted((p for p in self.points if p.collective == collective), key=lambda p: p.size_bytes))

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collectives with at least one measured size, in the order they ran."""
        return tuple(c for c in COLLECTIVES if any(p.collective == c for p in self.points))

    @property
    def fits(self) -> dict[str, AlphaBeta]:
        """collective -> its α-β fit (collectives with fewer than two sizes, or flat times, have none)."""
        out: dict[str, AlphaBeta] = {}
        for c in self.collectives:
            pts = self.points_of(c)
            try:
                out[c] = fit_alpha_beta([p.bus_bytes for p in pts], [p.time_s for p in pts], c)
            except RooflineError:
                continue
        return out

    def fit_problems(self) -> dict[str, str]:
        """collective -> why it has no fit."""
        out: dict[str, str] = {}
        for c in self.collectives:
            pts = self.points_of(c)
            try:
                fit_alpha_beta([p.bus_bytes for p in pts], [p.time_s for p in pts], c)
            except RooflineError as exc:
                out[c] = str(exc)
        return out

    @property
    def link_fit(self) -> AlphaBeta:
        """The all-reduce fit: a system file's node link."""
        fit = self.fits.get(LINK_COLLECTIVE)
        if fit is None:
            why = self.fit_problems().get(LINK_COLLECTIVE) or self.not_measured.get(LINK_COLLECTIVE) or "not measured"
            raise RooflineError(f"no {LINK_COLLECTIVE} fit for the link ({why})")
        return fit

    @property
    def label(self) -> str:
        """'4 KiB-1 MiB, 5 sizes': the ladder, as the source line says it."""
        if not self.sizes:
            return "no sizes"
        lo, hi = format_bytes(self.sizes[0], binary=True), format_bytes(self.sizes[-1], binary=True)
        return f"{lo}-{hi}, {len(self.sizes)} sizes"

    def default_id(self) -> str:
        what = self.catalog_id or _slug(self.device_name)
        return f"measured-{what}-{self.ranks}x-{self.backend}"

    def to_dict(self) -> dict[str, Any]:
        fits = self.fits
        return {
            "device": self.device, "backend": self.backend, "ranks": self.ranks, "device_name": self.device_name,
            "catalog_id": self.catalog_id, "quick": self.quick, "complete": self.complete,
            "budget_s": self.budget_s, "wall_s": self.wall_s, "repeats": self.repeats, "warmup": self.warmup,
            "date": self.date, "sizes": list(self.sizes), "size_means": dict(SIZE_MEANS),
            "bus_factors": {c: bus_factor(c, self.ranks) for c in COLLECTIVES},
            "points": [p.to_dict() for p in sorted(self.points, key=lambda p: (COLLECTIVES.index(p.collective),
                                                                            p.size_bytes))],
            "fits": {c: f.to_dict() for c, f in fits.items()},
            "fit_problems": self.fit_problems(),
            "link": {"collective": LINK_COLLECTIVE, **fits[LINK_COLLECTIVE].to_dict()}
            if LINK_COLLECTIVE in fits else None,
            "not_measured": dict(self.not_measured), "versions": dict(self.versions), "notes": list(self.notes),
        }

    def to_link_section(self, machine_id: str | None = None, name: str | None = None,
                        device: str | None = None) -> str:
        """A system file (TOML) whose node link is the all-reduce fit: β as bandwidth, α as latency.

        `device` is the machine each rank ran on: by default the catalog id of the GPU where it is
        one; "cpu" for a CPU run (a comment says to replace it with the CPU's measured machine file);
        otherwise the GPU's name as a placeholder, with the same comment."""
        fit = self.link_fit
        sid = machine_id or self.default_id()
        title = name or f"{self.device_name} x {self.ranks} ({self.backend}, measured)"
        comment = ""
        if device is None:
            if self.catalog_id:
                device = self.catalog_id
            elif self.device == "cpu":
                device = "cpu"
                comment = ("  # the measured CPU is not a catalog machine: put the path of its machine file here "
                           "(roofline measure --save my-cpu.toml)")
            else:
                device = _slug(self.device_name)
                comment = ("  # this GPU is not in the catalog: put the path of its machine file here "
                           "(roofline measure --device cuda --save my-gpu.toml)")
        source = (f"roofline measure --collectives ({self.date}, {self.backend}, {self.label}, "
                  f"fitted on {LINK_COLLECTIVE} busbw)")
        latency, latency_comment = fit.alpha_s, ""
        if not latency > 0:  # a system file's latency is positive: the smallest size's whole time bounds α
            smallest = self.points_of(LINK_COLLECTIVE)[0]
            latency = smallest.time_s
            latency_comment = (f"  # the fit put alpha at or below 0; this is the whole time of the smallest "
                               f"size ({format_bytes(smallest.size_bytes, binary=True)}), an upper bound")
        header = [f"# written by `roofline measure --collectives` on {self.device_name}, {self.ranks} ranks "
                  f"({self.backend}); the node link is the {LINK_COLLECTIVE} fit: time = latency + "
                  "bus bytes / bandwidth, bus bytes = 2(n-1)/n x size"]
        for c, f in self.fits.items():
            header.append(f"# {c}: alpha {_latency_text(f.alpha_s)}, beta {_bandwidth_text(f.beta_bytes_per_s)} "
                          f"per direction (residual {f.residual:.1%} rms, {f.points} sizes)")
        for what, why in self.not_measured.items():
            header.append(f"# not measured: {what} ({why})")
        lines = [*(_comment_line(h) for h in header),
                 f"id = {_toml_string(sid)}",
                 f"name = {_toml_string(title)}",
                 'kind = "system"',
                 f"device = {_toml_string(device)}{comment}",
                 f"devices_per_node = {int(self.ranks)}",
                 "max_nodes = 1",
                 "",
                 "[link.node]",
                 f"name = {_toml_string(f'measured: {self.backend} {LINK_COLLECTIVE} over {self.ranks} processes')}",
                 f"bandwidth = {_toml_string(_bandwidth_text(fit.beta_bytes_per_s))}",
                 f"latency = {_toml_string(_latency_text(latency))}{latency_comment}",
                 'topology = "switch"',
                 "measured = true",
                 f"source = {_toml_string(source)}"]
        return "\n".join(lines) + "\n"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "device"


def _bandwidth_text(rate: float) -> str:
    """12345678900.0 -> '12.35 GB/s' (decimal, four significant figures: roofline.units reads it back)."""
    return format_si(rate, "B/s", 4)


def _latency_text(seconds: float) -> str:
    """3.5e-5 -> '35 us' (ASCII 'us', four significant figures)."""
    if seconds == 0:
        return "0 us"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale * 0.99995:
            return f"{_sig4(seconds / scale)} {unit}"
    return f"{_sig4(seconds / 1e-9)} ns"


def _sig4(x: float) -> str:
    decimals = max(0, 3 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in text:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _comment_line(text: str) -> str:
    """A comment holds no control characters (a newline would end it and start a line of TOML)."""
    return "".join(ch if ord(ch) >= 0x20 and ord(ch) != 0x7F else " " for ch in text)
