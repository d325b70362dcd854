"""The closed vocabularies and the one bound rule, for one kernel and for a sequence of kernels."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import kernel_time, place_flop_bytes
from roofline.placement import GraphAnalysis
from roofline.vocab import Bound, Level, Plan, Unit, binding, bound_class

H100_PEAK, H100_BW = 989.4e12, 3.35e12  # dense BF16 and HBM3, hardware/data/h100-sxm.toml


def test_values_are_the_json_strings() -> None:
    assert json.dumps([Unit.MATRIX, Level.DRAM, Bound.MEMORY, Plan.FLASH]) == '["matrix", "dram", "memory", "flash"]'
    assert bound_class(Unit.VECTOR) is Bound.COMPUTE and bound_class(Level.L2) is Bound.MEMORY


def test_binding_is_the_largest_time_and_ties_go_to_memory() -> None:
    assert binding({Unit.MATRIX: 2e-6, Unit.VECTOR: 1e-6, Level.DRAM: 1.5e-6}) is Unit.MATRIX
    # I = I* exactly: compute time = memory time, and kernel_time calls that memory ("compute" only if I > I*)
    assert binding({Unit.MATRIX: 1e-6, Level.DRAM: 1e-6}) is Level.DRAM
    assert binding({}) is Level.DRAM  # a kernel that does nothing waits on nothing; DRAM by convention


def test_a_sequence_is_bound_by_the_resource_with_the_most_time() -> None:
    # two DRAM-bound kernels of 30 µs each and one matrix-bound kernel of 50 µs: 60 µs > 50 µs, so the
    # sequence is DRAM-bound although its single longest kernel is matrix-bound
    memory = place_flop_bytes(1e6, 30e-6 * H100_BW, "h100", "bf16", name="norm")  # 100.5 MB at 3.35 TB/s = 30 µs
    matrix = place_flop_bytes(50e-6 * H100_PEAK, 1e6, "h100", "bf16", name="gemm")  # 49.47 TFLOP at 989.4 T = 50 µs
    assert memory.time_s == pytest.approx(30e-6) and matrix.time_s == pytest.approx(50e-6)
    a = GraphAnalysis((memory, memory, matrix), Plan.NONE, matrix.machine, matrix.dtype)
    assert a.bound_times_s == pytest.approx({Level.DRAM: 60e-6, Unit.MATRIX: 50e-6})
    assert a.bound is Level.DRAM and a.bound_class is Bound.MEMORY
    assert a.memory_bound_time_s == pytest.approx(60e-6)


@given(flop=st.floats(1e3, 1e18), bytes_moved=st.floats(1e3, 1e15))
def test_one_kernel_agrees_with_the_textbook_kernel_time(flop: float, bytes_moved: float) -> None:
    # with one unit and one level the placement is exactly kernel_time(flops, bytes, peak, BW)
    intensity, t, bound = kernel_time(flop, bytes_moved, H100_PEAK, H100_BW)
    p = place_flop_bytes(flop, bytes_moved, "h100", "bf16")
    assert p.flop_per_byte == pytest.approx(intensity) and p.time_s == pytest.approx(t)
    ridge = H100_PEAK / H100_BW
    if abs(intensity / ridge - 1) > 1e-9:  # at the ridge itself the two divisions may round either way
        assert p.bound_class == bound
        assert p.bound is (Unit.MATRIX if bound == "compute" else Level.DRAM)
