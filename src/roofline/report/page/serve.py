"""The serving page: one self-contained HTML file with the throughput-against-latency chart over batch
and the serving summary (TTFT, ITL, end-to-end, throughput, the limits, cost).

Same machinery as the roofline page (report/page/roofline.py): plotly.js inlined, the data as JSON, the
template filled in one pass and the same Content-Security-Policy (its scripts by hash),
so the page makes no request of any kind. Its markup, styles and script are
roofline/report/page/serve.html, serve.css and serve.js.

The data, in `<script type="application/json" id="serve-data">`:
    {"title", "subtitle", "summary": [[what, value, note]], "curve": [{"batch", "itl_s", "itl_low_s",
     "itl_high_s", "tokens_per_s", "tokens_low", "tokens_high", "fits", "meets_itl_slo", "knee", "hover",
     "text": {...}}], "knee_batch", "max_batch_memory", "memory_limit_itl_s", "max_batch_slo", "itl_slo_s",
     "batch", "warnings", "figure": {"data": [...], "layout": {...}}}
The figure's traces: "band" (the expected band, a filled polygon), "floor" (the roofline line),
"batches" (one point per batch of the curve, hollow grey past the memory limit), "knee" and "chosen".
"""

from __future__ import annotations

import html
import math
from typing import Any

from roofline.report.charts.serve import (
    BAND_COLOUR,
    CHOSEN_COLOUR,
    FITS_COLOUR,
    KNEE_COLOUR,
    MEMORY_COLOUR,
    SLO_COLOUR,
    memory_limit_itl,
    split_label,
)
from roofline.report.page.roofline import panel_page
from roofline.report.text.serve import band, goodput_note, max_batch_formula, max_batch_note, money, rate
from roofline.serving import KNEE_GAIN, CurvePoint, ServingReport
from roofline.units import format_time

NO_FIT_HEX = "#999999"


def _point_record(r: ServingReport, p: CurvePoint) -> dict[str, Any]:
    fits = {True: "yes", False: "no: does not fit in memory", None: "memory not bounded"}[p.fits]
    text = {"itl": band(p.itl), "tokens": rate(p.throughput),
            "per_device": rate(p.throughput.scaled(1 / r.devices), "tokens/s per device"), "fits": fits}
    lines = [f"batch {p.batch}" + (" · knee" if p.batch == r.knee_batch else ""),
             f"ITL {text['itl']}", f"{text['tokens']}", f"fits: {fits}"]
    if p.meets_slo is not None:
        lines.append(f"meets the ITL SLO: {'yes' if p.meets_slo else 'no'}")
    return {"batch": p.batch, "itl_s": p.itl.floor, "itl_low_s": p.itl.low, "itl_high_s": p.itl.high,
            "tokens_per_s": p.throughput.ceiling, "tokens_low": p.throughput.low, "tokens_high": p.throughput.high,
            "fits": p.fits, "meets_itl_slo": p.meets_slo, "knee": p.batch == r.knee_batch,
            "hover": "<br>".join(html.escape(line) for line in lines), "text": text}


def _summary(r: ServingReport) -> list[list[str]]:
    rows = [["TTFT", band(r.ttft), "per request: the prompt's prefill at batch 1, no queueing"],
            ["ITL mean", band(r.itl_mean), f"over contexts {r.prompt + 1}–{r.context}"],
            ["ITL last", band(r.itl_last), f"at context {r.context}"],
            ["end-to-end", band(r.e2e), f"TTFT + {r.output - 1} × ITL mean"],
            ["throughput", rate(r.throughput), "output tokens, every replica"
             + (", pp micro-batches in flight" if r.pipeline_filled else "")],
            ["per device", rate(r.throughput_per_device), f"{r.devices} device{'s' if r.devices > 1 else ''}"]]
    if r.max_batch_memory is not None:
        rows.append(["max batch (memory)", str(r.max_batch_memory),
                     f"sequences of {r.context} tokens that fit beside the weights and the workspace "
                     + (max_batch_formula(r) if r.usable_bytes is not None else max_batch_note(r))])
    if r.itl_slo_s is not None:
        exp = r.max_batch_slo_expected
        rows.append(["max batch (ITL SLO)", str(r.max_batch_slo),
                     f"ITL mean ≤ {format_time(r.itl_slo_s)}"
                     + ("" if exp is None else f" (expected {exp[0] or '—'}–{exp[1] or '—'})")])
    if r.ttft_slo_s is not None:
        rows.append(["TTFT SLO", format_time(r.ttft_slo_s), ("met at the floor" if r.ttft_met else "missed")
                     + ("" if r.ttft.high <= r.ttft_slo_s else f"; the expected high {format_time(r.ttft.high)} "
                                                               f"misses it")])
    if r.goodput is not None:
        rows.append(["goodput", rate(r.goodput), goodput_note(r)])
    if r.cost_input is not None and r.cost_output is not None:
        rows.append(["cost / 1M input", money(r.cost_input), f"at {r.price_per_device_hour:g} per device-hour"])
        rows.append(["cost / 1M output", money(r.cost_output), f"at batch {r.batch}"])
    rows.append(["knee", "past the curve" if r.knee_batch is None else f"batch {r.knee_batch}",
                 f"doubling the batch past it gains < {KNEE_GAIN:.0%} of tokens/s"])
    return rows


