"""How close real kernels come to their floors: predicted against measured, kernel by kernel.

For each measured kernel, % of roof = time floor / measured time (`Placement.fraction_of_roof`).
The seed's expectation: a good matmul reaches 70 to 80% of peak, a good memory-bound kernel 80 to
90% of bandwidth. The summary gives the median share of the roof for the memory-bound and for the
compute-bound kernels, the worst offenders, and every kernel measured above its roof: those are
errors of the model (bytes or FLOPs undercounted) or of the measurement, never results.

Layering: imports roofline.placement and roofline.units only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roofline.placement import Placement
from roofline.units import format_time

ABOVE_ROOF = ("ABOVE THE ROOF: the model is wrong for this kernel (its bytes or FLOPs are off; data served "
              "from a cache is counted as DRAM traffic) or its timing is")


@dataclass(frozen=True)
class Accuracy:
    placements: tuple[Placement, ...]  # those with a measured time

    @staticmethod
    def of(placements: Sequence[Placement]) -> Accuracy:
        return Accuracy(tuple(p for p in placements if p.fraction_of_roof is not None))

    def bound(self, which: str) -> list[Placement]:
        return [p for p in self.placements if p.bound_class == which]

    def median_fraction(self, which: str) -> float | None:
        """The median share of the roof over the kernels bound by `which` ("memory" or "compute")."""
        fractions = [p.fraction_of_roof for p in self.bound(which) if p.fraction_of_roof is not None]
        return float(statistics.median(fractions)) if fractions else None

    @property
    def above_roof(self) -> list[Placement]:
        return [p for p in self.placements if p.above_roof]

    def worst(self, n: int = 3) -> list[Placement]:
        """The kernels furthest below their roof, worst first."""
        return sorted(self.placements, key=lambda p: p.fraction_of_roof or 0.0)[:n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_fraction_of_roof": {"memory": self.median_fraction("memory"),
                                        "compute": self.median_fraction("compute")},
            "kernels": {"memory": len(self.bound("memory")), "compute": len(self.bound("compute"))},
            "worst": [{"name": p.name, "fraction_of_roof": p.fraction_of_roof} for p in self.worst()],
            "above_roof": [p.name for p in self.above_roof],
        }

    def lines(self) -> list[str]:
        out = []
        for which in ("memory", "compute"):
            med = self.median_fraction(which)
            count = len(self.bound(which))
            if med is not None:
                out.append(f"{which}-bound kernels ({count}): median {med:.0%} of the roof")
        if self.placements:
            worst = ", ".join(f"{p.name} {p.fraction_of_roof or 0:.0%}" for p in self.worst())
            out.append(f"furthest below the roof: {worst}")
        for p in self.above_roof:
            out.append(f"! {p.name}: measured {format_time(p.measured_time_s or 0.0)} < floor "
                       f"{format_time(p.time_s)} ({p.fraction_of_roof or 0:.0%}): {ABOVE_ROOF}")
        return out


def accuracy_table(placements: Sequence[Placement], title: str = "") -> str:
    """Predicted floor beside measured time, kernel by kernel, with the share of the roof reached."""
    from rich.table import Table

    from roofline.report.text import render
    from roofline.units import format_bytes_per_s, format_flop_per_s, format_intensity

    t = Table(title=title, title_justify="left")
    for col, just in (("kernel", "left"), ("FLOP/B", "right"), ("bound", "left"), ("floor", "right"),
                      ("measured", "right"), ("achieved", "right"), ("% of roof", "right"), ("", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in placements:
        measured = p.measured_time_s
        if measured is None:
            t.add_row(p.name, format_intensity(p.flop_per_byte), p.bound_class, format_time(p.time_s),
                      "—", "—", "—", "")
            continue
        achieved = (format_bytes_per_s(p.bytes / measured) if p.bound_class == "memory"
                    else format_flop_per_s(p.flop / measured))
        flag = "ABOVE ROOF" if p.above_roof else ""
        t.add_row(p.name, format_intensity(p.flop_per_byte), p.bound_class, format_time(p.time_s),
                  format_time(measured), achieved, f"{p.fraction_of_roof or 0:.0%}", flag)
    return render(t, width=150)
