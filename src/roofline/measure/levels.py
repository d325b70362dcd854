"""The cache levels' bandwidth: a working-set ladder from L1 to DRAM, and the plateaus it shows.

As the Empirical Roofline Toolkit (ERT) and the Cache-Aware Roofline Model (CARM) do it: one
streaming kernel runs over working sets of growing size (16 KiB, 32 KiB, ... doubling up to 4x the
last-level cache, bounded), each repeated many times, and its bandwidth is plotted against the
working set. The curve falls in steps: a plateau while the working set fits a cache level, a drop
when it spills into the next. Each plateau is a level's bandwidth: L1, L2, L3, then DRAM.

The sizes climb in half-octave steps (16, 24, 32, 48, 64 KiB, ...).

The kernel (CPU). `acc[i] += x[i]` over two fp64 arrays of n/2 elements each (working set = 16·(n/2)
= 8·n bytes), counted as STREAM counts its add: x read, acc read, acc written, 3·8 bytes per element
per pass, write-allocate not counted. numpy runs R passes in ONE call, `np.add.reduce` over a
broadcast (stride 0) view of x of shape (R, n/2) into acc, so Python's per-call overhead (about a
microsecond, as long as a 16 KiB pass takes in L1) is paid once per R passes; R is chosen so that a
call moves at least 32 MiB. Every CPU of the process runs its own arrays in its own thread (numpy
releases the GIL in ufuncs), so the working set is per thread and the bandwidth is the sum over
threads: the whole chip's bandwidth of each level, as DRAM's is measured.

Plateaus (`find_plateaus`). Scanning from the smallest working set, a plateau is a run of at least
two consecutive sizes whose bandwidths stay within a factor (1 + tolerance) of each other (max / min
<= 1.3 by default); a single size between two runs is a transition and belongs to none. A plateau's
bandwidth is the median of its sizes' best rates.

Naming them (`name_plateaus`). With the caches' sizes (sysfs: /sys/devices/system/cpu/cpu0/cache/
index*/size, data and unified caches, each divided among the process' CPUs that share it), a plateau
is the smallest level whose size holds its middle working set (the geometric mean of its first and
last); past the last cache it is DRAM. A later plateau inside a level already named is that level's
tail (the cache partly spilled) and is left out. Without sizes the plateaus are L1, L2, L3 in order
and the last one, if its middle working set is past 16 MiB, DRAM. The last plateau is DRAM too when
its bandwidth is within the tolerance of STREAM's DRAM figure (a cache shared with other tenants
holds less than its size).

numpy is imported inside functions.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.frozen import frozen
from roofline.measure.env import Environment
from roofline.measure.runs import MeasureSettings, Progress
from roofline.measure.timing import Timing, time_calls
from roofline.vocab import Level

CACHES = (Level.L1, Level.L2, Level.L3)
ORDER = (*CACHES, Level.DRAM)
SMALLEST = 16 * 2**10  # the ladder's first working set: well inside any L1 data cache
TOLERANCE = 0.3  # a plateau's bandwidths lie within a factor 1.3 of each other
CALL_BYTES = 32 * 2**20  # each timed call moves at least this much per thread
# the ladder's last working set per thread: 4x the last-level cache's share, at most this
TOP_QUICK = 64 * 2**20
TOP_FULL = 512 * 2**20
NO_SIZES_DRAM = 16 * 2**20  # without cache sizes, a last plateau past this is taken for DRAM
KERNEL = "acc[i] += x[i] (fp64)"
COUNTED = "STREAM's add count: x read, acc read and written, 3·8 B per element per pass"


@frozen
class LadderPoint:
    """One working set of the ladder: per thread, and the bytes one timed call moved (all threads)."""

    working_set_bytes: float
    bytes_per_call: float
    timing: Timing

    @property
    def best_rate(self) -> float:
        return self.bytes_per_call / self.timing.min_s

    def to_dict(self) -> dict[str, Any]:
        return {"working_set_bytes": self.working_set_bytes, "bytes": self.bytes_per_call,
                "max_bytes_per_s": self.best_rate, **self.timing.to_dict()}


@frozen
class Plateau:
    """A run of ladder sizes with one bandwidth; `level` is None until named."""

    first_bytes: float  # the run's smallest working set
    last_bytes: float  # and its largest
    bytes_per_s: float  # the median of its sizes' best rates
    sizes: int
    level: Level | None = None

    @property
    def middle_bytes(self) -> float:
        """The geometric mean of the run's first and last working sets."""
        return math.sqrt(self.first_bytes * self.last_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "first_working_set_bytes": self.first_bytes,
                "last_working_set_bytes": self.last_bytes, "bytes_per_s": self.bytes_per_s, "sizes": self.sizes}


