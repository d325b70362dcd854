"""The page of a split step in headless Chromium: Llama 3 70B decode, batch 64, 8k, TP 8 on a DGX H100.

It loads offline with no console error, draws the NVLink roof and the collectives under it, and shows
the per-device panel (the step's time by what bounds it, what one device holds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from roofline.parallel import Split
from roofline.report.notebook import model_scenarios
from roofline.report.outputs import write_model_outputs
from roofline.units import format_time
from roofline.vocab import Bound

if TYPE_CHECKING:
    from conftest import Opened

pytestmark = pytest.mark.browser

import roofline.models as models  # noqa: E402

PEAK, NVLINK = 989.4e12, 450e9


@pytest.fixture(scope="module")
def tp8(open_page: Callable[[Path], Opened], tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[Opened, Any, Path]]:
    a = models.analyze_model("llama-3-70b", "dgx-h100", "decode", batch=64, seq=8192, split=Split(tp=8))
    path = tmp_path_factory.mktemp("tp8") / "llama-3-70b-tp8.html"
    write_model_outputs(model_scenarios(a), html=str(path), title=a.title)
    opened = open_page(path)
    yield opened, a, path
    opened.page.close()


def test_tp8_page_loads_offline_without_errors(tp8: tuple[Opened, Any, Path], artifacts: Path) -> None:
    opened, a, path = tp8
    assert path.stat().st_size < 6 * 2**20
    assert opened.console_errors == []
    assert opened.requests == [opened.url]
    assert opened.page.locator("#kernels-table tbody tr").count() == len(a.placements)
    opened.page.click("#all")
    opened.page.screenshot(path=str(artifacts / "llama-3-70b-tp8.png"), full_page=True)
    assert opened.console_errors == []


def test_tp8_page_draws_the_link_roof_trace(tp8: tuple[Opened, Any, Path]) -> None:
    opened, _, _ = tp8
    trace = opened.page.evaluate("""() => {
        const t = document.getElementById('chart').data.find(d => d.name === 'link roof');
        return t ? {x: Array.from(t.x), y: Array.from(t.y), dash: t.line.dash} : null; }""")
    assert trace is not None
    assert trace["x"][-1] == pytest.approx(PEAK / NVLINK) and trace["y"][-1] == pytest.approx(PEAK)
    assert trace["y"][0] == pytest.approx(NVLINK * trace["x"][0])
    # the slope is drawn on screen: plotly rendered a path for it
    assert opened.page.locator("#chart .scatterlayer .trace path.js-line").count() >= 2
    labels = opened.page.eval_on_selector_all("#chart .annotation-text", "els => els.map(e => e.textContent)")
    assert "link slope: NVLink 4 through NVSwitch 450 GB/s × I" in labels
    note = opened.page.locator("#link-note")
    assert note.is_visible() and "Purple: collectives" in (note.text_content() or "")


def test_tp8_page_steps_onto_a_collective_at_its_link_intensity(tp8: tuple[Opened, Any, Path]) -> None:
    opened, a, _ = tp8
    page = opened.page
    n = [p.name for p in a.placements].index("attn.all_reduce") + 1
    page.evaluate(f"() => window.roofline.setStep({n})")
    info = opened.info()
    assert info["name"] == f"{n}. attn.all_reduce ×80"
    assert info["intensity"] == "0.25 FLOP/B on the link"
    assert info["bound"] == "communication-bound"
    assert page.get_attribute("#info", "class") == "communication"
    current = page.evaluate("() => { const t = document.getElementById('chart').data.find(d => d.name === 'current');"
                            " return [t.x[0], t.y[0]]; }")
    assert current[0] == pytest.approx(0.25)
    # two-shot over 8 (1 MiB: above 256 KiB), 2 · 7/8 · S on the link, α 2.4 µs (dgx-h100's measured floor)
    assert current[1] == pytest.approx(458_752 / (2.4e-6 + 1_835_008 / NVLINK))
    assert opened.console_errors == []


def test_tp8_page_shows_the_per_device_panel(tp8: tuple[Opened, Any, Path]) -> None:
    opened, a, _ = tp8
    page = opened.page
    assert page.locator("#device").is_visible()
    assert page.text_content("#device-title") == "per device: TP 8 on dgx-h100"
    rows = dict(page.eval_on_selector_all("#device-table tr", "trs => trs.map(r => [r.cells[0].textContent, "
                                                              "r.cells[1].textContent])"))
    assert rows["devices"] == "8 (TP 8 on dgx-h100)"
    assert rows["step time"] == format_time(a.time_s)
    comm = sum(p.total_time_s for p in a.placements if p.bound_class is Bound.COMMUNICATION)
    assert rows["communication-bound"].startswith(format_time(comm))
    assert {"weights", "KV cache", "workspace", "memory per device"} <= set(rows)
    # memory held in binary units, as the terminal prints it: (141.1 GB of weights + 171.8 GB of KV cache,
    # 327,680 B × 64 × 8192) / 8 = 39.1 GB = 36.4 GiB, of 0.9 × 80 GiB = 72 GiB usable
    assert rows["memory per device"].startswith("36.4 GiB of 72 GiB usable: fits")
    assert rows["KV cache"] == "20 GiB"  # 171.8e9 / 8 / 2**30
    assert page.locator("#device-bar span.communication").count() == 1
    # switching the fusion plan keeps the panel, with that plan's times
    page.click("button[data-dim='plan'][data-value='none']")
    rows = dict(page.eval_on_selector_all("#device-table tr", "trs => trs.map(r => [r.cells[0].textContent, "
                                                              "r.cells[1].textContent])"))
    assert rows["step time"] == format_time(a.plans["none"].time_s)
    assert opened.console_errors == []


def test_a_page_on_one_device_hides_the_panel(open_page: Callable[[Path], Opened], tmp_path: Path) -> None:
    a = models.analyze_model("llama-3-8b", "h100", "decode", batch=8, seq=1024)
    path = tmp_path / "one.html"
    write_model_outputs(model_scenarios(a), html=str(path), title=a.title)
    opened = open_page(path)
    try:
        assert not opened.page.locator("#device").is_visible()
        assert not opened.page.locator("#link-note").is_visible()
        names = opened.page.evaluate("() => document.getElementById('chart').data.map(d => d.name)")
        assert "link roof" not in names
        assert opened.console_errors == [] and opened.requests == [opened.url]
    finally:
        opened.page.close()
