"""Chart and page outputs for the CLI and the library: the contract between the analyses and the charts.

CONTRACT (other modules call these; keep the signatures):

- `Scenario(label, analysis, phase, plan)`: one analysis to draw; `analysis` is a core
  `GraphAnalysis` whose placements are in execution order.
- `write_model_outputs(scenarios, png=, svg=, html=, title=)`: static roofline chart of the first
  scenario's kernels (PNG/SVG) and the interactive page with a switch between all scenarios
  (HTML). Returns the paths written. Writes atomically; raises RooflineError on a bad path.
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

Layering: a report module. matplotlib and plotly are imported inside the functions that draw, so
that importing this module (the CLI does, to parse options) costs nothing.
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.analysis import GraphAnalysis, Placement
from roofline.errors import RooflineError
from roofline.fileio import atomic_write
from roofline.units import (
    format_bytes,
    format_bytes_per_s,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_time,
)


@dataclass(frozen=True)
class Scenario:
    label: str  # e.g. "decode · flash"
    analysis: GraphAnalysis
    phase: str = ""  # "prefill" | "decode" | ""
    plan: str = ""  # "none" | "flash" | "fused" | "naive" | ""


# --- what a point is: shared by the static charts and the page -------------------------------------

def on_chart(p: Placement) -> bool:
    """A kernel has a point on log-log axes only if it has FLOPs and bytes (a pure copy has no
    FLOPs, a kernel moving no bytes has infinite intensity); the others are listed, not drawn."""
    return p.flop > 0 and p.bytes > 0 and math.isfinite(p.flop_per_byte)


def point_xy(p: Placement) -> tuple[float, float]:
    """(intensity I in FLOP/byte, attainable FLOP/s = FLOPs / time floor): where the kernel sits."""
    return p.flop_per_byte, p.attainable_flop_per_s


def measured_xy(p: Placement) -> tuple[float, float] | None:
    """(I, achieved FLOP/s = FLOPs / measured time): the measured point, straight below (or, if
    the model or the measurement is wrong, above) the predicted one."""
    achieved = p.achieved_flop_per_s
    if achieved is None or not on_chart(p):
        return None
    return p.flop_per_byte, achieved


def secondary_ceilings(placements: Sequence[Placement], peak_key: str, peak_flop_per_s: float
                       ) -> list[tuple[str, str, float]]:
    """Ceilings besides the main matrix roof that some kernels run under, as (kind, label, FLOP/s):
    the matrix peak of another precision (an fp8 matmul in a bf16 model) and the vector peak (norms,
    softmax, elementwise work), the latter only where it is below the main roof."""
    out: dict[str, tuple[str, str, float]] = {}
    for p in placements:
        key = p.dtype.peak_key
        if key != peak_key and p.roof_flop_per_s != peak_flop_per_s:
            out.setdefault(f"matrix-{key}", ("matrix", f"{key} peak", p.roof_flop_per_s))
    vector = [p.peak_by_unit["vector"] for p in placements
              if p.cost.flop_by_unit.get("vector") and "vector" in p.peak_by_unit]
    if vector and min(vector) < peak_flop_per_s:
        out["vector"] = ("vector", "vector peak", min(vector))
    return sorted(out.values(), key=lambda t: -t[2])


def floor_term(p: Placement) -> str:
    """The term that sets the time floor, with its numbers: '134 MB / 3.35 TB/s = 40 µs'."""
    lim = p.limiter
    if lim in p.level_times_s:
        return (f"{format_bytes(p.cost.bytes_by_level[lim])} / {format_bytes_per_s(p.bandwidth_by_level[lim])}"
                f" = {format_time(p.time_s)}")
    if lim in p.unit_times_s:
        return (f"{format_flop(p.cost.flop_by_unit[lim])} / {format_flop_per_s(p.peak_by_unit[lim])} ({lim})"
                f" = {format_time(p.time_s)}")
    return format_time(p.time_s)


def derivation_line(p: Placement) -> str:
    """One line from the FLOP formula to the bound and the floor, numbers put in."""
    formula = p.kernel.formula if p.kernel is not None and p.kernel.formula else ""
    head = f"FLOPs {formula} = {format_flop(p.flop)}" if formula else f"FLOPs = {format_flop(p.flop)}"
    if not on_chart(p):
        return f"{head}; bytes = {format_bytes(p.bytes)}; floor = {floor_term(p)} (not on the log-log chart)"
    cmp = ">" if p.bound == "compute" else "≤"
    return (f"{head}; I = {format_flop(p.flop)} / {format_bytes(p.bytes)} = {format_intensity(p.flop_per_byte)} "
            f"{cmp} ridge {format_intensity(p.ridge_flop_per_byte)} → {p.bound}-bound; floor = {floor_term(p)}")


def measured_note(p: Placement) -> str:
    """'measured 52 µs = 77% of the roof' or the ABOVE THE ROOF flag; '' if not measured."""
    frac = p.fraction_of_roof
    if p.measured_time_s is None or frac is None:
        return ""
    text = f"measured {format_time(p.measured_time_s)} = {frac:.0%} of the roof"
    if p.above_roof:
        text += " — ABOVE THE ROOF: the model or the measurement is wrong"
    return text


def _check(scenarios: Sequence[Scenario]) -> None:
    if not scenarios:
        raise RooflineError("nothing to draw: no scenario given")
    for s in scenarios:
        if not isinstance(s, Scenario):
            raise RooflineError(f"expected a Scenario, got {type(s).__name__}")


def _write_chart(fig: Any, path: str, fmt: str) -> Path:
    from roofline.report.charts import figure_bytes

    return atomic_write(path, figure_bytes(fig, fmt))


# --- the contract ------------------------------------------------------------------------------------

def _write_figure(fig: Any, png: str | None, svg: str | None) -> list[Path]:
    """The figure as PNG and/or SVG, each rendered in memory and written atomically."""
    written = [_write_chart(fig, png, "png")] if png else []
    if svg:
        written.append(_write_chart(fig, svg, "svg"))
    return written


def write_model_outputs(scenarios: Sequence[Scenario], *, png: str | None = None, svg: str | None = None,
                        html: str | None = None, title: str = "") -> list[Path]:
    """The first scenario's roofline as PNG/SVG and the page with every scenario as HTML.

    Each output is rendered in memory first and then written atomically, so an unwritable path
    raises RooflineError and never leaves a truncated file in place of a good one."""
    _check(scenarios)
    written: list[Path] = []
    if png or svg:
        fig = model_figure(scenarios, title=title)
        written += _write_figure(fig, png, svg)
    if html:
        written.append(atomic_write(html, model_html(scenarios, title=title)))
    return written


def write_kernel_outputs(scenarios: Sequence[Scenario], *, png: str | None = None, svg: str | None = None,
                         html: str | None = None, title: str = "") -> list[Path]:
    """Like `write_model_outputs`, but the static chart shows every scenario's kernels together
    (naive and fused attention as separate points), each named with its scenario's label."""
    _check(scenarios)
    written: list[Path] = []
    if png or svg:
        from roofline.report.charts import roofline_figure

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
    if html:
        written.append(atomic_write(html, model_html(scenarios, title=title)))
    return written


