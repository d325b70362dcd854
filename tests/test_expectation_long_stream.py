"""Decode's long stream (Fit.long_stream_s, roofline.expectation.model): the column by hand on a measured
row, the columns' evaluation, its fit on a synthetic set whose constants are known, and the file."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from roofline.calibration.fit import fit_kind
from roofline.expectation.columns import Columns, expected_columns
from roofline.expectation.model import LONG_STREAM_KNEE, Fit, Shape
from roofline.expectation.placed import l2_stream_s
from roofline.expectation.shipped import parse
from roofline.expectation.times import ExpectedTimes
from roofline.hardware import get_machine

# τ = L2 capacity / DRAM bandwidth on B200: the driver's 132,644,864 B (126.5 MiB) over 7,680 bits x 2 x 3996 MHz / 8
# = 7,672.32 GB/s (hardware/data/b200.toml); the knee is half of it, one die's share of the split L2
B200_TAU = 132_644_864 / 7_672.32e9  # 17.29 µs


def _decode(b: int, g: int, mem_us: float, tau: float = B200_TAU) -> Shape:
    """A decode kernel on B200's 148 SMs: b sequences × g K/V heads streaming mem_us of DRAM time."""
    return Shape("generation_attention.bf16@triton", mem_us * 1e-6, 0.0, sms=148, tile_pairs=float(b * g),
                 heads=float(b * g), memory_s=mem_us * 1e-6, kv_heads=float(b * g), head_dim=256, l2_s=tau)


def test_the_long_stream_of_a_measured_row() -> None:
    # aiconfigurator-core 0.12.0, b200_sxm/attention/sglang 0.5.14, kernel_source triton, BF16 cache:
    # generation_attention b1 h8/1 d256 kv 65535 measured 815.0 µs; its K and V, 65,536 tokens x (256 + 256)
    # x 2 B = 67,108,864 B (with the query and output, 67,116,032 B) at 7,672.32 GB/s: M = 8.748 µs
    from roofline.calibration.floors import attention_floors, roofs

    machine = get_machine("b200")
    assert l2_stream_s(machine) == pytest.approx(B200_TAU)
    f = attention_floors(roofs(machine, "bf16"), True, "bf16", "bf16", [1], [8], [1], [256], [65535])
    memory = float(f.dram_s[0])
    assert memory == pytest.approx(67_116_032 / 7_672.32e9)
    shape = _decode(1, 1, memory * 1e6)
    # one sequence x K/V head: its share of the DRAM time past τ/2, (8.748 - 8.644) / 1 = 0.104 µs
    assert LONG_STREAM_KNEE == 0.5
    assert Fit.long_stream_s(shape) == pytest.approx(67_116_032 / 7_672.32e9 - B200_TAU / 2)
    # KV 32767 (half the cache, M = 4.37 µs) is within the knee: none
    assert Fit.long_stream_s(_decode(1, 1, memory * 1e6 / 2)) == 0.0
    # a prefill shape (query rows), one without K/V heads and one of a machine without an L2 figure take none
    assert Fit.long_stream_s(replace(shape, m=128)) == 0.0
    assert Fit.long_stream_s(replace(shape, kv_heads=0.0)) == 0.0
    assert Fit.long_stream_s(replace(shape, l2_s=0.0)) == 0.0


def test_the_long_stream_by_hand_and_in_columns() -> None:
    # c_far = 50, e = 0.5, t0 = 10 µs, no roof but DRAM's: M = 40 µs over 4 sequences x K/V heads,
    # t = 40 / 0.5 + 10 + 50 x (40 - 17.29 / 2) / 4 = 80 + 10 + 391.9 = 481.9 µs; M = 5 µs (under τ/2): 20 µs
    fit = Fit("generation_attention.bf16@triton", 0.5, 10e-6, 1.0, 1.0, 1, long_stream_weight=50.0)
    long_t = 80e-6 + 10e-6 + 50 * (40e-6 - B200_TAU / 2) / 4
    assert fit.expected_s(_decode(4, 1, 40.0)) == pytest.approx(long_t)
    assert fit.expected_s(_decode(4, 1, 5.0)) == pytest.approx(20e-6)
    m = np.array([40e-6, 5e-6])
    zero = np.zeros(2)
    four = np.full(2, 4.0)
    t, _, _ = expected_columns(fit, Columns(m, zero, m, zero, zero, zero, four, four, four, np.full(2, 256.0), zero,
                                            zero, 148, None, B200_TAU))
    assert t == pytest.approx([long_t, 20e-6])


def test_the_long_stream_is_recovered_beside_the_streaming_roof() -> None:
    # y = max(M, 64·M/B) / 0.5 + 10 µs + 40·max(0, M − τ/2)/B over B = 1-512 sequences x K/V heads and M = 1-80 µs
    # (120 rows: the streaming roof is searched on fits of at least MIN_STREAM_ROWS = 100): kappa = 64, c_far = 40
    shapes = [_decode(b, g, mem) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) for g in (1, 2)
              for mem in (1.0, 5.0, 10.0, 20.0, 40.0, 80.0)]

    def truth(s: Shape) -> float:
        m = s.memory_s or 0.0
        return max(m, 64 * m / s.kv_heads) / 0.5 + 10e-6 + 40 * max(0.0, m - B200_TAU / 2) / s.kv_heads

    fit = fit_kind("generation_attention.bf16@triton", shapes, [truth(s) for s in shapes])
    assert fit.stream_blocks == 64.0
    assert fit.long_stream_weight == pytest.approx(40.0, rel=1e-4)
    assert (fit.efficiency, fit.t0_s) == pytest.approx((0.5, 10e-6), rel=1e-4)


def test_no_long_stream_without_a_streaming_roof() -> None:
    # the same rows without the long stream, DRAM's time alone: y = M / 0.8 + 5 µs; the fit takes kappa = 0 and no
    # long stream (the column is tried beside kappa > 0 only)
    shapes = [_decode(b, 1, mem) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
              for mem in (1.0, 5.0, 10.0, 20.0, 40.0, 80.0, 120.0, 160.0, 200.0, 240.0)]
    fit = fit_kind("generation_attention.bf16@triton", shapes, [(s.memory_s or 0.0) / 0.8 + 5e-6 for s in shapes])
    assert fit.stream_blocks == 0.0 and fit.long_stream_weight == 0.0


def test_the_long_stream_survives_the_file() -> None:
    fits = {"generation_attention.fp8@triton": Fit("generation_attention.fp8@triton", 0.5, 9e-6, 0.9, 1.3, 3780,
                                                   stream_blocks=48.0, long_stream_weight=99.2)}
    raw = json.loads(json.dumps(ExpectedTimes("b200", "sglang", "0.5.14", {}, fits).to_dict()))
    assert dict(parse(raw, "b200.sglang.json").fits) == fits
    # a file written before the term reads it as absent
    del raw["fits"]["generation_attention.fp8@triton"]["long_stream_weight"]
    assert parse(raw, "b200.sglang.json").fits["generation_attention.fp8@triton"].long_stream_weight == 0.0
