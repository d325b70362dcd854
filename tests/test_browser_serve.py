"""The serving page in headless Chromium: offline, no console error, one chart point per batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from roofline.parallel import Split
from roofline.report.outputs import write_serve_outputs
from roofline.serving import serve_model

if TYPE_CHECKING:
    from conftest import Opened

pytestmark = pytest.mark.browser


def test_serve_page_loads_offline_with_one_point_per_batch(open_page: Callable[[Path], Opened], tmp_path: Path,
                                                          artifacts: Path) -> None:
    r = serve_model("llama-3-70b", "dgx-h100", Split(tp=8), prompt=2048, output=256, itl_slo_s=0.03,
              price_per_device_hour=2.5)
    path = tmp_path / "serve.html"
    write_serve_outputs(r, html=str(path))
    assert path.stat().st_size < 6 * 2**20
    opened = open_page(path)
    page = opened.page
    try:
        assert opened.console_errors == []
        assert opened.requests == [opened.url]
        trace = page.evaluate("""() => {
            const t = document.getElementById('chart').data.find(d => d.name === 'batches');
            return {x: t.x, y: t.y, hover: t.hovertext, symbol: t.marker.symbol};
        }""")
        assert len(trace["x"]) == len(r.curve)
        assert trace["x"] == pytest.approx([p.itl.floor for p in r.curve])
        assert trace["y"] == pytest.approx([p.throughput.ceiling for p in r.curve])
        assert [s == "circle-open" for s in trace["symbol"]] == [p.fits is False for p in r.curve]
        # the chart draws every point: one marker path per batch in the rendered SVG
        drawn = page.evaluate("""() => {
            const i = document.getElementById('chart').data.findIndex(d => d.name === 'batches');
            return document.querySelectorAll('#chart .scatterlayer .trace')[i].querySelectorAll('path.point').length;
        }""")
        assert drawn == len(r.curve)
        assert page.locator("#curve-table tbody tr").count() == len(r.curve)
        summary = page.text_content("#summary") or ""
        for what in ("TTFT", "ITL mean", "end-to-end", "throughput", "max batch (memory)", "cost / 1M output"):
            assert what in summary
        assert (page.text_content("#title") or "").startswith("llama-3-70b serving on TP 8 of dgx-h100")
        page.screenshot(path=str(artifacts / "serve-llama-3-70b-tp8.png"), full_page=True)
        assert opened.console_errors == []
    finally:
        page.close()
