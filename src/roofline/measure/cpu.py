"""The CPU's ceilings: STREAM over numpy (one thread per CPU over contiguous slices) and torch (its
own thread pool) on fp64 arrays, and the matmul ladder per dtype: fp64 and fp32 through numpy's BLAS
and torch, bf16 and fp16 through torch. See ceilings.py for what is counted and how.

numpy and torch are imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from roofline.errors import TORCH_HINT, RooflineError, need_torch
from roofline.measure.env import Environment
from roofline.measure.runs import (
    SCALAR,
    CeilingRun,
    MeasureSettings,
    Progress,
    check_dtypes,
    default_buffer_bytes,
    matmul_ladder,
    stream_run,
    torch_stream,
)
from roofline.measure.timing import Timing, time_calls

CPU_DTYPES = ("fp64", "fp32", "bf16", "fp16")
CPU_LADDER = (256, 512, 1024, 2048, 4096)


def measure_cpu(settings: MeasureSettings, env: Environment, say: Progress) -> tuple[list[CeilingRun], dict[str, str]]:
    """The CPU's runs (bandwidth, then each dtype's matmul ladder per backend) and what was skipped."""
    backends = _cpu_backends(settings)
    dtypes = check_dtypes(settings, CPU_DTYPES)
    runs: list[CeilingRun] = []
    skipped: dict[str, str] = {"tf32": "a GPU tensor-core mode", "fp8": "no FP8 matmul on this CPU path"}
    if settings.memory:
        runs += _cpu_memory(settings, env, backends, say)
    for key in dtypes:
        usable = [b for b in backends if key in ("fp64", "fp32") or b == "torch"]
        if not usable:
            skipped[key] = f"needs torch ({TORCH_HINT})"
            continue
        for backend in usable:
            runs += matmul_ladder(settings, key, backend, CPU_LADDER, _time_matmul, say)
    return runs, skipped


def _cpu_backends(settings: MeasureSettings) -> tuple[str, ...]:
    wanted = settings.backends or ("numpy", "torch")
    out = []
    for b in wanted:
        if b not in ("numpy", "torch"):
            raise RooflineError(f"unknown backend {b!r}; CPU backends: numpy, torch")
        if b == "torch":
            try:
                import torch  # noqa: F401
            except ImportError:
                if settings.backends:
                    need_torch("the torch backend")
                continue
        out.append(b)
    return tuple(out)


def _slices(n: int, parts: int) -> list[slice]:
    step = -(-n // parts)
    step = -(-step // 4096) * 4096  # page-aligned slices: no two threads write one cache line
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def _cpu_memory(settings: MeasureSettings, env: Environment, backends: Sequence[str],
                say: Progress) -> list[CeilingRun]:
    import numpy as np

    size = settings.buffer_bytes or default_buffer_bytes(env.llc_bytes, settings.quick)
    n = size // 8
    rng = np.random.default_rng(1234)
    say(f"filling three {size / 2**20:.0f} MiB arrays")
    a = rng.random(n) + 0.5  # random in [0.5, 1.5): never zero
    b = rng.random(n) + 0.5
    c = np.empty(n)
    c[:] = a  # touch every page before timing
    threads = env.threads
    runs: list[CeilingRun] = []
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

        stream = torch_stream(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c))
        kernels += [(k, "torch", f) for k, f in stream.items()]
    try:
        for name, backend, fn in kernels:
            say(f"bandwidth: {name} ({backend})")
            timing = time_calls(fn, repeats=settings.repeats, warmup=1, until_confirmed=2 * settings.repeats)
            runs.append(stream_run(name, backend, "fp64", 8, n, timing))
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


def _time_matmul(settings: MeasureSettings, key: str, backend: str, n: int) -> Timing:
    """Build one size's operands and time it; they are freed on return, before the next size."""
    fn = _cpu_matmul(key, backend, n)
    return time_calls(fn, repeats=settings.repeats if n >= 1024 else 2 * settings.repeats, warmup=1,
                      min_sample_s=0.01, budget_s=4 * settings.call_limit_s, until_confirmed=2 * settings.repeats)
