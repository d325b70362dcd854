"""Chart and page outputs for the CLI and the library: the contract between the analyses and the charts.

CONTRACT (other modules call these; keep the signatures):

- `Scenario(label, analysis, phase, plan, device=None)`: one analysis to draw; `analysis` is a core
  `GraphAnalysis` whose placements are in execution order; `device` (a `DeviceShare`) is one device's
  share of a step split over devices, for the page's per-device panel. Collectives (kernels with bytes
  on Level.LINK or Level.NETWORK) are drawn under their link's roof on the chart and the page alike.
- `write_model_outputs(scenarios, png=, svg=, html=, title=)`: static roofline chart of the first
  scenario's kernels (PNG/SVG) and the interactive page with a switch between all scenarios
  (HTML). Returns the paths written. Every path is checked before anything is drawn, and the files
  are renamed into place together (fileio.writing_together); RooflineError on a bad path.
- `write_sweep_chart(rows, x, png=, svg=, ridge=, limit=, title=)`: rows are dicts with at least
  the key named by `x` (e.g. "batch") and "flop_per_byte"; draws intensity against x, the ridge
  as a horizontal line and the decode limit (if given) as an asymptote. Rows that also carry the
  step time add a second panel, the step time broken down by kernel with memory-bound and
  compute-bound time told apart; each row may give it as any one of
  "analysis" (a GraphAnalysis), "kernels" (a list of Placement.to_dict()-style dicts with "name",
  "bound" and "total_time_s") or "time_s" with "memory_bound_time_s" (totals only).

- `model_figure(scenarios, title=)` -> matplotlib Figure of the first scenario (for `.plot()`).
- `model_html(scenarios, title=)` -> str, the self-contained interactive page (for `_repr_html_`
  and `--html`).

Also here, for the `kernel` command and notebooks: `write_kernel_outputs` (every scenario's
kernels on one static chart, e.g. naive and fused attention side by side), `write_roofs_chart`
(several machines or precisions on one chart) and `notebook_html`
(the page inside an iframe, so that several pages in one notebook do not share ids or styles).

matplotlib and plotly are imported inside the functions that draw, so that importing this module
(the CLI does, to parse options) costs nothing.
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.fileio import atomic_write, check_outputs, writing_together
from roofline.report.points import Scenario
from roofline.units import (
    format_time,
)

if TYPE_CHECKING:
    from roofline.hardware import Machine


def _check(scenarios: Sequence[Scenario]) -> None:
    if not scenarios:
        raise RooflineError("nothing to draw: no scenario given")
    for s in scenarios:
        if not isinstance(s, Scenario):
            raise RooflineError(f"expected a Scenario, got {type(s).__name__}")


def _write_chart(fig: Any, path: str, fmt: str) -> Path:
    from roofline.report.charts.roofline import figure_bytes

    return atomic_write(path, figure_bytes(fig, fmt))


# --- the contract ------------------------------------------------------------------------------------

def _write_figure(fig: Any, png: str | None, svg: str | None) -> list[Path]:
    """The figure as PNG and/or SVG, each rendered in memory and written atomically."""
    written = [_write_chart(fig, png, "png")] if png is not None else []
    if svg is not None:
        written.append(_write_chart(fig, svg, "svg"))
    return written


def _paths(png: str | None = None, svg: str | None = None, html: str | None = None) -> None:
    """Every path checked before anything is drawn (fileio.check_outputs): a bad last one fails first."""
    check_outputs({"png": png, "svg": svg, "html": html})


def write_model_outputs(scenarios: Sequence[Scenario], *, png: str | None = None, svg: str | None = None,
                        html: str | None = None, title: str = "") -> list[Path]:
    """The first scenario's roofline as PNG/SVG and the page with every scenario as HTML.

    Each output is rendered in memory first and then written atomically, so an unwritable path
    raises RooflineError and never leaves a truncated file in place of a good one."""
    _check(scenarios)
    _paths(png, svg, html)
    written: list[Path] = []
    with writing_together():  # all files or none
        if png is not None or svg is not None:
            fig = model_figure(scenarios, title=title)
            written += _write_figure(fig, png, svg)
        if html is not None:
            written.append(atomic_write(html, model_html(scenarios, title=title)))
    return written


def write_kernel_outputs(scenarios: Sequence[Scenario], *, png: str | None = None, svg: str | None = None,
                         html: str | None = None, title: str = "") -> list[Path]:
    """Like `write_model_outputs`, but the static chart shows every scenario's kernels together
    (naive and fused attention as separate points), each named with its scenario's label."""
    _check(scenarios)
    _paths(png, svg, html)
    with writing_together():  # all files or none
        return _kernel_outputs(scenarios, png, svg, html, title)


