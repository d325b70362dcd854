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

Each ceiling is the best rate over the repeats and backends (the minimum time: what the hardware
proved it can do, STREAM's convention); min / median / max are all kept.

Layering: imports roofline.hardware, roofline.vocab, roofline.measure.timing, roofline.measure.env;
numpy and torch only inside functions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from roofline.errors import TORCH_HINT, RooflineError, need_torch
from roofline.hardware import Machine, MemoryLevel, catalog
from roofline.hardware.machine import PEAK_KEYS
from roofline.measure.env import Environment, capture_environment
from roofline.measure.timing import Timing, time_calls, time_cuda
from roofline.vocab import Bound, Level, Unit

# What a CeilingRun measured (its `kind`; in JSON "memory" and "matrix"): a STREAM kernel the memory
# bandwidth (Bound.MEMORY), a square matmul the matrix units (Unit.MATRIX).
CeilingKind = Bound | Unit
DEVICES = ("cpu", "cuda")
CPU_DTYPES = ("fp64", "fp32", "bf16", "fp16")
CUDA_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
STREAM_KERNELS = ("copy", "scale", "add", "triad")
# arrays each kernel touches per element: STREAM's byte count
STREAM_ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
SCALAR = 3.0  # STREAM's q

Progress = Callable[[str], None]


def need_cuda(what: str) -> Any:
    torch = need_torch(what)
    if not torch.cuda.is_available():
        build = getattr(torch.version, "cuda", None)
        why = "this torch build has no CUDA (a CPU wheel)" if not build else "torch sees no CUDA device"
        raise RooflineError(f"{what} needs a CUDA GPU; {why} (on a CUDA machine install a CUDA build of "
                            f"torch==2.13.0, or use --device cpu)")
    return torch


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Ceilings:
    device: str
    environment: Environment
    runs: tuple[CeilingRun, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)  # dtype or kernel -> why not measured
    wall_s: float = 0.0
    quick: bool = False

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

    def best_by_backend(self, kind: CeilingKind, dtype: str | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.runs:
            if r.kind == kind and (dtype is None or r.dtype == dtype):
                out[r.backend] = max(out.get(r.backend, 0.0), r.best_rate)
        return out

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
        vector: dict[str, float] = {}
        datasheet = self.catalog_match()
        if datasheet is not None and datasheet.vector_flop_per_s:
            vector = dict(datasheet.vector_flop_per_s)
            sources["peak.vector"] = f"datasheet of {datasheet.id}, not measured"
        notes = [f"measured on {line}" if i == 0 else line for i, line in enumerate(env.summary_lines())]
        notes += [f"not measured: {k} ({why})" for k, why in self.skipped.items()]
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


@dataclass(frozen=True)
class Plan:
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


def default_buffer_bytes(llc_bytes: int | None, quick: bool, gpu: bool = False) -> int:
    """4x the last-level cache (8x without `quick`), at least 64 MiB (GPU: 1 GiB quick, 4 GiB full).

    A GPU's copy needs gigabytes per array to reach its sustained rate: launch and tail effects are
    microseconds against milliseconds (an H200 was seen at about 4.3 TB/s copying 4.3 GB per array,
    8.6 GB moved in 2.0 ms); three 4 GiB arrays are under a tenth of a datacenter GPU's memory."""
    floor = (1 if quick else 4) * 2**30 if gpu else 64 * 2**20
    factor = 4 if quick else 8
    return max(floor, factor * (llc_bytes or 0))


def measure_ceilings(plan: Plan | None = None, progress: Progress | None = None) -> Ceilings:
    """Measure the device's ceilings; see the module docstring for what is run and how it counts."""
    plan = plan or Plan()
    if plan.device not in DEVICES:
        raise RooflineError(f"unknown device {plan.device!r}; devices: {', '.join(DEVICES)}")
    if plan.device == "cuda":
        need_cuda("measure --device cuda")
    if plan.buffer_bytes is not None and plan.buffer_bytes < 2**20:
        raise RooflineError(f"buffer size must be at least 1 MiB, got {plan.buffer_bytes} bytes")
    t0 = time.perf_counter()
    env = capture_environment(plan.device)
    say = progress or (lambda _text: None)
    if plan.device == "cpu":
        runs, skipped = _measure_cpu(plan, env, say)
    else:
        runs, skipped = _measure_cuda(plan, env, say)
    return Ceilings(plan.device, env, tuple(runs), skipped, time.perf_counter() - t0, plan.quick)


# --- CPU ---------------------------------------------------------------------------------------

def _cpu_backends(plan: Plan) -> tuple[str, ...]:
    wanted = plan.backends or ("numpy", "torch")
    out = []
    for b in wanted:
        if b not in ("numpy", "torch"):
            raise RooflineError(f"unknown backend {b!r}; CPU backends: numpy, torch")
        if b == "torch":
            try:
                import torch  # noqa: F401
            except ImportError:
                if plan.backends:
                    need_torch("the torch backend")
                continue
        out.append(b)
    return tuple(out)


def _check_dtypes(plan: Plan, allowed: Sequence[str]) -> tuple[str, ...]:
    from roofline.dtypes import get_dtype

    if plan.dtypes is None:
        return tuple(allowed)
    keys = []
    for d in plan.dtypes:
        key = get_dtype(d).peak_key
        if key not in allowed:
            raise RooflineError(f"{plan.device} matmuls run in {', '.join(allowed)}; not {d}")
        keys.append(key)
    return tuple(dict.fromkeys(keys))


def _measure_cpu(plan: Plan, env: Environment, say: Progress) -> tuple[list[CeilingRun], dict[str, str]]:
    backends = _cpu_backends(plan)
    dtypes = _check_dtypes(plan, CPU_DTYPES)
    runs: list[CeilingRun] = []
    skipped: dict[str, str] = {"tf32": "a GPU tensor-core mode", "fp8": "no FP8 matmul on this CPU path"}
    if plan.memory:
        runs += _cpu_memory(plan, env, backends, say)
    for key in dtypes:
        usable = [b for b in backends if key in ("fp64", "fp32") or b == "torch"]
        if not usable:
            skipped[key] = f"needs torch ({TORCH_HINT})"
            continue
        for backend in usable:
            runs += _ladder(plan, key, backend, say)
    return runs, skipped


def _slices(n: int, parts: int) -> list[slice]:
    step = -(-n // parts)
    step = -(-step // 4096) * 4096  # page-aligned slices: no two threads write one cache line
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def _cpu_memory(plan: Plan, env: Environment, backends: Sequence[str], say: Progress) -> list[CeilingRun]:
    import numpy as np

    size = plan.buffer_bytes or default_buffer_bytes(env.llc_bytes, plan.quick)
    n = size // 8
    rng = np.random.default_rng(1234)
    say(f"filling three {size / 2**20:.0f} MiB arrays")
    a = rng.random(n) + 0.5  # random in [0.5, 1.5): never zero
    b = rng.random(n) + 0.5
    c = np.empty(n)
    c[:] = a  # touch every page before timing
    threads = env.threads
    runs: list[CeilingRun] = []
    counted = {k: f"STREAM: {STREAM_ARRAYS[k]} arrays x 8 B x {n} elements" for k in STREAM_KERNELS}
    kernels: list[tuple[str, str, Callable[[int], object]]] = []
    if "numpy" in backends:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=threads)
        parts = _slices(n, threads)
        chunk = 1 << 15  # 256 KiB of fp64: the triad's temporary stays in L2
        temps = [np.empty(chunk) for _ in parts]

        def triad_part(i: int) -> None:
            s, tmp = parts[i], temps[i]
            for lo in range(s.start, s.stop, chunk):
                hi = min(s.stop, lo + chunk)
                t = tmp[: hi - lo]
                np.multiply(b[lo:hi], SCALAR, out=t)
                np.add(a[lo:hi], t, out=c[lo:hi])

        np_kernels: dict[str, Callable[[int], object]] = {
            "copy": lambda i: np.copyto(c[parts[i]], a[parts[i]]),
            "scale": lambda i: np.multiply(a[parts[i]], SCALAR, out=c[parts[i]]),
            "add": lambda i: np.add(a[parts[i]], b[parts[i]], out=c[parts[i]]),
            "triad": triad_part,
        }
        def on_all_threads(part_fn: Callable[[int], object]) -> Callable[[int], object]:
            return lambda _call: list(pool.map(part_fn, range(len(parts))))

        for k, f in np_kernels.items():
            kernels.append((k, "numpy", on_all_threads(f)))
    if "torch" in backends:
        import torch

        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        kernels += [
            ("copy", "torch", lambda _i: tc.copy_(ta)),
            ("scale", "torch", lambda _i: torch.mul(ta, SCALAR, out=tc)),
            ("add", "torch", lambda _i: torch.add(ta, tb, out=tc)),
            ("triad", "torch", lambda _i: torch.add(ta, tb, alpha=SCALAR, out=tc)),
        ]
    try:
        for name, backend, fn in kernels:
            say(f"bandwidth: {name} ({backend})")
            timing = time_calls(fn, repeats=plan.repeats, warmup=1)
            runs.append(CeilingRun(Bound.MEMORY, name, backend, "fp64", STREAM_ARRAYS[name] * 8.0 * n, timing,
                                   counted[name]))
    finally:
        if "numpy" in backends:
            pool.shutdown()
    return runs


def _cpu_matmul(key: str, backend: str, n: int) -> Callable[[int], object]:
    import numpy as np

    rng = np.random.default_rng(n)
    if backend == "numpy":
        np_dt = {"fp64": np.float64, "fp32": np.float32}[key]
        a = rng.standard_normal((n, n)).astype(np_dt)
        b = rng.standard_normal((n, n)).astype(np_dt)
        c = np.empty((n, n), np_dt)
        return lambda _i: np.matmul(a, b, out=c)
    import torch

    t_dt = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[key]
    gen = torch.Generator().manual_seed(n)
    ta = torch.randn((n, n), generator=gen).to(t_dt)
    tb = torch.randn((n, n), generator=gen).to(t_dt)
    tc = torch.empty((n, n), dtype=t_dt)
    return lambda _i: torch.matmul(ta, tb, out=tc)


CPU_LADDER = (256, 512, 1024, 2048, 4096)
CUDA_LADDER = (2048, 4096, 8192, 16384)


def _ladder(plan: Plan, key: str, backend: str, say: Progress,
            errors: dict[str, str] | None = None) -> list[CeilingRun]:
    """Square matmuls of growing n; stop before a size whose one call would exceed the call limit
    (a call's time grows as n³: x8 per doubling).

    With `errors` given, a size that fails (out of memory, an op this GPU or build lacks) ends the
    ladder and is recorded there under `key`; the sizes measured before it are kept."""
    cuda = backend == "cuda"
    ladder = CUDA_LADDER if cuda else CPU_LADDER
    top = plan.max_matmul_n or (ladder[-2] if plan.quick else ladder[-1])
    runs: list[CeilingRun] = []
    for n in (s for s in ladder if s <= top):
        say(f"{key} matmul n={n} ({backend})")
        try:
            timing = _time_matmul(plan, key, backend, n)
        except Exception as exc:  # reported, not fatal: one dtype must not cost the others
            if errors is None:
                raise
            first = (str(exc).splitlines() or [""])[0][:160]
            done = f" (kept the sizes before it, up to {runs[-1].name})" if runs else ""
            errors[key] = f"n={n}: {type(exc).__name__}: {first}{done}"
            break
        runs.append(CeilingRun(Unit.MATRIX, f"matmul {n}³", backend, key, 2.0 * n**3, timing,
                               f"2·n³ = 2·{n}³ FLOP per call"))
        if timing.median_s * 8 > plan.call_limit_s:
            break
    return runs


def _time_matmul(plan: Plan, key: str, backend: str, n: int) -> Timing:
    """Build one size's operands and time it; they are freed on return, before the next size."""
    if backend == "cuda":
        fn = _cuda_matmul(key, n)
        return time_cuda(fn, repeats=plan.repeats * 2, warmup=3, budget_s=4 * plan.call_limit_s)
    fn = _cpu_matmul(key, backend, n)
    return time_calls(fn, repeats=plan.repeats if n >= 1024 else 2 * plan.repeats, warmup=1,
                      min_sample_s=0.01, budget_s=4 * plan.call_limit_s)


# --- CUDA --------------------------------------------------------------------------------------

def fp8_operands(n: int, device: str = "cuda", seed: int = 0) -> tuple[Any, Any, Any]:
    """Random-normal e4m3 operands in the layout torch._scaled_mm requires, and a unit scale.

    cuBLASLt's FP8 GEMM takes A row-major and B column-major (its "TN" layout), so B is the
    transpose of a row-major matrix: strides (1, n). The scale is a float32 tensor (a 0-d one means
    one scale for the whole matrix). Values of a standard normal are far inside e4m3's ±448."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((n, n), device=device, generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn((n, n), device=device, generator=gen).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=device, dtype=torch.float32)
    return a, b, one


def fp8_matmul(a: Any, b: Any, scale: Any, fast_accum: bool = True) -> Any:
    """A·B in FP8 with bf16 output. Fast accumulation is the tensor cores' FP8 rate; without it
    cuBLAS adds periodic FP32 promotion."""
    import torch

    return torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16,
                            use_fast_accum=fast_accum)


def _cuda_matmul(key: str, n: int, device: str = "cuda") -> Callable[[int], object]:
    import torch

    if key == "fp8":
        a8, b8, one = fp8_operands(n, device, seed=n)
        return lambda _i: fp8_matmul(a8, b8, one)
    gen = torch.Generator(device=device).manual_seed(n)
    t_dt = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16}[key]
    a = torch.randn((n, n), device=device, generator=gen, dtype=torch.float32).to(t_dt)
    b = torch.randn((n, n), device=device, generator=gen, dtype=torch.float32).to(t_dt)
    c = torch.empty((n, n), device=device, dtype=t_dt)
    return lambda _i: torch.matmul(a, b, out=c)


def _measure_cuda(plan: Plan, env: Environment, say: Progress) -> tuple[list[CeilingRun], dict[str, str]]:
    import torch

    dtypes = _check_dtypes(plan, CUDA_DTYPES)
    runs: list[CeilingRun] = []
    skipped: dict[str, str] = {}
    if plan.memory:
        size = plan.buffer_bytes or default_buffer_bytes(env.llc_bytes, plan.quick, gpu=True)
        n = size // 4
        gen = torch.Generator(device="cuda").manual_seed(1234)
        say(f"filling three {size / 2**20:.0f} MiB device arrays")
        a = torch.rand(n, device="cuda", generator=gen) + 0.5
        b = torch.rand(n, device="cuda", generator=gen) + 0.5
        c = torch.empty_like(a)
        kernels: dict[str, Callable[[int], object]] = {
            "copy": lambda _i: c.copy_(a),
            "scale": lambda _i: torch.mul(a, SCALAR, out=c),
            "add": lambda _i: torch.add(a, b, out=c),
            "triad": lambda _i: torch.add(a, b, alpha=SCALAR, out=c),
        }
        for name, fn in kernels.items():
            say(f"bandwidth: {name} (cuda)")
            timing = time_cuda(fn, repeats=plan.repeats * 2, warmup=3)
            runs.append(CeilingRun(Bound.MEMORY, name, "cuda", "fp32", STREAM_ARRAYS[name] * 4.0 * n, timing,
                                   f"STREAM: {STREAM_ARRAYS[name]} arrays x 4 B x {n} elements"))
        del a, b, c
        torch.cuda.empty_cache()
    major, minor = torch.cuda.get_device_capability(0)
    for key in dtypes:
        if key == "fp8" and (major, minor) < (8, 9):
            skipped[key] = f"compute capability {major}.{minor} has no FP8 tensor cores"
            continue
        errors: dict[str, str] = {}
        try:
            with _tf32(key == "tf32"):
                runs += _ladder(plan, key, "cuda", say, errors)
        except Exception as exc:  # e.g. the TF32 switch missing from this build: this dtype only
            errors[key] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
        skipped.update(errors)
        torch.cuda.empty_cache()
    return runs, skipped


@contextmanager
def _tf32(on: bool) -> Iterator[None]:
    """fp32 matmuls in TF32 (on) or true fp32 (off), restored afterwards. torch 2.9+ has a new switch
    (fp32_precision) and refuses a mix of it and the legacy allow_tf32: use the new one where it exists."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        old = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if on else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = old
        return
    old_flag = matmul.allow_tf32
    matmul.allow_tf32 = on
    try:
        yield
    finally:
        matmul.allow_tf32 = old_flag
