"""The static charts' words and marks: the machine named once, the key listing only the bound classes
present, marker area carrying the kernel's share of the step, and the sweep chart drawing every
machine and marking the batches that do not fit in memory."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from roofline.cli import main
from roofline.hardware import get_machine
from roofline.kernels import elementwise_graph, matmul_graph
from roofline.placement import Placement, place
from roofline.report.charts import sweep as sweep_chart
from roofline.report.charts.roofline import marker_size, roofline_figure
from roofline.report.charts.sweep import fits_memory, sweep_figure

H100 = "NVIDIA H100 SXM5 80GB"


def _placements(*graphs: Any) -> list[Placement]:
    m = get_machine("h100")
    return [replace(place(k, m, "bf16"), name=f"{i + 1}:{k.name}") for i, g in enumerate(graphs) for k in g.kernels()]


def _gid(container: Any, gid: str) -> Any:
    found = [a for a in container.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid}"
    return found[0]


def _axes(fig: Any, gid: str) -> Any:
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def _texts(fig: Any) -> dict[str, str]:
    return {t.get_gid(): t.get_text() for t in fig.texts if t.get_gid()}


def _legend(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize("title", ["", f"llama-3-8b decode, batch 8, context 2048, on {H100}"])
def test_the_machine_is_named_once_in_title_and_subtitle(title: str) -> None:
    fig = roofline_figure(_placements(elementwise_graph("rmsnorm", 8192, 8192)), title=title)
    texts = _texts(fig)
    both = texts["title"] + " | " + texts["subtitle"]
    assert both.count(H100) == 1
    assert both.count("bf16") == 1  # the dtype too: "NVIDIA H100 SXM5 80GB, bf16" as the default title
    assert texts["subtitle"].startswith("bf16 · 1 kernels" if title else "1 kernels")


def test_key_lists_only_the_bound_classes_present() -> None:
    # an RMSNorm (1.5 FLOP/B) and a 16-token matmul (I ≈ 16): both far below the ridge of 295
    memory_only = roofline_figure(_placements(elementwise_graph("rmsnorm", 8192, 8192), matmul_graph(16, 8192, 8192)))
    assert _legend(_axes(memory_only, "roofline")) == ["memory-bound kernel"]
    key = " ".join(t.get_text() for t in _axes(memory_only, "key").texts)
    assert "blue memory" in key and "orange compute" not in key
    # a 4096³ matmul: N/3 = 1365 FLOP/B, right of the ridge: compute-bound, now in the key
    both = roofline_figure(_placements(elementwise_graph("rmsnorm", 8192, 8192), matmul_graph(4096, 4096, 4096)))
    assert _legend(_axes(both, "roofline")) == ["memory-bound kernel", "compute-bound kernel"]
    compute_only = roofline_figure(_placements(matmul_graph(4096, 4096, 4096)))
    assert _legend(_axes(compute_only, "roofline")) == ["compute-bound kernel"]


def test_marker_area_carries_the_kernels_share_of_the_step() -> None:
    # two identical kernels: each is half the step, 5 + 13·√0.5 = 14.19 pt across
    ps = _placements(elementwise_graph("add", 1, 8192 * 8192), elementwise_graph("add", 1, 8192 * 8192))
    ax = _axes(roofline_figure(ps), "roofline")
    assert _gid(ax, "kernel-1").get_markersize() == pytest.approx(5 + 13 * math.sqrt(0.5))
    assert _gid(ax, "kernel-2").get_markersize() == pytest.approx(14.19, abs=0.01)
    # an RMSNorm beside a 4096³ matmul: each marker's size is its own share of their summed time floor
    ps = _placements(elementwise_graph("rmsnorm", 8192, 8192), matmul_graph(4096, 4096, 4096))
    fig = roofline_figure(ps)
    ax = _axes(fig, "roofline")
    total = ps[0].total_time_s + ps[1].total_time_s
    for n, p in enumerate(ps, start=1):
        assert _gid(ax, f"kernel-{n}").get_markersize() == pytest.approx(5 + 13 * math.sqrt(p.total_time_s / total))
    # the matmul's 139 µs (137 GFLOP / 989.4 TFLOP/s) against the norm's 80 µs (268 MB / 3.35 TB/s)
    assert _gid(ax, "kernel-2").get_markersize() > _gid(ax, "kernel-1").get_markersize()
    assert "marker size on the chart grows with the kernel's share of the step time" in " ".join(
        t.get_text() for t in _axes(fig, "key").texts)
    assert marker_size(0.0) == 5.0 and marker_size(1.0) == 18.0
    # side-by-side alternatives (shares=False) have no step to share: one size
    ax = _axes(roofline_figure(ps, shares=False), "roofline")
    assert {_gid(ax, f"kernel-{n}").get_markersize() for n in (1, 2)} == {7.5}


def test_fits_memory_from_the_rows_own_columns() -> None:
    assert fits_memory({"fits": False, "devices": 1}) is False  # compare's own answer wins
    assert fits_memory({"devices": 2, "split_devices": 1}) is False  # Llama 3 70B needs two H100s
    assert fits_memory({"devices": 2, "split_devices": 8}) is True
    assert fits_memory({"devices": 1}) is True
    assert fits_memory({"devices": None}) is None


def _rows() -> list[dict[str, Any]]:
    # two machines, one intensity curve I(B) = B (the step's, not the machine's), each its own ridge;
    # on "small" the batches past 8 do not fit
    return [{"machine": m, "batch": b, "flop_per_byte": float(b), "ridge_flop_per_byte": ridge, "fits": b <= fit}
            for m, ridge, fit in (("small", 295.3, 8), ("big", 281.25, 1024)) for b in (1, 8, 64, 512)]


def test_sweep_chart_draws_every_machine_and_hollows_what_does_not_fit() -> None:
    fig = sweep_figure(_rows(), "batch", ridge=295.3, limit=400.0, series="machine")
    ax = _axes(fig, "intensity")
    for m, ridge in (("small", 295.3), ("big", 281.25)):
        assert list(_gid(ax, f"sweep-{m}").get_xdata()) == [1, 8, 64, 512]
        assert list(_gid(ax, f"ridge-{m}").get_ydata()) == pytest.approx([ridge, ridge])
        # each crosses its own ridge at the first batch at or above it: 512
        assert _gid(ax, f"crossover-{m}").get_xdata()[0] == 512
    hollow = _gid(ax, "nofit-small")
    assert list(hollow.get_xdata()) == [64, 512] and hollow.get_markerfacecolor() == "white"
    assert _gid(ax, "sweep-small").get_markevery() == [0, 1]  # filled where it fits
    assert not [a for a in ax.get_children() if a.get_gid() == "nofit-big"]
    legend = _legend(ax)
    assert "hollow: does not fit in memory" in legend
    assert "ridge I* = 295 FLOP/B, small" in legend and "ridge I* = 281 FLOP/B, big" in legend
    # later machines' markers inside the earlier ones': 7 pt, then 5 pt
    assert [_gid(ax, f"sweep-{m}").get_markersize() for m in ("small", "big")] == [7.0, 5.0]


def test_sweep_chart_one_series_marks_no_fit_and_fades_its_bars() -> None:
    rows = [{"batch": b, "flop_per_byte": float(b), "time_s": 1e-3, "memory_bound_time_s": 1e-3,
             "devices": 2 if b > 8 else 1, "split_devices": 1} for b in (1, 8, 64)]
    fig = sweep_figure(rows, "batch", ridge=295.3)
    ax = _axes(fig, "intensity")
    assert list(_gid(ax, "nofit").get_xdata()) == [64]
    bars = _axes(fig, "step-time")
    faded = {p.get_gid(): p.get_alpha() for p in bars.patches if (p.get_gid() or "").startswith("bar-2-")}
    assert faded and set(faded.values()) == {0.35}
    assert "no fit" in _gid(bars, "bar-total-2").get_text() and "no fit" not in _gid(bars, "bar-total-0").get_text()
    assert "faded: does not fit in memory" in _legend(bars)


def test_sweep_command_charts_every_machine(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    drawn: list[Any] = []
    real = sweep_chart.sweep_figure

    def keep(*args: Any, **kwargs: Any) -> Any:
        drawn.append(real(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(sweep_chart, "sweep_figure", keep)
    code = main(["sweep", "llama-3-70b", "--machine", "h100,b200", "--batch", "1,64", "--context", "8192",
                 "--png", str(tmp_path / "s.png")])
    _, err = capsys.readouterr()
    assert code == 0, err
    (fig,) = drawn
    assert "h100-sxm, b200" in _texts(fig)["title"]
    ax = _axes(fig, "intensity")
    assert {a.get_gid() for a in ax.get_lines()} >= {"sweep-h100-sxm", "sweep-b200"}
    assert {a.get_gid() for a in fig.axes} == {"intensity", "step-time-h100-sxm", "step-time-b200"}
    # Llama 3 70B's 141 GB of BF16 weights do not fit one H100 (80 GB): every H100 batch is hollow
    assert list(_gid(ax, "nofit-h100-sxm").get_xdata()) == [1, 64]
    assert "the chart shows" not in err  # every row is on the chart