def _kernel_outputs(scenarios: Sequence[Scenario], png: str | None, svg: str | None, html: str | None,
                    title: str) -> list[Path]:
    written: list[Path] = []
    if png is not None or svg is not None:
        from roofline.report.charts.roofline import roofline_figure

        multi = len(scenarios) > 1
        placements = [p for s in scenarios for p in s.analysis.placements]
        names = [f"{s.label}: {p.name}" if multi else p.name for s in scenarios for p in s.analysis.placements]
        first = scenarios[0].analysis
        sub = None
        if multi:
            sub = (f"{first.machine.name} · {first.dtype.name} · time floor "
                   + ", ".join(f"{s.label} {format_time(s.analysis.time_s)}" for s in scenarios))
        fig = roofline_figure(placements, machine=first.machine, dtype=first.dtype, names=names, title=title,
                              subtitle=sub, shares=not multi)
        written += _write_figure(fig, png, svg)
    if html is not None:
        written.append(atomic_write(html, model_html(scenarios, title=title)))
    return written


def write_sweep_chart(rows: Sequence[Mapping[str, Any]], x: str, *, png: str | None = None, svg: str | None = None,
                      ridge: float, limit: float | None = None, title: str = "", series: str | None = None
                      ) -> list[Path]:
    """Intensity against `x` with the ridge and the decode limit; the step-time breakdown below
    it when the rows carry times; one line set per value of `series` (e.g. "machine"). Written
    atomically; RooflineError on a bad path."""
    from roofline.report.charts.sweep import sweep_figure

    _paths(png, svg)
    fig = sweep_figure(rows, x, ridge=ridge, limit=limit, title=title, series=series)
    with writing_together():
        return _write_figure(fig, png, svg)


def write_roofs_chart(roofs: Sequence[tuple[Machine | str, str | None]], *, png: str | None = None,
                      svg: str | None = None, title: str = "") -> list[Path]:
    """Several machines or precisions on one chart: [("a100", "bf16"), ("h100", "bf16"), ("b200", "bf16")]
    or [("b200", "bf16"), ("b200", "fp8"), ("b200", "fp4")]. Written atomically."""
    from roofline.report.charts.roofline import roofs_figure

    _paths(png, svg)
    fig = roofs_figure(roofs, title=title)
    with writing_together():
        return _write_figure(fig, png, svg)


def model_figure(scenarios: Sequence[Scenario], *, title: str = "") -> Any:
    """The static roofline (matplotlib Figure) of the first scenario's kernels."""
    _check(scenarios)
    from roofline.report.charts.roofline import roofline_figure

    s = scenarios[0]
    a = s.analysis
    head = title or (f"{s.label} on {a.machine.name}" if s.label else f"{a.machine.name}")
    return roofline_figure(list(a.placements), machine=a.machine, dtype=a.dtype, title=head, plan=s.plan or a.plan)


def model_html(scenarios: Sequence[Scenario], *, title: str = "") -> str:
    """The self-contained interactive page (plotly.js inlined, no network request)."""
    _check(scenarios)
    from roofline.report.page.roofline import page

    return page(scenarios, title=title)


def notebook_html(scenarios: Sequence[Scenario], *, title: str = "", height_px: int = 900) -> str:
    """The page in an iframe (srcdoc), for `_repr_html_`: its ids, styles and scripts stay its own."""
    doc = model_html(scenarios, title=title)
    return (f'<iframe srcdoc="{_html.escape(doc, quote=True)}" style="width:100%;height:{height_px}px;border:0" '
            f'sandbox="allow-scripts"></iframe>')


def write_train_outputs(a: Any, *, png: str | None = None, html: str | None = None) -> list[Path]:
    """A training step's chart (roofline.report.charts.train: its kernels on the roofline by pass, the
    step's breakdown) as PNG, and its interactive page (roofline.report.page.train) as HTML; each
    rendered in memory and written together. `a` is a `roofline.training.TrainAnalysis`."""
    _paths(png, None, html)
    written: list[Path] = []
    with writing_together():
        if png is not None:
            from roofline.report.charts.roofline import figure_bytes
            from roofline.report.charts.train import train_figure

            written.append(atomic_write(png, figure_bytes(train_figure(a), "png")))
        if html is not None:
            from roofline.report.page.train import train_page

            written.append(atomic_write(html, train_page(a)))
    return written


def write_serve_outputs(report: Any, *, png: str | None = None, svg: str | None = None,
                        html: str | None = None) -> list[Path]:
    """The serving report's throughput-against-latency chart (one point per batch, the knee, the memory
    limit and the ITL target) as PNG/SVG, and its self-contained page (the same chart with hover, and
    the summary numbers) as HTML. `report` is a `roofline.serving.ServingReport`. Each output is
    rendered in memory and written atomically; RooflineError on a bad path."""
    _paths(png, svg, html)
    written: list[Path] = []
    with writing_together():  # all files or none
        if png is not None or svg is not None:
            from roofline.report.charts.serve import serve_figure

            written += _write_figure(serve_figure(report), png, svg)
        if html is not None:
            from roofline.report.page.serve import serve_page

            written.append(atomic_write(html, serve_page(report)))
    return written
