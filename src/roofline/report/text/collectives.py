"""Text for measured collectives: one table of every size (time, algbw, busbw) per collective, then
each collective's α-β fit, the link a system file takes, and what was not measured.
"""

from __future__ import annotations

from roofline.measure.collectives import FACTOR_FORMULA, LINK_COLLECTIVE, SIZE_MEANS, Collectives, bus_factor
from roofline.report.text.tables import render
from roofline.units import format_bytes, format_bytes_per_s, format_time


def collectives_text(c: Collectives) -> str:
    """The sizes as a table, then the fits (α latency, β bandwidth per direction on the busiest link)."""
    from roofline.report.text.grid import Table

    t = Table(title=f"Collectives: {c.ranks} × {c.device_name} ({c.backend})", title_justify="left")
    for col, just in (("collective", "left"), ("size", "right"), ("time", "right"), ("algbw", "right"),
                      ("busbw", "right"), ("runs", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for name in c.collectives:
        for p in c.points_of(name):
            t.add_row(name, format_bytes(p.size_bytes, binary=True), format_time(p.time_s),
                      format_bytes_per_s(p.algbw_bytes_per_s), format_bytes_per_s(p.busbw_bytes_per_s),
                      str(p.timing.repeats))
        t.add_section()
    lines = [render(t), ""]
    lines.append(f"time: the median of {c.repeats} repeats (after {c.warmup} warm-up), each the slowest rank's; "
                 "algbw = size / time; busbw = algbw × factor (nccl-tests)")
    for name in c.collectives:
        lines.append(f"  {name}: size = {SIZE_MEANS[name]}; factor {FACTOR_FORMULA[name]} = "
                     f"{bus_factor(name, c.ranks):g}")
    fits = c.fits
    if fits:
        lines.append("fit: time = α + bus bytes / β, bus bytes = factor × size (β per direction on the busiest link)")
    for name, f in fits.items():
        clamped = "; α < 0 refitted as 0" if f.clamped else ""
        lines.append(f"  {name:<15} α {format_time(f.alpha_s):>9}  β {format_bytes_per_s(f.beta_bytes_per_s, 4):>12}"
                     f"  (residual {f.residual:.1%} rms, worst {f.max_residual:.1%}, {f.points} sizes{clamped})")
    for name, why in c.fit_problems().items():
        lines.append(f"  {name:<15} no fit: {why}")
    if LINK_COLLECTIVE in fits:
        f = fits[LINK_COLLECTIVE]
        lines.append(f"node link (--save): the {LINK_COLLECTIVE} fit, {format_bytes_per_s(f.beta_bytes_per_s, 4)} "
                     f"per direction, latency {format_time(f.alpha_s)}")
    for what, why in c.not_measured.items():
        lines.append(f"not measured: {what} ({why})")
    lines += c.notes
    done = "" if c.complete else ", incomplete"
    lines.append(f"measured in {c.wall_s:.1f} s of a {c.budget_s:g} s budget ({c.ranks} {c.backend} processes on "
                 f"127.0.0.1{', --quick' if c.quick else ''}{done})")
    return "\n".join(lines)
