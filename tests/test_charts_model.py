"""Charts of a real model analysis: Llama 3 70B decode on an H100, the seed's running example."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.report.notebook import model_scenarios
from roofline.report.outputs import model_figure, write_model_outputs

models = pytest.importorskip("roofline.models", reason="roofline.models is not built yet")


@pytest.fixture(scope="module")
def llama_decode() -> Any:
    return models.analyze_model("llama-3-70b", "h100", "decode", batch=1, seq=8192)


def _axes(fig: Any, gid: str) -> Any:
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def test_llama_decode_chart_has_every_kernel_at_its_coordinates(llama_decode: Any) -> None:
    scenarios = model_scenarios(llama_decode)
    fig = model_figure(scenarios, title=llama_decode.title)
    ax = _axes(fig, "roofline")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ridge = next(line for line in ax.get_lines() if line.get_gid() == "ridge")
    assert ridge.get_xdata()[0] == pytest.approx(989.4e12 / 3.35e12)  # the seed's 295
    placements = scenarios[0].analysis.placements
    points = {line.get_gid(): line for line in ax.get_lines() if re.fullmatch(r"kernel-\d+", line.get_gid() or "")}
    drawn = [(i + 1, p) for i, p in enumerate(placements) if p.flop > 0 and p.bytes > 0]
    assert len(points) == len(drawn) >= 10
    for n, p in drawn:
        line = points[f"kernel-{n}"]
        assert line.get_xdata()[0] == pytest.approx(p.flop_per_byte)
        assert line.get_ydata()[0] == pytest.approx(p.flop / p.time_s)
    # decode at batch 1 is the skinny matmul: "one token buys one FLOP per byte of weight"
    projections = [p for p in placements if p.kind == "matmul"]
    assert projections and all(p.flop_per_byte == pytest.approx(1.0, rel=2e-3) for p in projections)
    assert all(p.bound_class == "memory" for _, p in drawn)


def test_llama_decode_outputs_and_plan_switch_data(llama_decode: Any, tmp_path: Path) -> None:
    html = tmp_path / "llama.html"
    paths = write_model_outputs(model_scenarios(llama_decode), png=str(tmp_path / "llama.png"),
                                svg=str(tmp_path / "llama.svg"), html=str(html), title=llama_decode.title)
    assert [p.suffix for p in paths] == [".png", ".svg", ".html"]
    size = html.stat().st_size
    assert size < 6 * 2**20  # the budget: plotly.js (4.8 MB) and the data under 6 MB
    data = json.loads(re.search(r'id="roofline-data">(.*?)</script>', html.read_text(), re.S).group(1))  # type: ignore[union-attr]
    plans = {s["plan"]: s for s in data["scenarios"]}
    assert set(plans) == {"none", "flash", "fused"}
    for s in data["scenarios"]:
        assert s["ridge_flop_per_byte"] == pytest.approx(989.4e12 / 3.35e12)
        assert s["figure"]["layout"]["xaxis"]["type"] == "log"


def test_model_command_writes_chart_and_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png, page = tmp_path / "m.png", tmp_path / "m.html"
    code = main(["model", "llama-3-8b", "--machine", "h100", "--phase", "decode", "--batch", "8", "--context", "1024",
                 "--png", str(png), "--html", str(page)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG" and "roofline-data" in page.read_text()
