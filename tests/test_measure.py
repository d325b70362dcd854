"""Measuring ceilings: timing statistics, STREAM byte counts, the measured machine file, the CLI.

The logic is tested on injected timings: a fake clock inside roofline.measure.timing, or a fake
`time_calls` / `_time_matmul` inside roofline.measure.cpu. The kernels still run (a broken one
fails), but every figure derived from a time is exact arithmetic, so nothing here depends on how
loaded the machine is. Real measured rates are checked only in the tests marked `slow`, against
bounds wide enough for a loaded two-core machine, never equality. Sizes are small (8 MiB arrays,
256³ matmuls) so the file runs in seconds.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import roofline.measure.cpu as cpu
import roofline.measure.timing as timing_module
from roofline.cli import main
from roofline.errors import RooflineError
from roofline.hardware import get_machine, load_machine_file
from roofline.measure.ceilings import Ceilings, catalog_match, measure_ceilings
from roofline.measure.env import Environment, capture_environment
from roofline.measure.runs import CeilingRun, MeasureSettings, matmul_ladder
from roofline.measure.timing import Timing, rotation_count, time_calls
from roofline.vocab import Bound, Level, Unit

SMALL = MeasureSettings(quick=True, buffer_bytes=8 * 2**20, dtypes=("fp32",), max_matmul_n=256, backends=("numpy",))
N_SMALL = 8 * 2**20 // 8  # fp64 elements per 8 MiB array

# The samples every faked run reports: best 40 ms, median 45 ms, worst 50 ms (in call order 50, 40, 45).
# A matmul ladder stops after its first size, 256³: 8 × the 45 ms median is past --quick's 0.25 s call limit.
FAKE = Timing((0.05, 0.04, 0.045))


def fake_time_calls(fn: Callable[[int], object], **_options: Any) -> Timing:
    """Stands in for time_calls inside roofline.measure.ceilings: the kernel runs once (so a broken
    kernel still fails) and the samples are FAKE, whatever the machine is doing."""
    fn(0)
    return FAKE


class FakeClock:
    """Stands in for the `time` module inside roofline.measure.timing: perf_counter reads a counter
    that only the code under test advances. Steps are powers of two, so sums are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing_module, "time", fake)
    return fake


@pytest.fixture(scope="module")
def faked() -> Ceilings:
    """The small plan measured with every sample faked (FAKE): its ceilings are exact arithmetic."""
    with pytest.MonkeyPatch.context() as mp:  # undone before any test runs: the slow ones time for real
        mp.setattr(cpu, "time_calls", fake_time_calls)
        return measure_ceilings(SMALL)