def _log_range(lo: float, hi: float) -> list[float]:
    return [math.log10(lo), math.log10(hi)]


def _figure(r: ServingReport, curve: list[dict[str, Any]], mem_x: float | None) -> dict[str, Any]:
    pts = r.curve
    xs_all = [*(p.itl.low for p in pts), *(p.itl.high for p in pts), r.itl_mean.floor]
    xs_all += [v for v in (r.itl_slo_s, mem_x) if v is not None]
    ys_all = [*(p.throughput.ceiling for p in pts), *(p.throughput.low for p in pts), r.throughput.ceiling]
    x_range = _log_range(min(xs_all) / 1.6, max(xs_all) * 1.6)
    y_range = _log_range(min(ys_all) / 2.5, max(ys_all) * 3.0)
    band_x = [p.itl.low for p in pts] + [p.itl.high for p in reversed(pts)]
    band_y = [p.throughput.high for p in pts] + [p.throughput.low for p in reversed(pts)]
    eff = r.efficiency
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "band", "x": band_x, "y": band_y, "fill": "toself",
         "fillcolor": "rgba(31,119,180,0.13)", "line": {"width": 0, "color": BAND_COLOUR}, "hoverinfo": "skip",
         "showlegend": False},
        {"type": "scatter", "mode": "lines", "name": "floor", "x": [c["itl_s"] for c in curve],
         "y": [c["tokens_per_s"] for c in curve], "line": {"color": FITS_COLOUR, "width": 2},
         "hoverinfo": "skip", "showlegend": False},
        {"type": "scatter", "mode": "markers+text", "name": "batches", "x": [c["itl_s"] for c in curve],
         "y": [c["tokens_per_s"] for c in curve], "text": [str(c["batch"]) for c in curve],
         "textposition": "top left", "textfont": {"size": 11},
         "hovertext": [c["hover"] for c in curve], "hovertemplate": "%{hovertext}<extra></extra>",
         "marker": {"size": 11, "symbol": ["circle-open" if c["fits"] is False else "circle" for c in curve],
                    "color": [NO_FIT_HEX if c["fits"] is False else FITS_COLOUR for c in curve],
                    "line": {"width": [2 if c["fits"] is False else 1 for c in curve],
                             "color": [NO_FIT_HEX if c["fits"] is False else "white" for c in curve]}},
         "showlegend": False},
    ]
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if r.knee_batch is not None:
        k = next(c for c in curve if c["batch"] == r.knee_batch)
        data.append({"type": "scatter", "mode": "markers", "name": "knee", "x": [k["itl_s"]],
                     "y": [k["tokens_per_s"]], "hoverinfo": "skip", "showlegend": False,
                     "marker": {"symbol": "circle-open", "size": 24, "color": KNEE_COLOUR, "line": {"width": 2.5}}})
        annotations.append({"x": math.log10(k["itl_s"]), "y": math.log10(k["tokens_per_s"]), "xref": "x",
                            "yref": "y", "showarrow": True, "ax": 30, "ay": 40, "arrowcolor": KNEE_COLOUR,
                            "font": {"size": 12, "color": KNEE_COLOUR},
                            "text": html.escape(f"knee: batch {r.knee_batch} (doubling gains < {KNEE_GAIN:.0%})")})
    data.append({"type": "scatter", "mode": "markers", "name": "chosen", "x": [r.itl_mean.floor],
                 "y": [r.throughput.ceiling], "showlegend": False,
                 "hovertemplate": html.escape(f"batch {r.batch} ({r.batch_chosen}): ITL {band(r.itl_mean)}, "
                                              f"{rate(r.throughput)}") + "<extra></extra>",
                 "marker": {"symbol": "star", "size": 16, "color": CHOSEN_COLOUR, "line": {"color": "white",
                                                                                            "width": 1}}})
    if r.itl_slo_s is not None:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": r.itl_slo_s, "x1": r.itl_slo_s,
                       "y0": 0, "y1": 1, "line": {"color": SLO_COLOUR, "width": 2}})
        slo = f"ITL SLO {format_time(r.itl_slo_s)}"
        if r.max_batch_slo is not None:
            slo += f"<br>largest batch meeting it: {r.max_batch_slo}"
        annotations.append({"x": math.log10(r.itl_slo_s), "y": 1, "xref": "x", "yref": "paper", "xanchor": "left",
                            "yanchor": "top", "xshift": 6, "showarrow": False, "bgcolor": "rgba(255,255,255,0.9)",
                            "font": {"size": 12, "color": SLO_COLOUR}, "text": f"<b>{slo}</b>"})
    if mem_x is not None:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": mem_x, "x1": mem_x, "y0": 0, "y1": 1,
                       "line": {"color": MEMORY_COLOUR, "width": 1.5, "dash": "dash"}})
        annotations.append({"x": math.log10(mem_x), "y": 0, "xref": "x", "yref": "paper", "xanchor": "right",
                            "yanchor": "bottom", "xshift": -6, "showarrow": False,
                            "bgcolor": "rgba(255,255,255,0.9)", "font": {"size": 12, "color": MEMORY_COLOUR},
                            "text": f"memory limit: batch {r.max_batch_memory}<br>(ITL {format_time(mem_x)}); "
                                    f"hollow points do not fit"})
    layout = {
        "xaxis": {"type": "log", "range": x_range, "title": {"text": "inter-token latency, ITL (mean over the "
                                                                      "generation)"},
                  "gridcolor": "#e6e6e6", "zeroline": False, **_time_ticks(x_range)},
        "yaxis": {"type": "log", "range": y_range, "title": {"text": "throughput (output tokens/s, every replica)"},
                  "gridcolor": "#e6e6e6", "zeroline": False},
        "margin": {"l": 70, "r": 20, "t": 20, "b": 55},
        "plot_bgcolor": "white", "paper_bgcolor": "white", "hovermode": "closest", "height": 540,
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif"},
        "shapes": shapes, "annotations": annotations,
        "meta": {"band": f"expected band: {eff.label}"},
    }
    return {"data": data, "layout": layout}


