"""The CUDA GPU's ceilings: STREAM through torch on fp32 device arrays (4 GiB each without `quick`)
and the matmul ladder per dtype: fp64, fp32 (TF32 off), tf32, bf16, fp16 and fp8 through
torch._scaled_mm where the GPU has FP8 tensor cores. Device events time every call. See
ceilings.py for what is counted and how.

torch is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from roofline.measure import runs as ceiling_runs
from roofline.measure.env import Environment
from roofline.measure.runs import CeilingRun, MeasureSettings, Progress
from roofline.measure.timing import Timing, time_cuda

CUDA_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
CUDA_LADDER = (2048, 4096, 8192, 16384)


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


def _time_matmul(settings: MeasureSettings, key: str, backend: str, n: int) -> Timing:
    """Build one size's operands and time it; they are freed on return, before the next size."""
    fn = _cuda_matmul(key, n)
    return time_cuda(fn, repeats=settings.repeats * 2, warmup=3, budget_s=4 * settings.call_limit_s)


def measure_cuda(settings: MeasureSettings, env: Environment, say: Progress) -> tuple[list[CeilingRun], dict[str, str]]:
    """The GPU's runs (bandwidth, then each dtype's matmul ladder) and what was skipped or failed."""
    import torch

    dtypes = ceiling_runs.check_dtypes(settings, CUDA_DTYPES)
    runs: list[CeilingRun] = []
    skipped: dict[str, str] = {}
    if settings.memory:
        runs += _cuda_memory(settings, env, say)  # its arrays are freed on return
        torch.cuda.empty_cache()
    major, minor = torch.cuda.get_device_capability(0)
    for key in dtypes:
        if key == "fp8" and (major, minor) < (8, 9):
            skipped[key] = f"compute capability {major}.{minor} has no FP8 tensor cores"
            continue
        errors: dict[str, str] = {}
        try:
            with _tf32(key == "tf32"):
                runs += ceiling_runs.matmul_ladder(settings, key, "cuda", CUDA_LADDER, _time_matmul, say, errors)
        except Exception as exc:  # e.g. the TF32 switch missing from this build: this dtype only
            errors[key] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
        skipped.update(errors)
        torch.cuda.empty_cache()
    return runs, skipped


def _cuda_memory(settings: MeasureSettings, env: Environment, say: Progress) -> list[CeilingRun]:
    import torch

    size = settings.buffer_bytes or ceiling_runs.default_buffer_bytes(env.llc_bytes, settings.quick, gpu=True)
    n = size // 4
    gen = torch.Generator(device="cuda").manual_seed(1234)
    say(f"filling three {size / 2**20:.0f} MiB device arrays")
    a = torch.rand(n, device="cuda", generator=gen) + 0.5
    b = torch.rand(n, device="cuda", generator=gen) + 0.5
    c = torch.empty_like(a)
    runs: list[CeilingRun] = []
    for name, fn in ceiling_runs.torch_stream(a, b, c).items():
        say(f"bandwidth: {name} (cuda)")
        timing = time_cuda(fn, repeats=settings.repeats * 2, warmup=3)
        runs.append(ceiling_runs.stream_run(name, "cuda", "fp32", 4, n, timing))
    return runs


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
