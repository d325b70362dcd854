"""Charts and the interactive page for Llama 3 70B on an H100: build time, size, and render time.

Targets (issue 4): the decode page under 6 MB and rendered in under 3 s in headless Chromium
(Debian's chromium, the test flags). Measured here: building the page (prefill and decode, three
fusion plans each, in one page) and the static PNG/SVG in Python; the page's size; and in the
browser, from navigation until the page's script has drawn the first step (body[data-ready]), and
one step of the slider. Usage: python bench/bench_html.py [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_BYTES = 6 * 2**20
MAX_RENDER_S = 3.0
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def fmt(ts: list[float]) -> str:
    return f"min {min(ts) * 1e3:.0f} ms, median {statistics.median(ts) * 1e3:.0f} ms over {len(ts)} runs"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from roofline.models import analyze_model
    from roofline.report.charts.roofline import figure_bytes
    from roofline.report.notebook import model_scenarios
    from roofline.report.outputs import model_figure, model_html

    decode = analyze_model("llama-3-70b", "h100", "decode", batch=64, seq=8192)
    prefill = analyze_model("llama-3-70b", "h100", "prefill", batch=1, seq=8192)
    pages = {
        "decode (3 plans)": (model_scenarios(decode), decode.title),
        "prefill + decode (6 scenarios)": ([*model_scenarios(prefill), *model_scenarios(decode)],
                                           "llama-3-70b on H100"),
    }
    lines = [f"# bench_html: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"]
    ok = True
    tmp = Path(tempfile.mkdtemp(prefix="bench_html_"))
    files: dict[str, Path] = {}
    for name, (scenarios, title) in pages.items():
        ts, text = timed(lambda s=scenarios, t=title: model_html(s, title=t), args.runs)
        size = len(text.encode())
        ok &= size < MAX_BYTES
        kernels = sum(len(s.analysis.placements) for s in scenarios)
        lines.append(f"page, llama-3-70b {name}, {kernels} kernels: build {fmt(ts)}; "
                     f"{size / 2**20:.2f} MiB ({size:,} B); target < 6 MiB: {'OK' if size < MAX_BYTES else 'OVER'}")
        files[name] = tmp / f"{len(files)}.html"
        files[name].write_text(text)
    for fmt_name in ("png", "svg"):
        ts, data = timed(lambda f=fmt_name: figure_bytes(model_figure(model_scenarios(decode)), f), args.runs)
        lines.append(f"static chart, decode, {fmt_name}: {fmt(ts)}; {len(data):,} B")

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        lines.append("browser: python playwright is not installed; render time not measured")
    else:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for name, path in files.items():
                renders, steps = [], []
                for _ in range(args.runs):
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    requests: list[str] = []
                    page.on("request", lambda r, out=requests: out.append(r.url))
                    t0 = time.perf_counter()
                    page.goto(path.as_uri())
                    page.wait_for_selector("body[data-ready='1']")
                    renders.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    page.click("#next")
                    page.wait_for_function("() => window.roofline.state.step === 2")
                    steps.append(time.perf_counter() - t0)
                    page.close()
                    ok &= requests == [path.as_uri()]
                worst = max(renders)
                ok &= worst < MAX_RENDER_S
                lines.append(f"browser, {name}: render {fmt(renders)}, worst {worst:.2f} s, target < 3 s: "
                             f"{'OK' if worst < MAX_RENDER_S else 'OVER'}; one step {fmt(steps)}; "
                             f"requests besides the page: {len(requests) - 1}")
            browser.close()
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
