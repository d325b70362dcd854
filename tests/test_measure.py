"""Measuring ceilings: timing statistics, STREAM byte counts, the measured machine file, the CLI.

Measured quantities are checked against bounds, never equality; counts and derived figures are
exact arithmetic. Sizes are small (8 MiB arrays, 256³ matmuls) so the file runs in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import get_machine, load_machine_file
from roofline.measure.ceilings import MATRIX, MEMORY, CeilingRun, Ceilings, Plan, catalog_match, measure_ceilings
from roofline.measure.env import Environment, capture_environment
from roofline.measure.timing import Timing, rotation_count, time_calls
from roofline.vocab import Level

SMALL = Plan(quick=True, buffer_bytes=8 * 2**20, dtypes=("fp32",), max_matmul_n=256, backends=("numpy",))


@pytest.fixture(scope="module")
def small() -> Ceilings:
    return measure_ceilings(SMALL)


def test_timing_statistics_and_rates() -> None:
    t = Timing((0.003, 0.001, 0.002))
    assert (t.min_s, t.median_s, t.max_s) == (0.001, 0.002, 0.003)
    assert t.spread == pytest.approx((0.003 - 0.001) / 0.002)
    # 1 GB per call: the best rate is over the shortest time
    assert t.rates(1e9) == pytest.approx({"max": 1e12, "median": 5e11, "min": 1e9 / 0.003})
    with pytest.raises(RooflineError):
        Timing(())
    with pytest.raises(RooflineError):
        Timing((0.0,))


def test_time_calls_counts_warmup_repeats_and_inner_calls() -> None:
    calls: list[int] = []
    timing = time_calls(calls.append, repeats=4, warmup=2)
    assert calls == list(range(2 + 4))  # each call sees its index, so inputs can rotate
    assert timing.repeats == 4 and timing.inner == 1
    calls.clear()
    # a call far shorter than min_sample_s is repeated within each sample
    timing = time_calls(calls.append, repeats=3, warmup=1, min_sample_s=0.001)
    assert timing.inner > 1 and len(calls) == 1 + 3 * timing.inner


def test_time_calls_sees_a_known_sleep() -> None:
    timing = time_calls(lambda _i: time.sleep(0.002), repeats=3)
    assert 0.002 <= timing.min_s < 0.2  # a sleep never returns early; the upper bound is generous


def test_rotation_covers_eight_times_the_cache() -> None:
    # 64 MiB sets, 32 MiB cache: ceil(8·32 / 64) + 1 = 5 sets
    assert rotation_count(64 * 2**20, 32 * 2**20) == 5
    assert rotation_count(1 * 2**20, 32 * 2**20) == 16  # capped at the limit
    assert rotation_count(3 * 2**30, 32 * 2**20, memory_budget_bytes=4 * 2**30) == 1  # one set fits the budget
    assert rotation_count(1024, None) == 2


def test_stream_byte_counts(small: Ceilings) -> None:
    n = 8 * 2**20 // 8  # fp64 elements per 8 MiB array
    work = {r.name: r.work for r in small.runs if r.kind == MEMORY}
    assert work == {"copy": 2 * 8 * n, "scale": 2 * 8 * n, "add": 3 * 8 * n, "triad": 3 * 8 * n}
    flop = {r.name: r.work for r in small.runs if r.kind == MATRIX}
    assert flop == {"matmul 256³": 2 * 256**3}


def test_ceilings_are_plausible(small: Ceilings) -> None:
    # bounds, not values: any machine this runs on streams between 1 GB/s and 10 TB/s and does an
    # fp32 matmul between 1 GFLOP/s and 1 PFLOP/s
    assert 1e9 < small.memory_bytes_per_s < 1e13
    assert 1e9 < small.peak_flop_per_s["fp32"] < 1e15
    for r in small.runs:
        assert r.worst_rate <= r.median_rate <= r.best_rate
    assert small.memory_bytes_per_s == max(r.best_rate for r in small.runs if r.kind == MEMORY)


def test_measured_machine_round_trips_through_its_file(small: Ceilings, tmp_path: Path) -> None:
    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml

    m = small.to_machine("my-cpu")
    assert m.measured and m.kind == "cpu" and m.id == "my-cpu"
    path = tmp_path / "my-cpu.toml"
    atomic_write(path, machine_to_toml(m))
    back = load_machine_file(path)
    assert back.measured and back.kind == "cpu"
    # figures are written to 4 significant digits
    assert back.memory_bytes_per_s == pytest.approx(m.memory_bytes_per_s, rel=5e-4)
    assert back.peak_flop_per_s("fp32") == pytest.approx(m.peak_flop_per_s("fp32"), rel=5e-4)
    assert get_machine(str(path)).id == "my-cpu"  # usable anywhere --machine is
    assert any("OPENBLAS_CORETYPE" in n for n in back.notes) == ("OPENBLAS_CORETYPE" in os.environ)


def test_environment_records_threads_caches_and_blas_variables() -> None:
    env = capture_environment("cpu")
    assert env.device == "cpu" and env.threads >= 1
    assert env.memory_capacity_bytes is None or env.memory_capacity_bytes > 2**20
    if "OPENBLAS_CORETYPE" in os.environ:  # recorded exactly as set; the tests never change it
        assert env.variables["OPENBLAS_CORETYPE"] == os.environ["OPENBLAS_CORETYPE"]
    assert "python" in env.versions and "numpy" in env.versions


def test_catalog_match_by_device_name() -> None:
    assert catalog_match("NVIDIA H200").id == "h200"  # type: ignore[union-attr]
    assert catalog_match("NVIDIA H100 80GB HBM3").id == "h100-sxm"  # type: ignore[union-attr]
    assert catalog_match("NVIDIA H100 PCIe").id == "h100-pcie"  # type: ignore[union-attr]  # longest alias wins
    assert catalog_match("AMD EPYC 9654") is None


def test_comparison_with_the_datasheet() -> None:
    """A synthetic H200 run: 4.3 TB/s copy and 780 TFLOP/s bf16 against 4.8 TB/s and 989.4 TFLOP/s."""
    env = Environment("cuda", "NVIDIA H200", 132)
    n = 2**28
    copy = CeilingRun(MEMORY, "copy", "cuda", "fp32", 2 * 4.0 * n, Timing((2 * 4.0 * n / 4.3e12,)))
    mm = CeilingRun(MATRIX, "matmul 8192³", "cuda", "bf16", 2.0 * 8192**3, Timing((2.0 * 8192**3 / 780e12,)))
    c = Ceilings("cuda", env, (copy, mm))
    rows = {r["ceiling"]: r["ratio"] for r in c.comparison(get_machine("h200"))}
    assert rows["memory bandwidth"] == pytest.approx(4.3 / 4.8)
    assert rows["bf16 matmul"] == pytest.approx(780 / 989.4)
    m = c.to_machine()
    assert m.kind == "gpu" and m.vector_flop_per_s["fp32"] == get_machine("h200").vector_flop_per_s["fp32"]
    assert "not measured" in m.sources["peak.vector"]
    assert c.to_dict()["datasheet"]["machine"] == "h200"


def test_bad_plans_fail_with_one_clear_error() -> None:
    with pytest.raises(RooflineError, match="unknown device"):
        measure_ceilings(Plan(device="tpu"))
    with pytest.raises(RooflineError, match="at least 1 MiB"):
        measure_ceilings(Plan(buffer_bytes=1000))
    with pytest.raises(RooflineError, match="cpu matmuls run in"):
        measure_ceilings(Plan(dtypes=("fp8",), memory=False))


def test_measure_cli_json_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "measured.toml"
    t0 = time.perf_counter()
    rc = main(["measure", "--quick", "--buffer-size", "8MiB", "--dtype", "fp32", "--backend", "numpy", "--json",
               "--save", str(path)])
    wall = time.perf_counter() - t0
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert 1e9 < out["memory_bytes_per_s"] < 1e13 and 1e9 < out["peak_flop_per_s"]["fp32"] < 1e15
    assert out["environment"]["threads"] >= 1 and out["saved"] == str(path)
    assert wall < 30  # the bound for --quick; small buffers here make it a few seconds
    # the saved machine works wherever --machine does
    assert main(["kernel", "matmul", "512", "512", "512", "--machine", str(path), "--dtype", "fp32", "--json"]) == 0
    placed = json.loads(capsys.readouterr().out)
    assert placed["machine"] == out["machine"]
    assert placed["peak_flop_per_s"] == pytest.approx(out["peak_flop_per_s"]["fp32"], rel=5e-4)


def test_measure_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measure", "--quick", "--buffer-size", "8MiB", "--dtype", "fp32", "--backend", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "memory bandwidth:" in out and "fp32 matmul peak:" in out and "STREAM" in out


def test_bad_buffer_size_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measure", "--buffer-size", "lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "roofline: error:" in err


def _run_without_torch(args: list[str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter where `import torch` fails, as on an install without the extra."""
    code = ("import sys\nsys.modules['torch'] = None\nfrom roofline.cli import main\n"
            f"sys.exit(main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_cuda_without_torch_says_what_to_install() -> None:
    r = _run_without_torch(["measure", "--device", "cuda"])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "pip install -e '.[torch]'" in r.stderr and "torch==2.13.0" in r.stderr


def test_cpu_measure_works_without_torch() -> None:
    r = _run_without_torch(["measure", "--quick", "--buffer-size", "8MiB", "--dtype", "fp32", "--json"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {run["backend"] for run in out["runs"]} == {"numpy"} and out["peak_flop_per_s"]["fp32"] > 1e9


def test_cuda_without_a_gpu_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["measure", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CUDA" in err


def test_measure_layer_imports_neither_torch_nor_numpy() -> None:
    code = ("import sys\nimport roofline.measure, roofline.measure.tracer, roofline.measure.bench, "
            "roofline.commands.measure\nprint(','.join(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_dram_level_of_the_measured_machine(small: Ceilings) -> None:
    m = small.to_machine()
    assert m.memory[Level.DRAM].bytes_per_s == small.memory_bytes_per_s
    assert "STREAM" in m.memory[Level.DRAM].source


def test_bench_and_trace_without_torch_say_what_to_install() -> None:
    for args in (["bench"], ["trace", "prog.py"]):
        r = _run_without_torch(args)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
        assert "needs torch" in r.stderr and "pip install -e '.[torch]'" in r.stderr


def test_tf32_switch_is_restored() -> None:
    torch = pytest.importorskip("torch")
    from roofline.measure.ceilings import _tf32

    matmul = torch.backends.cuda.matmul
    attr = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"
    before = getattr(matmul, attr)
    with _tf32(True):
        assert getattr(matmul, attr) in ("tf32", True)
    with _tf32(False):
        assert getattr(matmul, attr) in ("ieee", False)
    assert getattr(matmul, attr) == before


# --- the CUDA-only branches, rehearsed on the CPU (the GPU check gets one try on a lent machine) ---

def test_gpu_stream_buffers_are_gigabytes() -> None:
    from roofline.measure.ceilings import default_buffer_bytes

    l2 = 60 * 2**20  # an H200's L2 as PyTorch reported it on a lent machine
    # 8x the L2 is 480 MiB, under the floor: a copy needs GiB per array to reach its sustained rate
    assert default_buffer_bytes(l2, quick=False, gpu=True) == 4 * 2**30
    assert default_buffer_bytes(l2, quick=True, gpu=True) == 1 * 2**30
    assert default_buffer_bytes(l2, quick=False) == 8 * l2  # a CPU with a 60 MiB L3: 8x it


def test_fp8_operands_have_the_layout_scaled_mm_requires() -> None:
    torch = pytest.importorskip("torch")
    from roofline.measure.ceilings import fp8_matmul, fp8_operands

    n = 64
    a, b, scale = fp8_operands(n, "cpu", seed=1)
    assert a.dtype == b.dtype == torch.float8_e4m3fn
    assert a.stride() == (n, 1) and b.stride() == (1, n)  # A row-major, B column-major (cuBLASLt's TN)
    assert scale.dtype == torch.float32 and scale.dim() == 0
    assert (a.float() != 0).float().mean() > 0.9  # random normal, not zeros
    out = fp8_matmul(a, b, scale)
    assert out.dtype == torch.bfloat16 and out.shape == (n, n)
    ref = a.double() @ b.double()  # the exact product of the e4m3 values
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2  # bf16 output rounding: about 2^-9 per element


def test_cuda_matmul_builder_runs_every_dtype_on_cpu_tensors() -> None:
    torch = pytest.importorskip("torch")
    from roofline.measure.ceilings import _cuda_matmul

    for key in ("fp64", "fp32", "bf16", "fp16", "fp8"):
        out = _cuda_matmul(key, 32, device="cpu")(0)
        assert out.shape == (32, 32) and torch.isfinite(out.float()).all() and out.abs().sum() > 0, key


def test_a_failing_matmul_size_keeps_the_smaller_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    import roofline.measure.ceilings as ceilings

    real = ceilings._time_matmul

    def fail_at_512(plan: Plan, key: str, backend: str, n: int) -> Timing:
        if n >= 512:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return real(plan, key, backend, n)

    monkeypatch.setattr(ceilings, "_time_matmul", fail_at_512)
    plan = Plan(quick=True, max_matmul_n=1024)
    errors: dict[str, str] = {}
    runs = ceilings._ladder(plan, "fp32", "numpy", lambda _t: None, errors)
    assert [r.name for r in runs] == ["matmul 256³"]
    assert errors["fp32"].startswith("n=512: RuntimeError: CUDA out of memory") and "more detail" not in errors["fp32"]
    with pytest.raises(RuntimeError):  # without an errors dict (the CPU path) a failure is raised
        ceilings._ladder(plan, "fp32", "numpy", lambda _t: None)


def test_time_cuda_warms_up_by_time_and_reads_events_after_a_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.cuda.Event and synchronize replaced by host-clock stand-ins: the control flow of
    time_cuda (warm-up by count, then by time; one event pair per sample) runs without a GPU."""
    torch = pytest.importorskip("torch")
    from roofline.measure.timing import time_cuda

    synced: list[int] = []

    class HostEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.t = 0.0

        def record(self) -> None:
            self.t = time.perf_counter()

        def elapsed_time(self, end: HostEvent) -> float:
            assert synced, "events read before a synchronize"
            return (end.t - self.t) * 1e3  # milliseconds, as CUDA's

    calls: list[int] = []

    def fn(i: int) -> None:
        calls.append(i)
        time.sleep(0.001)

    monkeypatch.setattr(torch.cuda, "Event", HostEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(1))
    t = time_cuda(fn, repeats=5, warmup=2, warmup_s=0.02)
    assert t.repeats == 5 and t.min_s >= 0.001  # each sample holds one call that sleeps 1 ms
    assert calls == list(range(len(calls)))  # consecutive indices: inputs rotate call by call
    # 2 warm-up calls, then at least 20 ms of them (each at most ~1-2 ms, so at least 5 more), then 5 samples
    assert len(calls) >= 2 + 5 + 5