def write_sweep_chart(rows: Sequence[Mapping[str, Any]], x: str, *, png: str | None = None, svg: str | None = None,
                      ridge: float, limit: float | None = None, title: str = "") -> list[Path]:
    """Intensity against `x` with the ridge and the decode limit; the step-time breakdown below
    it when the rows carry times. Written atomically; RooflineError on a bad path."""
    from roofline.report.charts import sweep_figure

    fig = sweep_figure(rows, x, ridge=ridge, limit=limit, title=title)
    return _write_figure(fig, png, svg)


def write_roofs_chart(roofs: Sequence[tuple[str, str | None]], *, png: str | None = None, svg: str | None = None,
                      title: str = "") -> list[Path]:
    """Several machines or precisions on one chart: [("a100", "bf16"), ("h100", "bf16"), ("b200", "bf16")]
    or [("b200", "bf16"), ("b200", "fp8"), ("b200", "fp4")]. Written atomically."""
    from roofline.report.charts import roofs_figure

    fig = roofs_figure(roofs, title=title)
    return _write_figure(fig, png, svg)


def model_figure(scenarios: Sequence[Scenario], *, title: str = "") -> Any:
    """The static roofline (matplotlib Figure) of the first scenario's kernels."""
    _check(scenarios)
    from roofline.report.charts import roofline_figure

    s = scenarios[0]
    a = s.analysis
    head = title or (f"{s.label} on {a.machine.name}" if s.label else f"{a.machine.name}")
    return roofline_figure(list(a.placements), machine=a.machine, dtype=a.dtype, title=head, plan=s.plan or a.plan)


def model_html(scenarios: Sequence[Scenario], *, title: str = "") -> str:
    """The self-contained interactive page (plotly.js inlined, no network request)."""
    _check(scenarios)
    from roofline.report.html import page

    return page(scenarios, title=title)


def notebook_html(scenarios: Sequence[Scenario], *, title: str = "", height_px: int = 900) -> str:
    """The page in an iframe (srcdoc), for `_repr_html_`: its ids, styles and scripts stay its own."""
    doc = model_html(scenarios, title=title)
    return (f'<iframe srcdoc="{_html.escape(doc, quote=True)}" style="width:100%;height:{height_px}px;border:0" '
            f'sandbox="allow-scripts"></iframe>')
