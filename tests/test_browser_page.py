"""The page as a newcomer meets it, in headless Chromium: it opens on every kernel, steps with the
keyboard, hides the stepper when there is one kernel, keeps its labels inside the plot and apart at
900 px, and runs under a Content-Security-Policy of script hashes with no violation (a page whose
script was altered after it was written is refused, which shows the policy is live)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from roofline.graph import Graph, Op, tensor
from roofline.kernels import elementwise_op, matmul_op, norm_op
from roofline.placement import analyze_graph
from roofline.report.outputs import Scenario, write_kernel_outputs, write_model_outputs
from roofline.vocab import Role, Unit

if TYPE_CHECKING:
    from conftest import Opened

pytestmark = pytest.mark.browser


def _step_graph(tokens: int = 16, hidden: int = 4096, vocab: int = 32000) -> Graph:
    """A decode step in miniature: an embedding gather with no FLOPs first (as every model's step
    starts), then a norm, a projection, a residual add and the LM head."""
    ids = tensor("ids", (tokens,), "int32")
    table = tensor("embedding.weight", (vocab, hidden), "bf16", Role.WEIGHT)
    x = tensor("x", (tokens, hidden), "bf16")
    g = tensor("norm.gain", (hidden,), "bf16", Role.WEIGHT)
    xn = tensor("xn", (tokens, hidden), "bf16")
    w = tensor("w", (hidden, hidden), "bf16", Role.WEIGHT)
    y = tensor("y", (tokens, hidden), "bf16")
    h = tensor("h", (tokens, hidden), "bf16")
    head = tensor("lm_head.weight", (hidden, vocab), "bf16", Role.WEIGHT)
    logits = tensor("logits", (tokens, vocab), "bf16")
    return Graph([
        Op("embedding", "gather", (ids, table), (x,), {Unit.MATRIX: 0.0}, formula="0 (a gather)"),
        norm_op("norm", "rmsnorm", x, g, xn),
        matmul_op("proj", xn, w, y),
        elementwise_op("residual", "add", (x, y), h),
        matmul_op("lm_head", h, head, logits),
    ], name="step")


@pytest.fixture(scope="module")
def step_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("step") / "step.html"
    write_model_outputs([Scenario("decode · none", analyze_graph(_step_graph(), "h100", "bf16"), phase="decode",
                                  plan="none")], html=str(path), title="a decode step in miniature")
    return path


@pytest.fixture
def step(open_page: Callable[[Path], Opened], step_page: Path) -> Iterator[Opened]:
    opened = open_page(step_page)
    yield opened
    assert opened.console_errors == [] and opened.requests == [opened.url]
    opened.page.close()


def test_the_page_opens_on_every_kernel(step: Opened) -> None:
    page = step.page
    # five kernels, the embedding (0 FLOPs) not drawn: four points on the chart from the start
    assert page.input_value("#step") == "5"
    assert step.shown() == 4
    # the panel shows kernel 5 while the label says all 5 are drawn: the label names both (issue 24)
    assert page.text_content("#step-label") == "all 5 kernels; below, kernel 5 (the last)"
    assert step.info()["name"] == "5. lm_head"


def test_arrow_keys_step_and_home_end_jump(step: Opened) -> None:
    page = step.page
    page.click("h1")  # focus on the page, not a control
    page.keyboard.press("ArrowLeft")
    assert page.input_value("#step") == "4" and step.shown() == 3
    assert page.text_content("#step-label") == "kernel 4 of 5"
    page.keyboard.press("Home")
    assert page.input_value("#step") == "1" and step.shown() == 0  # the embedding: listed, not drawn
    page.keyboard.press("ArrowLeft")
    assert page.input_value("#step") == "0"  # before the first kernel, as the previous button goes
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.input_value("#step") == "2" and step.info()["name"] == "2. norm"
    page.keyboard.press("End")
    assert page.input_value("#step") == "5" and step.shown() == 4
    # on the slider its own keys step it, once per press (the page does not step it a second time)
    page.keyboard.press("Home")
    page.focus("#step")
    page.keyboard.press("ArrowRight")
    assert page.input_value("#step") == "2"


def test_a_one_kernel_page_has_nothing_to_step(open_page: Callable[[Path], Opened], tmp_path: Path) -> None:
    g = Graph([matmul_op("matmul", tensor("a", (4096, 4096), "bf16"), tensor("b", (4096, 4096), "bf16", Role.WEIGHT),
                         tensor("c", (4096, 4096), "bf16"))], name="matmul")
    path = tmp_path / "one.html"
    write_kernel_outputs([Scenario("", analyze_graph(g, "h100", "bf16"))], html=str(path))
    opened = open_page(path)
    try:
        page = opened.page
        assert not page.locator("#stepper").is_visible()
        assert not page.locator("#step-label").is_visible()  # no "kernel 1 of 1"
        assert opened.shown() == 1 and opened.info()["name"] == "1. matmul"
        page.click("h1")
        page.keyboard.press("ArrowLeft")  # nothing to step: the one kernel stays shown
        assert opened.shown() == 1
        assert opened.console_errors == []
    finally:
        opened.page.close()


# --- labels at 900 px ------------------------------------------------------------------------------

LABELS_JS = """() => {
  const gd = document.getElementById('chart'), fl = gd._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const plot = [svg.left + xa._offset, svg.top + ya._offset, svg.left + xa._offset + xa._length,
                svg.top + ya._offset + ya._length];
  const labels = Array.from(gd.querySelectorAll('.annotation')).map(a => {
    const el = a.querySelector('rect.bg'), b = el.getBBox(), m = el.getScreenCTM();
    const poly = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(p => [m.a * p[0] + m.c * p[1] + m.e, m.b * p[0] + m.d * p[1] + m.f]);
    const i = +a.getAttribute('data-index');
    return {text: a.textContent, name: fl.annotations[i].name, angle: fl.annotations[i].textangle, poly: poly};
  });
  const roof = gd.data.find(t => t.name === 'roof');
  const px = k => [xa._offset + xa.l2p(Math.log10(roof.x[k])), ya._offset + ya.l2p(Math.log10(roof.y[k]))];
  const a = px(0), b = px(1);
  return {plot: plot, labels: labels, slope: Math.atan2(b[1] - a[1], b[0] - a[0]) * 180 / Math.PI};
}"""


def _overlap(p: list[list[float]], q: list[list[float]]) -> bool:
    """Separating axes: two convex polygons overlap unless some edge's normal separates them."""
    for poly in (p, q):
        for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1], strict=True):
            nx, ny = y0 - y1, x1 - x0
            a = [nx * x + ny * y for x, y in p]
            b = [nx * x + ny * y for x, y in q]
            if max(a) <= min(b) or max(b) <= min(a):
                return False
    return True


