"""The interactive page: one self-contained HTML file that steps through the kernels on the roofline.

Everything the page needs is inside it: plotly.js inlined (no CDN), the data as JSON, the script
and the styles; system fonts only, no MathJax. Opened from disk with the network off it works, and
it makes no request of any kind.

How it steps: the slider and the previous/next buttons are plain HTML controls. Step k shows the
first k kernels in execution order; each step calls `Plotly.restyle` on the kernel traces with the
first k points (no plotly animation frames, which throw when a drag interrupts them). Switching the
scenario (fusion plan, phase) calls `Plotly.react` with that scenario's figure and keeps the step
on the same kernel, or the kernel that now contains it.

The data, in `<script type="application/json" id="roofline-data">`:
    {"title", "axes": {"x_range", "y_range"} (log10), "scenarios": [{"label", "phase", "plan",
     "machine", "dtype", "peak_flop_per_s", "bytes_per_s", "ridge_flop_per_byte", "summary",
     "kernels": [{"n", "name", "count", "flop", "bytes", "flop_per_byte", "attainable_flop_per_s",
                  "time_s", "total_time_s", "bound", "x", "y", "mx", "my", "above_roof", "text": {...},
                  "derivation", "explain", "hover"}],
     "figure": {"data": [...], "layout": {...}}}]}
`figure` is a plain plotly figure (all kernels shown); the traces named "kernels", "measured",
"measured-link" and "current" are the ones a step rewrites.

Layering: a report module; imports plotly (inside `page`) and the core.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from roofline.explain import explain_placement
from roofline.placement import Placement
from roofline.report.points import (
    ABOVE_ROOF_COLOUR,
    BOUND_COLOURS,
    ROOF_CYCLE,
    Scenario,
    derivation_line,
    measured_note,
    measured_xy,
    on_chart,
    point_xy,
    secondary_ceilings,
)
from roofline.units import (
    finite_or_none,
    format_bytes,
    format_bytes_per_s,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_si,
    format_time,
)
from roofline.vocab import Bound

SECONDARY_COLOURS = ROOF_CYCLE


def _kernel_record(n: int, p: Placement, total_time_s: float) -> dict[str, Any]:
    x, y = point_xy(p) if on_chart(p) else (None, None)
    mxy = measured_xy(p)
    share = p.total_time_s / total_time_s if total_time_s else 0.0
    text = {
        "flop": format_flop(p.flop),
        "bytes": format_bytes(p.bytes),
        "intensity": format_intensity(p.flop_per_byte) if on_chart(p) else "—",
        "attainable": format_flop_per_s(p.attainable_flop_per_s),
        "time": format_time(p.time_s),
        "total": format_time(p.total_time_s),
        "share": f"{share:.1%}",
        "measured": measured_note(p),
        "measured_short": "" if p.measured_time_s is None else (
            f"{format_time(p.measured_time_s)} · {p.fraction_of_roof or 0:.0%} of roof"
            + (" · ABOVE ROOF" if p.above_roof else "")),
    }
    count = f" ×{p.count}" if p.count > 1 else ""
    hover = "<br>".join(html.escape(line) for line in (
        f"{n}. {p.name}{count}",
        f"FLOPs {text['flop']} · bytes {text['bytes']}",
        f"I = {text['intensity']} · {p.bound_class}-bound",
        f"time floor {text['time']}" + (f" ({text['total']} per step)" if p.count > 1 else ""),
        f"attainable {text['attainable']}",
        *([text["measured"]] if text["measured"] else []),
    ))
    return {
        "n": n, "name": p.name, "count": p.count, "flop": p.flop, "bytes": p.bytes,
        "flop_per_byte": finite_or_none(p.flop_per_byte), "attainable_flop_per_s": p.attainable_flop_per_s,
        "time_s": p.time_s, "total_time_s": p.total_time_s, "bound": p.bound_class, "resource": p.bound,
        "x": finite_or_none(x), "y": finite_or_none(y),
        "mx": mxy[0] if mxy else None, "my": mxy[1] if mxy else None,
        "measured_time_s": p.measured_time_s, "fraction_of_roof": p.fraction_of_roof, "above_roof": p.above_roof,
        "text": text, "derivation": derivation_line(p), "explain": explain_placement(p), "hover": hover,
    }


def _log_range(lo: float, hi: float) -> list[float]:
    return [math.floor(math.log10(lo)), math.ceil(math.log10(hi))]


def _decade_ticks(log_range: list[float]) -> dict[str, Any]:
    """One labelled tick per decade, with a decimal prefix ('100 T', '1 P'), as on the static chart."""
    vals = [10.0**k for k in range(math.ceil(log_range[0]), math.floor(log_range[1]) + 1)]
    return {"tickmode": "array", "tickvals": vals, "ticktext": [format_si(v) for v in vals]}


def _axes_ranges(scenarios: Sequence[Scenario]) -> tuple[list[float], list[float]]:
    """One pair of ranges for every scenario, so that switching plans moves points, not axes."""
    xs: list[float] = []
    ys: list[float] = []
    for s in scenarios:
        a = s.analysis
        ridge = a.machine.ridge_flop_per_byte(a.dtype)
        xs.append(ridge)
        ys.append(a.machine.peak_flop_per_s(a.dtype))
        for p in a.placements:
            if on_chart(p):
                xs.append(p.flop_per_byte)
                ys.append(p.attainable_flop_per_s)
                ys.append(p.roof_flop_per_s)
                mxy = measured_xy(p)
                if mxy:
                    ys.append(mxy[1])
    ridges = [s.analysis.machine.ridge_flop_per_byte(s.analysis.dtype) for s in scenarios]
    # room right of the ridge for its label
    x_lo, x_hi = min(xs) / 3, max(max(xs) * 3, max(ridges) * 12)
    bw = max(s.analysis.machine.memory_bytes_per_s for s in scenarios)
    y_lo = min(min(ys), bw * x_lo) / 2
    return _log_range(x_lo, x_hi), [math.floor(math.log10(y_lo)), math.log10(max(ys) * 3)]


def _slope_angle(x_range: list[float], y_range: list[float], width_px: float = 740.0, height_px: float = 445.0
                 ) -> float:
    """The memory slope's on-screen angle (degrees, plotly's clockwise sign) for a plot area of about
    width × height pixels: one decade up per decade right."""
    per_x = width_px / (x_range[1] - x_range[0])
    per_y = height_px / (y_range[1] - y_range[0])
    return -math.degrees(math.atan2(per_y, per_x))


def _figure(s: Scenario, kernels: list[dict[str, Any]], x_range: list[float], y_range: list[float]
            ) -> dict[str, Any]:
    a = s.analysis
    m, dt = a.machine, a.dtype
    peak = m.peak_flop_per_s(dt)
    bw = m.memory_bytes_per_s
    ridge = peak / bw
    x_lo, x_hi = 10 ** x_range[0], 10 ** x_range[1]
    roof_x = [x_lo, ridge, x_hi]
    roof_y = [min(peak, bw * x) for x in roof_x]
    drawn = [k for k in kernels if k["x"] is not None]
    measured = [k for k in drawn if k["mx"] is not None]
    link_x: list[float | None] = []
    link_y: list[float | None] = []
    for k in measured:
        link_x += [k["x"], k["mx"], None]
        link_y += [k["y"], k["my"], None]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "roof", "x": roof_x, "y": roof_y,
         "line": {"color": "#222", "width": 2.5}, "hoverinfo": "skip", "showlegend": False},
        {"type": "scatter", "mode": "markers", "name": "ridge", "x": [ridge], "y": [peak],
         "marker": {"symbol": "circle-open", "size": 11, "color": "#222", "line": {"width": 2.5}},
         "hovertemplate": f"ridge I* = peak / BW = {format_flop_per_s(peak)} / {format_bytes_per_s(bw)}"
                          f" = {format_intensity(ridge)}<extra></extra>", "showlegend": False},
        {"type": "scatter", "mode": "markers", "name": "kernels", "x": [k["x"] for k in kernels],
         "y": [k["y"] for k in kernels], "hovertext": [k["hover"] for k in kernels],
         "hovertemplate": "%{hovertext}<extra></extra>",
         "marker": {"size": 11, "color": [BOUND_COLOURS[k["bound"]] for k in kernels],
                    "line": {"color": "white", "width": 1}}, "showlegend": False},
        {"type": "scatter", "mode": "markers", "name": "measured", "x": [k["mx"] for k in kernels],
         "y": [k["my"] for k in kernels], "hovertext": [k["hover"] for k in kernels],
         "hovertemplate": "measured<br>%{hovertext}<extra></extra>",
         "marker": {"size": [15 if k["above_roof"] else 10 for k in kernels],
                    "symbol": ["x" if k["above_roof"] else "diamond-open" for k in kernels],
                    "color": [ABOVE_ROOF_COLOUR if k["above_roof"] else BOUND_COLOURS[k["bound"]] for k in kernels],
                    "line": {"width": 2}}, "showlegend": False},
        {"type": "scatter", "mode": "lines", "name": "measured-link", "x": link_x, "y": link_y,
         "line": {"color": "#888", "width": 1, "dash": "dot"}, "hoverinfo": "skip", "showlegend": False},
        {"type": "scatter", "mode": "markers", "name": "current", "x": [], "y": [],
         "marker": {"symbol": "circle-open", "size": 24, "color": "#000", "line": {"width": 2.5}},
         "hoverinfo": "skip", "showlegend": False},
    ]
    shapes: list[dict[str, Any]] = [
        {"type": "line", "xref": "x", "yref": "y", "x0": ridge, "x1": ridge, "y0": 10 ** y_range[0], "y1": peak,
         "line": {"color": "#222", "width": 1, "dash": "dot"}},
    ]
    annotations: list[dict[str, Any]] = [
        {"x": math.log10(x_hi) - 0.05, "y": math.log10(peak), "xref": "x", "yref": "y", "xanchor": "right",
         "yanchor": "bottom", "showarrow": False, "font": {"size": 13},
         "text": f"<b>compute roof: {dt.peak_key} peak {format_flop_per_s(peak)}</b>"},
        {"x": math.log10(ridge), "y": math.log10(peak), "xref": "x", "yref": "y", "xanchor": "left",
         "yanchor": "top", "showarrow": False, "xshift": 8, "yshift": -6, "font": {"size": 12},
         "text": f"ridge I* = {format_intensity(ridge)}"},
        {"x": (math.log10(x_lo) + math.log10(ridge)) / 2, "y": math.log10(bw * math.sqrt(x_lo * ridge)),
         "xref": "x", "yref": "y", "showarrow": False, "yshift": 26, "font": {"size": 13},
         "textangle": _slope_angle(x_range, y_range),
         "text": f"<b>memory slope: DRAM {format_bytes_per_s(bw)} × I</b>"},
    ]
    for i, (_kind, label, ceiling) in enumerate(secondary_ceilings(a.placements, dt.peak_key, peak)):
        colour = SECONDARY_COLOURS[i % len(SECONDARY_COLOURS)]
        start = ceiling / bw
        data.append({"type": "scatter", "mode": "lines", "name": label, "x": [start, x_hi], "y": [ceiling, ceiling],
                     "line": {"color": colour, "width": 1.5, "dash": "dash"}, "hoverinfo": "skip",
                     "showlegend": False})
        annotations.append({"x": math.log10(x_hi) - 0.05, "y": math.log10(ceiling), "xref": "x", "yref": "y",
                            "xanchor": "right", "yanchor": "top", "showarrow": False, "font": {"size": 11,
                                                                                              "color": colour},
                            "text": f"{html.escape(label)} {format_flop_per_s(ceiling)}"})
    layout = {
        "xaxis": {"type": "log", "range": x_range, "title": {"text": "arithmetic intensity I (FLOP/byte)"},
                  "gridcolor": "#e6e6e6", "zeroline": False, **_decade_ticks(x_range)},
        "yaxis": {"type": "log", "range": y_range, "title": {"text": "attainable performance (FLOP/s)"},
                  "gridcolor": "#e6e6e6", "zeroline": False, **_decade_ticks(y_range)},
        "margin": {"l": 70, "r": 20, "t": 20, "b": 55},
        "plot_bgcolor": "white", "paper_bgcolor": "white", "hovermode": "closest", "height": 520,
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif"},
        "shapes": shapes, "annotations": annotations,
    }
    return {"data": data, "layout": layout}


def _scenario_record(s: Scenario, x_range: list[float], y_range: list[float]) -> dict[str, Any]:
    a = s.analysis
    total = a.time_s
    kernels = [_kernel_record(i + 1, p, total) for i, p in enumerate(a.placements)]
    peak = a.machine.peak_flop_per_s(a.dtype)
    bw = a.machine.memory_bytes_per_s
    mem_share = a.memory_bound_time_s / total if total else 0.0
    summary = (f"{a.machine.name} · {a.dtype.name} · plan {a.plan} · {len(kernels)} kernels · "
               f"{format_flop(a.flop)}, {format_bytes(a.bytes)} per step · time floor {format_time(total)}, "
               f"{mem_share:.0%} of it memory-bound")
    return {
        "label": s.label or a.plan, "phase": s.phase, "plan": s.plan, "machine": a.machine.name,
        "dtype": a.dtype.name, "peak_flop_per_s": peak, "bytes_per_s": bw, "ridge_flop_per_byte": peak / bw,
        "time_s": total, "summary": summary, "kernels": kernels, "figure": _figure(s, kernels, x_range, y_range),
    }


def _switch_dims(scenarios: Sequence[Scenario]) -> list[str]:
    """Button rows for the scenario switch: one per attribute that varies ("phase", "plan") when
    those identify every scenario, otherwise one row of labels."""
    dims = [d for d in ("phase", "plan") if len({getattr(s, d) for s in scenarios}) > 1]
    keys = {tuple(getattr(s, d) for d in dims) for s in scenarios}
    if dims and len(keys) == len(scenarios) and all(getattr(s, d) for s in scenarios for d in dims):
        return dims
    return ["label"]


def payload(scenarios: Sequence[Scenario], title: str = "") -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data (also what the tests read back)."""
    x_range, y_range = _axes_ranges(scenarios)
    return {
        "title": title or (scenarios[0].label or "Roofline"),
        "axes": {"x_range": x_range, "y_range": y_range},
        "switch": _switch_dims(scenarios),
        "scenarios": [_scenario_record(s, x_range, y_range) for s in scenarios],
        "colours": {**{str(b): c for b, c in BOUND_COLOURS.items()}, "above": ABOVE_ROOF_COLOUR},
    }


