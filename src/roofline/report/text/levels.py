"""Text for the cache ladder of `roofline measure`: bandwidth per working set, and the levels found.

The ladder is duck-typed (roofline.measure.levels.CacheLadder), as ceilings_text takes its Ceilings.
"""

from __future__ import annotations

from typing import Any

from roofline.units import format_bytes, format_bytes_per_s


def ladder_lines(ladder: Any) -> list[str]:
    """One line per working set (its level marked where it lies on a plateau), then one per level."""
    if ladder is None or not ladder.points:
        return []
    where: dict[float, str] = {}
    for p in ladder.plateaus:
        for point in ladder.points:
            if p.first_bytes <= point.working_set_bytes <= p.last_bytes:
                where[point.working_set_bytes] = str(p.level or "")
    lines = [ladder.describe() + ":"]
    for point in ladder.points:
        mark = f"  {where[point.working_set_bytes]}" if point.working_set_bytes in where else ""
        lines.append(f"  {format_bytes(point.working_set_bytes, 3, binary=True):>10} per thread  "
                     f"{format_bytes_per_s(point.best_rate, 4):>12}{mark}")
    for level, p in ladder.levels.items():
        size = ladder.cache_bytes.get(level)
        cap = f", cache {format_bytes(size[0], 3, binary=True)} (sysfs)" if size else ""
        lines.append(f"{level} bandwidth: {format_bytes_per_s(p.bytes_per_s, 4)} (median of {p.sizes} sizes, "
                     f"{format_bytes(p.first_bytes, 3, binary=True)} to {format_bytes(p.last_bytes, 3, binary=True)}"
                     f"{cap})")
    if not ladder.levels:
        lines.append("no plateau found: the bandwidths varied more than the tolerance between sizes")
    return lines


def chip_lines(c: Any) -> list[str]:
    """The CUDA microkernels' figures (L2, L1/shared SRAM, exponentials), each against the catalog's
    per-SM figures (rate per clock per SM × SMs × clock) where the GPU is in the catalog."""
    runs = getattr(c, "chip_runs", ())
    if not runs:
        return []
    from roofline.units import format_si

    compared = {row["resource"]: row for row in c.to_dict().get("chip_comparison", [])}
    lines = []
    for r in runs:
        rate = format_si(r.best_rate, "exp/s") if r.unit == "ops_per_s" else format_bytes_per_s(r.best_rate, 4)
        row = compared.get(r.resource)
        versus = f"; {row['ratio']:.0%} of the per-SM figures' {format_si(row['per_sm_figures'])}" if row else ""
        lines.append(f"{r.name}: {rate} ({r.counted}{versus})")
    return lines