def _open_at(browser: Any, path: Path, width: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 1000})
    url = path.resolve().as_uri()
    page.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    page.wait_for_selector("#chart[data-labels]", timeout=10_000)
    return page, errors


@pytest.fixture(scope="module")
def tp8_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Llama 3 70B decode under TP 8: the most labels a page draws (roof, ridge, DRAM slope, NVLink slope,
    vector peak)."""
    models = pytest.importorskip("roofline.models")
    from roofline.parallel import Split
    from roofline.report.notebook import model_scenarios

    a = models.analyze_model("llama-3-70b", "h100", "decode", batch=64, seq=8192, split=Split(tp=8))
    path = tmp_path_factory.mktemp("tp8") / "tp8.html"
    write_model_outputs(model_scenarios(a), html=str(path), title=a.title)
    return path


@pytest.mark.parametrize("width", [900, 640])
def test_labels_stay_inside_the_plot_and_apart(browser: Any, tp8_page: Path, artifacts: Path, width: int) -> None:
    page, errors = _open_at(browser, tp8_page, width)
    try:
        got = page.evaluate(LABELS_JS)
        page.screenshot(path=str(artifacts / f"tp8-labels-{width}.png"))
        left, top, right, bottom = got["plot"]
        labels = got["labels"]
        assert {lab["name"] for lab in labels} == {"roof-label", "ridge-label", "slope-label", "link-slope-label",
                                                  "ceiling-label"}
        for lab in labels:  # every corner inside the plot area (1 px for rounding)
            for x, y in lab["poly"]:
                assert left - 1 <= x <= right + 1 and top - 1 <= y <= bottom + 1, (lab["text"], got["plot"])
        for a, b in itertools.combinations(labels, 2):
            assert not _overlap(a["poly"], b["poly"]), (a["text"], b["text"])
        # the slope labels run at the angle the slope has on screen at this width
        for lab in labels:
            if lab["name"] in ("slope-label", "link-slope-label"):
                assert lab["angle"] == pytest.approx(got["slope"], abs=0.5)
        assert -90 < got["slope"] < -30  # a real slope: one decade up per decade right, on this plot's aspect
        assert errors == []
    finally:
        page.close()


# --- the policy is live ------------------------------------------------------------------------------

RECORD_VIOLATIONS = """window.__csp = [];
document.addEventListener('securitypolicyviolation',
                          e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


def test_no_policy_violation_and_a_tampered_script_is_refused(browser: Any, step_page: Path, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.add_init_script(RECORD_VIOLATIONS)
    try:
        page.goto(step_page.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        assert page.evaluate("() => window.__csp") == []
        # the chart rendered: plotly drew the roof, the ridge and the four kernels' points
        assert page.locator("#chart .main-svg").count() >= 1
        assert page.locator("#chart .scatterlayer .trace").count() >= 3
        assert page.evaluate("() => document.getElementById('chart').data.length") >= 6
    finally:
        page.close()
    # one character of the page's script changed after the page was written: its hash no longer matches
    text = step_page.read_text(encoding="utf-8")
    tampered = tmp_path / "tampered.html"
    tampered.write_text(text.replace('"use strict";', '"use strict" ;', 1), encoding="utf-8")
    assert tampered.read_text(encoding="utf-8") != text
    page = browser.new_page()
    page.add_init_script(RECORD_VIOLATIONS)
    try:
        page.goto(tampered.resolve().as_uri())
        page.wait_for_timeout(500)
        assert any(v.startswith("script-src") for v in page.evaluate("() => window.__csp"))
        assert page.get_attribute("body", "data-ready") is None  # the script never ran
    finally:
        page.close()


def test_serve_page_runs_without_a_policy_violation(browser: Any, tmp_path: Path) -> None:
    serving = pytest.importorskip("roofline.serving")
    from roofline.report.outputs import write_serve_outputs

    report = serving.serve_model("llama-3-8b", "h100", prompt=512, output=64)
    path = tmp_path / "serve.html"
    write_serve_outputs(report, html=str(path))
    page = browser.new_page()
    page.add_init_script(RECORD_VIOLATIONS)
    try:
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        assert page.evaluate("() => window.__csp") == []
        points = page.evaluate("() => document.getElementById('chart').data.find(t => t.name === 'batches').x.length")
        assert points == len(report.curve)
        assert math.isfinite(report.itl_mean.floor)
    finally:
        page.close()
