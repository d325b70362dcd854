"""The training page (`roofline train --html`) in headless Chromium: offline under the pages' CSP, no
console error, one point per kernel with arithmetic, coloured by pass, and the step's breakdown whose
parts add up to the step at the floor and at both ends of the band."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from roofline.report.outputs import write_train_outputs
from roofline.report.points import on_chart
from roofline.training import TrainSplit, analyze_training, describe_training

if TYPE_CHECKING:
    from conftest import Opened

pytestmark = pytest.mark.browser


def test_train_page_draws_the_kernels_by_pass_and_the_breakdown(open_page: Callable[[Path], Opened], tmp_path: Path,
                                                                artifacts: Path) -> None:
    # Llama 3 8B, TP 2 × DP 4 on one HGX H200 node, full recompute: all four passes have kernels
    setup = describe_training("llama-3-8b", 4096, 64, 1, TrainSplit(tp=2, dp=4), recompute="full")
    a = analyze_training(setup, "hgx-h200")
    path = tmp_path / "train.html"
    write_train_outputs(a, html=str(path))
    html = path.read_text()
    assert "Content-Security-Policy" in html and "'unsafe-inline'" not in html.split("script-src")[1].split(";")[0]
    opened = open_page(path)
    page = opened.page
    try:
        assert opened.console_errors == []
        assert opened.requests == [opened.url]  # offline: no request past the file itself
        traces = page.evaluate("""() => document.getElementById('chart').data.map(
            d => ({uid: d.uid, name: d.name, x: d.x, kernels: d.customdata || []}))""")
        by = {t["uid"]: t for t in traces}
        drawn = [x for x in a.placed if on_chart(x.placement) and not x.is_comm]
        for pass_ in ("forward", "backward", "recompute", "optimizer"):
            expect = sorted(x.kernel.kernel.name for x in drawn if str(x.kernel.pass_) == pass_)
            assert expect, pass_
            assert sorted(by[f"pass-{pass_}"]["kernels"]) == expect and by[f"pass-{pass_}"]["name"] == pass_
        # one marker a kernel in the rendered SVG (the traces after the roof, in the order plotly draws them)
        points = page.evaluate("() => document.querySelectorAll('#chart .scatterlayer path.point').length")
        assert points == len(drawn)
        # the breakdown: compute + exposed communication + bubble + optimizer = the step, at each end
        parts = ("compute", "exposed communication", "pipeline bubble", "optimizer")
        for i, st in enumerate((a.floor, a.low, a.high)):
            total = sum(by["part-" + p.replace(" ", "-")]["x"][i] for p in parts)
            assert total == pytest.approx(st.step_s, rel=1e-9)
        assert by["part-compute"]["x"][0] == pytest.approx(a.floor.compute_s)
        assert page.locator("#communication tbody tr").count() == len(a.communication())
        table = page.text_content("#communication") or ""
        assert "dp.grads.all_reduce" in table and "nvls" in table  # the gradients' NVLS all-reduce, named
        summary = page.text_content("#summary") or ""
        for what in ("step time", "MFU", "tokens/s", "pipeline bubble", "memory a device"):
            assert what in summary
        page.screenshot(path=str(artifacts / "train-llama-3-8b-tp2-dp4.png"), full_page=True)
        assert opened.console_errors == []
    finally:
        page.close()
