"""Expected bands from the user's own machine: a calibration file in place of the published figures.

    eff = efficiency_from_calibration("my-gpu.calibration.json", Efficiency())

replaces the (low, high) of every bound class the file has (its 25th and 75th percentiles of the
measured shares of the roof, clamped to (0, 1]) and keeps `base` for the rest, and always for the
per-step overhead (no bench measures it). `keep` names classes to take from `base` even where the
file has them (an explicit --efficiency-* flag wins over a file). The result is a
`CalibratedEfficiency`: an Efficiency whose `sources` (and `to_dict()["sources"]`) say, class by
class, which came from the file and which are the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from roofline.errors import RooflineError
from roofline.measure.calibration import CLASSES, Calibration, load_calibration
from roofline.serving.efficiency import Efficiency


@dataclass(frozen=True)
class CalibratedEfficiency(Efficiency):
    """An Efficiency some of whose ranges come from a calibration file. `sources` maps each field
    (compute, memory, communication, step_overhead_s) to where its range came from; `calibration` is
    the file (or "" for a Calibration passed in memory); `from_file` the classes it supplied."""

    sources: tuple[tuple[str, str], ...] = ()
    calibration: str = ""
    from_file: tuple[str, ...] = ()
    machine: str = ""  # the machine the file measured
    date: str = ""

    @property
    def source(self) -> Mapping[str, str]:
        return dict(self.sources)

    @property
    def measured_on(self) -> str:
        return self.machine

    @property
    def origin(self) -> str:
        where = f"the calibration {self.calibration}" if self.calibration else "a calibration"
        rest = [c for c in CLASSES if c not in self.from_file]
        return (f"{' and '.join(self.from_file)}: {where} (measured on {self.machine or 'an unnamed machine'}"
                f"{', ' + self.date if self.date else ''}; 25th-75th percentile of the measured shares of the roof)"
                + (f"; {' and '.join(rest)}: the published figure or as given" if rest else "")
                + "; the overhead: an assumption or as given")

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["sources"] = {**d.get("sources", {}), **dict(self.sources)}
        d["calibration"] = {"file": self.calibration or None, "classes": list(self.from_file)}
        d["calibration_measured_on"] = {"machine": self.machine or None, "date": self.date or None}
        return d


def efficiency_from_calibration(path_or_calibration: str | os.PathLike[str] | Calibration, base: Efficiency,
                                keep: Iterable[str] = ()) -> CalibratedEfficiency:
    """`base` with the ranges the calibration has (clamped to (0, 1]); the rest, and the per-step
    overhead, stay `base`'s. `keep`: classes to leave at `base` even where the file has them."""
    if isinstance(path_or_calibration, Calibration):
        cal, where = path_or_calibration, ""
    else:
        where = os.fspath(path_or_calibration)
        cal = load_calibration(where)
    kept = set(keep)
    bad = sorted(kept - set(CLASSES))
    if bad:
        raise RooflineError(f"unknown bound class {bad[0]!r}; classes: {', '.join(CLASSES)}")
    ranges = {c: r for c, r in cal.efficiency_ranges().items() if c not in kept}
    if not ranges:
        raise RooflineError(f"{where or 'the calibration'} gives no range to use "
                            f"(it has {', '.join(cal.classes) or 'no class'}; kept from the defaults: "
                            f"{', '.join(sorted(kept)) or 'none'})")
    base_sources = base.to_dict().get("sources", {})
    label = f"calibration {where}: " if where else "calibration: "
    sources: dict[str, str] = {}
    for c in CLASSES:
        if c in ranges:
            sources[c] = label + cal.describe(c)
        else:
            why = "given explicitly" if c in kept and c in cal.classes else "not in the calibration"
            sources[c] = f"default ({why}): {base_sources.get(c, 'as given')}"
    sources["step_overhead_s"] = f"default (no calibration measures it): {base_sources.get('step_overhead_s', '')}"
    # every field of Efficiency as base has it (so a field added there is carried over), then the file's
    values: dict[str, Any] = {f.name: getattr(base, f.name) for f in fields(Efficiency) if f.init}
    values.update(ranges)
    return CalibratedEfficiency(**values, sources=tuple(sources.items()), calibration=where,
                                from_file=tuple(ranges), machine=cal.machine, date=cal.date)


__all__ = ["CalibratedEfficiency", "efficiency_from_calibration"]