def find_plateaus(points: Sequence[tuple[float, float]], tolerance: float = TOLERANCE) -> list[Plateau]:
    """Runs of at least two consecutive (working set, bandwidth) points, in order of size, whose
    bandwidths stay within max / min <= 1 + tolerance; see the module docstring."""
    ordered = sorted(points)
    out: list[Plateau] = []
    i = 0
    while i < len(ordered):
        j = i + 1
        lo = hi = ordered[i][1]
        while j < len(ordered):
            rate = ordered[j][1]
            if max(hi, rate) > (1 + tolerance) * min(lo, rate):
                break
            lo, hi = min(lo, rate), max(hi, rate)
            j += 1
        if j - i >= 2:
            run = ordered[i:j]
            out.append(Plateau(run[0][0], run[-1][0], statistics.median(r for _, r in run), len(run)))
            i = j
        else:
            i += 1  # a transition between two levels
    return out


def name_plateaus(plateaus: Sequence[Plateau], capacities: Mapping[Level, float] | None = None,
                  dram_bytes_per_s: float | None = None, tolerance: float = TOLERANCE) -> list[Plateau]:
    """Each plateau named L1, L2, L3 or DRAM (module docstring); plateaus past DRAM are dropped.

    `capacities` are each cache level's bytes per thread. `dram_bytes_per_s` (STREAM's over arrays
    far past the last-level cache), when given, names the last plateau DRAM if it is within the
    tolerance of it, even inside a cache's size (a cache shared with other tenants)."""
    caps = {lv: c for lv, c in (capacities or {}).items() if lv in CACHES and c}
    ordered = sorted(plateaus, key=lambda p: p.first_bytes)
    named: list[Plateau] = []
    nxt = 0
    for k, p in enumerate(ordered):
        last = k == len(ordered) - 1
        if caps:
            by_size = next((ORDER.index(lv) for lv in CACHES if caps.get(lv, 0.0) >= p.middle_bytes), len(CACHES))
        else:
            by_size = len(CACHES) if last and len(ordered) > 1 and p.middle_bytes > NO_SIZES_DRAM else 0
        if last and dram_bytes_per_s and len(ordered) > 1 and (
                max(p.bytes_per_s, dram_bytes_per_s) <= (1 + tolerance) * min(p.bytes_per_s, dram_bytes_per_s)):
            by_size = len(CACHES)
        if caps and by_size < nxt:  # inside a level already named: that level's tail, partly spilled
            continue
        index = max(nxt, by_size)
        if index >= len(ORDER):
            break
        named.append(Plateau(p.first_bytes, p.last_bytes, p.bytes_per_s, p.sizes, ORDER[index]))
        nxt = index + 1
    return named


# --- the caches' sizes ------------------------------------------------------------------------------