@pytest.fixture
def fake_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every measurement in this test (the CLI's included) reports FAKE."""
    monkeypatch.setattr(cpu, "time_calls", fake_time_calls)


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


def test_time_calls_counts_warmup_repeats_and_inner_calls(clock: FakeClock) -> None:
    calls: list[int] = []

    def call(i: int, seconds: float = 2**-10) -> None:
        calls.append(i)
        clock.advance(seconds)

    timing = time_calls(call, repeats=4, warmup=2)
    assert calls == list(range(2 + 4))  # each call sees its index, so inputs can rotate
    assert timing.times_s == (2**-10,) * 4 and timing.inner == 1
    calls.clear()
    # a call far shorter than min_sample_s is repeated within each sample: 2^-10 s / 2^-20 s = 1024 calls
    timing = time_calls(lambda i: call(i, 2**-20), repeats=3, warmup=1, min_sample_s=2**-10)
    assert timing.inner == 1024 and len(calls) == 1 + 3 * 1024
    assert timing.times_s == (2**-20,) * 3  # a sample's time is per call


def test_time_calls_stops_when_the_budget_is_spent(clock: FakeClock) -> None:
    # 1/8 s per call, a 0.3 s budget: 1/8 and 2/8 are within it, 3/8 is past it, so 3 of 10 samples
    timing = time_calls(lambda _i: clock.advance(2**-3), repeats=10, budget_s=0.3)
    assert timing.repeats == 3
    # at least one sample, however small the budget
    assert time_calls(lambda _i: clock.advance(2**-3), repeats=10, budget_s=1e-9).repeats == 1


def test_a_best_sample_is_confirmed_by_a_second_within_5_percent() -> None:
    # 1.04 / 1.00 − 1 = 4% ≤ 5%: confirmed; 1.5 / 1.0 − 1 = 50%: one lucky sample, not confirmed
    assert Timing((2.0, 1.0, 1.04)).best_gap == pytest.approx(0.04)
    assert Timing((2.0, 1.0, 1.04)).confirmed
    assert Timing((1.5, 1.0)).best_gap == pytest.approx(0.5)
    assert not Timing((1.5, 1.0)).confirmed
    assert Timing((1.0,)).best_gap is None and not Timing((1.0,)).confirmed  # one sample confirms nothing


def test_time_calls_samples_on_until_the_best_is_confirmed(clock: FakeClock) -> None:
    # a busy machine: samples of 1/64 s and 4/64 s alternate after the warm-up. With 2 repeats the
    # samples are 1/64, 4/64 (best unconfirmed: 4×); a third, 1/64, confirms it: 3 samples, not 2 + 10
    steps = iter([2**-6, 2**-6, 4 * 2**-6, 2**-6, 4 * 2**-6])
    timing = time_calls(lambda _i: clock.advance(next(steps)), repeats=2, warmup=1, until_confirmed=10)
    assert timing.times_s == (2**-6, 4 * 2**-6, 2**-6)
    assert timing.confirmed
    # never confirmed: the extra samples stop at until_confirmed, and the timing says so
    slow = iter([2**-6] + [2**-6 * (k + 1) for k in range(12)])
    timing = time_calls(lambda _i: clock.advance(next(slow)), repeats=2, warmup=1, until_confirmed=3)
    assert timing.repeats == 2 + 3 and not timing.confirmed


def test_measure_says_whether_each_ceiling_was_stable(faked: Ceilings) -> None:
    # FAKE's best 40 ms and next 45 ms are 12.5% apart: every ceiling unconfirmed, said in one line
    from roofline.report.text.ceilings import ceilings_text

    (line,) = [x for x in ceilings_text(faked).splitlines() if x.startswith("noise: ")]
    assert "NOT STABLE: no second sample came within 5% of the best" in line
    assert "the next-best sample took 1.12× as long" in line  # 0.045 / 0.04 = 1.125, 3 digits
    assert "a rerun may differ" in line


def test_time_calls_waits_for_asynchronous_work(clock: FakeClock) -> None:
    # a launch returns after 1/1024 s; the work it queued ends 3/1024 s later, at the sync: a sample
    # holds both (4/1024 s), because the clock is read after the sync
    timing = time_calls(lambda _i: clock.advance(2**-10), repeats=3, sync=lambda: clock.advance(3 * 2**-10))
    assert timing.times_s == (4 * 2**-10,) * 3


@pytest.mark.slow
def test_time_calls_sees_a_known_sleep() -> None:
    timing = time_calls(lambda _i: time.sleep(0.002), repeats=3)
    # a sleep never returns early; the upper bound leaves room for a loaded machine
    assert 0.002 <= timing.min_s < 2.0


def test_rotation_covers_eight_times_the_cache() -> None:
    # 64 MiB sets, 32 MiB cache: ceil(8·32 / 64) + 1 = 5 sets
    assert rotation_count(64 * 2**20, 32 * 2**20) == 5
    assert rotation_count(1 * 2**20, 32 * 2**20) == 16  # capped at the limit
    assert rotation_count(3 * 2**30, 32 * 2**20, memory_budget_bytes=4 * 2**30) == 1  # one set fits the budget
    assert rotation_count(1024, None) == 2


def test_stream_byte_counts(faked: Ceilings) -> None:
    n = N_SMALL
    work = {r.name: r.work for r in faked.runs if r.kind is Bound.MEMORY}
    assert work == {"copy": 2 * 8 * n, "scale": 2 * 8 * n, "add": 3 * 8 * n, "triad": 3 * 8 * n}
    flop = {r.name: r.work for r in faked.runs if r.kind is Unit.MATRIX}
    assert flop == {"matmul 256³": 2 * 256**3}
    # the kinds are enums inside and the same strings as ever in JSON
    kinds = {r["name"]: r["kind"] for r in json.loads(json.dumps(faked.to_dict()))["runs"]}
    assert kinds == {"copy": "memory", "scale": "memory", "add": "memory", "triad": "memory",
                     "matmul 256³": "matrix"}


def test_ceilings_are_the_best_rate_of_the_faked_samples(faked: Ceilings) -> None:
    for r in faked.runs:  # best over the shortest sample (40 ms), median over 45 ms, worst over 50 ms
        assert (r.best_rate, r.median_rate, r.worst_rate) == (r.work / 0.04, r.work / 0.045, r.work / 0.05)
    # every kernel took 40 ms at best, so the ones moving three arrays (add, triad) stream fastest:
    # 3·8·n bytes in 40 ms; of the two, the first measured is kept
    assert faked.memory_bytes_per_s == 3 * 8 * N_SMALL / 0.04
    assert (faked.memory_run.name, faked.memory_run.backend) == ("add", "numpy")
    assert faked.peak_flop_per_s == {"fp32": 2 * 256**3 / 0.04}


def test_the_memory_ceiling_is_the_best_kernel() -> None:
    env = Environment("cpu", "test CPU", 2)
    # copy 40 GB/s, scale 60 GB/s, triad 50 GB/s (each one sample of 1e9 B): the ceiling is scale's
    runs = tuple(CeilingRun(Bound.MEMORY, name, "numpy", "fp64", 1e9, Timing((1e9 / rate,)))
                 for name, rate in (("copy", 40e9), ("scale", 60e9), ("triad", 50e9)))
    c = Ceilings("cpu", env, runs)
    assert c.memory_run.name == "scale" and c.memory_bytes_per_s == pytest.approx(60e9)
    assert c.to_machine().memory_bytes_per_s == pytest.approx(60e9)


def test_the_matmul_peak_is_the_best_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # the sizes of the ladder reach different rates: 20 GFLOP/s at 256³, 50 at 512³, 30 at 1024³; each
    # run's second sample is twice as slow as its first. The peak is the best size's best sample,
    # 50 GFLOP/s: not the worst size (20), the first (20) or the last (30)
    rates = {256: 20e9, 512: 50e9, 1024: 30e9}

    def faked_size(plan: MeasureSettings, key: str, backend: str, n: int) -> Timing:
        best = 2 * n**3 / rates[n]
        return Timing((best, 2 * best))

    monkeypatch.setattr(cpu, "_time_matmul", faked_size)
    monkeypatch.setattr(cpu, "time_calls", fake_time_calls)  # the bandwidth runs, so a machine can be made
    c = measure_ceilings(MeasureSettings(quick=True, buffer_bytes=2**20, dtypes=("fp32",), backends=("numpy",),
                              max_matmul_n=1024))
    assert [r.name for r in c.runs if r.kind is Unit.MATRIX] == ["matmul 256³", "matmul 512³", "matmul 1024³"]
    assert c.peak_flop_per_s == {"fp32": pytest.approx(50e9)}
    assert c.matrix_run("fp32").name == "matmul 512³"
    assert c.matrix_run("fp32").median_rate == pytest.approx(50e9 / 1.5)  # median of t and 2t is 1.5t
    assert c.to_machine().matrix_flop_per_s["fp32"] == pytest.approx(50e9)


def test_measured_machine_round_trips_through_its_file(faked: Ceilings, tmp_path: Path) -> None:
    from roofline.fileio import atomic_write
    from roofline.hardware import machine_to_toml

    m = faked.to_machine("my-cpu")
    assert m.measured and m.kind == "cpu" and m.id == "my-cpu"
    path = tmp_path / "my-cpu.toml"
    atomic_write(path, machine_to_toml(m))
    back = load_machine_file(path)
    assert back.measured and back.kind == "cpu"
    # figures are written to 4 significant digits: 3·8·n B / 40 ms and 2·256³ FLOP / 40 ms
    assert back.memory_bytes_per_s == pytest.approx(3 * 8 * N_SMALL / 0.04, rel=5e-4)
    assert back.peak_flop_per_s("fp32") == pytest.approx(2 * 256**3 / 0.04, rel=5e-4)
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
    copy = CeilingRun(Bound.MEMORY, "copy", "cuda", "fp32", 2 * 4.0 * n, Timing((2 * 4.0 * n / 4.3e12,)))
    mm = CeilingRun(Unit.MATRIX, "matmul 8192³", "cuda", "bf16", 2.0 * 8192**3, Timing((2.0 * 8192**3 / 780e12,)))
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
        measure_ceilings(MeasureSettings(device="tpu"))
    with pytest.raises(RooflineError, match="at least 1 MiB"):
        measure_ceilings(MeasureSettings(buffer_bytes=1000))
    with pytest.raises(RooflineError, match="cpu matmuls run in"):
        measure_ceilings(MeasureSettings(dtypes=("fp8",), memory=False))


QUICK_SMALL = ["measure", "--quick", "--buffer-size", "8MiB", "--dtype", "fp32", "--backend", "numpy"]


def test_measure_cli_json_and_save(fake_timings: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "measured.toml"
    assert main([*QUICK_SMALL, "--json", "--save", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    # every sample faked (40 ms best): add moves 3·8·n bytes in it; the ladder stops after 256³
    assert out["memory_bytes_per_s"] == pytest.approx(3 * 8 * N_SMALL / 0.04)
    assert out["peak_flop_per_s"] == {"fp32": pytest.approx(2 * 256**3 / 0.04)}
    assert out["environment"]["threads"] >= 1 and out["saved"] == str(path)
    # the saved machine works wherever --machine does
    assert main(["kernel", "matmul", "512", "512", "512", "--machine", str(path), "--dtype", "fp32", "--json"]) == 0
    placed = json.loads(capsys.readouterr().out)
    assert placed["machine"] == out["machine"]
    assert placed["peak_flop_per_s"] == pytest.approx(out["peak_flop_per_s"]["fp32"], rel=5e-4)
    # measured figures are saved to 4 significant digits (cli.measure.MEASURED_DIGITS): their noise is larger
    import re
    figures = re.findall(r'= "([0-9.]+) [a-zA-Z]*(?:FLOP/s|B/s|B)"', path.read_text())
    assert figures and all(len(f.replace(".", "").lstrip("0")) <= 4 for f in figures)


@pytest.mark.slow
def test_a_real_quick_measurement_is_plausible(capsys: pytest.CaptureFixture[str]) -> None:
    """The one place real rates are checked: bounds, never values, wide enough for a loaded machine."""
    assert cpu.time_calls is time_calls  # the real clock, not a fake left behind
    t0 = time.perf_counter()
    assert main([*QUICK_SMALL, "--json"]) == 0
    wall = time.perf_counter() - t0
    out = json.loads(capsys.readouterr().out)
    # any machine this runs on, however busy, streams 8 MiB arrays between 100 MB/s and 100 TB/s and
    # does an fp32 matmul between 100 MFLOP/s and 1 PFLOP/s
    assert 1e8 < out["memory_bytes_per_s"] < 1e14
    assert 1e8 < out["peak_flop_per_s"]["fp32"] < 1e15
    for r in out["runs"]:
        unit = "bytes_per_s" if r["kind"] == "memory" else "flop_per_s"
        assert r[f"min_{unit}"] <= r[f"median_{unit}"] <= r[f"max_{unit}"]
    assert out["memory_bytes_per_s"] == max(r["max_bytes_per_s"] for r in out["runs"] if r["kind"] == "memory")
    assert wall < 30  # the bound for --quick; small buffers here make it a few seconds


def test_measure_cli_text(fake_timings: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(QUICK_SMALL) == 0
    out = capsys.readouterr().out
    assert "memory bandwidth:" in out and "fp32 matmul peak:" in out and "STREAM" in out


def test_bad_buffer_size_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measure", "--buffer-size", "lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "roofline: error:" in err


# fake_time_calls in a fresh interpreter: every measurement reports FAKE (the kernels still run once)
_FAKE_TIMINGS = ("import roofline.measure.cpu as c\nfrom roofline.measure.timing import Timing\n"
                 f"def fake(fn, **_kw):\n    fn(0)\n    return Timing({FAKE.times_s!r})\nc.time_calls = fake\n")


def _run_without_torch(args: list[str], fake_timings: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter where `import torch` fails, as on an install without the extra."""
    code = ("import sys\nsys.modules['torch'] = None\n" + (_FAKE_TIMINGS if fake_timings else "")
            + f"from roofline.cli import main\nsys.exit(main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_cuda_without_torch_says_what_to_install() -> None:
    r = _run_without_torch(["measure", "--device", "cuda"])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "pip install -e '.[torch]'" in r.stderr and "torch==2.13.0" in r.stderr


def test_cpu_measure_works_without_torch() -> None:
    r = _run_without_torch(["measure", "--quick", "--buffer-size", "8MiB", "--dtype", "fp32", "--json"],
                           fake_timings=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {run["backend"] for run in out["runs"]} == {"numpy"}  # torch's backend is left out, not an error
    assert out["peak_flop_per_s"] == {"fp32": pytest.approx(2 * 256**3 / 0.04)}  # 256³ in FAKE's best 40 ms


def test_cuda_without_a_gpu_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without a GPU, wherever this runs
    assert main(["measure", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs a CUDA GPU" in err and "--device cpu" in err


def test_measure_layer_imports_neither_torch_nor_numpy() -> None:
    # every module of the measuring rooms (and trace, where the tracer lives) and the measure commands
    rooms = [name for name in ("roofline.measure", "roofline.tracing") if importlib.util.find_spec(name)]
    modules = [*rooms, "roofline.cli.measure"]
    for room in rooms:
        package = importlib.import_module(room)
        modules += [info.name for info in pkgutil.iter_modules(package.__path__, room + ".")]
    code = (f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(','.join(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_dram_level_of_the_measured_machine(faked: Ceilings) -> None:
    m = faked.to_machine()
    assert m.memory[Level.DRAM].bytes_per_s == faked.memory_bytes_per_s
    assert "STREAM" in m.memory[Level.DRAM].source


def test_bench_and_trace_without_torch_say_what_to_install() -> None:
    for args in (["bench"], ["trace", "prog.py"]):
        r = _run_without_torch(args)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
        assert "needs torch" in r.stderr and "pip install -e '.[torch]'" in r.stderr


def test_tf32_switch_is_restored() -> None:
    torch = pytest.importorskip("torch")
    from roofline.measure.cuda import _tf32

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
    from roofline.measure.runs import default_buffer_bytes

    l2 = 60 * 2**20  # an H200's L2 as PyTorch reported it on a lent machine
    # 8x the L2 is 480 MiB, under the floor: a copy needs GiB per array to reach its sustained rate
    assert default_buffer_bytes(l2, quick=False, gpu=True) == 4 * 2**30
    assert default_buffer_bytes(l2, quick=True, gpu=True) == 1 * 2**30
    assert default_buffer_bytes(l2, quick=False) == 8 * l2  # a CPU with a 60 MiB L3: 8x it


def test_fp8_operands_have_the_layout_scaled_mm_requires() -> None:
    torch = pytest.importorskip("torch")
    from roofline.measure.cuda import fp8_matmul, fp8_operands

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
    from roofline.measure.cuda import _cuda_matmul

    for key in ("fp64", "fp32", "bf16", "fp16", "fp8"):
        out = _cuda_matmul(key, 32, device="cpu")(0)
        assert out.shape == (32, 32) and torch.isfinite(out.float()).all() and out.abs().sum() > 0, key


def test_a_failing_matmul_size_keeps_the_smaller_sizes() -> None:
    def fail_at_512(plan: MeasureSettings, key: str, backend: str, n: int) -> Timing:
        if n >= 512:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return Timing((0.001,))  # 1 ms: far under the call limit, so the ladder goes on to 512

    plan = MeasureSettings(quick=True, max_matmul_n=1024)
    errors: dict[str, str] = {}
    runs = matmul_ladder(plan, "fp32", "numpy", cpu.CPU_LADDER, fail_at_512, lambda _t: None, errors)
    assert [r.name for r in runs] == ["matmul 256³"]
    assert errors["fp32"].startswith("n=512: RuntimeError: CUDA out of memory") and "more detail" not in errors["fp32"]
    with pytest.raises(RuntimeError):  # without an errors dict (the CPU path) a failure is raised
        matmul_ladder(plan, "fp32", "numpy", cpu.CPU_LADDER, fail_at_512, lambda _t: None)


def test_time_cuda_warms_up_by_time_and_reads_events_after_a_sync(monkeypatch: pytest.MonkeyPatch,
                                                                  clock: FakeClock) -> None:
    """torch.cuda.Event and synchronize replaced by stand-ins on the fake clock: the control flow of
    time_cuda (warm-up by count, then by time; one event pair per sample; the budget) runs without a GPU."""
    torch = pytest.importorskip("torch")
    from roofline.measure.timing import time_cuda

    synced: list[int] = []

    class ClockEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.t = 0.0

        def record(self) -> None:
            self.t = clock.now

        def elapsed_time(self, end: ClockEvent) -> float:
            assert synced, "events read before a synchronize"
            return (end.t - self.t) * 1e3  # milliseconds, as CUDA's

    calls: list[int] = []
    step = 2**-10  # each call takes 1/1024 s on the fake clock

    def fn(i: int) -> None:
        calls.append(i)
        clock.advance(step)

    monkeypatch.setattr(torch.cuda, "Event", ClockEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(1))
    t = time_cuda(fn, repeats=5, warmup=2, warmup_s=20 * step)
    assert t.times_s == pytest.approx((step,) * 5)  # each sample holds exactly one call
    assert calls == list(range(len(calls)))  # consecutive indices: inputs rotate call by call
    # 2 warm-up calls, then calls until 20 steps have passed (20 more), then the 5 samples
    assert len(calls) == 2 + 20 + 5
    # the budget is checked every 4 samples: 1/8 s per call, a 0.3 s budget, 20 asked: 4 taken (0.5 s)
    calls.clear()
    step = 2**-3
    assert time_cuda(fn, repeats=20, warmup=1, warmup_s=0.0, budget_s=0.3).repeats == 4
