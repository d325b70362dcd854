"""How close real kernels come to their floors: predicted against measured, kernel by kernel.

For each measured kernel, % of roof = time floor / measured time (`Placement.fraction_of_roof`).
The usual expectation: a good matmul reaches 70 to 80% of peak, a good memory-bound kernel 80 to
90% of bandwidth. The summary gives the median share of the roof for the memory-bound and for the
compute-bound kernels, the worst offenders, and every kernel measured above its roof: those are
errors of the model (bytes or FLOPs undercounted) or of the measurement, never results.

The table of predicted against measured, kernel by kernel, is `roofline.report.text.accuracy.accuracy_table`:
this module holds the numbers only and never imports the report room.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from roofline.frozen import frozen
from roofline.placement import Placement
from roofline.units import format_time
from roofline.vocab import Bound

ABOVE_ROOF = ("ABOVE THE ROOF: the model is wrong for this kernel (its bytes or FLOPs are off; data served "
              "from a cache is counted as DRAM traffic) or its timing is")
SPLIT = (Bound.MEMORY, Bound.COMPUTE)  # the summary's two groups, in the order they are shown


@frozen
class Accuracy:
    placements: tuple[Placement, ...]  # those with a measured time

    @staticmethod
    def of(placements: Sequence[Placement]) -> Accuracy:
        return Accuracy(tuple(p for p in placements if p.fraction_of_roof is not None))

    def bound(self, which: Bound) -> list[Placement]:
        return [p for p in self.placements if p.bound_class is Bound(which)]

    def median_fraction(self, which: Bound) -> float | None:
        """The median share of the roof over the kernels bound by `which` (memory or compute)."""
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
            "median_fraction_of_roof": {which: self.median_fraction(which) for which in SPLIT},
            "kernels": {which: len(self.bound(which)) for which in SPLIT},
            "worst": [{"name": p.name, "fraction_of_roof": p.fraction_of_roof} for p in self.worst()],
            "above_roof": [p.name for p in self.above_roof],
        }

    def lines(self) -> list[str]:
        out = []
        for which in SPLIT:
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
