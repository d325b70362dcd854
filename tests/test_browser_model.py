"""The page for a real model in headless Chromium: Llama 3 70B decode under 6 MB, rendered in under 3 s."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from roofline.report.notebook import model_scenarios
from roofline.report.outputs import write_model_outputs
from roofline.units import format_bytes

if TYPE_CHECKING:
    from conftest import Opened

pytestmark = pytest.mark.browser

import roofline.models as models  # noqa: E402


@pytest.fixture(scope="module")
def llama(open_page: Callable[[Path], Opened], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Opened, Any, Path]]:
    a = models.analyze_model("llama-3-70b", "h100", "decode", batch=1, seq=8192, plan="none")
    path = tmp_path_factory.mktemp("llama") / "llama-3-70b-decode.html"
    write_model_outputs(model_scenarios(a), html=str(path), title=a.title)
    opened = open_page(path)
    yield opened, a, path
    opened.page.close()


def test_llama_page_is_small_and_offline(llama: tuple[Opened, Any, Path], artifacts: Path) -> None:
    opened, a, path = llama
    assert path.stat().st_size < 6 * 2**20
    # the 3 s render target (navigation to the first step drawn) is bench/bench_html.py's; here only a hang
    assert opened.load_s < 30.0
    assert opened.console_errors == []
    assert opened.requests == [opened.url]
    assert opened.page.locator("#kernels-table tbody tr").count() == len(a.plans["none"].placements)
    opened.page.click("#all")
    opened.page.screenshot(path=str(artifacts / "llama-3-70b-decode.png"), full_page=True)


def test_llama_fusion_switch_changes_attention_bytes(llama: tuple[Opened, Any, Path]) -> None:
    opened, a, _ = llama
    page = opened.page
    none = {p.name: p for p in a.plans["none"].placements}
    flash = {p.name: p for p in a.plans["flash"].placements}
    page.evaluate("() => { window.roofline.setScenario(0); window.roofline.setStep(1); }")
    step = [p.name for p in a.plans["none"].placements].index("attn.qk") + 1
    page.fill("#step", str(step))
    page.dispatch_event("#step", "input")
    assert opened.shown() == step - 1  # the embedding has no FLOPs and is not drawn
    assert opened.info()["bytes"] == format_bytes(none["attn.qk"].bytes)
    page.click("button[data-dim='plan'][data-value='flash']")
    now = opened.info()
    assert now["name"].endswith("attn ×80")
    # FlashAttention in decode: the scores (1 query × 8192 keys per head) no longer cross HBM
    assert now["bytes"] == format_bytes(flash["attn"].bytes)
    assert flash["attn"].bytes < none["attn.qk"].bytes + none["attn.softmax"].bytes + none["attn.pv"].bytes
    page.click("#next")
    assert opened.info()["name"].startswith(f"{step + 1}. o_proj")
    assert opened.console_errors == []


def test_phase_and_plan_switch_are_independent(open_page: Callable[[Path], Opened], tmp_path: Path) -> None:
    prefill = models.analyze_model("llama-3-8b", "h100", "prefill", batch=1, seq=1024)
    decode = models.analyze_model("llama-3-8b", "h100", "decode", batch=8, seq=1024)
    path = tmp_path / "phases.html"
    write_model_outputs([*model_scenarios(prefill), *model_scenarios(decode)], html=str(path), title="llama-3-8b")
    opened = open_page(path)
    page = opened.page
    try:
        groups = page.eval_on_selector_all("#switch .group", "els => els.map(e => e.dataset.dim)")
        assert groups == ["phase", "plan"]
        assert page.text_content("#summary").startswith(prefill.machine.name)  # type: ignore[union-attr]
        page.click("button[data-dim='plan'][data-value='none']")
        page.click("button[data-dim='phase'][data-value='decode']")
        state = page.evaluate("() => { const s = window.roofline.data.scenarios[window.roofline.state.scenario];"
                              " return [s.phase, s.plan]; }")
        assert state == ["decode", "none"]  # the plan chosen before the phase stays chosen
        rows = page.locator("#kernels-table tbody tr").count()
        assert rows == len(decode.plans["none"].placements)
        assert opened.console_errors == [] and opened.requests == [opened.url]
    finally:
        page.close()
