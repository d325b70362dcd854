"""The cache ladder of `roofline measure`: plateaus on synthetic ladders (by arithmetic), the caches'
sizes from a sysfs tree, a real CPU ladder (bounds), and the saved machine file with its levels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from roofline.hardware import load_machine_file, machine_to_toml
from roofline.measure.ceilings import Ceilings
from roofline.measure.env import Environment, capture_environment
from roofline.measure.levels import (
    CacheLadder,
    LadderPoint,
    Plateau,
    cache_sizes,
    find_plateaus,
    ladder_sizes,
    ladder_top,
    measure_ladder,
    name_plateaus,
    per_thread,
)
from roofline.measure.runs import CeilingRun, MeasureSettings, stream_run
from roofline.measure.timing import Timing
from roofline.vocab import Level, Unit

KiB, MiB, G = 2**10, 2**20, 1e9

# a ladder from 16 KiB to 128 MiB (doubling, 14 sizes): four plateaus with a transition between each.
# 200/150 = 1.33, 150/100 = 1.5, 100/60 = 1.67, 60/40 = 1.5, 40/20 = 2, 20/10 = 2: every step is past
# the 1.3 tolerance, so 64 KiB, 2 MiB and 32 MiB are transitions that belong to no plateau.
RATES = [200, 200, 150, 100, 100, 100, 100, 60, 40, 40, 40, 20, 10, 10]
SIZES = [16 * KiB * 2**i for i in range(14)]
LADDER = [(s, r * G) for s, r in zip(SIZES, RATES, strict=True)]
CAPS = {Level.L1: 48 * KiB, Level.L2: 2 * MiB, Level.L3: 32 * MiB}


def test_plateaus_of_a_synthetic_ladder():
    found = find_plateaus(LADDER)
    # runs: 16-32 KiB (2 sizes), 128 KiB-1 MiB (4), 4-16 MiB (3), 64-128 MiB (2)
    assert [(p.first_bytes, p.last_bytes, p.sizes) for p in found] == [
        (16 * KiB, 32 * KiB, 2), (128 * KiB, 1 * MiB, 4), (4 * MiB, 16 * MiB, 3), (64 * MiB, 128 * MiB, 2)]
    assert [p.bytes_per_s for p in found] == [200 * G, 100 * G, 40 * G, 10 * G]


def test_plateau_bandwidth_is_the_median_and_noise_within_tolerance_stays_one_plateau():
    # 100, 120, 95, 110: max / min = 120 / 95 = 1.26 <= 1.3, one run; median = (100 + 110) / 2 = 105
    found = find_plateaus([(16 * KiB, 100 * G), (32 * KiB, 120 * G), (64 * KiB, 95 * G), (128 * KiB, 110 * G)])
    assert len(found) == 1
    assert found[0].bytes_per_s == pytest.approx(105 * G)  # median of an even count: mean of the middle two
    # a single size between two runs is a transition: 100, 100, 70, 40, 40 -> two plateaus (70 is in none,
    # since 100 / 70 = 1.43 and 70 / 40 = 1.75 both pass 1.3)
    two = find_plateaus([(1, 100.0), (2, 100.0), (4, 70.0), (8, 40.0), (16, 40.0)])
    assert [(p.first_bytes, p.last_bytes) for p in two] == [(1, 2), (8, 16)]


def test_plateaus_named_by_cache_size():
    named = name_plateaus(find_plateaus(LADDER), CAPS)
    # middles: sqrt(16·32) KiB = 22.6 KiB <= 48 KiB (l1); sqrt(128 KiB·1 MiB) = 362 KiB <= 2 MiB (l2);
    # sqrt(4·16) MiB = 8 MiB <= 32 MiB (l3); sqrt(64·128) MiB = 90.5 MiB > every cache (dram)
    assert [p.level for p in named] == [Level.L1, Level.L2, Level.L3, Level.DRAM]
    assert named[1].middle_bytes == pytest.approx(math.sqrt(128 * KiB * 1 * MiB))


def test_plateaus_named_in_order_without_sizes():
    named = name_plateaus(find_plateaus(LADDER))
    # no sizes: l1, l2, l3 in order; the last (middle 90.5 MiB > 16 MiB) is DRAM
    assert [p.level for p in named] == [Level.L1, Level.L2, Level.L3, Level.DRAM]
    # two plateaus only, the last ending at 1 MiB (middle sqrt(256 KiB·1 MiB) = 512 KiB < 16 MiB): l1, l2
    short = name_plateaus([Plateau(16 * KiB, 32 * KiB, 200 * G, 2), Plateau(256 * KiB, 1 * MiB, 100 * G, 3)])
    assert [p.level for p in short] == [Level.L1, Level.L2]


def test_a_level_named_twice_keeps_its_first_plateau():
    # 64-256 KiB and 512 KiB-1 MiB both fit a 2 MiB L2: the second is L2's spilled tail, left out
    plateaus = [Plateau(16 * KiB, 32 * KiB, 200 * G, 2), Plateau(64 * KiB, 256 * KiB, 120 * G, 3),
                Plateau(512 * KiB, 1 * MiB, 80 * G, 2), Plateau(64 * MiB, 128 * MiB, 8 * G, 2)]
    named = name_plateaus(plateaus, CAPS)
    assert [(p.level, p.bytes_per_s) for p in named] == [(Level.L1, 200 * G), (Level.L2, 120 * G),
                                                         (Level.DRAM, 8 * G)]


def test_last_plateau_at_streams_rate_is_dram_inside_a_large_shared_cache():
    # a 480 MiB L3 shared with other tenants: the 8-16 MiB plateau (middle 11.3 MiB, inside 240 MiB per
    # thread) runs at 8.5 GB/s, within 1.3 of STREAM's 8.9 GB/s (8.9 / 8.5 = 1.05): DRAM, not L3
    plateaus = [Plateau(16 * KiB, 32 * KiB, 200 * G, 2), Plateau(64 * KiB, 512 * KiB, 120 * G, 4),
                Plateau(8 * MiB, 16 * MiB, 8.5 * G, 2)]
    caps = {Level.L1: 48 * KiB, Level.L2: 2 * MiB, Level.L3: 240 * MiB}
    assert [p.level for p in name_plateaus(plateaus, caps, dram_bytes_per_s=8.9 * G)] == [
        Level.L1, Level.L2, Level.DRAM]
    assert [p.level for p in name_plateaus(plateaus, caps)] == [Level.L1, Level.L2, Level.L3]


def _sysfs(root: Path, entries: list[tuple[str, int, str, str]]) -> Path:
    for i, (kind, level, size, shared) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for name, text in (("type", kind), ("level", str(level)), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(text + "\n")
    return root


def test_cache_sizes_from_sysfs(tmp_path):
    root = _sysfs(tmp_path / "cache", [("Data", 1, "48K", "0"), ("Instruction", 1, "32K", "0"),
                                       ("Unified", 2, "2048K", "0"), ("Unified", 3, "32768K", "0-7")])
    sizes = cache_sizes(root, mine={0, 1, 2, 3})
    # the instruction cache is left out; L3 is shared by CPUs 0-7, of which this process has 0-3: 4
    assert sizes == {Level.L1: (48 * 1024, 1), Level.L2: (2048 * 1024, 1), Level.L3: (32768 * 1024, 4)}
    caps = per_thread(sizes)
    assert caps[Level.L3] == 32 * MiB / 4  # 8 MiB per thread
    # the ladder's top: 4 x the last cache's share = 32 MiB, under the quick cap of 64 MiB
    assert ladder_top(caps, quick=True) == 4 * 8 * MiB
    assert cache_sizes(tmp_path / "absent") == {}


def test_ladder_sizes_climb_in_half_octaves_from_16_kib():
    # x1.5 from a power of two, x4/3 back to the next: 16, 24, 32, 48, ... 768 KiB, 1 MiB (13 sizes)
    assert ladder_sizes(1 * MiB) == [s * KiB for s in (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)]
    assert len(ladder_sizes(1)) == 2  # at least two sizes, whatever the top


def _timing(seconds: float) -> Timing:
    return Timing((seconds, seconds * 1.1))


def _ceilings(ladder: CacheLadder) -> Ceilings:
    env = Environment("cpu", "Test CPU", 2, 32 * MiB, 16 * 2**30)
    stream = stream_run("triad", "numpy", "fp64", 8, 2**22, _timing(0.01))  # 3·8·2^22 B / 0.01 s = 10.07 GB/s
    matmul = CeilingRun(Unit.MATRIX, "matmul 1024³", "numpy", "fp32", 2.0 * 1024**3, _timing(0.01))
    return Ceilings("cpu", env, (stream, matmul), {}, 1.0, True, ladder)


def test_saved_machine_file_round_trips_with_its_levels(tmp_path):
    points = tuple(LadderPoint(float(s), r * 0.001, _timing(0.001)) for s, r in LADDER)  # r B/s · 1 ms
    plateaus = tuple(name_plateaus(find_plateaus([(p.working_set_bytes, p.best_rate) for p in points]), CAPS))
    sizes = {Level.L1: (48 * KiB, 1), Level.L2: (2 * MiB, 1), Level.L3: (32 * MiB, 1)}
    c = _ceilings(CacheLadder(points, plateaus, 2, sizes))
    m = c.to_machine("test-cpu")
    # l1, l2, l3 from the ladder's plateaus (200, 100, 40 GB/s), DRAM from STREAM's triad, not the ladder's
    assert m.memory[Level.L1].bytes_per_s == pytest.approx(200 * G)
    assert m.memory[Level.L2].bytes_per_s == pytest.approx(100 * G)
    assert m.memory[Level.L3].bytes_per_s == pytest.approx(40 * G)
    assert m.memory_bytes_per_s == pytest.approx(3 * 8 * 2**22 / 0.01)
    assert m.memory[Level.L2].capacity_bytes == 2 * MiB
    path = tmp_path / "cpu.toml"
    path.write_text(machine_to_toml(m))
    back = load_machine_file(path)
    for level in (Level.DRAM, Level.L1, Level.L2, Level.L3):
        assert back.memory[level].bytes_per_s == m.memory[level].bytes_per_s  # every figure exact
        assert back.memory[level].capacity_bytes == m.memory[level].capacity_bytes
    assert "cache ladder" in back.sources["memory.l1"]
    d = c.to_dict()
    assert d["levels_bytes_per_s"][Level.DRAM] == pytest.approx(10 * G)  # the ladder's own DRAM plateau
    assert len(d["cache_ladder"]["points"]) == len(SIZES)


def test_measured_text_lists_the_ladder():
    from roofline.report.text.ceilings import ceilings_text

    points = tuple(LadderPoint(float(s), r * 0.001, _timing(0.001)) for s, r in LADDER)
    plateaus = tuple(name_plateaus(find_plateaus([(p.working_set_bytes, p.best_rate) for p in points]), CAPS))
    text = ceilings_text(_ceilings(CacheLadder(points, plateaus, 2, {Level.L1: (48 * KiB, 1)})))
    assert "l1 bandwidth: 200 GB/s (median of 2 sizes, 16 KiB to 32 KiB, cache 48 KiB (sysfs))" in text
    assert "dram bandwidth: 10 GB/s" in text
    assert "ERT/CARM" in text and "seed" not in text


@pytest.mark.slow
def test_a_real_cpu_ladder_l1_at_least_dram():
    env = capture_environment("cpu")
    ladder = measure_ladder(MeasureSettings(quick=True), env, lambda _s: None)
    rates = {p.working_set_bytes: p.best_rate for p in ladder.points}
    assert min(rates) == 16 * KiB and len(rates) >= 2
    for rate in rates.values():  # any CPU streams between 100 MB/s and 100 TB/s
        assert 1e8 < rate < 1e14
    # the smallest working sets (in L1) stream at least as fast as the largest (past the caches)
    small = max(rates[s] for s in rates if s <= 32 * KiB)
    assert small >= rates[max(rates)]
    levels = ladder.levels
    if Level.L1 in levels and Level.DRAM in levels:
        assert levels[Level.L1].bytes_per_s >= levels[Level.DRAM].bytes_per_s


# --- CUDA inside the chip: what can be checked without a GPU -------------------------------------------

def test_cuda_chip_shapes_by_arithmetic():
    from roofline.measure.cuda_chip import exp_shape, l1_shape, l2_shape

    s = l2_shape(50 * MiB, 132)  # an H100's 50 MiB L2, 132 SMs
    # a quarter of the L2 in 16 KiB blocks: 12.5 MiB / 16 KiB = 800 blocks; 2 GiB / 12.5 MiB = 163.84 -> 164
    assert (s.programs, s.blocks, s.passes) == (4 * 132, 800, 164)
    assert s.work == 800 * 164 * 16 * KiB
    s1 = l1_shape(132, passes=512)
    assert s1.work == 4 * 132 * 512 * 16 * KiB  # programs × passes × one 16 KiB block per pass
    se = exp_shape(132, iterations=512)
    assert se.work == 4 * 132 * 1024 * 4 * 512  # programs × elements × chains × iterations


def test_cuda_chip_without_triton_says_what_to_install(monkeypatch):
    from roofline.measure import cuda_chip
    from roofline.measure.cuda_chip import measure_cuda_chip

    def no_triton() -> None:
        raise ImportError("No module named 'triton'")

    monkeypatch.setattr(cuda_chip, "_kernels", no_triton)  # as on a CPU wheel of torch, which has no Triton
    runs, skipped = measure_cuda_chip(MeasureSettings(device="cuda"), Environment("cuda", "x", 132), lambda _s: None)
    assert runs == [] and set(skipped) == {"l2 bandwidth", "smem bandwidth", "exp rate"}
    assert all("pip install triton" in why for why in skipped.values())


def test_chip_runs_become_levels_and_are_compared_with_the_per_sm_figures(tmp_path):
    from roofline.measure.cuda_chip import ChipRun

    env = Environment("cuda", "NVIDIA H200", 132, 60 * MiB, 141 * 10**9)
    stream = stream_run("copy", "cuda", "fp32", 4, 2**30, _timing(0.002))  # 2·4·2^30 B / 2 ms = 4.29 TB/s
    matmul = CeilingRun(Unit.MATRIX, "matmul 8192³", "cuda", "bf16", 2.0 * 8192**3, _timing(0.0015))
    chip = (ChipRun(Level.L2, "l2 bandwidth", 10e9, _timing(0.001), "L2 reads"),  # 10 GB / 1 ms = 10 TB/s
            ChipRun(Level.SMEM, "smem bandwidth", 25e9, _timing(0.001), "L1 hits"),  # 25 TB/s
            ChipRun(Unit.EXP, "exp rate", 3.5e9, _timing(0.001), "ex2"))  # 3.5e12 exponentials/s
    c = Ceilings("cuda", env, (stream, matmul), {}, 1.0, True, None, chip)
    m = c.to_machine()
    assert m.memory[Level.L2].bytes_per_s == pytest.approx(10e12)
    assert m.memory[Level.L2].capacity_bytes == 60 * MiB
    assert m.memory[Level.SMEM].bytes_per_s == pytest.approx(25e12)
    rows = {r["resource"]: r for r in c.to_dict()["chip_comparison"]}
    # the catalog H200's [chip]: shared memory 128 B/clk × 132 SMs × 1.83 GHz = 30.92 TB/s,
    # exponentials 16 /clk × 132 × 1.83 GHz = 3.865e12 /s; it publishes no L2 bandwidth, so no L2 row
    assert set(rows) == {Level.SMEM, Unit.EXP}
    assert rows[Level.SMEM]["ratio"] == pytest.approx(25e12 / (128 * 132 * 1.83e9))
    assert rows[Unit.EXP]["ratio"] == pytest.approx(3.5e12 / (16 * 132 * 1.83e9))
    (tmp_path / "gpu.toml").write_text(machine_to_toml(m))
    back = load_machine_file(tmp_path / "gpu.toml")
    assert back.memory[Level.SMEM].bytes_per_s == m.memory[Level.SMEM].bytes_per_s


@pytest.mark.slow
def test_measure_save_writes_the_ladders_levels(tmp_path, capsys):
    import json

    from roofline.cli import main

    path = tmp_path / "cpu.toml"
    assert main(["measure", "--quick", "--backend", "numpy", "--dtype", "fp64", "--buffer-size", "16MiB", "--json",
                 "--save", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    back = load_machine_file(path)
    ladder_levels = {Level(k): v for k, v in out["levels_bytes_per_s"].items()}
    # every cache level the ladder found is in the file with its bandwidth, written to 4 significant
    # digits (a relative error of at most 5e-4); DRAM's figure is STREAM's
    for level, rate in ladder_levels.items():
        if level is not Level.DRAM:
            assert back.memory[level].bytes_per_s == pytest.approx(rate, rel=5e-4)
            assert "cache ladder" in back.sources[f"memory.{level}"]
    assert back.memory_bytes_per_s == pytest.approx(out["memory_bytes_per_s"], rel=5e-4)
    assert out["cache_ladder"]["points"][0]["working_set_bytes"] == 16 * KiB
