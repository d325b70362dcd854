"""A step split over devices on the chart and the page: the link roof, the collectives under it at
I = FLOPs per byte on the link, the per-device breakdown; and the alpha-beta arithmetic in --explain.

Every coordinate is derived here by hand. Llama 3 70B decode, batch 64, TP 8 on a DGX H100: each
all-reduce's message is the residual, 64 · 8192 · 2 B = 1,048,576 B; over n = 8 it runs two-shot (vLLM's
custom all-reduce above 256 KiB, up to 8 MiB: roofline.parallel.algorithms), which like the ring sends
2 · 7/8 · 1,048,576 = 1,835,008 B per device over NVLink (450 GB/s per direction, α = 2.4 µs: the least
start-up a measured h100_sxm collective leaves, parallel/data/collectives.json) and adds 7/8 · 64 · 8192 =
458,752 reduction FLOPs, so it sits at I = 458,752 / 1,835,008 = 0.25 FLOP/B and FLOPs / (2.4 µs +
1,835,008 / 450e9) = 458,752 / 6.4778 µs = 70.82 GFLOP/s high.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import roofline.models as models
from roofline.explain import explain_placement
from roofline.graph import Graph, tensor
from roofline.hardware import get_system
from roofline.parallel import Collective, Split, collective_op
from roofline.placement import GraphAnalysis, place
from roofline.report.notebook import model_scenarios
from roofline.report.outputs import model_figure
from roofline.report.page.roofline import payload
from roofline.report.points import BOUND_COLOURS
from roofline.vocab import Bound, Level, Plan

PEAK = 989.4e12  # H100 SXM dense bf16
NVLINK = 450e9  # per direction: NVIDIA's 900 GB/s counts both
ALPHA = 2.4e-6  # dgx-h100's node link α: its measured start-up floor (deploy's device machine)
IB = 50e9  # one 400 Gb/s NDR port per GPU


@pytest.fixture(scope="module")
def tp8() -> Any:
    return models.analyze_model("llama-3-70b", "dgx-h100", "decode", batch=64, seq=8192, split=Split(tp=8))


@pytest.fixture(scope="module")
def tp8_pp2() -> Any:
    return models.analyze_model("llama-3-70b", "dgx-h100", "decode", batch=64, seq=8192, split=Split(tp=8, pp=2))


@pytest.fixture(scope="module")
def one_device() -> Any:
    return models.analyze_model("llama-3-70b", "h100", "decode", batch=64, seq=8192)


def _axes(fig: Any, gid: str) -> Any:
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def _lines(ax: Any) -> dict[str, Any]:
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}


def _texts(fig: Any) -> dict[str, str]:
    texts = [*fig.texts, *(t for ax in fig.axes for t in ax.texts)]
    return {t.get_gid(): t.get_text() for t in texts if t.get_gid()}


def _number(a: Any, name: str) -> int:
    return [p.name for p in a.placements].index(name) + 1


def test_tp8_chart_draws_the_nvlink_roof_meeting_the_compute_roof(tp8: Any) -> None:
    fig = model_figure(model_scenarios(tp8), title=tp8.title)
    ax = _axes(fig, "roofline")
    roof = _lines(ax)["link-roof-link"]
    xs, ys = list(roof.get_xdata()), list(roof.get_ydata())
    # from the left edge up the slope 450 GB/s × I to the compute roof, at I = 989.4e12 / 450e9 = 2198.7
    assert xs[-1] == pytest.approx(PEAK / NVLINK) == pytest.approx(2198.67, rel=1e-5)
    assert ys[-1] == pytest.approx(PEAK)
    assert ys[0] == pytest.approx(NVLINK * xs[0])
    assert list(_lines(ax)["link-ridge-link"].get_xdata()) == pytest.approx([PEAK / NVLINK])
    assert _texts(fig)["link-roof-label-link"] == "link slope: NVLink 4 through NVSwitch 450 GB/s × I"
    assert ax.get_xlim()[1] >= PEAK / NVLINK  # the meeting point is inside the axes
    assert "link-roof-network" not in _lines(ax)  # TP 8 stays inside the node


def test_tp8_collectives_sit_under_the_link_roof_at_hand_computed_points(tp8: Any) -> None:
    fig = model_figure(model_scenarios(tp8), title=tp8.title)
    ax = _axes(fig, "roofline")
    lines = _lines(ax)
    flop = 7 / 8 * 64 * 8192  # 458,752: the reduce-scatter half's adds
    on_link = 2 * 7 / 8 * 64 * 8192 * 2  # 1,835,008 B
    assert (flop, on_link) == (458_752, 1_835_008)
    for name in ("embedding.all_reduce", "attn.all_reduce", "mlp.all_reduce"):
        point = lines[f"kernel-{_number(tp8, name)}"]
        assert point.get_xdata()[0] == pytest.approx(flop / on_link) == pytest.approx(0.25)
        assert point.get_ydata()[0] == pytest.approx(flop / (ALPHA + on_link / NVLINK)) == pytest.approx(7.0819e10,
                                                                                                        rel=1e-4)
        assert point.get_markerfacecolor() == BOUND_COLOURS[Bound.COMMUNICATION]
        # α puts it below its slope: 450e9 × 0.25 = 112.5 GFLOP/s
        assert point.get_ydata()[0] < NVLINK * 0.25
    # the all-gather of the logits has no FLOPs: listed, not drawn, as any zero-FLOP kernel
    n = _number(tp8, "logits.all_gather")
    assert f"kernel-{n}" not in lines
    assert _texts(fig)[f"key-note-{n}"] == "not drawn: no FLOPs"
    # the other kernels stay where they were, on the DRAM roof
    qkv = tp8.placements[_number(tp8, "qkv_proj") - 1]
    assert lines[f"kernel-{_number(tp8, 'qkv_proj')}"].get_xdata()[0] == pytest.approx(qkv.flop / qkv.bytes)


def test_tp8_legend_key_and_subtitle_name_the_communication(tp8: Any) -> None:
    fig = model_figure(model_scenarios(tp8), title=tp8.title)
    ax = _axes(fig, "roofline")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "collective (I = FLOPs / byte on the link)" in labels
    comm = sum(p.total_time_s for p in tp8.placements if p.bound_class is Bound.COMMUNICATION)
    assert _texts(fig)["subtitle"].endswith(f", {comm / tp8.analysis.time_s:.0%} communication")
    key_text = " ".join(t.get_text() for t in _axes(fig, "key").texts)
    assert "purple communication" in key_text and "per byte on" in key_text
    # a collective's row in the key gives its FLOP/B on the link
    n = _number(tp8, "attn.all_reduce")
    row = next(t for t in _axes(fig, "key").texts if t.get_gid() == f"key-{n}")
    cells = next(t for t in _axes(fig, "key").texts if t.get_position()[1] == row.get_position()[1] and t is not row)
    assert cells.get_text().split()[0] == "0.25"


def test_across_nodes_a_second_roof_for_the_network(tp8_pp2: Any) -> None:
    fig = model_figure(model_scenarios(tp8_pp2), title=tp8_pp2.title)
    lines = _lines(_axes(fig, "roofline"))
    net = lines["link-roof-network"]
    assert list(net.get_xdata())[-1] == pytest.approx(PEAK / IB)  # 19,788 FLOP/B
    assert net.get_ydata()[0] == pytest.approx(IB * net.get_xdata()[0])
    assert _texts(fig)["link-roof-label-network"] == "network slope: InfiniBand NDR 50 GB/s × I"
    # the stage-to-stage send has no FLOPs: on the network, listed, not drawn
    n = _number(tp8_pp2, "pp.send_recv.network")
    assert f"kernel-{n}" not in lines


def test_no_split_no_link_roof_and_no_communication(one_device: Any) -> None:
    fig = model_figure(model_scenarios(one_device), title=one_device.title)
    ax = _axes(fig, "roofline")
    assert not [g for g in _lines(ax) if g.startswith("link-")]
    assert not [g for g in _texts(fig) if g.startswith("link-")]
    assert "collective (I = FLOPs / byte on the link)" not in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "communication" not in _texts(fig)["subtitle"]
    assert all(line.get_markerfacecolor() != BOUND_COLOURS[Bound.COMMUNICATION] for line in ax.get_lines()
               if re.fullmatch(r"kernel-\d+", line.get_gid() or ""))
    assert all(s.device is None for s in model_scenarios(one_device))


def test_page_data_has_the_link_roof_the_points_and_the_per_device_share(tp8: Any, one_device: Any) -> None:
    data = payload(model_scenarios(tp8), title=tp8.title)
    s = data["scenarios"][0]
    assert s["plan"] == Plan.FLASH
    trace = next(t for t in s["figure"]["data"] if t["name"] == "link roof")
    assert trace["x"][-1] == pytest.approx(PEAK / NVLINK) and trace["y"][-1] == pytest.approx(PEAK)
    assert trace["y"][0] == pytest.approx(NVLINK * trace["x"][0])
    assert s["links"] == [{"level": Level.LINK, "name": "NVLink 4 through NVSwitch",
                           "label": "NVLink 4 through NVSwitch 450 GB/s × I", "bytes_per_s": NVLINK,
                           "latency_s": pytest.approx(ALPHA), "ridge_flop_per_byte": pytest.approx(PEAK / NVLINK)}]
    k = s["kernels"][_number(tp8, "attn.all_reduce") - 1]
    assert k["bound"] == Bound.COMMUNICATION and k["x"] == pytest.approx(0.25)
    assert k["text"]["intensity"] == "0.25 FLOP/B on the link"
    assert "α 2.4 µs + 1.84 MB / 450 GB/s" in k["derivation"]
    assert s["kernels"][_number(tp8, "logits.all_gather") - 1]["x"] is None
    assert data["colours"]["communication"] == BOUND_COLOURS[Bound.COMMUNICATION]
    assert "Purple: collectives" in s["link_note"]
    # per device: the step's time split by what bounds it; what one device holds
    d = s["device"]
    rows = {r[0]: r[1] for r in d["rows"]}
    assert rows["devices"] == "8 (TP 8 on dgx-h100)"
    comm = sum(p.total_time_s for p in tp8.placements if p.bound_class is Bound.COMMUNICATION)
    assert [b[0] for b in d["bar"]] == ["compute", "memory", "communication"]
    assert d["bar"][2][1] == pytest.approx(comm)
    assert sum(b[1] for b in d["bar"]) == pytest.approx(tp8.analysis.time_s)
    assert rows["weights"].endswith("GiB") and "usable: fits" in rows["memory per device"]  # memory held: binary
    # one device: no link roof, no panel
    plain = payload(model_scenarios(one_device))["scenarios"][0]
    assert plain["links"] == [] and plain["device"] is None and plain["link_note"] == ""
    assert all(t["name"] not in ("link roof", "network roof") for t in plain["figure"]["data"])


# --- explain: the alpha-beta time as arithmetic ------------------------------------------------------

def _all_reduce_on_4_h100() -> Any:
    # S = 64 · 8192 · 2 B = 1,048,576 B over 4 devices of one node of H100s (NVLink 4: 900 GB/s both ways)
    msg, out = tensor("x", (64, 8192), "bf16"), tensor("y", (64, 8192), "bf16")
    op = collective_op("tp.all_reduce", Collective.ALL_REDUCE, msg, out, 4, Level.LINK)
    machine = get_system("h100", devices=4).device_machine()
    return place(Graph([op]).kernels()[0], machine, "bf16")


def test_explain_prints_alpha_plus_bytes_over_bandwidth_for_a_collective() -> None:
    p = _all_reduce_on_4_h100()
    # 2 · 3/4 · 1,048,576 = 1,572,864 B; 15 µs + 1,572,864 / 450e9 = 15 µs + 3.4953 µs = 18.495 µs
    assert p.cost.bytes_by_level[Level.LINK] == 2 * 3 / 4 * 1_048_576 == 1_572_864
    assert p.time_s == pytest.approx(15e-6 + 1_572_864 / 450e9) == pytest.approx(18.4953e-6, rel=1e-5)
    text = explain_placement(p)
    assert "link (NVLink 4) α + bytes / BW = 15 µs + 1,572,864 / 4.5e+11 = 15 µs + 3.4953 µs = 18.495 µs" in text
    assert "link (NVLink 4) = 450 GB/s per direction (4.5e+11 B/s), latency α = 15 µs   [" in text
    assert "over the link (NVLink 4): 1,572,864 B (1.57 MB) sent by each device" in text
    # 3/4 · 524,288 elements = 393,216 reduction FLOPs; on the link 393,216 / 1,572,864 = 0.25 FLOP/B
    assert "on the link: I = FLOPs / link bytes = 393216 / 1.57286e+06 = 0.25 FLOP/B" in text
    assert "→ communication-bound (limited by link)" in text
    assert "bytes / BW = 1.573e+06" not in text  # the wrong arithmetic (no α) is gone
    # the DRAM term keeps its plain form
    assert "DRAM bytes / BW = 2.097e+06 / 3.35e+12 = 626 ns" in text


def test_explain_of_a_kernel_without_links_is_unchanged_in_form() -> None:
    from roofline.kernels import matmul_graph

    p = place(matmul_graph(4096, 4096, 4096).kernels()[0], "h100", "bf16")
    text = explain_placement(p)
    assert "α" not in text and "link" not in text
    assert "DRAM bytes / BW = 1.007e+08 / 3.35e+12 = 30 µs" in text
    assert "→ compute-bound (limited by matrix)" in text


def test_a_single_collective_kernel_draws_its_roof() -> None:
    p = _all_reduce_on_4_h100()
    fig = model_figure([_scenario(p)])
    lines = _lines(_axes(fig, "roofline"))
    assert lines["kernel-1"].get_xdata()[0] == pytest.approx(393_216 / 1_572_864)
    assert lines["kernel-1"].get_ydata()[0] == pytest.approx(393_216 / (15e-6 + 1_572_864 / 450e9))
    assert _texts(fig)["link-roof-label-link"] == "link slope: NVLink 4 450 GB/s × I"


def _scenario(p: Any) -> Any:
    from roofline.report.outputs import Scenario

    return Scenario("", GraphAnalysis((p,), Plan.NONE, p.machine, p.dtype))