def _json_for_script(obj: Any) -> str:
    """JSON safe inside a <script> element: '<', '>' and '&' as \\u escapes, no NaN."""
    text = json.dumps(obj, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(scenarios: Sequence[Scenario], title: str = "") -> str:
    """The complete page as one string."""
    from plotly.offline import get_plotlyjs

    data = payload(scenarios, title)
    return (_TEMPLATE
            .replace("@@TITLE@@", html.escape(data["title"]))
            .replace("@@CSP@@", CSP)
            .replace("@@STYLE@@", _STYLE.replace("@MEMORY@", BOUND_COLOURS[Bound.MEMORY])
                     .replace("@COMPUTE@", BOUND_COLOURS[Bound.COMPUTE]).replace("@ABOVE@", ABOVE_ROOF_COLOUR))
            .replace("@@DATA@@", _json_for_script(data))
            .replace("@@SCRIPT@@", _SCRIPT)
            .replace("@@PLOTLY@@", get_plotlyjs()))


# the page may load nothing: no connection, no font, no image from anywhere but itself (data: and blob:
# URLs are plotly's own in-page images); inline scripts and styles are the page itself
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="@@CSP@@">
<title>@@TITLE@@</title>
<style>@@STYLE@@</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <p id="summary"></p>
</header>
<section id="controls">
  <div id="switch"></div>
  <div id="stepper">
    <button id="prev" type="button" title="previous kernel">&#9664; previous</button>
    <input id="step" type="range" min="0" max="1" value="1" step="1" aria-label="kernels shown">
    <button id="next" type="button" title="next kernel">next &#9654;</button>
    <button id="all" type="button" title="show every kernel">all</button>
    <span id="step-label"></span>
  </div>
</section>
<main>
  <div id="chart"></div>
  <aside id="info" aria-live="polite">
    <h2 id="info-name"></h2>
    <table>
      <tr><th>FLOPs</th><td data-field="flop"></td></tr>
      <tr><th>bytes</th><td data-field="bytes"></td></tr>
      <tr><th>intensity</th><td data-field="intensity"></td></tr>
      <tr><th>bound</th><td data-field="bound"></td></tr>
      <tr><th>time floor</th><td data-field="time"></td></tr>
      <tr><th>per step</th><td data-field="total"></td></tr>
      <tr><th>share of step</th><td data-field="share"></td></tr>
    </table>
    <p id="info-derivation"></p>
    <p id="info-measured"></p>
    <details><summary>full derivation</summary><pre id="info-explain"></pre></details>
  </aside>
</main>
<section id="table-section">
  <h2>All kernels, in execution order</h2>
  <table id="kernels-table">
    <thead><tr><th>#</th><th>kernel</th><th>×</th><th>FLOPs</th><th>bytes</th><th>FLOP/B</th><th>bound</th>
    <th>time floor</th><th>per step</th><th>share</th><th>measured</th></tr></thead>
    <tbody></tbody>
  </table>
</section>
<footer>roofline · a self-contained page: works offline, loads nothing from the network.</footer>
<script type="application/json" id="roofline-data">@@DATA@@</script>
<script>@@PLOTLY@@</script>
<script>@@SCRIPT@@</script>
</body>
</html>
"""

_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 8px 0; }
#summary { color: #555; margin: 0 0 10px; font-size: 13px; }
#controls { display: flex; flex-wrap: wrap; gap: 10px 28px; align-items: center; margin-bottom: 8px; }
#switch .group { display: inline-flex; align-items: center; gap: 4px; margin-right: 16px; }
#switch .group span { font-size: 12px; color: #666; margin-right: 2px; }
button { font: inherit; font-size: 13px; padding: 3px 10px; border: 1px solid #bbb; background: #f7f7f7;
         border-radius: 4px; cursor: pointer; }
button.on { background: #222; color: white; border-color: #222; }
#stepper { display: flex; align-items: center; gap: 6px; }
#step { width: 280px; } #step-label { font-size: 13px; color: #444; min-width: 150px; }
main { display: flex; gap: 16px; align-items: flex-start; }
#chart { flex: 1 1 720px; min-width: 520px; height: 520px; }
#info { flex: 0 0 330px; font-size: 13px; border-left: 3px solid #ddd; padding-left: 12px; }
#info.memory { border-color: @MEMORY@; } #info.compute { border-color: @COMPUTE@; }
#info table th { text-align: left; font-weight: 600; padding-right: 12px; color: #444; }
#info-derivation { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 12px; background: #f5f5f5;
                   padding: 6px; word-break: break-word; }
#info-measured.above { color: @ABOVE@; font-weight: 700; }
#info pre { font-size: 11px; white-space: pre-wrap; max-height: 320px; overflow: auto; }
#kernels-table { border-collapse: collapse; font-size: 12.5px; }
#kernels-table th, #kernels-table td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right;
                                       white-space: nowrap; }
#kernels-table td:nth-child(2), #kernels-table th:nth-child(2) { text-align: left; }
#kernels-table tbody tr { cursor: pointer; }
#kernels-table tr.future { color: #aaa; } #kernels-table tr.current { background: #fff3c4; }
#kernels-table td.memory { color: @MEMORY@; } #kernels-table td.compute { color: @COMPUTE@; }
#kernels-table td.above { color: @ABOVE@; font-weight: 700; }
footer { color: #888; font-size: 11px; margin-top: 16px; }
"""

_SCRIPT = r"""
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("roofline-data").textContent);
  var chart = document.getElementById("chart");
  var slider = document.getElementById("step");
  var state = { scenario: 0, step: 1 };
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function scen() { return DATA.scenarios[state.scenario]; }
  function traceIndex(name) {
    var data = scen().figure.data;
    for (var i = 0; i < data.length; i++) { if (data[i].name === name) return i; }
    return -1;
  }
  function text(id, value) { document.getElementById(id).textContent = value; }

  // the first `step` kernels, as the arrays of the traces a step rewrites
  function stepTraces(step) {
    var ks = scen().kernels.slice(0, step);
    var kx = [], ky = [], kc = [], kh = [], mx = [], my = [], mh = [], ms = [], msym = [], mc = [], lx = [], ly = [];
    ks.forEach(function (k) {
      kx.push(k.x); ky.push(k.y); kh.push(k.hover);
      kc.push(DATA.colours[k.bound]);
      if (k.x !== null && k.mx !== null) {
        mx.push(k.mx); my.push(k.my); mh.push(k.hover);
        ms.push(k.above_roof ? 15 : 10); msym.push(k.above_roof ? "x" : "diamond-open");
        mc.push(k.above_roof ? DATA.colours.above : DATA.colours[k.bound]);
        lx.push(k.x, k.mx, null); ly.push(k.y, k.my, null);
      }
    });
    var cur = ks.length ? ks[ks.length - 1] : null;
    var cx = cur && cur.x !== null ? [cur.x] : [], cy = cur && cur.x !== null ? [cur.y] : [];
    return {
      kernels: { x: [kx], y: [ky], hovertext: [kh], "marker.color": [kc] },
      measured: { x: [mx], y: [my], hovertext: [mh], "marker.size": [ms], "marker.symbol": [msym],
                  "marker.color": [mc] },
      "measured-link": { x: [lx], y: [ly] },
      current: { x: [cx], y: [cy] }
    };
  }

  function showInfo() {
    var s = scen(), k = state.step > 0 ? s.kernels[state.step - 1] : null;
    var info = document.getElementById("info");
    info.className = k ? k.bound : "";
    text("info-name", k ? (k.n + ". " + k.name + (k.count > 1 ? " ×" + k.count : "")) : "no kernel yet");
    var fields = info.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i].getAttribute("data-field");
      fields[i].textContent = !k ? "" : (f === "bound" ? k.bound + "-bound" : k.text[f]);
    }
    text("info-derivation", k ? k.derivation : "Press next to add the first kernel.");
    var meas = document.getElementById("info-measured");
    meas.textContent = k ? k.text.measured : "";
    meas.className = k && k.above_roof ? "above" : "";
    text("info-explain", k ? k.explain : "");
    text("step-label", "kernel " + state.step + " of " + s.kernels.length);
    var rows = document.querySelectorAll("#kernels-table tbody tr");
    for (var r = 0; r < rows.length; r++) {
      rows[r].className = r === state.step - 1 ? "current" : (r >= state.step ? "future" : "");
    }
  }

  // one step: restyle the kernel traces; no animation frames
  function setStep(step) {
    var n = scen().kernels.length;
    state.step = Math.max(0, Math.min(n, step | 0));
    slider.value = String(state.step);
    var t = stepTraces(state.step);
    Object.keys(t).forEach(function (name) {
      var idx = traceIndex(name);
      if (idx >= 0) Plotly.restyle(chart, t[name], [idx]);
    });
    showInfo();
  }

  function fillTable() {
    var body = document.querySelector("#kernels-table tbody");
    while (body.firstChild) body.removeChild(body.firstChild);
    scen().kernels.forEach(function (k, i) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-n", String(k.n));
      var cells = [k.n, k.name, k.count, k.text.flop, k.text.bytes, k.text.intensity, k.bound, k.text.time,
                   k.text.total, k.text.share, k.text.measured_short];
      cells.forEach(function (c, j) {
        var td = document.createElement("td");
        td.textContent = String(c);
        if (j === 6) td.className = k.bound;
        if (j === 10 && k.above_roof) td.className = "above";
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () { setStep(i + 1); });
      body.appendChild(tr);
    });
  }

  // switching keeps the same kernel, or the one that now contains it ("attention.qk" -> "attention")
  function matchStep(oldKernel, kernels) {
    if (!oldKernel) return 0;
    for (var i = 0; i < kernels.length; i++) { if (kernels[i].name === oldKernel.name) return i + 1; }
    for (var j = 0; j < kernels.length; j++) {
      var a = kernels[j].name, b = oldKernel.name;
      if (b.indexOf(a + ".") === 0 || a.indexOf(b + ".") === 0) return j + 1;
    }
    return Math.min(state.step, kernels.length);
  }

  function setScenario(index) {
    var old = state.step > 0 ? scen().kernels[state.step - 1] : null;
    state.scenario = index;
    var s = scen();
    text("summary", s.summary);
    slider.max = String(s.kernels.length);
    var step = matchStep(old, s.kernels);
    var fig = JSON.parse(JSON.stringify(s.figure));
    Plotly.react(chart, fig.data, fig.layout, CONFIG);
    fillTable();
    markSwitch();
    setStep(step);
  }

  function markSwitch() {
    var s = scen();
    var buttons = document.querySelectorAll("#switch button");
    for (var i = 0; i < buttons.length; i++) {
      var dim = buttons[i].getAttribute("data-dim"), value = buttons[i].getAttribute("data-value");
      buttons[i].className = s[dim] === value ? "on" : "";
    }
  }

  function choose(dim, value) {
    var cur = scen(), best = -1;
    DATA.scenarios.forEach(function (s, i) {
      if (s[dim] !== value) return;
      var same = DATA.switch.every(function (d) { return d === dim || s[d] === cur[d]; });
      if (same) best = i; else if (best < 0) best = i;
    });
    if (best >= 0) setScenario(best);
  }

  function buildSwitch() {
    var box = document.getElementById("switch");
    if (DATA.scenarios.length < 2) return;
    DATA.switch.forEach(function (dim) {
      var group = document.createElement("div");
      group.className = "group";
      group.setAttribute("data-dim", dim);
      var name = document.createElement("span");
      name.textContent = dim === "label" ? "scenario" : dim;
      group.appendChild(name);
      var seen = {};
      DATA.scenarios.forEach(function (s) {
        if (seen[s[dim]]) return;
        seen[s[dim]] = true;
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = s[dim];
        b.setAttribute("data-dim", dim);
        b.setAttribute("data-value", s[dim]);
        b.addEventListener("click", function () { choose(dim, s[dim]); });
        group.appendChild(b);
      });
      box.appendChild(group);
    });
  }

  text("title", DATA.title);
  buildSwitch();
  slider.addEventListener("input", function () { setStep(parseInt(slider.value, 10)); });
  document.getElementById("prev").addEventListener("click", function () { setStep(state.step - 1); });
  document.getElementById("next").addEventListener("click", function () { setStep(state.step + 1); });
  document.getElementById("all").addEventListener("click", function () { setStep(scen().kernels.length); });
  state.step = 1;
  setScenario(0);
  setStep(1);
  window.roofline = { state: state, setStep: setStep, setScenario: setScenario, data: DATA };
  document.body.setAttribute("data-ready", "1");
})();
"""
