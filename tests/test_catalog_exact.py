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


@pytest.mark.parametrize("machine", ["b200", "gb200"])
def test_the_b200_l2_is_126_mib_across_its_two_dies(machine: str) -> None:
    # Chips and Cheese's B200 measurement: 126 MB of L2 split over the two dies
    assert l2(machine) == 126 * MIB == 132_120_576


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
