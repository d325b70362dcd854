"""Collectives measured on a real engine: torch.distributed over N processes, gloo on a CPU, NCCL on GPUs.

What runs. N worker processes (one per GPU on CUDA; N on the CPU, each with its share of the
CPUs) join one process group over a free port on 127.0.0.1, and only there: MASTER_ADDR is
127.0.0.1, gloo is pinned to the loopback interface and NCCL's bootstrap too. Each runs all-reduce
(sum), all-gather, reduce-scatter (sum), all-to-all and send/recv (a ring of pairs: every rank sends
to rank + 1 and receives from rank − 1 at once) over a ladder of sizes, fp32 buffers of zeros (a sum
of zeros stays zero however often it runs, so no value drifts to infinity or denormals; links carry
bytes, not values). Per size: warm-up calls, then timed repeats, each started after a barrier and
ended after the device finished (CUDA synchronize); a repeat's time is the slowest rank's (the
parent takes the max over ranks of each repeat), and a size reports the median repeat.

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

The budget. The whole run is bounded in seconds. The workers share a soft deadline a little before
it: before each size they agree (an all-reduce of a flag) whether the next size still fits, judged
from the last size's time, each collective getting an equal share of what is left (what one leaves
unused rolls over). At the budget the parent kills every worker that is still running (a hung
process group included); every size all ranks had finished is reported, and what was not measured
is said. Each worker also exits by itself a few seconds past the budget, should its parent die.

Layering: imports roofline.errors, roofline.fileio, roofline.units and roofline.measure (timing,
ceilings, env); torch is imported only inside functions and inside the worker processes.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, need_torch
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
FIRST_SIZE_WARMUP = 5  # extra warm-up calls at the first size of each collective


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

@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


# --- the plan and the parent ----------------------------------------------------------------------

@dataclass(frozen=True)
class CollectivesPlan:
    """What one collectives run does. `devices` None: 2 processes on a CPU, every visible GPU on CUDA."""

    device: str = "cpu"
    devices: int | None = None
    quick: bool = False
    sizes: tuple[int, ...] | None = None  # S per size, bytes (default: default_sizes)
    budget_s: float | None = None  # the whole run, process start-up included (default: budget())
    repeats: int | None = None
    warmup: int | None = None
    collectives: tuple[str, ...] = COLLECTIVES

    def timed_repeats(self) -> int:
        return self.repeats or (10 if self.quick else 20)

    def warmup_calls(self) -> int:
        return self.warmup if self.warmup is not None else (1 if self.quick else 2)

    def budget(self) -> float:
        if self.budget_s is not None:
            return float(self.budget_s)
        return {("cpu", True): 30.0, ("cpu", False): 120.0, ("cuda", True): 60.0, ("cuda", False): 180.0}[
            (self.device, self.quick)]


Progress = Callable[[str], None]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _loopback_interface() -> str:
    """The loopback interface's name ('lo' on Linux, 'lo0' on macOS), so gloo binds only there."""
    try:
        names = [name for _i, name in socket.if_nameindex()]
    except OSError:
        names = []
    return next((n for n in names if n in ("lo", "lo0")), next((n for n in names if n.startswith("lo")), "lo"))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the rendezvous binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_plan(plan: CollectivesPlan) -> tuple[int, str, str | None]:
    """(ranks, device name, catalog id): the plan checked against this machine; bad input raises one line."""
    if plan.device not in BACKENDS:
        raise RooflineError(f"unknown device {plan.device!r}; devices: {', '.join(BACKENDS)}")
    unknown_names = [c for c in plan.collectives if c not in COLLECTIVES]
    if unknown_names or not plan.collectives:
        raise RooflineError(f"unknown collective {', '.join(unknown_names) or '(none given)'}; "
                            f"collectives: {', '.join(COLLECTIVES)}")
    if plan.budget_s is not None and not plan.budget_s > 0:
        raise RooflineError(f"the budget must be positive, got {plan.budget_s} s")
    if plan.repeats is not None and plan.repeats < 1:
        raise RooflineError(f"repeats must be at least 1, got {plan.repeats}")
    torch = need_torch("roofline measure --collectives")
    cuda = plan.device == "cuda"
    if cuda:
        from roofline.measure.ceilings import need_cuda

        need_cuda("measure --collectives --device cuda")
        visible = int(torch.cuda.device_count())
        ranks = plan.devices if plan.devices is not None else visible
        if ranks > visible:
            raise RooflineError(f"--devices {ranks} needs {ranks} GPUs; torch sees {visible} "
                                "(one rank per GPU: NCCL does not run two ranks on one GPU)")
    else:
        ranks = plan.devices if plan.devices is not None else 2
    if ranks < 2:
        what = "GPU" if cuda else "process"
        raise RooflineError(f"a collective needs at least 2 devices; got {ranks} {what}"
                            f"{'' if ranks == 1 else 's'} (--devices N, N >= 2)")
    if cuda:
        from roofline.measure.ceilings import catalog_match

        if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
            raise RooflineError("measure --collectives --device cuda needs NCCL; this torch build has none")
        name = str(torch.cuda.get_device_name(0))
        match = catalog_match(name)
        catalog_id = match.id if match is not None else None
    else:
        if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
            raise RooflineError("measure --collectives needs torch.distributed with gloo; this torch build has none")
        from roofline.measure.env import cpu_name

        name, catalog_id = cpu_name(), None
    sizes = plan.sizes if plan.sizes is not None else default_sizes(plan.device, plan.quick)
    if not sizes or any(round_size(s, ranks) < ITEM_BYTES * ranks for s in sizes):
        raise RooflineError(f"every size must be at least {ITEM_BYTES * ranks} bytes over {ranks} ranks "
                            f"(one fp32 value per rank), got {list(sizes)}")
    return ranks, name, catalog_id


