"""Catalog figures changed or derived by the audit of issue 20 item 4, each by its arithmetic.

Sources are in each machine's data file (src/roofline/hardware/data/<id>.toml)."""

from __future__ import annotations

import pytest

from roofline.hardware import get_machine
from roofline.vocab import Level

MIB = 2**20


def l2(machine: str) -> float:
    level = get_machine(machine).memory.get(Level.L2)
    assert level is not None and level.capacity_bytes is not None, f"{machine} has no L2 size"
    return level.capacity_bytes


def test_l40s_l2_is_the_96_mib_measured_on_the_l40() -> None:
    # arXiv 2606.22588: the 142-SM L40 (the L40S's AD102 configuration) exposes 96 MiB; was 48 MiB (TechPowerUp)
    assert l2("l40s") == 96 * MIB == 100_663_296


def test_the_h200_l2_is_its_gh100s_50_mib() -> None:
    # the Hopper whitepaper's H100 SXM5 L2, 50 MB (binary); the H200 is the same GH100 with HBM3e
    assert l2("h200") == l2("h100-sxm") == 50 * MIB


def test_the_b200_l2_is_the_drivers_126_5_mib_and_the_gb200_keeps_the_measured_126() -> None:
    # pytorch/ao PR #4002's device query on a B200: "L2 Cache Size: 126.50 MB" (l2CacheSize / 2**20)
    assert l2("b200") == 126.5 * MIB == 132_644_864
    # no GB200 readout: Chips and Cheese's B200 measurement, 126 MB of L2 split over the two dies
    assert l2("gb200") == 126 * MIB == 132_120_576


def test_a100_80gb_bandwidth_is_the_physical_figure_within_the_datasheets_rounding() -> None:
    # 5120 bits x 2 x 1593 MHz / 8 = 2,039.04 GB/s; the datasheet's 2,039 GB/s is kept (0.002% under)
    physical = 5120 * 2 * 1593e6 / 8
    assert physical == pytest.approx(2039.04e9, rel=1e-12)
    assert get_machine("a100").memory_bytes_per_s == pytest.approx(physical, rel=1e-4)


def test_h100_pcie_bandwidth_is_the_physical_figure() -> None:
    # 5120 bits x 2 x 1593 MHz / 8 = 2.039 TB/s (the datasheet's "2 TB/s" rounds; STREAM measured 2016 GB/s)
    assert get_machine("h100-pcie").memory_bytes_per_s == pytest.approx(5120 * 2 * 1593e6 / 8, rel=1e-4)
    assert get_machine("h100-pcie").memory_bytes_per_s > 2016e9


def test_l40s_bandwidth_is_exact() -> None:
    # 384 bits x 18 Gb/s a pin / 8 = 864 GB/s: the product page's figure, unrounded
    assert get_machine("l40s").memory_bytes_per_s == 384 * 18e9 / 8 == 864e9


def test_the_b300_l2_is_the_drivers_126_5_mib() -> None:
    # cudaGetDeviceProperties on a B300 SXM6 AC: l2CacheSize = 132,644,864 B (ademeure/QuickRunCUDA,
    # b300_clean/03_caches.md); the B200's driver reports the same 126.50 MB (pytorch/ao PR #4002)
    assert l2("b300") == 126.5 * MIB == 132_644_864


@pytest.mark.parametrize("machine", ["b200", "b300"])
def test_hgx_blackwell_bandwidth_is_the_drivers_bus_times_its_memory_clock(machine: str) -> None:
    # cudaGetDeviceProperties memoryBusWidth 7680 bits, nvidia-smi max memory clock 3996 MHz, double data
    # rate: B200 (pytorch/ao PR #4002), B300 SXM6 AC (ademeure/QuickRunCUDA b300_clean/01_hbm_bandwidth.md)
    physical = 7680 * 2 * 3996e6 / 8
    assert physical == pytest.approx(7.67232e12, rel=1e-12)
    assert get_machine(machine).memory_bytes_per_s == physical
    # NVIDIA prints this as 7.7 TB/s per HGX GPU; the 8 TB/s used before was 8192 bits' figure (GB300's)
    assert round(physical / 1e12, 1) == 7.7 and get_machine("gb300").memory_bytes_per_s == 8e12


def test_mi300x_bandwidth_is_amds_exact_figure() -> None:
    # AMD footnote MI300-05A: 8192 bits x 5.2 Gb/s a pin / 8 = 5.3248 TB/s (the headline 5.3 rounds)
    assert get_machine("mi300x").memory_bytes_per_s == pytest.approx(8192 * 5.2e9 / 8, rel=1e-12) == 5.3248e12


@pytest.mark.parametrize(("machine", "bits", "gbps"), [("l4", 192, 12.5), ("rtx-4090", 384, 21.0)])
def test_gddr_bandwidths_are_exact(machine: str, bits: int, gbps: float) -> None:
    # L4: 192 bits x 12.5 Gb/s (GDDR6 at 1563 MHz, TechPowerUp); RTX 4090: 384 bits x 21 Gb/s (GDDR6X)
    assert get_machine(machine).memory_bytes_per_s == bits * gbps * 1e9 / 8


def test_the_hgx_b300_is_not_the_gb300_rack_gpu() -> None:
    # aiconfigurator-core's b300_sxm.yaml (the tables' GPU, NVIDIA's Blackwell Ultra datasheet): 2.25 PF BF16
    # dense (36 PF sparse / 2 / 8), 4.5 PF FP8, 14 PF FP4; the GB300 NVL72 page: 360 PF BF16 sparse / 72 / 2
    b300, gb300 = get_machine("b300"), get_machine("gb300")
    assert b300.matrix_flop_per_s["bf16"] == 36e15 / 8 / 2 == 2.25e15
    assert b300.matrix_flop_per_s["fp8"] == 4.5e15 and b300.matrix_flop_per_s["fp4"] == 14e15
    assert gb300.matrix_flop_per_s["bf16"] == 360e15 / 72 / 2 == 2.5e15
    # the B300 SXM6 AC's driver: 148 SMs at B200's BF16 rate per SM, 8192 x 148 x 1.8558 GHz = 2.25 PF
    assert b300.chip is not None and b300.chip.sms == 148
    assert 8192 * 148 * b300.chip.clock_hz == pytest.approx(2.25e15, rel=1e-4)
    # nvidia-smi's 275,040 MiB (aiconfigurator-core b300_sxm.yaml), not the package's 288 GB
    assert get_machine("b300").memory.get(Level.DRAM) is not None
    assert get_machine("b300").memory[Level.DRAM].capacity_bytes == 275_040 * MIB
