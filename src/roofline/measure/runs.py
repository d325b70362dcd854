"""One benchmark of one ceiling (CeilingRun), the MeasureSettings of a measure run, and what the CPU and CUDA
measurements share: STREAM's kernels and byte count, the buffer size, the dtype check and the
ladder of matmul sizes. How each device runs them is in cpu.py and cuda.py; ceilings.py gathers the
runs into Ceilings.

torch is imported only inside `torch_stream`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.measure.timing import Timing
from roofline.vocab import Bound, Unit

# What a CeilingRun measured (its `kind`; in JSON "memory" and "matrix"): a STREAM kernel the memory
# bandwidth (Bound.MEMORY), a square matmul the matrix units (Unit.MATRIX).
CeilingKind = Bound | Unit
# arrays each kernel touches per element: STREAM's byte count
STREAM_ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
SCALAR = 3.0  # STREAM's q

Progress = Callable[[str], None]


@frozen
class CeilingRun:
    """One benchmark of one ceiling: `work` bytes (memory) or FLOPs (matrix) per call."""

    kind: CeilingKind  # Bound.MEMORY (a STREAM kernel) | Unit.MATRIX (a matmul)
    name: str  # "triad", "matmul 2048³"
    backend: str  # "numpy" | "torch" | "cuda"
    dtype: str  # peak key (matrix) or the arrays' dtype (memory)
    work: float
    timing: Timing
    counted: str = ""  # how `work` was counted

    @property
    def best_rate(self) -> float:
        return self.work / self.timing.min_s

    @property
    def median_rate(self) -> float:
        return self.work / self.timing.median_s

    @property
    def worst_rate(self) -> float:
        return self.work / self.timing.max_s

    @property
    def unit(self) -> str:
        return "bytes_per_s" if self.kind is Bound.MEMORY else "flop_per_s"

    def to_dict(self) -> dict[str, Any]:
        key = "bytes" if self.kind is Bound.MEMORY else "flop"
        return {"kind": self.kind, "name": self.name, "backend": self.backend, "dtype": self.dtype,
                key: self.work, "counted": self.counted, **self.timing.to_dict(),
                f"max_{self.unit}": self.best_rate, f"median_{self.unit}": self.median_rate,
                f"min_{self.unit}": self.worst_rate}


@frozen
class MeasureSettings:
    """What one `measure` run does; `quick` trades repeats and sizes for a run of a few seconds."""

    device: str = "cpu"
    quick: bool = False
    buffer_bytes: int | None = None  # per array; default from the last-level cache
    dtypes: tuple[str, ...] | None = None  # default: every dtype the device runs
    backends: tuple[str, ...] | None = None  # CPU: "numpy", "torch" (default: those installed)
    max_matmul_n: int | None = None
    memory: bool = True

    @property
    def repeats(self) -> int:
        return 5 if self.quick else 10

    @property
    def call_limit_s(self) -> float:
        """The ladder stops before a size whose single call would take longer than this."""
        return 0.25 if self.quick else 1.0


def stream_run(name: str, backend: str, dtype: str, item_bytes: int, n: int, timing: Timing) -> CeilingRun:
    """One STREAM kernel's run over arrays of n elements of `item_bytes` each, with STREAM's byte count."""
    arrays = STREAM_ARRAYS[name]
    return CeilingRun(Bound.MEMORY, name, backend, dtype, arrays * float(item_bytes) * n, timing,
                      f"STREAM: {arrays} arrays x {item_bytes} B x {n} elements")


def torch_stream(a: Any, b: Any, c: Any) -> dict[str, Callable[[int], object]]:
    """STREAM's four kernels over torch tensors, c written from a and b, as runners for the timers."""
    import torch

    return {
        "copy": lambda _i: c.copy_(a),
        "scale": lambda _i: torch.mul(a, SCALAR, out=c),
        "add": lambda _i: torch.add(a, b, out=c),
        "triad": lambda _i: torch.add(a, b, alpha=SCALAR, out=c),
    }


def default_buffer_bytes(llc_bytes: int | None, quick: bool, gpu: bool = False) -> int:
    """4x the last-level cache (8x without `quick`), at least 64 MiB (GPU: 1 GiB quick, 4 GiB full).

    A GPU's copy needs gigabytes per array to reach its sustained rate: launch and tail effects are
    microseconds against milliseconds (an H200 was seen at about 4.3 TB/s copying 4.3 GB per array,
    8.6 GB moved in 2.0 ms); three 4 GiB arrays are under a tenth of a datacenter GPU's memory."""
    floor = (1 if quick else 4) * 2**30 if gpu else 64 * 2**20
    factor = 4 if quick else 8
    return max(floor, factor * (llc_bytes or 0))


def check_dtypes(settings: MeasureSettings, allowed: Sequence[str]) -> tuple[str, ...]:
    """The settings' dtypes as peak keys, each one the device runs (default: all of `allowed`)."""
    from roofline.dtypes import get_dtype

    if settings.dtypes is None:
        return tuple(allowed)
    keys = []
    for d in settings.dtypes:
        key = get_dtype(d).peak_key
        if key not in allowed:
            raise RooflineError(f"{settings.device} matmuls run in {', '.join(allowed)}; not {d}")
        keys.append(key)
    return tuple(dict.fromkeys(keys))


# builds one size's operands and times its matmul: (settings, dtype key, backend, n) -> Timing
TimeMatmul = Callable[[MeasureSettings, str, str, int], Timing]


def matmul_ladder(settings: MeasureSettings, key: str, backend: str, sizes: Sequence[int], time_matmul: TimeMatmul,
                  say: Progress, errors: dict[str, str] | None = None) -> list[CeilingRun]:
    """Square matmuls of growing n from `sizes`; stop before a size whose one call would exceed the
    call limit (a call's time grows as n³: x8 per doubling).

    With `errors` given, a size that fails (out of memory, an op this GPU or build lacks) ends the
    ladder and is recorded there under `key`; the sizes measured before it are kept."""
    top = settings.max_matmul_n or (sizes[-2] if settings.quick else sizes[-1])
    runs: list[CeilingRun] = []
    for n in (s for s in sizes if s <= top):
        say(f"{key} matmul n={n} ({backend})")
        try:
            timing = time_matmul(settings, key, backend, n)
        except Exception as exc:  # reported, not fatal: one dtype must not cost the others
            if errors is None:
                raise
            first = (str(exc).splitlines() or [""])[0][:160]
            done = f" (kept the sizes before it, up to {runs[-1].name})" if runs else ""
            errors[key] = f"n={n}: {type(exc).__name__}: {first}{done}"
            break
        runs.append(CeilingRun(Unit.MATRIX, f"matmul {n}³", backend, key, 2.0 * n**3, timing,
                               f"2·n³ = 2·{n}³ FLOP per call"))
        if timing.median_s * 8 > settings.call_limit_s:
            break
    return runs