def measure_collectives(plan: CollectivesPlan | None = None, progress: Progress | None = None,
                        on_update: Callable[[Collectives], None] | None = None) -> Collectives:
    """Run the collectives over the plan's processes; see the module docstring for what and how.

    `on_update`, if given, receives the results so far about once a second while the workers run
    (a caller can save partial results as they come)."""
    plan = plan or CollectivesPlan()
    ranks, device_name, catalog_id = check_plan(plan)
    torch = need_torch("roofline measure --collectives")
    sizes = tuple(sorted({round_size(s, ranks) for s in (plan.sizes or default_sizes(plan.device, plan.quick))}))
    say = progress or (lambda _text: None)
    budget = plan.budget()
    t0 = time.perf_counter()
    wall0 = time.time()
    hard_deadline = wall0 + budget
    reserve = min(max(2.0, 0.1 * budget), 0.5 * budget)
    threads = max(1, _cpu_count() // ranks) if plan.device == "cpu" else 1
    backend = BACKENDS[plan.device]
    base = dict(device=plan.device, backend=backend, ranks=ranks, device_name=device_name, sizes=sizes,
                catalog_id=catalog_id, quick=plan.quick, budget_s=budget, repeats=plan.timed_repeats(),
                warmup=plan.warmup_calls(), date=time.strftime("%Y-%m-%d", time.gmtime()),
                versions={"torch": str(torch.__version__), "python": sys.version.split()[0],
                          **({"cuda": str(torch.version.cuda)} if plan.device == "cuda" else {})})
    notes: list[str] = []
    if plan.device == "cpu" and ranks > _cpu_count():
        notes.append(f"{ranks} processes on {_cpu_count()} CPUs: they take turns, and the times show it")
    with tempfile.TemporaryDirectory(prefix="roofline-collectives-") as tmp:
        folder = Path(tmp)
        spec = {"backend": backend, "device": plan.device, "ranks": ranks, "port": free_port(), "sizes": list(sizes),
                "collectives": list(plan.collectives), "repeats": plan.timed_repeats(),
                "warmup": plan.warmup_calls(), "soft_deadline": hard_deadline - reserve,
                "hard_deadline": hard_deadline, "timeout_s": budget + 5.0, "threads": threads, "folder": tmp}
        (folder / "spec.json").write_text(json.dumps(spec))
        say(f"collectives: starting {ranks} {backend} processes")
        procs = _start_workers(folder, ranks, plan.device, threads)
        killed = False
        failed: list[str] = []
        try:
            last_update = time.perf_counter()
            while True:
                codes = [p.poll() for p in procs]
                if all(c is not None for c in codes):
                    failed = [_worker_error(folder, r, c) for r, c in enumerate(codes) if c != 0]
                    break
                if any(c not in (None, 0) for c in codes):  # one died: the others would wait for it forever
                    failed = [_worker_error(folder, r, c) for r, c in enumerate(codes) if c not in (None, 0)]
                    killed = _kill(procs)
                    break
                if time.time() > hard_deadline:
                    killed = _kill(procs)
                    notes.append(f"the process group was still running at the budget ({budget:g} s) and was "
                                 "killed; the sizes every rank had finished are reported")
                    break
                status = _read_json(folder / "status.json")
                if status:
                    say(f"collectives: {status.get('step', '')}")
                if on_update is not None and time.perf_counter() - last_update > 1.0:
                    last_update = time.perf_counter()
                    on_update(_gather(folder, base, notes, time.perf_counter() - t0, complete=False))
                time.sleep(0.05)
        finally:
            _kill(procs)
        result = _gather(folder, base, notes, time.perf_counter() - t0, complete=not (killed or failed))
    if failed:
        first = failed[0]
        if not result.points:
            raise RooflineError(f"measure --collectives failed: {first}")
        result = _with(result, notes=(*result.notes, f"a worker failed: {first}"))
    return result


def _with(c: Collectives, **changes: Any) -> Collectives:
    from dataclasses import replace

    return replace(c, **changes)


def _worker_env(device: str, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the folder holding the roofline package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.update(MASTER_ADDR="127.0.0.1", PYTHONUNBUFFERED="1")
    loop = _loopback_interface()
    env["GLOO_SOCKET_IFNAME"] = loop  # gloo binds the loopback interface, never one facing a network
    if device == "cuda":
        env["NCCL_SOCKET_IFNAME"] = loop  # NCCL's bootstrap too; the data moves over NVLink/PCIe/shared memory
    else:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


_WORKER = ("import sys\nfrom roofline.measure.collectives import worker_main\n"
           "sys.exit(worker_main(sys.argv[1], int(sys.argv[2])))")


def _start_workers(folder: Path, ranks: int, device: str, threads: int) -> list[subprocess.Popen[bytes]]:
    env = _worker_env(device, threads)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for r in range(ranks):
            with open(folder / f"rank{r}.err", "wb") as err:
                procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, str(folder), str(r)],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                              env=env, start_new_session=True))
    except OSError as exc:
        _kill(procs)
        raise RooflineError(f"cannot start the collective processes: {exc}") from None
    return procs


