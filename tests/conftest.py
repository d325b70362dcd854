"""Browser fixtures: Debian's chromium driven by Python playwright (never `playwright install`).

`browser` is one headless Chromium for the session; `open_page(path)` opens a page from disk and
records every request (refusing all but the page's own file:// URL) and every console error.
`artifacts` is test-artifacts/ (gitignored), where screenshots are kept.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# CI draws the same hypothesis examples every run (derandomize: a seed from each test's own source), so a
# run's verdict does not depend on luck; a local run keeps drawing new ones
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# In CI (CI=true) nothing may pass by skipping: a skipped test is excused only if it carries the `gpu`
# marker (it needs a CUDA GPU the machine may not have). Any other skip (chromium, playwright or torch
# missing, a module skipped whole at collection) fails the run, whatever its reason says.
_SKIPPED: list[str] = []


def _skip_reason(report: Any) -> str:
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_collectreport(report: Any) -> None:
    # a module skipped at collection (importorskip at its top) carries no test's marker: never excused
    if report.skipped:
        _SKIPPED.append(f"{report.nodeid}: {_skip_reason(report)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    if report.skipped and item.get_closest_marker("gpu") is None:
        _SKIPPED.append(f"{report.nodeid}: {_skip_reason(report)}")
    return report


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    # the quick loop runs without torch: a test marked `torch` is skipped with the reason, never failed;
    # in CI (torch installed by scripts/test.sh) nothing is skipped, and a skip would fail the run above
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="needs torch: pip install -e '.[torch]' (torch==2.13.0), as scripts/test.sh does")
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if os.environ.get("CI") and _SKIPPED and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("CI") and _SKIPPED:
        terminalreporter.write_line("CI=true, yet tests without the gpu marker were skipped (this run fails):",
                                    red=True)
        for line in _SKIPPED:
            terminalreporter.write_line(f"  {line}")


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@dataclass
class Opened:
    """A page opened from disk, with what it asked for and what it complained about."""

    page: Any
    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    load_s: float = 0.0

    def shown(self) -> int:
        """How many kernel points the chart draws now (trace 'kernels'; null points are not drawn)."""
        return int(self.page.evaluate("""() => {
            const d = document.getElementById('chart').data.find(t => t.name === 'kernels');
            return d.x.filter(v => v !== null && v !== undefined).length; }"""))

    def info(self) -> dict[str, str]:
        """The current kernel's panel: its name and each data-field cell."""
        return dict(self.page.evaluate("""() => {
            const o = {name: document.getElementById('info-name').textContent};
            document.querySelectorAll('#info [data-field]').forEach(e => o[e.dataset.field] = e.textContent);
            return o; }"""))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="python playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (scripts/test.sh installs it)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def open_page(browser: Any) -> Callable[[Path], Opened]:
    def open_(path: Path) -> Opened:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        opened = Opened(page, path.resolve().as_uri())
        # every request is recorded; any but the page itself is refused, so a page that tried to
        # reach the network fails the test instead of waiting on it
        page.route("**/*", lambda r: r.continue_() if r.request.url == opened.url else r.abort())
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("console", lambda m: opened.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: opened.console_errors.append(str(e)))
        t0 = time.perf_counter()
        page.goto(opened.url)
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        opened.load_s = time.perf_counter() - t0
        return opened

    return open_


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = Path(__file__).resolve().parents[1] / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a pipe: no $COLUMNS, stdout not a terminal (as under capsys): every table at full width."""
    monkeypatch.delenv("COLUMNS", raising=False)
