"""Quantities: parsing "3.35 TB/s" and printing 3.35e12 bytes/s.

Inside the library every quantity is in base units (FLOP, FLOP/s, bytes, bytes/s, seconds).
Prefixes exist only here. Rates (FLOP/s, bytes/s) are always decimal: 3.35 TB/s = 3.35e12
bytes/s. Sizes say exactly which they are: "KB" is 1000 bytes and "KiB" is 1024; the two are
never printed under one name.

Layering: this module imports nothing from roofline.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from roofline.errors import RooflineError

Kind = Literal["flop", "flop_per_s", "bytes", "bytes_per_s", "time_s"]

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

# unit word (after the prefix) -> the quantity kind it denotes
_UNIT_WORDS: dict[str, Kind] = {
    "FLOP/s": "flop_per_s",
    "FLOPS": "flop_per_s",
    "OP/s": "flop_per_s",  # integer ops (int8 "TOPS") share the rate axis with FLOP/s
    "OPS": "flop_per_s",
    "FLOP": "flop",
    "B/s": "bytes_per_s",
    "Bps": "bytes_per_s",
    "B": "bytes",
    "s": "time_s",
}
_TIME_PREFIX = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PATTERN = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµ/]*)\s*$")


class UnitError(RooflineError):
    """A quantity string that does not parse, or has the wrong kind of unit."""


def parse_quantity(text: str | float | int, kind: Kind) -> float:
    """Parse "3.35 TB/s" (kind="bytes_per_s") into 3.35e12; a bare number is taken as base units.

    Binary prefixes (KiB, MiB, GiB) are accepted only for byte sizes; rates are decimal.
    """
    if isinstance(text, bool):
        raise UnitError(f"expected a quantity in {_KIND_NAME[kind]}, got {text!r}")
    if isinstance(text, int | float):
        return float(text)
    match = _PATTERN.match(text)
    if match is None:
        raise UnitError(f"cannot read {text!r} as a quantity in {_KIND_NAME[kind]} "
                        f"(write it like {_EXAMPLE[kind]!r})")
    number = float(match.group(1))
    unit = match.group(2)
    if unit == "":
        return number
    for word, word_kind in sorted(_UNIT_WORDS.items(), key=lambda kv: -len(kv[0])):
        if not unit.endswith(word):
            continue
        prefix = unit[: -len(word)]
        if word_kind == "time_s":
            if prefix in _TIME_PREFIX and kind == "time_s":
                return number * _TIME_PREFIX[prefix]
            continue
        if word_kind != kind:
            raise UnitError(f"{text!r} is in {_KIND_NAME[word_kind]}, expected {_KIND_NAME[kind]} "
                            f"(write it like {_EXAMPLE[kind]!r})")
        if prefix in _DECIMAL:
            return number * _DECIMAL[prefix]
        if prefix in _BINARY:
            if word_kind != "bytes":
                raise UnitError(f"{text!r}: binary prefixes are for sizes only; rates are decimal "
                                f"(write {prefix[0]}B/s)")
            return number * _BINARY[prefix]
        break
    raise UnitError(f"unknown unit in {text!r} (write it like {_EXAMPLE[kind]!r})")


_KIND_NAME: dict[Kind, str] = {
    "flop": "FLOP",
    "flop_per_s": "FLOP/s",
    "bytes": "bytes",
    "bytes_per_s": "bytes/s",
    "time_s": "seconds",
}
_EXAMPLE: dict[Kind, str] = {
    "flop": "4.4 TFLOP",
    "flop_per_s": "989 TFLOP/s",
    "bytes": "80 GiB",
    "bytes_per_s": "3.35 TB/s",
    "time_s": "80 us",
}


def _si(value: float, unit: str, digits: int = 3) -> str:
    """Decimal prefix formatting with `digits` significant figures: 3.35e12, "B/s" -> "3.35 TB/s"."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    sign = "-" if value < 0 else ""
    value = abs(value)
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale * 0.9995:
            return f"{sign}{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{sign}{_sig(value, digits)} {unit}"


def _sig(x: float, digits: int) -> str:
    """`digits` significant figures, no exponent, trailing zeros of the fraction dropped."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """A number with a decimal prefix, `digits` significant figures: 1e12 -> "1 T", 3.35e12, "B/s" -> "3.35 TB/s"."""
    return _si(value, unit, digits).strip()


def finite_or_none(x: float | None) -> float | None:
    """JSON has no infinity: an infinite intensity (a kernel that moves no bytes) is written as null."""
    return x if x is not None and math.isfinite(x) else None


def format_flop(flop: float, digits: int = 3) -> str:
    return _si(flop, "FLOP", digits)


def format_flop_per_s(rate: float, digits: int = 3) -> str:
    return _si(rate, "FLOP/s", digits)


def format_bytes_per_s(rate: float, digits: int = 3) -> str:
    return _si(rate, "B/s", digits)


def format_bytes(size: float, digits: int = 3, binary: bool = False) -> str:
    """Decimal by default ("134 MB"); binary=True prints KiB/MiB/GiB. The name always says which."""
    if not binary:
        return _si(size, "B", digits)
    if size == 0 or not math.isfinite(size):
        return f"{size:g} B"
    for prefix, scale in (("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10)):
        if abs(size) >= scale:
            return f"{_sig(size / scale, digits)} {prefix}B"
    return f"{_sig(size, digits)} B"


def format_time(seconds: float, digits: int = 3) -> str:
    """80e-6 -> "80 µs"; 3.9e-3 -> "3.9 ms"."""
    if seconds == 0 or not math.isfinite(seconds):
        return f"{seconds:g} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale * 0.9995:
            return f"{_sig(seconds / scale, digits)} {unit}"
    return f"{_sig(seconds / 1e-12, digits)} ps"


def format_intensity(flop_per_byte: float, digits: int = 3) -> str:
    """Intensity in FLOP/byte, never with a prefix: 1365.3 stays 1365 rather than 1.37 k."""
    if flop_per_byte >= 10 ** digits:
        return f"{flop_per_byte:,.0f} FLOP/B"
    return f"{_sig(flop_per_byte, digits)} FLOP/B"


def format_count(n: float) -> str:
    """Parameter-style counts: 70.6e9 -> "70.6 B"; plain digits below a thousand."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{_sig(n / scale, 3)} {suffix}"
    return f"{n:g}"


def require_positive_int(value: object, label: str) -> int:
    """The one check of a size handed to the library: an int of at least 1 (True is not a size)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UnitError(f"{label} must be a positive integer, got {value!r}")
    return value


def parse_positive_int(text: object, label: str) -> int:
    """A size from the command line: "8192" or "8_192"; "-5", "0" and "abc" fail naming `label`."""
    try:
        number = int(str(text).replace("_", ""))
    except ValueError:
        raise UnitError(f"{label} must be a positive integer, got {text!r}") from None
    return require_positive_int(number, label)