def _size(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip())
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def _cpus(text: str) -> set[int]:
    """A sysfs CPU list ("0-3,8") as a set."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def cache_sizes(base: str | Path = "/sys/devices/system/cpu/cpu0/cache",
                mine: set[int] | None = None) -> dict[Level, tuple[int, int]]:
    """Each data or unified cache level of cpu0 from sysfs: (its size, how many of the process' CPUs
    share it). {} where sysfs has no cache directory (macOS, some containers)."""
    root = Path(base)
    if mine is None:
        try:
            mine = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            mine = set()
    out: dict[Level, tuple[int, int]] = {}
    for index in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or size is None or not 1 <= level <= 3:
            continue
        try:
            shared = _cpus((index / "shared_cpu_list").read_text())
        except OSError:
            shared = set()
        sharing = len(shared & mine) if shared and mine else 1
        out[CACHES[level - 1]] = (size, max(1, sharing))
    return out


def per_thread(sizes: Mapping[Level, tuple[int, int]]) -> dict[Level, float]:
    """Each cache's bytes per thread: its size over the process' CPUs that share it."""
    return {lv: size / sharing for lv, (size, sharing) in sizes.items()}


def ladder_sizes(top: float, smallest: int = SMALLEST) -> list[int]:
    """Working sets from `smallest` in half-octave steps (16, 24, 32, 48, 64 KiB ...: x1.5 then x4/3)
    up to `top`, at least two sizes: three or more sizes inside each cache level, so that a plateau
    is seen even where the level is only twice the one before."""
    def step(size: int) -> int:
        return size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3  # from a power of two: x1.5

    out = [smallest]
    while len(out) < 2 or step(out[-1]) <= top:
        out.append(step(out[-1]))
    return out


def ladder_top(capacities: Mapping[Level, float], quick: bool) -> int:
    """4x the last cache's share per thread, at most TOP_QUICK (TOP_FULL without --quick), and at
    least 4 MiB; 16 MiB per thread without sizes."""
    cap = TOP_QUICK if quick else TOP_FULL
    if not capacities:
        return 16 * 2**20
    return int(min(cap, max(4 * 2**20, 4 * max(capacities.values()))))


# --- the ladder ---------------------------------------------------------------------------------------

@frozen
class CacheLadder:
    """The ladder's points, its plateaus named by level, and what it ran with."""

    points: tuple[LadderPoint, ...]
    plateaus: tuple[Plateau, ...]
    threads: int
    cache_bytes: Mapping[Level, tuple[int, int]] = field(default_factory=dict)  # sysfs: size, CPUs sharing
    kernel: str = KERNEL
    counted: str = COUNTED

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_bytes", MappingProxyType(dict(self.cache_bytes)))

    @property
    def levels(self) -> dict[Level, Plateau]:
        return {p.level: p for p in self.plateaus if p.level is not None}

    def describe(self) -> str:
        last = self.points[-1].working_set_bytes if self.points else 0
        return (f"cache ladder: {self.kernel} over working sets of 16 KiB to {last / 2**20:g} MiB per thread "
                f"on {self.threads} thread{'s' if self.threads != 1 else ''}, {COUNTED}; "
                f"plateaus within a factor {1 + TOLERANCE:g} (ERT/CARM method)")

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "counted": self.counted, "threads": self.threads,
                "tolerance": TOLERANCE,
                "cache_bytes": {lv: {"size": s, "sharing_cpus": n} for lv, (s, n) in self.cache_bytes.items()},
                "points": [p.to_dict() for p in self.points], "plateaus": [p.to_dict() for p in self.plateaus]}


def _accumulate_runner(ws: int) -> tuple[Callable[[], object], float]:
    """One thread's kernel over a working set of `ws` bytes: (one call, bytes it moves)."""
    import numpy as np

    half = max(1, ws // 16)  # two arrays of fp64
    x = np.random.default_rng(ws).random(half) + 0.5  # in [0.5, 1.5): never zero or denormal
    acc = np.zeros(half)
    passes = max(2, -(-CALL_BYTES // (24 * half)))
    view = np.broadcast_to(x, (passes, half))
    return (lambda: np.add.reduce(view, axis=0, out=acc)), 24.0 * half * passes


def measure_ladder(settings: MeasureSettings, env: Environment, say: Progress,
                   dram_bytes_per_s: float | None = None) -> CacheLadder:
    """The CPU's cache ladder (module docstring): every size timed, then its plateaus named."""
    from concurrent.futures import ThreadPoolExecutor

    sizes = cache_sizes()
    caps = per_thread(sizes)
    threads = max(1, env.threads)
    ladder = ladder_sizes(ladder_top(caps, settings.quick))
    points: list[LadderPoint] = []
    repeats = 3 if settings.quick else 5
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for ws in ladder:
            say(f"cache ladder: {ws / 2**10:g} KiB per thread")
            runners = [_accumulate_runner(ws) for _ in range(threads)]
            moved = sum(b for _, b in runners)

            def call(_i: int, runners: list[tuple[Callable[[], object], float]] = runners) -> object:
                return list(pool.map(lambda r: r[0](), runners))

            timing = time_calls(call, repeats=repeats, warmup=1)
            points.append(LadderPoint(float(ws), moved, timing))
    found = find_plateaus([(p.working_set_bytes, p.best_rate) for p in points])
    return CacheLadder(tuple(points), tuple(name_plateaus(found, caps, dram_bytes_per_s)), threads, sizes)


__all__ = ["CacheLadder", "LadderPoint", "Plateau", "cache_sizes", "find_plateaus", "ladder_sizes", "ladder_top",
           "measure_ladder", "name_plateaus", "per_thread"]
