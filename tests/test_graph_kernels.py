"""A kernel of one op (Graph._alone, the short path most kernels of a step take) is the kernel the
general path (Graph._group) makes of the same op, and frozen values keep a read-only mapping as it is."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from roofline.frozen import read_only
from roofline.graph import Cost, Graph, Op, tensor
from roofline.models import analyze_model
from roofline.parallel import Split
from roofline.placement import analyze_plans
from roofline.vocab import Level, Plan, Role, Unit


@pytest.mark.parametrize(("model", "phase", "batch", "seq", "split"), [
    ("qwen3.5-397b-a17b", "decode", 64, 8192, None),  # Gated DeltaNet + gated attention + 512 experts
    ("qwen3.5-397b-a17b", "prefill", 1, 8192, None),
    ("nemotron-3-nano", "decode", 8, 4096, None),  # Mamba2: a state read and written in place
    ("deepseek-v3", "decode", 64, 8192, Split(tp=8, ep=8)),  # MLA, collectives on the link
    ("gpt-oss-120b", "prefill", 2, 1024, None),  # windowed layers, mxfp4 weights
])
def test_one_op_alone_is_the_group_of_that_op(model: str, phase: str, batch: int, seq: int,
                                              split: Split | None) -> None:
    machine = "dgx-h200" if split else "h200"
    g = analyze_model(model, machine, phase, batch, seq, split=split).model.graph
    for op in g.ops:
        alone, group = g._alone(op.name, op), g._group(op.name, [op])
        assert alone == group
        assert repr(alone.cost) == repr(group.cost)  # the same float values (2.0 is not 2), keys in the same order


def test_in_place_state_and_a_fused_pair_by_hand() -> None:
    x = tensor("x", (4, 8), "bf16")  # 32 values x 2 B = 64 B
    state = tensor("state", (8, 8), "fp32", Role.KV_CACHE, persistent=True)  # 64 values x 4 B = 256 B
    w = tensor("w", (8, 8), "bf16", Role.WEIGHT)  # 128 B
    y = tensor("y", (4, 8), "bf16")  # 64 B
    z = tensor("z", (4, 8), "bf16")  # 64 B
    update = Op("update", "state_update", (x, state), (state,), {Unit.VECTOR: 3 * 64}, 2)
    mm = Op("mm", "matmul", (x, w), (y,), {Unit.MATRIX: 2.0 * 4 * 8 * 8}, 2)  # 2·M·N·K = 512
    add = Op("add", "add", (y, x), (z,), {Unit.VECTOR: 32.0}, 2)
    g = Graph([update, mm, add])
    k = g._alone("update", update)
    assert k.cost.bytes == 64 + 256 + 256  # x and the state read, the state written back (persistent)
    assert k.cost.flop_by_unit == {Unit.VECTOR: 192.0}
    assert type(k.cost.flop_by_unit[Unit.VECTOR]) is float  # an int count summed from 0.0, as a group sums it
    fused = g._group("mm+add", [mm, add])
    assert fused.cost.bytes == 64 + 128 + 64  # x and w read once, z written; y stays inside
    assert fused.cost.flop_by_unit == {Unit.MATRIX: 512.0, Unit.VECTOR: 32.0}
    kernels = g.kernels()
    assert [k.name for k in kernels] == ["update", "mm", "add"]
    assert kernels[1].cost.bytes == 64 + 128 + 64  # mm alone: x, w read; y written (add reads it)


def test_read_only_keeps_a_proxy_and_copies_a_dict() -> None:
    d = {Level.DRAM: 1.0}
    kept = MappingProxyType({Level.DRAM: 2.0})
    assert read_only(kept) is kept
    copied = read_only(d)
    d[Level.DRAM] = 3.0
    assert copied == {Level.DRAM: 1.0}  # the caller's later change does not reach the value
    cost = Cost({Unit.MATRIX: 1.0}, d)
    d[Level.DRAM] = 4.0
    assert cost.bytes == 3.0


def test_placements_share_the_ceilings_mappings() -> None:
    a = analyze_model("qwen3.5-397b-a17b", "h200", "decode", 64, 8192)
    plans = analyze_plans(a.model.graph, a.machine, a.dtype, [a.model.plans[p] for p in Plan if p in a.model.plans])
    ps = [p for ga in plans.values() for p in ga.placements]
    assert len({id(p.bandwidth_by_level) for p in ps}) == 1  # one machine's ceilings, read-only, shared
    assert ps[0].bandwidth_by_level == a.placements[0].bandwidth_by_level
