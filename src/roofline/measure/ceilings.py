"""The machine's empirical ceilings: streaming bandwidth and matrix FLOP/s per dtype.

Bandwidth. Four STREAM kernels over arrays far larger than the last-level cache (4x it with
`quick`, 8x otherwise, never under 64 MiB), counting bytes as STREAM does: each array read or
written once per element. copy c = a and scale c = q·a move 2·8·n bytes; add c = a + b and
triad c = a + q·b move 3·8·n bytes (fp64 arrays on a CPU; on a GPU the arrays are
fp32, 4 GiB each without `quick`, so 2·4·n and 3·4·n). The destination's write-allocate read is not
counted, as in STREAM and the C triad in bench/, so the figures compare directly. The inputs never
change, so repeated calls cannot drift to infinities or denormals. On the CPU every kernel runs on
all the process' CPUs: numpy in one thread per CPU over contiguous slices (numpy releases the GIL
in ufuncs), torch with its own thread pool.

Matrix FLOP/s. C = A·B with square random-normal operands (never zeros: zeros let a GPU lower its
power and flatter the clock), 2·n³ FLOPs per call, for every dtype the device runs: on a CPU fp64
and fp32 through numpy's BLAS and torch, bf16 and fp16 through torch; on CUDA fp64, fp32 (TF32
off), tf32, bf16, fp16 and fp8 (torch._scaled_mm, where the GPU has FP8 tensor cores). Sizes climb
a ladder until the next size would take too long, so a dtype the device only emulates (fp16 on
most CPUs) is measured at a small size instead of stalling the run.

Cache levels (CPU). A working-set ladder from 16 KiB to 4x the last-level cache finds the L1, L2
and L3 bandwidths as plateaus of bandwidth against working set (levels.py, the ERT/CARM method);
they are saved as memory levels l1, l2, l3 beside DRAM, whose figure stays STREAM's above. On CUDA,
cuda_chip.py measures the L2 and the L1/shared-memory bandwidth and the exponential units' rate.

Each ceiling is the best rate over the repeats and backends (the minimum time: what the hardware
proved it can do, STREAM's convention); min / median / max are all kept.

Where: runs.py holds one benchmark's record (CeilingRun), the MeasureSettings, STREAM's byte count and the
matmul ladder; cpu.py and cuda.py run them on each device; this module gathers the runs into
Ceilings, the measured Machine and its comparison with the catalog.

numpy and torch are imported only inside functions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, need_torch
from roofline.frozen import frozen
from roofline.hardware import Machine, MemoryLevel, catalog
from roofline.hardware.machine import PEAK_KEYS
from roofline.measure.cpu import measure_cpu
from roofline.measure.cuda import measure_cuda
from roofline.measure.cuda_chip import ChipRun, measure_cuda_chip
from roofline.measure.env import Environment, capture_environment
from roofline.measure.levels import CacheLadder, measure_ladder
from roofline.measure.runs import CeilingRun, MeasureSettings, Progress
from roofline.units import format_bytes
from roofline.vocab import Bound, Level, Unit

DEVICES = ("cpu", "cuda")


def need_cuda(what: str) -> Any:
    torch = need_torch(what)
    if not torch.cuda.is_available():
        build = getattr(torch.version, "cuda", None)
        why = "this torch build has no CUDA (a CPU wheel)" if not build else "torch sees no CUDA device"
        raise RooflineError(f"{what} needs a CUDA GPU; {why} (on a CUDA machine install a CUDA build of "
                            f"torch==2.13.0, or use --device cpu)")
    return torch


@frozen
class Ceilings:
    device: str
    environment: Environment
    runs: tuple[CeilingRun, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)  # dtype or kernel -> why not measured
    wall_s: float = 0.0
    quick: bool = False
    ladder: CacheLadder | None = None  # the cache levels' bandwidths (CPU), levels.py
    chip_runs: tuple[ChipRun, ...] = ()  # L2, L1/shared SRAM and exp rate (CUDA), cuda_chip.py

    def __post_init__(self) -> None:
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))

    @property
    def memory_run(self) -> CeilingRun:
        runs = [r for r in self.runs if r.kind is Bound.MEMORY]
        if not runs:
            raise RooflineError("no bandwidth was measured")
        return max(runs, key=lambda r: r.best_rate)

    @property
    def memory_bytes_per_s(self) -> float:
        """The best streaming rate of any kernel and backend: the slope of the measured roofline."""
        return self.memory_run.best_rate

    def matrix_run(self, key: str) -> CeilingRun:
        runs = [r for r in self.runs if r.kind is Unit.MATRIX and r.dtype == key]
        if not runs:
            raise RooflineError(f"no {key} matmul was measured")
        return max(runs, key=lambda r: r.best_rate)

    @property
    def peak_flop_per_s(self) -> dict[str, float]:
        """dtype (peak key) -> the best matmul rate measured in it."""
        keys = sorted({r.dtype for r in self.runs if r.kind is Unit.MATRIX}, key=PEAK_KEYS.index)
        return {k: self.matrix_run(k).best_rate for k in keys}

    def catalog_match(self) -> Machine | None:
        return catalog_match(self.environment.device_name) if self.device == "cuda" else None

    def to_machine(self, machine_id: str | None = None, name: str | None = None) -> Machine:
        """A Machine with the measured ceilings (measured=True); a catalog GPU lends its datasheet
        vector peaks, marked as such, since no matmul measures the vector units."""
        env = self.environment
        mem = self.memory_run
        how = "quick" if self.quick else "full"
        memory = {Level.DRAM: MemoryLevel(Level.DRAM, self.memory_bytes_per_s, env.memory_capacity_bytes, "",
                                    f"roofline measure ({how}): best {mem.name} ({mem.backend}), STREAM byte count")}
        sources = {"peak.matrix": f"roofline measure ({how}): best random-normal square matmul per dtype",
                   "memory.dram": memory[Level.DRAM].source}
        if self.ladder is not None:
            for level, plateau in self.ladder.levels.items():
                if level is Level.DRAM:  # DRAM's figure is STREAM's, over arrays far past the caches
                    continue
                size = self.ladder.cache_bytes.get(level)
                memory[level] = MemoryLevel(
                    level, plateau.bytes_per_s, size[0] if size else None, "",
                    f"roofline measure ({how}): {self.ladder.describe()}; {level} = median of "
                    f"{plateau.sizes} sizes, {format_bytes(plateau.first_bytes, 3, binary=True)} to "
                    f"{format_bytes(plateau.last_bytes, 3, binary=True)}"
                    + (f"; capacity: cpu0's cache in sysfs, shared by {size[1]} of this process' CPUs" if size else ""))
                sources[f"memory.{level}"] = memory[level].source
        for run in self.chip_runs:
            if isinstance(run.resource, Level) and run.resource not in memory:
                cap = env.llc_bytes if run.resource is Level.L2 else None
                memory[run.resource] = MemoryLevel(run.resource, run.best_rate, cap, "",
                                                   f"roofline measure ({how}): {run.name}, {run.counted}")
                sources[f"memory.{run.resource}"] = memory[run.resource].source
        vector: dict[str, float] = {}
        datasheet = self.catalog_match()
        if datasheet is not None and datasheet.vector_flop_per_s:
            vector = dict(datasheet.vector_flop_per_s)
            sources["peak.vector"] = f"datasheet of {datasheet.id}, not measured"
        notes = [f"measured on {line}" if i == 0 else line for i, line in enumerate(env.summary_lines())]
        notes += [f"not measured: {k} ({why})" for k, why in self.skipped.items()]
        notes += [f"measured: {r.name} {r.best_rate:.4g} exponentials/s ({r.counted})"
                  for r in self.chip_runs if r.resource is Unit.EXP]
        return Machine(
            id=machine_id or f"measured-{_slug(env.device_name)}",
            name=name or f"{env.device_name} (measured)",
            matrix_flop_per_s=self.peak_flop_per_s,
            vector_flop_per_s=vector,
            memory=memory,
            kind="gpu" if self.device == "cuda" else "cpu",
            sources=sources,
            notes=tuple(notes),
            measured=True,
        )

    def comparison(self, datasheet: Machine) -> list[dict[str, Any]]:
        """Measured against datasheet, ceiling by ceiling: the measured share of the datasheet figure."""
        rows = [{"ceiling": "memory bandwidth", "measured": self.memory_bytes_per_s,
                 "datasheet": datasheet.memory_bytes_per_s,
                 "ratio": self.memory_bytes_per_s / datasheet.memory_bytes_per_s}]
        for key, rate in self.peak_flop_per_s.items():
            if key in datasheet.matrix_flop_per_s:
                ds = datasheet.matrix_flop_per_s[key]
                rows.append({"ceiling": f"{key} matmul", "measured": rate, "datasheet": ds, "ratio": rate / ds})
        return rows

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "device": self.device,
            "memory_bytes_per_s": self.memory_bytes_per_s,
            "peak_flop_per_s": self.peak_flop_per_s,
            "memory_kernel": {"name": self.memory_run.name, "backend": self.memory_run.backend},
            "quick": self.quick,
            "wall_s": self.wall_s,
            "runs": [r.to_dict() for r in self.runs],
            "skipped": dict(self.skipped),
            "environment": self.environment.to_dict(),
        }
        if self.chip_runs:
            d["chip_runs"] = [r.to_dict() for r in self.chip_runs]
            chip = getattr(self.catalog_match(), "chip", None)
            if chip is not None:  # against rate per clock per SM × SMs × clock of the catalog's [chip]
                derived = {Level.L2: chip.l2_bytes_per_s, Level.SMEM: chip.smem_bytes_per_s, Unit.EXP: chip.exp_per_s}
                d["chip_comparison"] = [
                    {"resource": r.resource, "measured": r.best_rate, "per_sm_figures": derived[r.resource],
                     "ratio": r.best_rate / derived[r.resource]}
                    for r in self.chip_runs if derived.get(r.resource)]
        if self.ladder is not None:
            d["cache_ladder"] = self.ladder.to_dict()
            d["levels_bytes_per_s"] = {lv: p.bytes_per_s for lv, p in self.ladder.levels.items()}
        ds = self.catalog_match()
        if ds is not None:
            d["datasheet"] = {"machine": ds.id, "comparison": self.comparison(ds)}
        return d


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "device"


def catalog_match(device_name: str) -> Machine | None:
    """The catalog machine a device name denotes ("NVIDIA H200" -> h200), longest name first."""
    name = _slug(device_name)
    best: tuple[int, Machine] | None = None
    for m in catalog().values():
        for n in (m.id, *m.aliases):
            token = _slug(n)
            if re.search(rf"(^|-){re.escape(token)}($|-)", name) and (best is None or len(token) > best[0]):
                best = (len(token), m)
    return best[1] if best else None


def measure_ceilings(settings: MeasureSettings | None = None, progress: Progress | None = None) -> Ceilings:
    """Measure the device's ceilings; see the module docstring for what is run and how it counts."""
    settings = settings or MeasureSettings()
    if settings.device not in DEVICES:
        raise RooflineError(f"unknown device {settings.device!r}; devices: {', '.join(DEVICES)}")
    if settings.device == "cuda":
        need_cuda("measure --device cuda")
    if settings.buffer_bytes is not None and settings.buffer_bytes < 2**20:
        raise RooflineError(f"buffer size must be at least 1 MiB, got {settings.buffer_bytes} bytes")
    t0 = time.perf_counter()
    env = capture_environment(settings.device)
    say = progress or (lambda _text: None)
    ladder = None
    chip_runs: list[ChipRun] = []
    if settings.device == "cpu":
        runs, skipped = measure_cpu(settings, env, say)
        if settings.memory:
            streamed = [r.best_rate for r in runs if r.kind is Bound.MEMORY]
            ladder = measure_ladder(settings, env, say, max(streamed, default=None))
    else:
        runs, skipped = measure_cuda(settings, env, say)
        if settings.memory:
            try:
                chip_runs, chip_skipped = measure_cuda_chip(settings, env, say)
            except Exception as exc:  # never at the cost of the ceilings measured above
                chip_runs, chip_skipped = [], {"inside the chip": f"{type(exc).__name__}: {str(exc)[:160]}"}
            skipped = {**skipped, **chip_skipped}
    return Ceilings(settings.device, env, tuple(runs), skipped, time.perf_counter() - t0, settings.quick, ladder,
                    tuple(chip_runs))
