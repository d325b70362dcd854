"""How close real kernels came to their floors, as a table: predicted floor beside measured time.

The numbers (share of the roof, the memory/compute summary, the kernels above their roof) are
`roofline.measure.accuracy.Accuracy`; this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.placement import Placement
from roofline.report.text.tables import render
from roofline.units import format_bytes_per_s, format_flop_per_s, format_intensity, format_time
from roofline.vocab import Bound


def accuracy_table(placements: Sequence[Placement], title: str = "") -> str:
    """Predicted floor beside measured time, kernel by kernel, with the share of the roof reached.

    "achieved" is what the kernel's binding class moved: bytes/s for a memory-bound kernel, FLOP/s
    for a compute-bound one."""
    from roofline.report.text.grid import Table

    t = Table(title=title, title_justify="left")
    for col, just in (("kernel", "left"), ("FLOP/B", "right"), ("bound", "left"), ("floor", "right"),
                      ("measured", "right"), ("achieved", "right"), ("% of roof", "right"), ("", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in placements:
        bound = p.bound_class
        measured = p.measured_time_s
        if measured is None:
            t.add_row(p.name, format_intensity(p.flop_per_byte), str(bound), format_time(p.time_s),
                      "—", "—", "—", "")
            continue
        achieved = (format_bytes_per_s(p.bytes / measured) if bound is Bound.MEMORY
                    else format_flop_per_s(p.flop / measured))
        flag = "ABOVE ROOF" if p.above_roof else ""
        t.add_row(p.name, format_intensity(p.flop_per_byte), str(bound), format_time(p.time_s),
                  format_time(measured), achieved, f"{p.fraction_of_roof or 0:.0%}", flag)
    return render(t)
