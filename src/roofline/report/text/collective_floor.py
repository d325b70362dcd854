"""One collective's floor, expected band, busbw and algbw, and every algorithm's floor, as text.

Layering: imports units and parallel (the estimate it prints).
"""

from __future__ import annotations

from roofline.parallel.algorithms import CollectiveEstimate
from roofline.units import format_bytes, format_bytes_per_s, format_time


def _bw(e: CollectiveEstimate, t: float) -> str:
    return f"algbw {format_bytes_per_s(e.algbw(t))}, busbw {format_bytes_per_s(e.busbw(t))}"


def collective_text(e: CollectiveEstimate) -> str:
    """The estimate as the command prints it: headline, floor, band, the algorithms, the definitions."""
    f = e.floor
    where = "across nodes" if e.spans_nodes else "in one node"
    name = e.kind.value.replace("_", "-")
    lines = [f"{name} of {format_bytes(e.message_bytes, binary=True)} over {e.group} devices of {e.system} "
             f"({where}: {e.link_name}, {format_bytes_per_s(e.link_bytes_per_s)} per device per direction)",
             f"algorithm  {e.chosen}: {e.why}",
             f"floor      {format_time(f.floor_s)}   {_bw(e, f.floor_s)}   {f.formula}"]
    if e.expected_s is not None and e.band_s is not None:
        lines.append(f"expected   {format_time(e.expected_s)} (band {format_time(e.band_s[0])} – "
                     f"{format_time(e.band_s[1])})   {_bw(e, e.expected_s)}")
        lines.append(f"           {e.expected_from}")
    else:
        lines.append(f"expected   none: {e.expected_from}")
    if e.lowest.algorithm is not e.chosen:
        lines.append(f"lowest     {e.lowest.algorithm}'s floor {format_time(e.lowest.floor_s)}: what no measurement of "
                     "this collective on this system may beat")
    lines.append("")
    lines.append(f"{'algorithm':<10} {'bytes per device':>17} {'floor':>11}   formula")
    for a in e.floors:
        mark = "*" if a.algorithm is e.chosen else " "
        lines.append(f"{mark}{a.algorithm!s:<9} {format_bytes(a.bytes_per_device, binary=True):>17} "
                     f"{format_time(a.floor_s):>11}   {a.formula}")
    lines.append("")
    lines.append(f"α_floor {format_time(e.alpha_floor_s)}: {e.alpha_floor_from}")
    lines.append("algbw = S / t; busbw = algbw × 2(n−1)/n for all-reduce, × (n−1)/n for all-gather, reduce-scatter "
                 "and all-to-all (nccl-tests doc/PERFORMANCE.md), whatever the algorithm: under NVLS busbw can "
                 "exceed the link's rate")
    return "\n".join(lines)


__all__ = ["collective_text"]
