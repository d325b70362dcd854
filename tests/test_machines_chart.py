"""`roofline machines NAMES --png/--svg` (several roofs on one chart) and `.plot()` on core results."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.cli import main
from roofline.kernels import attention_graph, attention_plans, matmul_graph
from roofline.placement import analyze_graph, place


def _svg_text(path: Path) -> str:
    return path.read_text()


def test_machines_png_and_svg_draw_one_roof_per_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg = tmp_path / "roofs.svg"
    png = tmp_path / "roofs.png"
    assert main(["machines", "a100", "h100", "b200", "--svg", str(svg), "--png", str(png)]) == 0
    text = _svg_text(svg)
    for i in (1, 2, 3):
        assert f'id="roof-{i}"' in text  # one roof line per machine
    assert 'id="roof-4"' not in text
    # the legend names each roof with its ridge: 312/2.039 = 153, 989.4/3.35 = 295, 2250/7.672 = 293 (B200's
    # physical 7680 bits x 2 x 3996 MHz / 8 = 7.672 TB/s, tests/test_catalog_exact.py)
    for ridge in ("153 FLOP/B", "295 FLOP/B", "293 FLOP/B"):
        assert ridge in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {svg}" in capsys.readouterr().err


def test_machines_chart_of_precisions(tmp_path: Path) -> None:
    svg = tmp_path / "b200.svg"
    assert main(["machines", "b200", "--dtype", "bf16,fp8,fp4", "--svg", str(svg)]) == 0
    text = _svg_text(svg)
    # each halving of precision doubles the ridge: 2250/7.672, 4500/7.672, 9000/7.672
    for ridge in ("293 FLOP/B", "587 FLOP/B", "1,173 FLOP/B"):
        assert ridge in text, ridge


def test_machines_chart_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["machines", "a100", "--dtype", "fp8", "--png", str(tmp_path / "x.png")]) == 2
    assert "a100-sxm-80gb lists no matrix peak for fp8" in capsys.readouterr().err
    assert main(["machines", "--png", str(tmp_path / "x.png")]) == 2
    assert "name the machines to draw" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_core_results_plot_and_render_html() -> None:
    g = attention_graph(2048, 128)
    naive = analyze_graph(g, "h100", "bf16", attention_plans("attention")["none"])
    fig = naive.plot()
    ax = next(a for a in fig.axes if a.get_gid() == "roofline")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    html = naive._repr_html_()
    assert html.startswith("<iframe srcdoc=") and "attention.softmax" in html
    p = place(matmul_graph(4096, 4096, 4096).kernels()[0], "h100")
    assert p.plot().axes and "matmul" in p._repr_html_()