def _time_ticks(x_range: list[float]) -> dict[str, Any]:
    """Ticks at 1, 2 and 5 of each decade, labelled as times ('10 ms')."""
    vals = [m * 10.0**k for k in range(math.floor(x_range[0]), math.ceil(x_range[1]) + 1) for m in (1, 2, 5)]
    vals = [v for v in vals if x_range[0] <= math.log10(v) <= x_range[1]]
    return {"tickmode": "array", "tickvals": vals, "ticktext": [format_time(v) for v in vals]}


def serve_payload(r: ServingReport) -> dict[str, Any]:
    """Everything the serving page shows, as JSON-ready data (also what the tests read back)."""
    curve = [_point_record(r, p) for p in r.curve]
    mem_x = memory_limit_itl(r)
    eff = r.efficiency
    subtitle = (f"prompt {r.prompt}, output {r.output} tokens · {r.dtype.name} · plan {r.plan} · batch {r.batch}: "
                f"{r.batch_chosen}. Each time is the roofline floor with, in brackets and shaded on the chart, the "
                f"expected range ({eff.label}).")
    return {
        "title": f"{r.config.name} serving on {split_label(r)}",
        "subtitle": subtitle,
        "summary": _summary(r),
        "curve": curve,
        "knee_batch": r.knee_batch, "max_batch_memory": r.max_batch_memory, "memory_limit_itl_s": mem_x,
        "max_batch_slo": r.max_batch_slo, "itl_slo_s": r.itl_slo_s, "batch": r.batch,
        "warnings": list(r.warnings),
        "figure": _figure(r, curve, mem_x),
    }


def serve_page(r: ServingReport) -> str:
    """The complete serving page as one string."""
    return panel_page("serve", serve_payload(r))


__all__ = ["serve_page", "serve_payload"]
