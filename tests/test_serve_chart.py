"""The serving chart: throughput against ITL over batch, each point where the report puts it.

Every expected coordinate is read from the ServingReport itself (the curve's floors and ceilings, its
expected bands, the knee, the memory limit and the ITL target); the artists are found by gid, and
the SVG and the page's data are checked for the same things.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from roofline.errors import RooflineError
from roofline.parallel import Split
from roofline.report.charts.roofline import figure_bytes
from roofline.report.charts.serve import FITS_COLOUR, memory_limit_itl, serve_figure
from roofline.report.outputs import write_serve_outputs
from roofline.report.page.serve import serve_page, serve_payload
from roofline.serving import KNEE_GAIN, ServingReport, serve_model


@pytest.fixture(scope="module")
def report() -> ServingReport:
    """Llama 3 70B on a DGX H100 under TP 8 with a 30 ms ITL target: batch 1024 does not fit."""
    return serve_model("llama-3-70b", "dgx-h100", Split(tp=8), prompt=2048, output=256, itl_slo_s=0.03,
                 price_per_device_hour=2.5)


@pytest.fixture(scope="module")
def fig(report: ServingReport) -> Any:
    return serve_figure(report)


def _gid(container: Any, gid: str) -> Any:
    found = [a for a in container.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid}"
    return found[0]


def _ax(fig: Any) -> Any:
    return next(ax for ax in fig.axes if ax.get_gid() == "serving")


def test_the_report_has_what_the_chart_marks(report: ServingReport) -> None:
    # the fixture exercises every mark: a knee, points past the memory limit, an ITL target
    assert report.knee_batch is not None
    assert report.max_batch_memory is not None and report.max_batch_memory < report.curve[-1].batch
    assert [p.fits for p in report.curve].count(False) >= 1
    assert report.itl_slo_s == 0.03


def test_one_point_per_batch_at_its_itl_and_throughput(report: ServingReport, fig: Any) -> None:
    ax = _ax(fig)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "ITL" in ax.get_xlabel() and "tokens/s" in ax.get_ylabel()
    points = [line for line in ax.get_lines() if re.fullmatch(r"batch-\d+", line.get_gid() or "")]
    assert len(points) == len(report.curve)
    for p in report.curve:
        line = _gid(ax, f"batch-{p.batch}")
        assert line.get_xdata()[0] == pytest.approx(p.itl.floor)
        assert line.get_ydata()[0] == pytest.approx(p.throughput.ceiling)
        # throughput = the workload's, prefill counted, without pipeline stages: B·O / (O·ITL + B·TTFT)
        o = report.output
        assert line.get_ydata()[0] == pytest.approx(p.batch * o / (o * p.itl.floor + p.batch * report.ttft.floor))
    floor = _gid(ax, "floor")
    assert list(floor.get_xdata()) == pytest.approx([p.itl.floor for p in report.curve])
    assert list(floor.get_ydata()) == pytest.approx([p.throughput.ceiling for p in report.curve])
    labels = sorted((t for t in ax.texts if (t.get_gid() or "").startswith("batch-label-")),
                    key=lambda t: int(t.get_gid().rsplit("-", 1)[1]))
    assert [t.get_text() for t in labels] == [str(p.batch) for p in report.curve]


def test_batch_labels_never_overlap(fig: Any) -> None:
    ax = _ax(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts
             if (t.get_gid() or "").startswith("batch-label-")]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


def test_points_past_the_memory_limit_are_hollow_and_grey(report: ServingReport, fig: Any) -> None:
    ax = _ax(fig)
    for p in report.curve:
        line = _gid(ax, f"batch-{p.batch}")
        if p.batch <= report.max_batch_memory:  # type: ignore[operator]
            assert p.fits is True and line.get_markerfacecolor() == FITS_COLOUR
        else:
            assert p.fits is False and line.get_markerfacecolor() == "white"
            assert line.get_markeredgecolor() != FITS_COLOUR
    note = _gid(ax, "does-not-fit")
    assert note.get_text() == "does not fit"
    first_out = next(p for p in report.curve if p.fits is False)
    assert note.xy == pytest.approx((first_out.itl.floor, first_out.throughput.ceiling))
    # the memory limit: a vertical line at the ITL of the largest batch that fits
    mem = _gid(ax, "memory-limit")
    x = report.itl_at(report.max_batch_memory)[0].floor  # type: ignore[arg-type]
    assert memory_limit_itl(report) == pytest.approx(x)
    assert list(mem.get_xdata()) == pytest.approx([x, x])
    last_in = max((p for p in report.curve if p.fits), key=lambda p: p.batch)
    assert last_in.itl.floor < x < first_out.itl.floor
    assert f"batch {report.max_batch_memory}" in _gid(ax, "memory-limit-label").get_text()


def test_knee_and_slo_are_marked(report: ServingReport, fig: Any) -> None:
    ax = _ax(fig)
    knee = next(p for p in report.curve if p.batch == report.knee_batch)
    ring = _gid(ax, "knee")
    assert (ring.get_xdata()[0], ring.get_ydata()[0]) == pytest.approx((knee.itl.floor, knee.throughput.ceiling))
    # the knee's definition: the next doubling gains less than 10%
    after = report.curve[report.curve.index(knee) + 1]
    assert after.throughput.ceiling < (1 + KNEE_GAIN) * knee.throughput.ceiling
    slo = _gid(ax, "itl-slo")
    assert list(slo.get_xdata()) == pytest.approx([0.03, 0.03])
    text = _gid(ax, "itl-slo-label").get_text()
    assert "ITL SLO 30 ms" in text and str(report.max_batch_slo) in text
    chosen = _gid(ax, "chosen")
    assert chosen.get_xdata()[0] == pytest.approx(report.itl_mean.floor) and report.itl_mean.floor <= 0.03
    legend = ax.get_legend().get_texts()
    assert any(f"knee: batch {report.knee_batch}" in t.get_text() for t in legend)


def test_the_expected_band_is_shaded_from_low_to_high(report: ServingReport, fig: Any) -> None:
    band = _gid(_ax(fig), "band")
    verts = band.get_xy()
    pts = report.curve
    expect = [(p.itl.low, p.throughput.high) for p in pts] + [(p.itl.high, p.throughput.low) for p in reversed(pts)]
    # pytest.approx compares flat sequences only: each vertex's x and y, in order
    assert [c for v in verts[: len(expect)] for c in v] == pytest.approx([c for xy in expect for c in xy], rel=1e-9)
    for p in pts:  # the band lies right of and below the roofline point: slower than the floor
        assert p.itl.floor <= p.itl.low <= p.itl.high
        assert p.throughput.low <= p.throughput.high <= p.throughput.ceiling


def test_title_and_subtitle_name_the_model_split_and_what_floor_and_band_mean(fig: Any) -> None:
    texts = {t.get_gid(): t.get_text() for t in fig.texts}
    assert "llama-3-70b" in texts["title"] and "TP 8 of dgx-h100" in texts["title"]
    sub = texts["subtitle"]
    assert "prompt 2048, output 256" in sub and "roofline" in sub and "expected range" in sub


def test_svg_carries_the_gids_and_no_date(fig: Any) -> None:
    svg = figure_bytes(fig, "svg")
    root = ET.fromstring(svg)
    for gid in ("floor", "band", "knee", "itl-slo", "memory-limit", "does-not-fit", "batch-1", "batch-1024"):
        assert root.find(f".//*[@id='{gid}']") is not None, gid
    assert figure_bytes(fig, "svg") == svg


def test_without_target_or_overflow_nothing_extra_is_drawn() -> None:
    r = serve_model("llama-3-8b", "h100", prompt=128, output=128, batch=8)
    ax = _ax(serve_figure(r))
    gids = {a.get_gid() for a in ax.get_children()}
    assert "itl-slo" not in gids and "itl-slo-label" not in gids
    if all(p.fits for p in r.curve):
        assert "memory-limit" not in gids and "does-not-fit" not in gids


def test_write_serve_outputs_writes_png_svg_and_page(report: ServingReport, tmp_path: Path) -> None:
    png, svg, page = tmp_path / "s.png", tmp_path / "s.svg", tmp_path / "s.html"
    paths = write_serve_outputs(report, png=str(png), svg=str(svg), html=str(page))
    assert [p.name for p in paths] == ["s.png", "s.svg", "s.html"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in doc and "default-src 'none'" in doc
    assert "<script src=" not in doc and "<link " not in doc  # plotly inlined, nothing fetched
    with pytest.raises(RooflineError, match=r"cannot write .*x\.png: folder .* does not exist"):
        write_serve_outputs(report, png=str(tmp_path / "missing" / "x.png"))
    assert write_serve_outputs(report) == []


def test_page_data_has_one_point_per_batch_with_hover(report: ServingReport) -> None:
    data = serve_payload(report)
    trace = next(t for t in data["figure"]["data"] if t["name"] == "batches")
    assert trace["x"] == pytest.approx([p.itl.floor for p in report.curve])
    assert trace["y"] == pytest.approx([p.throughput.ceiling for p in report.curve])
    symbols = trace["marker"]["symbol"]
    assert [s == "circle-open" for s in symbols] == [p.fits is False for p in report.curve]
    for text, p in zip(trace["hovertext"], report.curve, strict=True):
        assert text.startswith(f"batch {p.batch}") and "ITL" in text and "tokens/s" in text and "fits" in text
    names = [row[0] for row in data["summary"]]
    for what in ("TTFT", "ITL mean", "end-to-end", "throughput", "max batch (memory)", "max batch (ITL SLO)",
                 "cost / 1M output"):
        assert what in names
    # the data block parses back out of the page
    doc = serve_page(report)
    block = re.search(r'<script type="application/json" id="serve-data">(.*?)</script>', doc, re.S)
    assert block is not None and json.loads(block.group(1))["knee_batch"] == report.knee_batch
