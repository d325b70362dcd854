"""Static charts: what is drawn, where, and that writing them is all-or-nothing.

The figures are inspected through their artists (found by gid) and through the SVG they render to;
every expected coordinate is computed from the seed's arithmetic.
"""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.graph import Graph
from roofline.hardware import get_machine
from roofline.kernels import attention_graph, attention_plans, elementwise_graph, matmul_graph
from roofline.placement import GraphAnalysis, analyze_graph, place
from roofline.report.charts.labels import number_ranges
from roofline.report.charts.roofline import figure_bytes, roofline_figure, roofs_figure
from roofline.report.charts.sweep import sweep_figure
from roofline.report.outputs import Scenario, model_figure, write_model_outputs, write_roofs_chart, write_sweep_chart
from roofline.report.points import ABOVE_ROOF_COLOUR, BOUND_COLOURS

H100_PEAK = 989.4e12  # dense BF16, h100-sxm.toml
H100_BW = 3.35e12


def _layer() -> GraphAnalysis:
    """A toy decode layer on an H100 in BF16: norm, a skinny matmul, a square matmul, a residual add."""
    graphs = [elementwise_graph("rmsnorm", 8192, 8192), matmul_graph(16, 8192, 8192),
              matmul_graph(4096, 4096, 4096), elementwise_graph("add", 1, 8192 * 8192)]
    m = get_machine("h100")
    placements = []
    for i, g in enumerate(graphs):
        for k in g.kernels():
            placements.append(replace(place(k, m, "bf16"), name=f"{i + 1}:{k.name}"))
    return GraphAnalysis(tuple(placements), "none", m, placements[0].dtype)


def _gid(container: Any, gid: str) -> Any:
    found = [a for a in container.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid}"
    return found[0]


def _axes(fig: Any, gid: str) -> Any:
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def test_roofline_axes_roof_ridge_and_one_point_per_kernel() -> None:
    a = _layer()
    fig = model_figure([Scenario("toy layer", a)])
    ax = _axes(fig, "roofline")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP/byte" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()
    roof = _gid(ax, "roof")
    assert max(roof.get_ydata()) == pytest.approx(H100_PEAK)
    # the slope: attainable = BW × I at the left end
    assert roof.get_ydata()[0] == pytest.approx(H100_BW * roof.get_xdata()[0])
    ridge = _gid(ax, "ridge")
    assert ridge.get_xdata()[0] == pytest.approx(H100_PEAK / H100_BW)  # 295.3, the seed's "about 295"
    assert ridge.get_ydata()[0] == pytest.approx(H100_PEAK)
    # labels carry the machine's values
    texts = {t.get_gid(): t.get_text() for t in ax.texts}
    assert "989 TFLOP/s" in texts["roof-label"]
    assert "3.35 TB/s" in texts["slope-label"]
    assert "295 FLOP/B" in texts["ridge-label"]
    # one point per kernel, at (I, attainable FLOP/s), coloured by bound
    points = [line for line in ax.get_lines() if re.fullmatch(r"kernel-\d+", line.get_gid() or "")]
    assert len(points) == len(a.placements) == 4
    expected = [
        # RMSNorm 8192²: 6 FLOP/element over 2·2 B/element + the gain: the seed's "1.5", on the slope
        (6 * 8192**2 / (4 * 8192**2 + 2 * 8192), H100_BW * 6 * 8192**2 / (4 * 8192**2 + 2 * 8192), "memory"),
        # 16 tokens through an 8192² weight: I ≈ T = 16, still on the slope
        (2 * 16 * 8192 * 8192 / (2 * (16 * 8192 + 8192 * 8192 + 16 * 8192)), None, "memory"),
        # square matmul: N/3 = 1365.3 > 295, on the roof
        (4096 / 3, H100_PEAK, "compute"),
        # residual add: 1 FLOP per 6 bytes
        (1 / 6, H100_BW / 6, "memory"),
    ]
    for n, (x, y, bound) in enumerate(expected, start=1):
        line = _gid(ax, f"kernel-{n}")
        assert line.get_xdata()[0] == pytest.approx(x)
        assert line.get_ydata()[0] == pytest.approx(y if y is not None else H100_BW * x)
        assert line.get_markerfacecolor() == BOUND_COLOURS[bound]
    key = _axes(fig, "key")
    numbers = [t.get_text().split()[0] for t in key.texts if (t.get_gid() or "").startswith("key-")]
    assert numbers == ["1", "2", "3", "4"]


def _boxes(fig: Any, ax: Any, prefix: str) -> list[Any]:
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    out = []
    for t in ax.texts:
        if (t.get_gid() or "").startswith(prefix):
            patch = t.get_bbox_patch()
            out.append(patch.get_window_extent(renderer) if patch is not None else t.get_window_extent(renderer))
    return out


