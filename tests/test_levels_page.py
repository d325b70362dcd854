"""The page's levels toggle: each kernel's points per memory level in the page's data (by
arithmetic), and in headless Chromium the toggle showing the current kernel's levels and roofs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from roofline.kernels import attention_graph, attention_plans, matmul_graph
from roofline.placement import analyze_graph, place
from roofline.report.outputs import Scenario, write_kernel_outputs
from roofline.report.page.roofline import payload

if TYPE_CHECKING:
    from conftest import Opened

N = 4096


def _matmul_scenario() -> Scenario:
    return Scenario("", analyze_graph(matmul_graph(N, N, N, "bf16"), "h100", "bf16"))


def test_kernel_records_carry_their_levels():
    data = payload([_matmul_scenario()])
    (k,) = data["scenarios"][0]["kernels"]
    levels = {lv["level"]: lv for lv in k["levels"]}
    # H100: shared memory 128 B/clk × 132 SMs × 1.83 GHz and DRAM 3.35 TB/s have bandwidths; L2 has none
    assert set(levels) == {"smem", "dram"}
    # smem bytes = 2 B · M·N·K · (1/256 + 1/256): I = 2·M·N·K / that = 256 / 2 = 128 FLOP/byte
    assert levels["smem"]["x"] == pytest.approx(128.0)
    assert levels["dram"]["x"] == pytest.approx(2.0 * N**3 / (3 * N * N * 2))  # 4096 / 3
    assert levels["smem"]["time_s"] == pytest.approx(levels["smem"]["bytes"] / (128 * 132 * 1.83e9))
    names = [t["name"] for t in data["scenarios"][0]["figure"]["data"]]
    # one hidden roof per level other than DRAM (DRAM's is the main roof), then the levels trace
    assert "level roof smem" in names and "levels" in names and "level roof dram" not in names
    roof = next(t for t in data["scenarios"][0]["figure"]["data"] if t["name"] == "level roof smem")
    assert roof["visible"] is False
    json.dumps(data)  # the page's JSON



@pytest.mark.browser
def test_the_levels_toggle_shows_the_current_kernels_levels(open_page: Callable[[Path], Opened],
                                                             tmp_path: Path) -> None:
    g = attention_graph(N, 128, "bf16", heads=32)
    plans = attention_plans("attention")
    path = tmp_path / "attention.html"
    write_kernel_outputs([Scenario("none", analyze_graph(g, "b200", "bf16", plans["none"]), plan="none")],
                         html=str(path))
    opened = open_page(path)
    try:
        page = opened.page
        assert page.locator("#levels-toggle").is_visible()
        levels_js = """() => { const d = document.getElementById('chart').data;
            const t = d.find(t => t.name === 'levels');
            const r = d.filter(t => t.name.startsWith('level roof '));
            return {x: t.x, n: t.x.length, roofs: r.map(t => t.visible),
                    items: Array.from(document.querySelectorAll('#info-levels li')).map(li => li.textContent)}; }"""
        off = page.evaluate(levels_js)
        assert off["n"] == 0 and off["roofs"] == [False] and off["items"] == []
        page.check("#levels")
        page.evaluate("() => window.roofline.setStep(1)")  # attention.qk: smem and DRAM bytes (L2 has no roof)
        on = page.evaluate(levels_js)
        qk = place(g.kernels(plans["none"])[0], "b200", "bf16")
        # its smem point: FLOPs / smem bytes = 2·B·H·N²·d / (2 B · H·N² · d · (1/128 + 1/128)) = 64 FLOP/byte
        assert on["n"] == 1 and on["x"][0] == pytest.approx(qk.flop / qk.cost.bytes_by_level["smem"])
        assert on["x"][0] == pytest.approx(64.0)
        assert on["roofs"] == [True]
        assert len(on["items"]) == 2 and on["items"][0].startswith("shared memory:")
        page.evaluate("() => window.roofline.setStep(2)")  # the softmax: DRAM only, no point besides its own
        assert page.evaluate(levels_js)["n"] == 0
        page.uncheck("#levels")
        assert page.evaluate(levels_js)["roofs"] == [False]
        assert opened.console_errors == [] and opened.requests == [opened.url]
    finally:
        opened.page.close()
