"""The training page (`roofline train --html`): one self-contained HTML file with the step's kernels on
the roofline, coloured by pass, beside the step's breakdown, then the step's figures and collectives.

Same machinery as the roofline and serving pages (report/page/roofline.py `assemble`): plotly.js
inlined, the data as JSON, the same shell and the same Content-Security-Policy (its two scripts by
hash), so the page makes no request of any kind. Its markup, styles and script are
roofline/report/page/train.html, train.css and train.js.

The data, in `<script type="application/json" id="train-data">`:
    {"title", "subtitle", "summary": [[what, value, note]], "communication": [{name, parallelism, kind,
     message, group, roof, runs, time, algorithm}], "conventions", "warnings", "figure": {"data", "layout"}}
The figure's traces (by uid): "roof" (the matrix roof at the compute dtype, x/y, the left panel),
one per pass ("pass-forward", "pass-backward", "pass-recompute", "pass-optimizer": every kernel with
arithmetic at (intensity, FLOPs / floor), its area its share of the step's floor, as the PNG draws
it; collectives are in the breakdown), and one per part of the step ("part-compute",
"part-exposed-communication", "part-pipeline-bubble", "part-optimizer": horizontal bars stacked over
the floor and the expected band's two ends, x2/y2, the right panel).
"""

from __future__ import annotations

import html
import math
from typing import Any

from roofline.report.charts.roofline import decade_ceil, decade_floor, roof_of
from roofline.report.charts.train import PART_COLOUR, PASS_COLOUR
from roofline.report.page.roofline import panel_page
from roofline.report.points import on_chart, point_xy
from roofline.training.analysis import TrainAnalysis
from roofline.units import format_bytes, format_time

PARTS = ("compute", "exposed communication", "pipeline bubble", "optimizer")
GREY = "#a6a6a6"  # matplotlib's "0.65", the PNG's bubble grey


def _hex(colour: str) -> str:
    return GREY if colour == "0.65" else colour


def _figure(a: TrainAnalysis) -> dict[str, Any]:
    drawn = [x for x in a.placed if on_chart(x.placement) and not x.is_comm]
    roof = roof_of(a.machine, a.dtype)
    xs = [point_xy(x.placement)[0] for x in drawn] or [roof.ridge_flop_per_byte]
    ys = [point_xy(x.placement)[1] for x in drawn] or [roof.peak_flop_per_s]
    x_lo = decade_floor(min([*xs, roof.ridge_flop_per_byte]) / 3)
    x_hi = decade_ceil(max([*xs, roof.ridge_flop_per_byte * 10]) * 3)
    y_lo = decade_floor(min([*ys, roof.attainable(x_lo)]) / 2)
    ridge = roof.ridge_flop_per_byte
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": f"{roof.label} roof", "uid": "roof", "x": [x_lo, ridge, x_hi],
         "y": [roof.attainable(x_lo), roof.peak_flop_per_s, roof.peak_flop_per_s], "xaxis": "x", "yaxis": "y",
         "line": {"color": "#222222", "width": 2}, "hoverinfo": "skip", "showlegend": True,
         "legendgroup": "passes", "legendgrouptitle": {"text": "kernels"}}]
    total = a.floor.step_s
    m = a.setup.micro_batches
    for pass_, colour in PASS_COLOUR.items():
        pts = [(x, y, k) for x, y, k in zip(xs, ys, drawn, strict=False) if k.kernel.pass_ is pass_]
        if not pts:
            continue
        shares = [k.floor_s * (k.runs_per_micro_batch * m + k.runs_per_step) / total for _, _, k in pts]
        hover = [html.escape(f"{k.kernel.kernel.name} ({pass_}) · I {x:.3g} FLOP/B · {y / 1e12:.4g} TFLOP/s · "
                             f"{format_time(k.floor_s)} a run, {s:.1%} of the step's floor · bound "
                             f"{k.placement.bound}") for (x, y, k), s in zip(pts, shares, strict=True)]
        data.append({"type": "scatter", "mode": "markers", "name": str(pass_), "uid": f"pass-{pass_}",
                     "x": [p[0] for p in pts],
                     "y": [p[1] for p in pts], "xaxis": "x", "yaxis": "y", "hovertext": hover,
                     "hovertemplate": "%{hovertext}<extra></extra>", "legendgroup": "passes",
                     "customdata": [k.kernel.kernel.name for _, _, k in pts],
                     "marker": {"color": colour, "opacity": 0.75, "line": {"color": "white", "width": 0.6},
                                "size": [6 + 30 * math.sqrt(s) for s in shares]}})
    ends = (("floor", a.floor), ("expected low", a.low), ("expected high", a.high))
    for part in PARTS:
        values = [{"compute": st.compute_s, "exposed communication": st.exposed_comm_s,
                   "pipeline bubble": st.bubble_s, "optimizer": st.optimizer_s}[part] for _, st in ends]
        data.append({"type": "bar", "orientation": "h", "name": part, "uid": f"part-{part.replace(' ', '-')}",
                     "x": values, "y": [e[0] for e in ends],
                     "xaxis": "x2", "yaxis": "y2", "marker": {"color": _hex(PART_COLOUR[part])},
                     "legendgroup": "step", "legendgrouptitle": {"text": "the step"},
                     "hovertext": [html.escape(f"{label}: {part} {format_time(v)}") for (label, _), v
                                   in zip(ends, values, strict=True)],
                     "hovertemplate": "%{hovertext}<extra></extra>"})
    annotations = [{"x": st.step_s, "y": label, "xref": "x2", "yref": "y2", "xanchor": "left", "showarrow": False,
                    "xshift": 4, "font": {"size": 11},
                    "text": html.escape(f"{format_time(st.step_s)}, MFU {a.mfu(st.step_s):.0%}")}
                   for label, st in ends]
    layout = {
        "xaxis": {"type": "log", "range": [math.log10(x_lo), math.log10(x_hi)], "domain": [0.0, 0.56],
                  "title": {"text": "arithmetic intensity I (FLOP/byte)"}, "gridcolor": "#e6e6e6"},
        "yaxis": {"type": "log", "range": [math.log10(y_lo), math.log10(roof.peak_flop_per_s * 4)],
                  "title": {"text": "attainable performance (FLOP/s)"}, "gridcolor": "#e6e6e6"},
        "xaxis2": {"domain": [0.68, 1.0], "anchor": "y2", "range": [0, a.high.step_s * 1.45],
                   "title": {"text": "seconds a step"}, "gridcolor": "#e6e6e6"},
        "yaxis2": {"anchor": "x2", "autorange": "reversed", "type": "category"},
        "barmode": "stack", "annotations": annotations, "hovermode": "closest", "height": 560,
        "margin": {"l": 70, "r": 20, "t": 20, "b": 55}, "plot_bgcolor": "white", "paper_bgcolor": "white",
        "legend": {"orientation": "h", "y": -0.18, "groupclick": "toggleitem"},
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif"},
        "meta": {"roof": f"{roof.label} roof", "point_area": "share of the step's floor"},
    }
    return {"data": data, "layout": layout}


