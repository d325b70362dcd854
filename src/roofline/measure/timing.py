"""Timing a kernel properly: warm-up, a bounded number of repeats, min / median / max.

A shared, noisy machine makes single timings worthless, so every figure here is a distribution.
The minimum is what the hardware proved it can do (STREAM's convention for a ceiling); the median
is what a kernel typically takes (our convention for a measured kernel point). Short calls are
repeated `inner` times per sample so that one sample is well above the clock's resolution and the
call overhead. On CUDA a sample is bracketed by device events, and the host waits for the device
before reading them.

A ceiling's best sample is *confirmed* when a second sample lies within CONFIRM (5%) of it: one lucky
sample between two busy ones is not a ceiling. `time_calls(..., until_confirmed=N)` keeps sampling, up
to N more samples (and within its budget), until the best is confirmed; a Timing says whether it was
(`confirmed`) and how far its two best samples lay apart (`best_gap`), so a report can say that a run
was noisy instead of printing a figure a rerun cannot reproduce (issue 24: `measure --quick` gave bf16
761, 462 and 204 GFLOP/s back to back on a loaded 2-core machine, without a word).

torch is imported inside `cuda_sync` / `cuda_events`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen

CONFIRM = 0.05  # the best sample is confirmed by a second within 5% of it


@frozen
class Timing:
    """Seconds per call, one entry per sample (each sample averaged over `inner` calls)."""

    times_s: tuple[float, ...]
    inner: int = 1

    def __post_init__(self) -> None:
        if not self.times_s:
            raise RooflineError("a timing needs at least one sample")
        if any(not (t > 0 and math.isfinite(t)) for t in self.times_s):
            raise RooflineError(f"timings must be positive and finite, got {self.times_s}")

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.times_s))

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    @property
    def repeats(self) -> int:
        return len(self.times_s)

    @property
    def spread(self) -> float:
        """(max − min) / median: how noisy the samples were."""
        return (self.max_s - self.min_s) / self.median_s

    @property
    def best_gap(self) -> float | None:
        """second-fastest / fastest − 1: how far the best sample stands from the next (None: one sample)."""
        fastest = sorted(self.times_s)[:2]
        return fastest[1] / fastest[0] - 1 if len(fastest) == 2 else None

    @property
    def confirmed(self) -> bool:
        """Whether a second sample lies within CONFIRM of the best (the best is not one lucky sample)."""
        gap = self.best_gap
        return gap is not None and gap <= CONFIRM

    def rates(self, amount: float) -> dict[str, float]:
        """`amount` (FLOPs or bytes per call) over the times: the best rate is amount / min time."""
        return {"max": amount / self.min_s, "median": amount / self.median_s, "min": amount / self.max_s}

    def to_dict(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "median_s": self.median_s, "max_s": self.max_s,
                "repeats": self.repeats, "inner": self.inner, "best_confirmed": self.confirmed,
                "best_gap": self.best_gap}


def time_calls(fn: Callable[[int], object], *, repeats: int, warmup: int = 1, min_sample_s: float = 0.0,
               budget_s: float | None = None, sync: Callable[[], None] | None = None,
               until_confirmed: int = 0) -> Timing:
    """Time `fn(i)` (i counts calls, so `fn` can rotate through input sets) on the host clock.

    `sync` (e.g. torch.cuda.synchronize) is called before the clock is read, so asynchronous work is
    inside the sample. Calls shorter than `min_sample_s` are repeated `inner` times per sample. At
    least one sample is taken; after that, sampling stops early once `budget_s` is spent. With
    `until_confirmed` N, up to N samples more are taken after `repeats` while the best is not confirmed
    (module doc).
    """
    if repeats < 1:
        raise RooflineError(f"repeats must be at least 1, got {repeats}")
    wait = sync or (lambda: None)
    calls = 0
    t_warm = 0.0
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        fn(calls)
        wait()
        t_warm = time.perf_counter() - t0
        calls += 1
    inner = 1
    if min_sample_s > 0 and t_warm < min_sample_s:
        inner = min(10_000, max(1, math.ceil(min_sample_s / max(t_warm, 1e-7))))
    times: list[float] = []
    start = time.perf_counter()
    for i in range(repeats + max(0, until_confirmed)):
        if i >= repeats and Timing(tuple(times), inner).confirmed:
            break
        wait()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(calls)
            calls += 1
        wait()
        times.append((time.perf_counter() - t0) / inner)
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
    return Timing(tuple(times), inner)


def time_cuda(fn: Callable[[int], object], *, repeats: int, warmup: int = 3, budget_s: float | None = None,
              warmup_s: float = 0.1) -> Timing:
    """Time `fn(i)` on the current CUDA stream with device events: one event pair per sample.

    The warm-up runs `warmup` calls and then keeps calling until `warmup_s` has passed: an idle GPU
    sits at a low clock (an H200 was read at 345 MHz idle, 1980 MHz under load) and takes a moment
    to raise it, and the first calls also pay for cuBLAS handles and kernel selection. The host
    waits for the device before reading the events."""
    import torch

    calls = 0
    for _ in range(max(1, warmup)):
        fn(calls)
        calls += 1
    torch.cuda.synchronize()
    t_warm = time.perf_counter()
    while time.perf_counter() - t_warm < warmup_s and calls < 10_000:
        fn(calls)
        calls += 1
        torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    t0 = time.perf_counter()
    done = 0
    for i in range(repeats):
        starts[i].record()
        fn(calls)
        calls += 1
        ends[i].record()
        done += 1
        if budget_s is not None and i % 4 == 3:
            torch.cuda.synchronize()
            if time.perf_counter() - t0 > budget_s:
                break
    torch.cuda.synchronize()
    return Timing(tuple(starts[i].elapsed_time(ends[i]) * 1e-3 for i in range(done)))


def rotation_count(set_bytes: float, cache_bytes: float | None, cover: float = 8.0, limit: int = 16,
                   memory_budget_bytes: float = 4 * 2**30) -> int:
    """How many input sets to rotate through so that consecutive calls do not find their inputs in
    the last-level cache: enough sets to cover `cover` times the cache, at most `limit`, within a
    memory budget. Twice the cache is not enough: modern replacement policies are built to resist
    cyclic thrashing and keep part of a working set a few times their size (measured here: binary
    ops over four 24 MiB sets in a 32 MiB L3 ran at 126% of the streaming roof); eight times is."""
    if not cache_bytes or set_bytes <= 0:
        return 2
    wanted = math.ceil(cover * cache_bytes / set_bytes) + 1
    affordable = max(1, int(memory_budget_bytes // set_bytes))
    return max(1, min(limit, wanted, affordable))
