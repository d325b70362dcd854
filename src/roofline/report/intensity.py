"""Where a kernel sits on the chart's x axis: FLOPs per DRAM byte, or for a collective per byte on
its link. Its own module, below report.points, so that the text tables (one figure in the table, the
CSV, the PNG and the page) read it without loading the chart points' dataclasses at start-up.
"""

from __future__ import annotations

from roofline.placement import Placement
from roofline.vocab import LINKS, Level


def link_level(p: Placement) -> Level | None:
    """The link a collective crosses (Level.LINK or Level.NETWORK, the one with the larger time if
    both), or None for a kernel that moves no bytes between devices."""
    times = {lv: t for lv, t in p.level_times_s.items() if lv in LINKS and p.cost.bytes_by_level.get(lv)}
    return max(times, key=lambda lv: times[lv]) if times else None


def link_bytes(p: Placement) -> float:
    """Bytes one device sends over its collective's link (0 for any other kernel)."""
    lv = link_level(p)
    return float(p.cost.bytes_by_level[lv]) if lv is not None else 0.0


def intensity(p: Placement) -> float:
    """The x of a kernel's point: FLOPs per DRAM byte, or per byte on the link for a collective."""
    lb = link_bytes(p)
    if lb:
        return p.flop / lb
    return p.flop_per_byte


__all__ = ["intensity", "link_bytes", "link_level"]
