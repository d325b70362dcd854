"""The interactive page: one self-contained HTML file that steps through the kernels on the roofline.

Everything the page needs is inside it: plotly.js inlined (no CDN), the data as JSON, the script
and the styles; system fonts only, no MathJax. Opened from disk with the network off it works, and
it makes no request of any kind.

How it steps: the slider and the previous/next buttons are plain HTML controls, and ← → Home End
step from the keyboard; the page opens on every kernel (a model's first kernel, the embedding, has
no FLOPs and no point), and a one-kernel page hides the stepper. Step k shows the first k kernels in
execution order; each step calls `Plotly.restyle` on the kernel traces with the
first k points (no plotly animation frames, which throw when a drag interrupts them). Switching the
scenario (fusion plan, phase) calls `Plotly.react` with that scenario's figure and keeps the step
on the same kernel, or the kernel that now contains it. The chart is responsive, so the script
places its labels for the size it has: each slope's label at the slope's angle on screen, the
ridge's label where it fits, and each slope label slid along its slope off the other labels.

The data, in `<script type="application/json" id="roofline-data">`:
    {"title", "axes": {"x_range", "y_range"} (log10), "scenarios": [{"label", "phase", "plan",
     "machine", "dtype", "peak_flop_per_s", "bytes_per_s", "ridge_flop_per_byte", "summary",
     "kernels": [{"n", "name", "count", "flop", "bytes", "flop_per_byte", "attainable_flop_per_s",
                  "time_s", "total_time_s", "bound", "x", "y", "mx", "my", "above_roof", "text": {...},
                  "derivation", "explain", "hover", "levels": [{"level", "x", "bytes", ...}]}],
     "links": [{"level", "name", "label", "bytes_per_s", "latency_s", "ridge_flop_per_byte"}], "link_note",
     "device": null or {"title", "rows": [[what, value, class]], "bar": [[class, seconds, share]], "note"},
     "figure": {"data": [...], "layout": {...}}}]}
`figure` is a plain plotly figure (all kernels shown); the traces named "kernels", "measured",
"measured-link" and "current" are the ones a step rewrites. A scenario with collectives (kernels with
bytes on a link between devices) has one more trace per link, "link roof" or "network roof": the
slope of that link's bandwidth per direction up to the compute roof; its collectives sit under it at
I = FLOPs per byte on the link. The "levels inside the chip" toggle shows the current kernel's point at
each memory level besides DRAM and each level's roof (traces "levels" and "level roof <level>",
page/levels.py). A scenario split over devices (`Scenario.device`) fills the
per-device panel: the step's time by what bounds it and the memory one device holds.

The page's markup, styles and script are files of their own in roofline/report/page/ (page.html
inside shell.html, the head and scripts every page shares; page.css, page.js), read at render time;
`page` fills their @@NAME@@ placeholders and the @MEMORY@, @COMPUTE@, @COMMUNICATION@ and @ABOVE@
colour tokens of the styles, each template in one pass (`fill`):
a value is never scanned again, so a name that contains a placeholder stays text. The policy
(`csp`) names each inline script by its SHA-256 instead of allowing any inline script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from roofline.explain import explain_placement
from roofline.models.memory import gib  # memory held: binary units, as the terminal prints it
from roofline.placement import Placement
from roofline.report.page.levels import kernel_levels, level_traces, level_xs
from roofline.report.points import (
    ABOVE_ROOF_COLOUR,
    BOUND_COLOURS,
    ROOF_CYCLE,
    DeviceShare,
    LinkRoof,
    Scenario,
    derivation_line,
    intensity,
    link_bytes,
    link_level,
    link_roofs,
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
from roofline.vocab import Bound, Level

SECONDARY_COLOURS = ROOF_CYCLE


def _kernel_record(n: int, p: Placement, total_time_s: float) -> dict[str, Any]:
    x, y = point_xy(p) if on_chart(p) else (None, None)
    mxy = measured_xy(p)
    share = p.total_time_s / total_time_s if total_time_s else 0.0
    lv = link_level(p)
    text = {
        "flop": format_flop(p.flop),
        "bytes": format_bytes(p.bytes) if lv is None else (
            f"{format_bytes(p.bytes)} + {format_bytes(link_bytes(p))} on the {lv}"),
        "intensity": "—" if not on_chart(p) else (
            format_intensity(p.flop_per_byte) if lv is None else f"{format_intensity(intensity(p))} on the {lv}"),
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
        "levels": kernel_levels(p),
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
                xs.append(point_xy(p)[0])
                xs += level_xs(p)  # the levels toggle's points
                ys.append(p.attainable_flop_per_s)
                ys.append(p.roof_flop_per_s)
                mxy = measured_xy(p)
                if mxy:
                    ys.append(mxy[1])
    ridges = [s.analysis.machine.ridge_flop_per_byte(s.analysis.dtype) for s in scenarios]
    # room right of the ridge for its label
    x_lo, x_hi = min(xs) / 3, max(max(xs) * 3, max(ridges) * 12)
    for s in scenarios:  # each link's slope reaches the compute roof inside the axes
        peak = s.analysis.machine.peak_flop_per_s(s.analysis.dtype)
        x_hi = max([x_hi, *(lk.ridge(peak) * 3 for lk in link_roofs(s.analysis.placements))])
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
        {"name": "roof-label", "x": math.log10(x_hi) - 0.05, "y": math.log10(peak), "xref": "x", "yref": "y",
         "xanchor": "right", "yanchor": "bottom", "showarrow": False, "font": {"size": 13},
         "text": f"<b>compute roof: {dt.peak_key} peak {format_flop_per_s(peak)}</b>"},
        {"name": "ridge-label", "x": math.log10(ridge), "y": math.log10(peak), "xref": "x", "yref": "y",
         "xanchor": "left", "yanchor": "top", "showarrow": False, "xshift": 8, "yshift": -6, "font": {"size": 12},
         "text": f"ridge I* = {format_intensity(ridge)}"},
        {"name": "slope-label", "x": (math.log10(x_lo) + math.log10(ridge)) / 2,
         "y": math.log10(bw * math.sqrt(x_lo * ridge)),
         "xref": "x", "yref": "y", "showarrow": False, "yshift": 26, "font": {"size": 13},
         "textangle": _slope_angle(x_range, y_range),
         "text": f"<b>memory slope: DRAM {format_bytes_per_s(bw)} × I</b>"},
    ]
    for lk in link_roofs(a.placements):
        xs_on = [point_xy(p)[0] for p in a.placements if on_chart(p) and link_level(p) is lk.level]
        _link_roof(data, annotations, lk, peak, x_lo, max(xs_on, default=x_lo), x_range, y_range)
    for i, (_kind, label, ceiling) in enumerate(secondary_ceilings(a.placements, dt.peak_key, peak)):
        colour = SECONDARY_COLOURS[i % len(SECONDARY_COLOURS)]
        start = ceiling / bw
        data.append({"type": "scatter", "mode": "lines", "name": label, "x": [start, x_hi], "y": [ceiling, ceiling],
                     "line": {"color": colour, "width": 1.5, "dash": "dash"}, "hoverinfo": "skip",
                     "showlegend": False})
        annotations.append({"name": "ceiling-label", "x": math.log10(x_hi) - 0.05, "y": math.log10(ceiling),
                            "xref": "x", "yref": "y", "xanchor": "right", "yanchor": "top", "showarrow": False,
                            "font": {"size": 11, "color": colour},
                            "text": f"{html.escape(label)} {format_flop_per_s(ceiling)}"})
    data += level_traces(a.placements, peak, x_lo, x_hi)  # hidden until the levels toggle is on
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


def _link_roof(data: list[dict[str, Any]], annotations: list[dict[str, Any]], lk: LinkRoof, peak: float,
               x_lo: float, x_points: float, x_range: list[float], y_range: list[float]) -> None:
    """A link's roof: the slope BW_link × I from the left edge up to the compute roof, with its label
    along it (below: the DRAM slope runs above), right of its collectives (`x_points`, the largest of
    their intensities) where that leaves the label room."""
    colour = BOUND_COLOURS[Bound.COMMUNICATION]
    ridge = lk.ridge(peak)
    data.append({
        "type": "scatter", "mode": "lines", "name": f"{lk.level} roof", "x": [x_lo, ridge],
        "y": [lk.bytes_per_s * x_lo, peak],
        "line": {"color": colour, "width": 2, "dash": "dash" if lk.level is Level.LINK else "dashdot"},
        "hovertemplate": html.escape(f"{lk.level} roof: {lk.label}, per direction; latency α "
                                     f"{format_time(lk.latency_s)}; meets the compute roof at I = "
                                     f"{format_intensity(ridge)}") + "<extra></extra>",
        "showlegend": False})
    x_start = max(x_lo, 10 ** y_range[0] * 1.5 / lk.bytes_per_s)
    clear = x_points * 4
    x_mid = math.sqrt((clear if ridge / clear > 30 else x_start) * ridge)
    annotations.append({
        "name": "link-slope-label", "x": math.log10(x_mid), "y": math.log10(lk.bytes_per_s * x_mid), "xref": "x",
        "yref": "y", "showarrow": False, "yshift": -16, "font": {"size": 12, "color": colour},
        "textangle": _slope_angle(x_range, y_range), "text": html.escape(f"{lk.level} slope: {lk.label}")})


def _device_record(d: DeviceShare) -> dict[str, Any]:
    """The per-device panel of a split step: what bounds the step's time, and what one device holds."""
    step = d.step_time_s
    parts = [("compute", d.compute_time_s), ("memory", d.memory_time_s), ("communication", d.communication_time_s)]
    busy = sum(t for _, t in parts)
    rows: list[list[str]] = [["devices", f"{d.devices} ({d.split} on {d.system})", ""],
                             ["step time", format_time(step)
                              + (" (communication under compute)" if d.overlap else ""), ""]]
    for what, t in parts:
        rows.append([f"{what}-bound", f"{format_time(t)} · {t / busy if busy else 0:.0%}", what])
    if d.stages > 1:
        rows.append(["per stage", f"{format_time(step / d.stages)} (one of {d.stages} pipeline stages)", ""])
    rows += [["weights", gib(d.weights_bytes), ""], ["KV cache", gib(d.kv_cache_bytes), ""],
             ["workspace", gib(d.workspace_bytes), ""]]
    held = gib(d.total_bytes)
    fits = d.usable_bytes is None or d.total_bytes <= d.usable_bytes
    if d.usable_bytes is not None:
        held += f" of {gib(d.usable_bytes)} usable: " + ("fits" if fits else "does NOT fit")
    rows.append(["memory per device", held, "" if fits else "above"])
    return {"title": f"per device: {d.split} on {d.system}", "rows": rows,
            "bar": [[what, t, t / busy if busy else 0.0] for what, t in parts],
            "note": "time by what bounds each kernel (kernels × their counts, one device's kernels in turn); "
                    "memory: what one device holds"}


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
    links = link_roofs(a.placements)
    link_note = ""
    if links:
        comm = sum(p.total_time_s for p in a.placements if p.bound_class is Bound.COMMUNICATION)
        summary += f", {comm / total if total else 0:.0%} communication"
        link_note = ("Purple: collectives, each under its link's roof (" + "; ".join(
            f"{lk.level}: {lk.name}, {format_bytes_per_s(lk.bytes_per_s)} per direction, latency α "
            f"{format_time(lk.latency_s)}" for lk in links) + ") at I = FLOPs per byte on the link; the latency "
            "puts each below its slope. A collective with no FLOPs (an all-gather, a send) is listed, not drawn.")
    return {
        "label": s.label or a.plan, "phase": s.phase, "plan": s.plan, "machine": a.machine.name,
        "dtype": a.dtype.name, "peak_flop_per_s": peak, "bytes_per_s": bw, "ridge_flop_per_byte": peak / bw,
        "time_s": total, "summary": summary, "kernels": kernels, "figure": _figure(s, kernels, x_range, y_range),
        "links": [{"level": lk.level, "name": lk.name, "label": lk.label, "bytes_per_s": lk.bytes_per_s,
                   "latency_s": lk.latency_s, "ridge_flop_per_byte": lk.ridge(peak)} for lk in links],
        "link_note": link_note,
        "device": None if s.device is None else _device_record(s.device),
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
    style = fill(_asset("page.css"), {"MEMORY": BOUND_COLOURS[Bound.MEMORY], "COMPUTE": BOUND_COLOURS[Bound.COMPUTE],
                                      "COMMUNICATION": BOUND_COLOURS[Bound.COMMUNICATION],
                                      "ABOVE": ABOVE_ROOF_COLOUR}, marker="@")
    return assemble("page.html", data_id="roofline-data", title=data["title"], style=style,
                    data=_json_for_script(data), scripts=(get_plotlyjs(), _asset("page.js")))


def panel_page(name: str, data: Mapping[str, Any]) -> str:
    """A page of the chart-and-panels layout (the serving and training pages): `name`.html, its styles
    after panels.css and its script after tables.js (the summary, warnings and heading they share), the
    data in <script id="`name`-data">."""
    from plotly.offline import get_plotlyjs

    return assemble(f"{name}.html", data_id=f"{name}-data", title=data["title"],
                    style=_asset("panels.css") + _asset(f"{name}.css"), data=_json_for_script(data),
                    scripts=(get_plotlyjs(), _asset("tables.js") + _asset(f"{name}.js")))


def _asset(name: str) -> str:
    """One of the page's own files beside this module in roofline/report/page/ (package data, so an
    installed wheel has them)."""
    return resources.files("roofline.report.page").joinpath(name).read_text(encoding="utf-8")


def fill(template: str, values: Mapping[str, str], marker: str = "@@") -> str:
    """`template` with each @@NAME@@ (or, with marker="@", @NAME@) replaced by values[NAME], in one
    pass: a value is inserted as it is and never scanned again, so a kernel or model name that
    contains "@@PLOTLY@@" stays text. A placeholder without a value is an error of ours, not the user's."""
    m = re.escape(marker)

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template placeholder {marker}{name}{marker} has no value")
        return values[name]

    return re.sub(f"{m}([A-Z][A-Z_]*){m}", value, template)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def csp(scripts: Sequence[str]) -> str:
    """The page's Content-Security-Policy: it may load nothing (no connection, no font, no image from
    anywhere but itself; data: and blob: URLs are plotly's own in-page images) and run only its own
    inline scripts, each named by its SHA-256 (CSP level 2 hash sources), never 'unsafe-inline' for
    scripts. Styles stay 'unsafe-inline': plotly writes style="..." attributes as it draws, which a
    hash cannot allow (that needs 'unsafe-hashes' and a hash for every attribute it will ever write);
    a style can load nothing here, as default-src 'none' covers its url()s. No <base>, no form
    submission."""
    return ("default-src 'none'; script-src " + " ".join(_sha256(s) for s in scripts)
            + "; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'")


def assemble(body: str, *, data_id: str, title: str, style: str, data: str, scripts: tuple[str, str]) -> str:
    """One of the pages: its body (page.html, serve.html) inside the one shell both share (shell.html:
    the head, the footer, the scripts), filled in one pass: the title escaped, the styles, the data as
    JSON in <script id=data_id>, plotly.js and the page's script, under a policy that names exactly
    those two scripts by hash. The body is inserted as it is, never scanned for placeholders."""
    plotly_js, script = scripts
    return fill(_asset("shell.html"), {"BODY": _asset(body).removesuffix("\n"), "DATA_ID": data_id,
                                       "TITLE": html.escape(title), "CSP": csp(scripts), "STYLE": style,
                                       "DATA": data, "PLOTLY": plotly_js, "SCRIPT": script})
