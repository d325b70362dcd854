"""A calibration file: the shares of the roof real kernels reached on one machine, per bound class.

`roofline bench --save-calibration FILE` writes the compute and memory classes from the bench's
placements; `roofline measure --collectives --save-calibration FILE` writes the communication class;
`roofline serve --calibration FILE` takes its expected bands from it (roofline.calibration.choose).

What is recorded, per bound class (compute, memory, communication):

    samples   the measured fractions of the roof, one per kernel (or collective)
              a kernel:     fraction = time floor / measured time   (Placement.fraction_of_roof)
              a collective: fraction = busbw at its largest size / the link's bandwidth per direction
    low       the 25th percentile of the samples          high   the 75th percentile
    n         how many samples                           (one sample: low = high = that value)

Quantiles by linear interpolation between the sorted samples x[0] ≤ … ≤ x[n−1] (numpy's default,
Hyndman and Fan's type 7): q(p) = x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]) with h = (n − 1)·p. Fractions
0.6, 0.7, 0.8, 0.9 give low 0.675 and high 0.825.

A kernel measured above its roof (fraction > 1) is an error of the model or of the timing, never a
share a kernel reaches: it is left out of the samples and named in `excluded`. A collective's share
needs the link's bandwidth: given, or the catalog system of the GPU measured; otherwise (a CPU run,
a GPU not in the catalog) the communication class is left out and a note says so.

The file is JSON (`to_json`, `load_calibration`); a malformed one fails in one line (RooflineError).

No numpy, no torch.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError, unknown
from roofline.frozen import frozen
from roofline.units import MIN_SHARE, format_bytes, format_bytes_per_s
from roofline.vocab import Bound

if TYPE_CHECKING:
    from roofline.measure.collectives import Collectives
    from roofline.placement import Placement

FORMAT = "roofline-calibration"
VERSION = 1
CLASSES: tuple[str, ...] = (Bound.COMPUTE.value, Bound.MEMORY.value, Bound.COMMUNICATION.value)
LOW_Q, HIGH_Q = 0.25, 0.75
QUANTILE_METHOD = "linear interpolation between sorted samples (numpy's default, type 7): h = (n-1)p"


def quantile(values: Sequence[float], p: float) -> float:
    """The p-quantile of `values` by linear interpolation (type 7): 0.6, 0.7, 0.8, 0.9 at 0.25 -> 0.675."""
    xs = sorted(float(v) for v in values)
    if not xs:
        raise RooflineError("a quantile needs at least one value")
    h = (len(xs) - 1) * p
    i = math.floor(h)
    if i + 1 >= len(xs):
        return xs[-1]
    return xs[i] + (h - i) * (xs[i + 1] - xs[i])


@frozen
class Sample:
    """One measured kernel or collective: its name and the fraction of its roof it reached."""

    name: str
    fraction: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fraction_of_roof": self.fraction}


@frozen
class ClassShare:
    """The measured share of the roof of one bound class: (low, high) = the 25th and 75th percentiles
    of `samples` (or, in a hand-written file without samples, as written), over `n` samples."""

    low: float
    high: float
    n: int
    samples: tuple[Sample, ...] = ()

    @staticmethod
    def of(samples: Iterable[Sample]) -> ClassShare:
        ss = tuple(samples)
        if not ss:
            raise RooflineError("a bound class needs at least one measured sample")
        fr = [s.fraction for s in ss]
        return ClassShare(quantile(fr, LOW_Q), quantile(fr, HIGH_Q), len(ss), ss)

    @property
    def clamped(self) -> tuple[float, float]:
        """(low, high) within (0, 1]: an efficiency never exceeds the roof."""
        return min(self.low, 1.0), min(self.high, 1.0)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"low": self.low, "high": self.high, "n": self.n}
        if self.samples:
            d["samples"] = [s.to_dict() for s in self.samples]
        return d


@frozen
class Calibration:
    """Measured shares of the roof per bound class (a subset of compute, memory, communication), the
    machine they were measured on, the date (UTC, YYYY-MM-DD) and the command that produced them."""

    machine: str
    date: str
    produced_by: str
    classes: Mapping[str, ClassShare] = field(default_factory=dict)
    excluded: tuple[str, ...] = ()  # samples left out, each with why
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = [c for c in self.classes if c not in CLASSES]
        if bad:
            raise unknown("bound class", bad[0], CLASSES)
        ordered = {c: self.classes[c] for c in CLASSES if c in self.classes}
        object.__setattr__(self, "classes", MappingProxyType(ordered))

    # --- from measurements ------------------------------------------------------------------
    @staticmethod
    def from_placements(placements: Sequence[Placement], *, machine: str | None = None,
                        produced_by: str = "roofline bench", date: str | None = None) -> Calibration:
        """The bench's measured placements: per bound class, fraction = floor / measured time.
        Placements without a measured time are skipped; those above their roof are excluded."""
        by_class: dict[str, list[Sample]] = {}
        excluded: list[str] = []
        measured = [p for p in placements if p.fraction_of_roof is not None]
        if not measured:
            raise RooflineError("no measured kernels to calibrate from")
        for p in measured:
            frac = float(p.fraction_of_roof or 0.0)
            if p.above_roof:
                excluded.append(f"{p.name}: {frac:.0%} of its roof, above it (an error of the model or the timing)")
                continue
            by_class.setdefault(str(p.bound_class), []).append(Sample(p.name, frac))
        classes = {c: ClassShare.of(s) for c, s in by_class.items()}
        return Calibration(machine or measured[0].machine.id, date or _today(), produced_by, classes,
                           tuple(excluded))

    @staticmethod
    def from_collectives(record: Collectives, *, link_bytes_per_s: float | None = None,
                         produced_by: str = "roofline measure --collectives", date: str | None = None,
                         ) -> Calibration:
        """A collectives run: per collective, busbw at its largest measured size / the link's bandwidth
        per direction (`link_bytes_per_s`, or the catalog's node link of the GPU measured). Without a
        known link the communication class is left out, and a note says so."""
        machine = record.catalog_id or record.default_id()
        link, where = (link_bytes_per_s, "as given") if link_bytes_per_s else _catalog_link(record)
        when = date or record.date or _today()
        if not link:
            note = (f"communication left out: the link's bandwidth of {record.device_name} is not known "
                    f"({where}), so busbw has nothing to be a fraction of")
            return Calibration(machine, when, produced_by, {}, (), (note,))
        samples = []
        for c in record.collectives:
            largest = record.points_of(c)[-1]
            samples.append(Sample(f"{c} {format_bytes(largest.size_bytes, binary=True)} x{largest.ranks}",
                                  largest.busbw_bytes_per_s / link))
        if not samples:
            return Calibration(machine, when, produced_by, {}, (),
                               ("communication left out: no collective was measured",))
        note = (f"communication: busbw at each collective's largest size / the link, "
                f"{format_bytes_per_s(link, 4)} per direction ({where})")
        return Calibration(machine, when, produced_by, {Bound.COMMUNICATION.value: ClassShare.of(samples)}, (),
                           (note,))

    def merge(self, other: Calibration) -> Calibration:
        """Both files' classes. A class in both pools the samples (quartiles recomputed); where either
        side has no samples (a hand-written range), `other`'s range replaces this one's."""
        classes = dict(self.classes)
        notes = [*self.notes, *other.notes]
        for c, share in other.classes.items():
            mine = classes.get(c)
            if mine is not None and mine.samples and share.samples:
                classes[c] = ClassShare.of((*mine.samples, *share.samples))
            else:
                if mine is not None:
                    notes.append(f"{c}: the range of {other.produced_by} replaced that of {self.produced_by}")
                classes[c] = share
        machine = self.machine if other.machine == self.machine else f"{self.machine} + {other.machine}"
        produced = self.produced_by if other.produced_by == self.produced_by else \
            f"{self.produced_by}; {other.produced_by}"
        return Calibration(machine, max(self.date, other.date), produced, classes,
                           (*self.excluded, *other.excluded), tuple(notes))

    # --- use --------------------------------------------------------------------------------
    def efficiency_ranges(self) -> dict[str, tuple[float, float]]:
        """(low, high) per bound class the file has, clamped to (0, 1]."""
        return {c: s.clamped for c, s in self.classes.items()}

    def describe(self, which: str) -> str:
        """'memory: 0.675-0.825 (25th-75th percentile of 4 kernels), roofline bench on m, 2025-01-02'."""
        s = self.classes[which]
        lo, hi = s.clamped
        what = "value" if s.n == 1 else f"25th-75th percentile of {s.n}"
        return f"{lo:.3g}-{hi:.3g} ({what}), {self.produced_by} on {self.machine}, {self.date}"

    # --- the file ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "machine": self.machine, "date": self.date,
                "produced_by": self.produced_by, "quantiles": {"low": LOW_Q, "high": HIGH_Q,
                                                               "method": QUANTILE_METHOD},
                "classes": {c: s.to_dict() for c, s in self.classes.items()},
                "excluded": list(self.excluded), "notes": list(self.notes)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def _catalog_link(record: Collectives) -> tuple[float | None, str]:
    """The per-direction node link of the catalog GPU measured, for a group of its ranks."""
    if not record.catalog_id:
        what = "a CPU run" if record.device == "cpu" else "a GPU not in the catalog"
        return None, f"{what}; no catalog link"
    from roofline.hardware import get_machine
    from roofline.hardware.system_file import device_system

    try:
        link = device_system(get_machine(record.catalog_id), max(record.ranks, 2)).node_link
    except RooflineError as exc:
        return None, str(exc)
    return link.bytes_per_s, f"the catalog's node link of {record.catalog_id} for {record.ranks} devices"


# --- reading a file ---------------------------------------------------------------------------------

_TOP = {"format", "version", "machine", "date", "produced_by", "quantiles", "classes", "excluded", "notes"}
_SHARE = {"low", "high", "n", "samples"}


def _number(value: Any, where: str, path: str) -> float:
    """A share of the roof: a finite number from units.MIN_SHARE up (an integer past a float's range, or a
    subnormal 1e-320 that would make floor / share infinite, is refused naming the field)."""
    number = math.nan
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # 10**400 in the file
            raise RooflineError(f"{path}: {where} must be a number, got an integer of hundreds of digits") from None
    if not math.isfinite(number):
        raise RooflineError(f"{path}: {where} must be a number, got {json.dumps(value)[:40]}")
    if not number > 0:
        raise RooflineError(f"{path}: {where} must be above 0, got {number:g}")
    if number < MIN_SHARE:
        raise RooflineError(f"{path}: {where} is a share of the roof, at least {MIN_SHARE:g}; got {number:g}")
    return number


def _text(raw: Mapping[str, Any], key: str, path: str) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise RooflineError(f"{path}: {key} must be a string")
    return value


def _texts(raw: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RooflineError(f"{path}: {key} must be a list of strings")
    return tuple(value)


def _share(name: str, raw: Any, path: str) -> ClassShare:
    if isinstance(raw, int | float) and not isinstance(raw, bool):  # a single value
        v = _number(raw, f"classes.{name}", path)
        return ClassShare(v, v, 1)
    if not isinstance(raw, dict):
        raise RooflineError(f"{path}: classes.{name} must be a number or an object with low and high")
    extra = sorted(set(raw) - _SHARE)
    if extra:
        raise RooflineError(f"{path}: classes.{name} has an unknown key {extra[0]!r}; keys: low, high, n, samples")
    for key in ("low", "high"):
        if key not in raw:
            raise RooflineError(f"{path}: classes.{name} needs {key}")
    low, high = _number(raw["low"], f"classes.{name}.low", path), _number(raw["high"], f"classes.{name}.high", path)
    if low > high:
        raise RooflineError(f"{path}: classes.{name}: low {low:g} is above high {high:g}")
    samples: list[Sample] = []
    raw_samples = raw.get("samples", [])
    if not isinstance(raw_samples, list):
        raise RooflineError(f"{path}: classes.{name}.samples must be a list")
    for i, s in enumerate(raw_samples):
        where = f"classes.{name}.samples[{i}]"
        if not isinstance(s, dict) or not isinstance(s.get("name", ""), str) or "fraction_of_roof" not in s:
            raise RooflineError(f"{path}: {where} must be an object with name and fraction_of_roof")
        samples.append(Sample(s.get("name", ""), _number(s["fraction_of_roof"], f"{where}.fraction_of_roof", path)))
    n_raw = raw.get("n", len(samples) or 1)
    if isinstance(n_raw, bool) or not isinstance(n_raw, int) or n_raw < 1:
        raise RooflineError(f"{path}: classes.{name}.n must be a positive integer, got {json.dumps(n_raw)[:40]}")
    if samples and n_raw != len(samples):
        raise RooflineError(f"{path}: classes.{name}.n is {n_raw} but it lists {len(samples)} samples")
    return ClassShare(low, high, n_raw, tuple(samples))


def parse_calibration(raw: Any, path: str = "<data>") -> Calibration:
    """A Calibration from the decoded JSON of a file; every problem is one line naming the file."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{path}: a calibration file is a JSON object")
    if raw.get("format") != FORMAT:
        raise RooflineError(f"{path}: not a calibration file (format must be {FORMAT!r}; write one with "
                            "`roofline bench --save-calibration FILE`)")
    if raw.get("version") != VERSION:
        raise RooflineError(f"{path}: calibration version {json.dumps(raw.get('version'))[:20]} is not "
                            f"supported (this roofline reads version {VERSION})")
    extra = sorted(set(raw) - _TOP)
    if extra:
        raise RooflineError(f"{path}: unknown key {extra[0]!r}; keys: {', '.join(sorted(_TOP))}")
    classes = raw.get("classes")
    if not isinstance(classes, dict):
        raise RooflineError(f"{path}: classes must be an object (compute, memory, communication)")
    for c in classes:
        if c not in CLASSES:
            raise RooflineError(f"{path}: {unknown('bound class', c, CLASSES)}")
    if not classes:
        raise RooflineError(f"{path}: the file has no bound class (compute, memory, communication)")
    return Calibration(_text(raw, "machine", path), _text(raw, "date", path), _text(raw, "produced_by", path),
                       {c: _share(c, v, path) for c, v in classes.items()}, _texts(raw, "excluded", path),
                       _texts(raw, "notes", path))


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Read a calibration file (JSON). A missing, unreadable or malformed file fails in one line."""
    from roofline.fileio import read_text_file

    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise RooflineError(f"calibration file {p} does not exist (write one with "
                            "`roofline bench --save-calibration FILE`)")
    text = read_text_file(p, "calibration")  # a regular file of at most 1 MiB: never a FIFO or /dev/zero
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (RecursionError, ValueError):  # nested too deeply, or an int past Python's digit limit
        raise RooflineError(f"{p}: not a calibration file (its JSON nests too deeply or holds too long a "
                            "number)") from None
    return parse_calibration(raw, str(p))


__all__ = ["CLASSES", "Calibration", "ClassShare", "Sample", "load_calibration", "parse_calibration", "quantile"]