def train_payload(a: TrainAnalysis) -> dict[str, Any]:
    """Everything the training page shows, as JSON-ready data (also what the tests read back)."""
    d = a.to_dict()
    st, mfu = d["step_time_s"], d["mfu"]
    s = a.setup
    summary = [
        ["step time", f"{format_time(st['floor'])} floor, {format_time(st['expected']['low'])}–"
                      f"{format_time(st['expected']['high'])} expected", a.times.origin],
        ["MFU", f"{mfu['floor']:.1%} floor, {mfu['expected']['low']:.1%}–{mfu['expected']['high']:.1%} expected",
         "model FLOPs 6·N + 12·L·h·s a token (PaLM) × tokens/s ÷ (devices × matrix peak)"],
        ["tokens/s", f"{d['tokens_per_s']:,.0f}", "at the floor"],
        ["pipeline bubble", f"{d['pipeline_bubble']:.1%}", "(p − 1)/(m + p − 1), over v interleaved chunks"],
        ["memory a device", a.memory.summary(), ""],
    ]
    comms = [{"name": c["name"], "parallelism": c["parallelism"], "kind": c["kind"],
              "message": format_bytes(c["bytes"]), "group": c["group_size"], "roof": str(c["link"]),
              "runs": f"{c['runs_per_step']:,.4g}", "time": format_time(c["time_s"]),
              "algorithm": c.get("algorithm", "")} for c in d["communication"]]
    subtitle = (f"{a.dtype.name} · ZeRO {int(s.zero)} · recompute {s.recompute} · {s.micro_batches} micro-batches · "
                f"bubble {a.bubble:.1%} · point area: share of the step's floor")
    return {"title": a.title, "subtitle": subtitle, "summary": summary, "communication": comms,
            "conventions": "; ".join(f"{k}: {v}" for k, v in d["conventions"].items()),
            "warnings": list(a.warnings), "figure": _figure(a)}


def train_page(a: TrainAnalysis) -> str:
    """The complete training page as one string."""
    return panel_page("train", train_payload(a))


__all__ = ["train_page", "train_payload"]