def _disjoint(a: Any, b: Any) -> bool:
    return a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


def test_labels_never_overlap_each_other_or_the_roof_labels() -> None:
    """30 kernels crowded between I = 1 and 4, and coincident ones: every number stays readable."""
    m = get_machine("h100")
    ps = []
    for i in range(30):
        cols = 1024 * (1 + i % 5)  # five distinct shapes: coincident points share one label
        ps.append(replace(place(matmul_graph(1 + i // 5, cols, 4096).kernels()[0], m, "bf16"), name=f"k{i}"))
    fig = roofline_figure(ps, title="crowded")
    ax = _axes(fig, "roofline")
    labels = _boxes(fig, ax, "label-")
    assert 1 < len(labels) <= 30
    for a, b in itertools.combinations(labels, 2):
        assert _disjoint(a, b)
    fixed = [t.get_window_extent(fig.canvas.get_renderer()) for t in ax.texts
             if t.get_gid() in ("roof-label", "slope-label", "ridge-label")]
    for a in labels:
        assert all(_disjoint(a, b) for b in fixed)
        box = ax.get_window_extent(fig.canvas.get_renderer())
        assert box.x0 <= a.x0 and a.x1 <= box.x1 and box.y0 <= a.y0 and a.y1 <= box.y1
    # every kernel number appears in exactly one label
    numbers: list[int] = []
    for t in ax.texts:
        if (t.get_gid() or "").startswith("label-"):
            for part in t.get_text().split(","):
                lo, _, hi = part.partition("–")  # "6–10" is a run of coincident kernels
                numbers += range(int(lo), int(hi or lo) + 1)
    assert sorted(numbers) == list(range(1, 31))
    assert number_ranges([1, 2, 3, 5, 7, 8]) == "1–3,5,7,8"


def test_measured_points_beside_predicted_and_above_roof_flagged() -> None:
    a = _layer()
    ps = list(a.placements)
    ps[0] = ps[0].with_measured(ps[0].time_s / 0.8)  # 80% of the roof: below it
    ps[2] = ps[2].with_measured(ps[2].time_s * 0.9)  # faster than the floor: above the roof
    fig = roofline_figure(ps)
    ax = _axes(fig, "roofline")
    below = _gid(ax, "measured-1")
    assert below.get_xdata()[0] == pytest.approx(ps[0].flop_per_byte)
    assert below.get_ydata()[0] == pytest.approx(ps[0].flop / (ps[0].time_s / 0.8))  # achieved = FLOPs / time
    above = _gid(ax, "above-roof-3")
    assert above.get_ydata()[0] == pytest.approx(H100_PEAK / 0.9)  # on the roof, measured 10% faster
    assert above.get_markerfacecolor() == ABOVE_ROOF_COLOUR
    warning = next(t for t in fig.texts if t.get_gid() == "above-roof-warning")
    assert "ABOVE the roof" in warning.get_text() and "3" in warning.get_text()
    notes = {t.get_gid(): t.get_text() for t in _axes(fig, "key").texts if (t.get_gid() or "").startswith("key-note")}
    assert "80% of the roof" in notes["key-note-1"]
    assert "ABOVE THE ROOF (111%)" in notes["key-note-3"]  # floor / measured = 1 / 0.9


def test_svg_has_one_group_per_kernel_and_text_values() -> None:
    a = _layer()
    svg = figure_bytes(model_figure([Scenario("toy", a)]), "svg")
    root = ET.fromstring(svg)
    ids = {el.get("id") for el in root.iter() if el.get("id")}
    assert {"roof", "ridge", "kernel-1", "kernel-2", "kernel-3", "kernel-4"} <= ids
    assert "kernel-5" not in ids
    text = " ".join("".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "295 FLOP/B" in text and "989 TFLOP/s" in text and "3.35 TB/s" in text
    png = figure_bytes(model_figure([Scenario("toy", a)]), "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_kernels_without_flops_are_listed_not_drawn() -> None:
    a = _layer()
    copy = GraphAnalysis((*a.placements, replace(a.placements[0], name="copy",
                                                 cost=type(a.placements[0].cost)({}, {"dram": 1e6}))),
                         a.plan, a.machine, a.dtype)
    fig = model_figure([Scenario("toy", copy)])
    gids = {line.get_gid() for line in _axes(fig, "roofline").get_lines()}
    assert "kernel-5" not in gids and "kernel-4" in gids
    assert any("not drawn: no FLOPs" in t.get_text() for t in _axes(fig, "key").texts)


def test_roofs_compared_across_machines_and_precisions(tmp_path: Path) -> None:
    fig = roofs_figure([("a100", "bf16"), ("h100", "bf16"), ("b200", "bf16")])
    ax = _axes(fig, "roofline")
    peaks = [max(_gid(ax, f"roof-{i}").get_ydata()) for i in (1, 2, 3)]
    assert peaks == pytest.approx([312e12, 989.4e12, 2.25e15])
    ridges = [_gid(ax, f"ridge-{i}").get_xdata()[0] for i in (1, 2, 3)]
    # the seed's table: 153, 295, 281; B200's is 293 over its physical 7680 bits x 2 x 3996 MHz / 8 = 7.672 TB/s
    # (the seed's 281 divides by DGX B200's 8 TB/s; tests/test_catalog_exact.py)
    b200_bw = 7680 * 2 * 3996e6 / 8
    assert ridges == pytest.approx([312e12 / 2.039e12, 989.4e12 / 3.35e12, 2.25e15 / b200_bw], rel=1e-3)
    assert [round(r) for r in ridges] == [153, 295, 293]
    caption = next(t for t in fig.texts if t.get_gid() == "caption").get_text()
    assert "×7.2" in caption  # "the roof rose seven times": 2.25e15 / 312e12 = 7.21
    assert "×1.9" in caption  # "the ridge moved by two": 295 / 153 = 1.93

    fig = roofs_figure([("b200", "bf16"), ("b200", "fp8"), ("b200", "fp4")])
    ax = _axes(fig, "roofline")
    ridges = [_gid(ax, f"ridge-{i}").get_xdata()[0] for i in (1, 2, 3)]
    # "each halving of precision doubles the ridge": 2.25, 4.5, 9 PFLOP/s over 7.672 TB/s
    assert ridges == pytest.approx([2.25e15 / b200_bw, 4.5e15 / b200_bw, 9e15 / b200_bw])
    labels = sorted(t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("ridge-label"))
    assert labels == ["1173", "293", "587"]
    (path,) = write_roofs_chart([("b200", "bf16"), ("b200", "fp8")], svg=str(tmp_path / "roofs.svg"))
    ids = {el.get("id") for el in ET.fromstring(path.read_bytes()).iter() if el.get("id")}
    assert {"roof-1", "roof-2", "ridge-1", "ridge-2"} <= ids and "roof-3" not in ids


def test_sweep_chart_intensity_ridge_limit_and_breakdown() -> None:
    # a toy decode sweep: I(B) = 60·B / (B + 60) rises toward a limit of 60, below the H100 ridge
    batches = [1, 4, 16, 64, 256, 1024]
    a = _layer()
    rows = [{"batch": b, "flop_per_byte": 60 * b / (b + 60), "analysis": a} for b in batches]
    fig = sweep_figure(rows, "batch", ridge=295.3, limit=60.0)
    ax = _axes(fig, "intensity")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    sweep = _gid(ax, "sweep")
    assert list(sweep.get_xdata()) == batches
    assert list(sweep.get_ydata()) == pytest.approx([60 * b / (b + 60) for b in batches])
    assert list(_gid(ax, "ridge").get_ydata()) == pytest.approx([295.3, 295.3])
    assert list(_gid(ax, "limit").get_ydata()) == pytest.approx([60.0, 60.0])
    assert "memory-bound at every batch" in _gid(ax, "never-label").get_text()
    bars = _axes(fig, "step-time")
    patches = [p for p in bars.patches if (p.get_gid() or "").startswith("bar-0-")]
    assert len(patches) == 4  # one segment per kernel
    heights_s = sum(p.get_height() for p in patches)
    unit = bars.get_ylabel().split("(")[1].rstrip(")")
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]
    assert heights_s * scale == pytest.approx(a.time_s)
    hatched = [p for p in patches if p.get_hatch()]
    assert [p.get_gid() for p in hatched] == ["bar-0-3:matmul-compute"]  # the square matmul


def test_sweep_chart_from_totals_and_crossing_the_ridge(tmp_path: Path) -> None:
    rows = [{"batch": b, "flop_per_byte": float(b), "time_s": 1e-3, "memory_bound_time_s": 1e-3 if b < 295 else 0.0}
            for b in (64, 128, 256, 512)]
    fig = sweep_figure(rows, "batch", ridge=295.3)
    ax = _axes(fig, "intensity")
    assert _gid(ax, "crossover").get_xdata()[0] == 512  # the first batch at or above the ridge
    paths = write_sweep_chart(rows, "batch", ridge=295.3, png=str(tmp_path / "s.png"), svg=str(tmp_path / "s.svg"))
    assert [p.name for p in paths] == ["s.png", "s.svg"]
    assert ET.fromstring((tmp_path / "s.svg").read_bytes()).find(".//*[@id='crossover']") is not None
    with pytest.raises(RooflineError, match="lacks 'flop_per_byte'"):
        sweep_figure([{"batch": 1}], "batch", ridge=295.3)


def test_unwritable_path_is_one_clear_error_and_leaves_the_good_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    s = [Scenario("toy", _layer())]
    with pytest.raises(RooflineError, match=r"cannot write .*x\.png: folder .* does not exist"):
        write_model_outputs(s, png=str(tmp_path / "missing" / "x.png"))
    with pytest.raises(RooflineError, match="it is a folder"):
        write_model_outputs(s, svg=str(tmp_path))
    good = tmp_path / "chart.png"
    good.write_bytes(b"the good chart")

    def full_disk(src: str, dst: str, **dir_fds: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("roofline.fileio.os.replace", full_disk)
    with pytest.raises(RooflineError, match="No space left on device"):
        write_model_outputs(s, png=str(good))
    assert good.read_bytes() == b"the good chart"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png"]  # no temporary file left behind


def test_kernel_command_writes_chart_svg_and_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png, svg, page = tmp_path / "a.png", tmp_path / "a.svg", tmp_path / "a.html"
    code = main(["kernel", "attention", "--seq", "1024", "--head-dim", "128", "--fusion", "none", "--json",
                 "--png", str(png), "--svg", str(svg), "--html", str(page)])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["name"] == "attention (none) N=1024 d=128"  # stdout stays pure JSON
    assert f"wrote {png}" in err
    ids = {el.get("id") for el in ET.fromstring(svg.read_bytes()).iter() if el.get("id")}
    # naive attention's three kernels and the fused one, side by side
    assert {"kernel-1", "kernel-2", "kernel-3", "kernel-4"} <= ids and "kernel-5" not in ids
    text = page.read_text()
    data = json.loads(re.search(r'<script type="application/json" id="roofline-data">(.*?)</script>', text,
                                re.S).group(1))  # type: ignore[union-attr]
    assert [s["plan"] for s in data["scenarios"]] == ["none", "flash"]
    naive, fused = (s["kernels"] for s in data["scenarios"])
    # same FLOPs, fewer bytes: naive adds the seed's 8·N² bytes of scores and probabilities (each written
    # and read back at 2 bytes) to the Q, K, V, O that fused attention alone moves
    assert sum(k["flop"] for k in naive) == pytest.approx(fused[0]["flop"])
    assert fused[0]["bytes"] == 4 * 1024 * 128 * 2
    assert sum(k["bytes"] for k in naive) == pytest.approx(4 * 1024 * 128 * 2 + 8 * 1024**2)

    code = main(["kernel", "rmsnorm", "64", "64", "--png", str(tmp_path / "nope" / "x.png")])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.strip().count("\n") == 0 and "cannot write" in err


def test_model_figure_on_an_attention_plan() -> None:
    g: Graph = attention_graph(4096, 128, heads=8)
    plans = attention_plans("attention")
    fig = model_figure([Scenario("fused", analyze_graph(g, "h100", "bf16", plans["flash"]), plan="fused")])
    line = _gid(_axes(fig, "roofline"), "kernel-1")
    # fused attention: 4·N²·d·H + 5·N²·H FLOPs over Q, K, V, O = 4·N·d·H·2 bytes: about N/2, compute-bound
    flop = 4 * 4096**2 * 128 * 8 + 5 * 4096**2 * 8
    assert line.get_xdata()[0] == pytest.approx(flop / (4 * 4096 * 128 * 8 * 2))
    assert line.get_markerfacecolor() == BOUND_COLOURS["compute"]


def test_sweep_rows_with_kernel_dicts_break_the_step_down_by_kernel() -> None:
    a = _layer()
    rows = [{"batch": b, "flop_per_byte": float(b), "kernels": [p.to_dict() for p in a.placements]} for b in (1, 2)]
    bars = _axes(sweep_figure(rows, "batch", ridge=295.3), "step-time")
    gids = sorted(p.get_gid() for p in bars.patches if (p.get_gid() or "").startswith("bar-1-"))
    assert gids == ["bar-1-1:rmsnorm-memory", "bar-1-2:matmul-memory", "bar-1-3:matmul-compute", "bar-1-4:add-memory"]
    totals = [t.get_text() for t in bars.texts if t.get_gid() == "bar-total-1"]
    # the memory-bound share of the step: everything but the square matmul
    mem = sum(p.total_time_s for p in a.placements if p.bound_class == "memory") / a.time_s
    assert totals and f"{mem:.0%} mem" in totals[0]


def test_notebook_html_is_the_page_in_an_isolated_iframe() -> None:
    import html as html_lib

    from roofline.report.outputs import model_html, notebook_html

    s = [Scenario("toy", _layer())]
    frame = notebook_html(s, title="toy")
    assert frame.startswith('<iframe srcdoc="') and 'sandbox="allow-scripts"' in frame
    srcdoc = frame[len('<iframe srcdoc="'):frame.index('" style=')]
    assert '"' not in srcdoc  # every quote of the page is escaped inside the attribute
    assert html_lib.unescape(srcdoc) == model_html(s, title="toy")