def _kill(procs: Sequence[subprocess.Popen[bytes]]) -> bool:
    """Kill every worker still running (by its own pid) and reap them all; True if any was killed."""
    killed = False
    for p in procs:
        if p.poll() is None:
            p.kill()
            killed = True
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return killed


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _worker_error(folder: Path, rank: int, code: int | None) -> str:
    record = _read_json(folder / f"rank{rank}.json") or {}
    if record.get("error"):
        return f"rank {rank}: {record['error']}"
    try:
        lines = [ln for ln in (folder / f"rank{rank}.err").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    tail = lines[-1][:300] if lines else "no message"
    return f"rank {rank} exited with code {code}: {tail}"


def _gather(folder: Path, base: Mapping[str, Any], notes: Sequence[str], wall_s: float,
            complete: bool) -> Collectives:
    """The ranks' files combined: a size counts once every rank finished it; each repeat's time is the
    slowest rank's."""
    ranks = int(base["ranks"])
    records = [_read_json(folder / f"rank{r}.json") or {} for r in range(ranks)]
    per_rank: list[dict[tuple[str, int], list[float]]] = [
        {(p["collective"], int(p["size_bytes"])): [float(t) for t in p["times_s"]] for p in rec.get("points", [])}
        for rec in records]
    points = []
    for key, times in per_rank[0].items():
        rows = [times] + [other.get(key, []) for other in per_rank[1:]]
        if any(len(row) != len(times) or not row for row in rows):
            continue
        worst = tuple(max(samples) for samples in zip(*rows, strict=True))
        points.append(CollectivePoint(key[0], key[1], ranks, Timing(worst)))
    not_measured: dict[str, str] = {}
    for rec in records:
        for what, why in rec.get("not_measured", {}).items():
            not_measured.setdefault(what, why)
    done = {p.collective for p in points}
    planned = _read_json(folder / "spec.json") or {}
    for c in planned.get("collectives", []):
        if c not in done and c not in not_measured:
            not_measured[c] = "not reached within the budget" if not complete else "no size finished"
    return Collectives(points=tuple(points), not_measured=not_measured, wall_s=wall_s, complete=complete,
                       notes=tuple(notes), **base)


# --- the worker (one per rank, in its own process) --------------------------------------------------

def worker_main(folder_text: str, rank: int) -> int:
    """One rank: join the group on 127.0.0.1, run every collective over the ladder, write rank<r>.json
    after each size (so a kill keeps what finished)."""
    import threading
    from datetime import timedelta

    from roofline.fileio import atomic_write

    folder = Path(folder_text)
    spec = json.loads((folder / "spec.json").read_text())
    record: dict[str, Any] = {"rank": rank, "points": [], "not_measured": {}, "done": False}

    def save() -> None:
        atomic_write(folder / f"rank{rank}.json", json.dumps(record))

    def watchdog() -> None:  # should the parent die, never outlive the budget by more than a few seconds
        while time.time() < spec["hard_deadline"] + 5.0:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        import torch
        import torch.distributed as dist

        n = int(spec["ranks"])
        cuda = spec["device"] == "cuda"
        if cuda:
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
        else:
            torch.set_num_threads(int(spec["threads"]))
            dev = torch.device("cpu")
        options: dict[str, Any] = {"device_id": dev} if cuda else {}
        dist.init_process_group(spec["backend"], init_method=f"tcp://127.0.0.1:{int(spec['port'])}", rank=rank,
                                world_size=n, timeout=timedelta(seconds=float(spec["timeout_s"])), **options)
        try:
            _run_ladder(spec, rank, n, dev, cuda, record, save, folder)
        finally:
            dist.destroy_process_group()
        record["done"] = True
        save()
        return 0
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        save()
        return 1


def _ops(torch: Any, dist: Any, collective: str, size: int, n: int, rank: int, dev: Any) -> Callable[[], None]:
    """The call for one collective at size S (nccl-tests' S: see the module docstring), buffers allocated."""
    count = size // ITEM_BYTES
    zeros = lambda k: torch.zeros(k, dtype=torch.float32, device=dev)  # noqa: E731
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if collective == ALL_REDUCE:
        buf = zeros(count)
        return lambda: dist.all_reduce(buf)
    if collective == ALL_GATHER:
        inp, out = zeros(count // n), zeros(count)
        return lambda: gather(out, inp)
    if collective == REDUCE_SCATTER:
        inp, out = zeros(count), zeros(count // n)
        return lambda: scatter(out, inp)
    if collective == ALL_TO_ALL:
        inp, out = zeros(count), zeros(count)
        return lambda: dist.all_to_all_single(out, inp)
    send, recv = zeros(count), zeros(count)
    nxt, prv = (rank + 1) % n, (rank - 1) % n

    def ring() -> None:
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return ring


def _run_ladder(spec: Mapping[str, Any], rank: int, n: int, dev: Any, cuda: bool, record: dict[str, Any],
                save: Callable[[], None], folder: Path) -> None:
    import torch
    import torch.distributed as dist

    from roofline.fileio import atomic_write

    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    barrier_options: dict[str, Any] = {"device_ids": [rank]} if cuda else {}
    flag = torch.zeros(1, dtype=torch.float32, device=dev)

    def anyone(mine: bool) -> bool:
        """True on every rank if it is true on any: the ranks decide together."""
        flag.fill_(1.0 if mine else 0.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    collectives = list(spec["collectives"])
    sizes = [int(s) for s in spec["sizes"]]
    soft = float(spec["soft_deadline"])
    for i, collective in enumerate(collectives):
        share_end = time.time() + (soft - time.time()) / (len(collectives) - i)
        last_wall, last_size = 0.0, 0
        for size in sizes:
            predicted = last_wall * max(1.0, size / last_size) if last_size else 0.0
            if anyone(time.time() + predicted > share_end):
                left = [format_bytes(s, binary=True) for s in sizes if s >= size]
                record["not_measured"][collective] = (f"sizes {', '.join(left)} left out: its share of the "
                                                      f"budget was spent")
                break
            if rank == 0:
                atomic_write(folder / "status.json", json.dumps(
                    {"step": f"{collective} {format_bytes(size, binary=True)} over {n} ranks"}))
            started = time.time()
            try:
                call = _ops(torch, dist, collective, size, n, rank, dev)
                failed = ""
            except Exception as exc:  # out of memory at this size: agreed below, then the ladder ends
                call, failed = (lambda: None), f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            if anyone(bool(failed)):
                record["not_measured"][collective] = (f"stopped at {format_bytes(size, binary=True)}: "
                                                      f"{failed or 'another rank could not allocate it'}")
                break
            # warm-up: the first size of each collective pays for connections and first-call set-up
            for _ in range(max(0, int(spec["warmup"])) + (FIRST_SIZE_WARMUP if size == sizes[0] else 0)):
                call()
                sync()
            times = []
            for _ in range(int(spec["repeats"])):
                dist.barrier(**barrier_options)
                sync()
                t0 = time.perf_counter()
                call()
                sync()
                times.append(time.perf_counter() - t0)
            dist.barrier(**barrier_options)
            del call
            record["points"].append({"collective": collective, "size_bytes": size, "times_s": times})
            save()
            last_wall, last_size = time.time() - started, size
        if cuda:
            torch.cuda.empty_cache()
