"""Quantities: parsing "3.35 TB/s" and printing 3.35e12 bytes/s.

Inside the library every quantity is in base units (FLOP, FLOP/s, bytes, bytes/s, seconds).
Prefixes exist only here. Rates (FLOP/s, bytes/s) are always decimal: 3.35 TB/s = 3.35e12
bytes/s. Sizes say exactly which they are: "KB" is 1000 bytes and "KiB" is 1024; the two are
never printed under one name.

Ranges: a quantity is finite and at most MAX_QUANTITY (1e30) in base units; a size or token count
is a whole number from 1 to MAX_COUNT (2**53, the largest range in which every whole number is
exactly a float, so the library's float sums of FLOPs and bytes stay exact per size). Counts take
the suffixes k/K = 1000, M = 10**6, G = 10**9 and Ki = 1024, Mi = 2**20, Gi = 2**30 ("128k" is
128,000 tokens; "128Ki" is 131,072). Anything else is one UnitError naming the range.
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
_PATTERN = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµ/]*)\s*$", re.ASCII)  # digits 0-9 only: see ascii_digits


MIN_SHARE = 1e-6  # the smallest share any input may give (an efficiency, a calibration's fraction, an
# acceptance rate): a millionth of the roof is already far below any kernel's; a subnormal 1e-320
# would make floor / share infinite
MAX_QUANTITY = 1e30  # FLOP, FLOP/s, bytes, bytes/s or seconds: 1e30 FLOP is 10,000x the largest training run
MAX_COUNT = 2**53  # sizes and token counts: every whole number up to here is exactly a float
MAX_LIST_VALUES = 10_000  # one axis of a sweep; 1:100000000:1 would otherwise be built, exhausting memory

# token-count and size suffixes: decimal k/K, M, G (HF's "128k" = 128,000) and binary Ki, Mi, Gi
COUNT_SUFFIXES = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
COUNT_HINT = "write it like 8192, 128k (= 128,000) or 128Ki (= 131,072)"
_COUNT = re.compile(r"(\d+(?:_\d+)*)(?:\.(\d*))?\s*(Ki|Mi|Gi|k|K|M|G)?", re.ASCII)
_SIGNED_INT = re.compile(r"[-+]?\d+", re.ASCII)


class UnitError(RooflineError):
    """A quantity string that does not parse, or has the wrong kind of unit."""


def _shown(text: object) -> str:
    """A value for an error message, never hundreds of digits long: 10**400 is "about 10**400"."""
    if isinstance(text, int) and not isinstance(text, bool):
        if abs(text) < 10**18:
            return repr(text)
        return f"{'-' if text < 0 else ''}about 10**{math.floor(math.log10(abs(text)))}"
    shown = str(text)
    if len(shown) > 40:
        return repr(shown[:20] + "...") + f" ({len(shown)} characters)"
    return repr(text)


def ascii_digits(text: str, label: str = "") -> None:
    """Numbers are written with the digits 0-9. Python's int() and float() also read other scripts'
    digits ("٣٠" as 30, "３" as 3): refused in one line, never read as a number the user may not have
    meant (a name or a file name may hold any character; only a number is held to this)."""
    odd = next((ch for ch in text if ch.isdigit() and not ch.isascii()), None)
    if odd is not None:
        where = f"{label}: " if label else ""
        raise UnitError(f"{where}{_shown(text)} holds the digit {odd!r} (U+{ord(odd):04X}); write numbers with the "
                        "digits 0-9")


def _in_range(value: float, text: object, kind: Kind) -> float:
    """The one range check of a parsed quantity: finite, and at most MAX_QUANTITY in magnitude."""
    if math.isnan(value):
        raise UnitError(f"{_shown(text)} is not a number ({_EXAMPLE[kind]!r} is)")
    if not abs(value) <= MAX_QUANTITY:
        raise UnitError(f"{_shown(text)} is too large: a quantity is finite and at most {MAX_QUANTITY:g} "
                        f"{_KIND_NAME[kind]} (write it like {_EXAMPLE[kind]!r})")
    return value


def parse_quantity(text: str | float | int, kind: Kind) -> float:
    """Parse "3.35 TB/s" (kind="bytes_per_s") into 3.35e12; a bare number is taken as base units.

    Binary prefixes (KiB, MiB, GiB) are accepted only for byte sizes; rates are decimal.
    """
    if isinstance(text, bool):
        raise UnitError(f"expected a quantity in {_KIND_NAME[kind]}, got {text!r}")
    if isinstance(text, int | float):
        try:
            return _in_range(float(text), text, kind)
        except OverflowError:  # an int beyond any float: 10**400
            return _in_range(math.inf, text, kind)
    return _in_range(_parse(text, kind), text, kind)


def _parse(text: str, kind: Kind) -> float:
    """The text's number times its prefix, in base units (maybe infinite: the caller checks the range)."""
    ascii_digits(text)
    match = _PATTERN.match(text)
    if match is None:
        raise UnitError(f"cannot read {_shown(text)} as a quantity in {_KIND_NAME[kind]} "
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
            raise UnitError(f"{_shown(text)} is in {_KIND_NAME[word_kind]}, expected {_KIND_NAME[kind]} "
                            f"(write it like {_EXAMPLE[kind]!r})")
        if prefix in _DECIMAL:
            return number * _DECIMAL[prefix]
        if prefix in _BINARY:
            if word_kind != "bytes":
                raise UnitError(f"{_shown(text)}: binary prefixes are for sizes only; rates are decimal "
                                f"(write {prefix[0]}B/s)")
            return number * _BINARY[prefix]
        break
    raise UnitError(f"unknown unit in {_shown(text)} (write it like {_EXAMPLE[kind]!r})")


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
    if value >= 999.5e18:  # beyond the largest prefix: 1e+30 FLOP, not 1e+12 EFLOP
        return f"{sign}{_sig(value, digits)} {unit}"
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale * 0.9995:
            return f"{sign}{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{sign}{_sig(value, digits)} {unit}"


def _sig(x: float, digits: int) -> str:
    """`digits` significant figures, trailing zeros of the fraction dropped; no exponent from 1e-4 up to
    a million, scientific notation beyond ("1.2e+30", never 300 digits)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if not 1e-4 <= abs(x) < 1e6:
        mantissa, exponent = f"{x:.{max(digits - 1, 0)}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{exponent}"
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
    if abs(size) >= 1000 * 2.0**50:  # beyond PiB: 1e+30 B
        return f"{_sig(size, digits)} B"
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
    if 10 ** digits <= flop_per_byte < 1e9:
        return f"{flop_per_byte:,.0f} FLOP/B"
    return f"{_sig(flop_per_byte, digits)} FLOP/B"


def format_count(n: float) -> str:
    """Parameter-style counts: 70.6e9 -> "70.6 B"; plain digits below a thousand."""
    if abs(n) >= 1e15:  # beyond T: 1e+30
        return _sig(n, 3)
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{_sig(n / scale, 3)} {suffix}"
    return f"{n:g}"


def require_positive_int(value: object, label: str) -> int:
    """The one check of a size handed to the library: an int from 1 to MAX_COUNT (True is not a size)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UnitError(f"{label} must be a positive integer, got {_shown(value)}")
    if value > MAX_COUNT:
        raise _too_large(label, value)
    return value


def _too_large(label: str, given: object) -> UnitError:
    return UnitError(f"{label} {_shown(given)} is too large: a size or count is at most 2**53 = {MAX_COUNT:,} "
                     "(the largest whole number a float holds exactly)")


def _whole(text: str) -> int | None:
    """"8192", "8_192", "128k" (128,000), "128Ki" (131,072), "1.5M": a whole number, or None.

    Beyond MAX_COUNT the value is MAX_COUNT + 1 (too large, whatever it was): a 400-digit count is
    never built."""
    match = _COUNT.fullmatch(text.strip())
    if match is None:
        return None
    digits, fraction, suffix = match.group(1).replace("_", ""), match.group(2) or "", match.group(3)
    if len(digits.lstrip("0")) > 20:
        return MAX_COUNT + 1
    if len(fraction) > 20:
        return None
    numerator = int(digits + fraction) * COUNT_SUFFIXES.get(suffix or "", 1)
    denominator = 10 ** len(fraction)
    if numerator % denominator:
        return None  # "1.5" tokens, "1.0001k"
    return min(numerator // denominator, MAX_COUNT + 1)


def parse_positive_int(text: object, label: str) -> int:
    """A size or token count from the command line: "8192", "8_192", "128k" (128,000), "128Ki"
    (131,072); from 1 to 2**53. "-5", "0", "1.5" and "abc" fail naming `label`."""
    if isinstance(text, int) and not isinstance(text, bool):
        return require_positive_int(text, label)
    ascii_digits(str(text), label)
    value = _whole(str(text))
    if value is not None:
        if value > MAX_COUNT:
            raise _too_large(label, text)
        return require_positive_int(value, label)
    if _SIGNED_INT.fullmatch(str(text).strip()) and len(str(text)) < 40:
        return require_positive_int(int(str(text)), label)  # "-5": the message shows -5
    raise UnitError(f"{label} must be a positive integer, got {_shown(text)} ({COUNT_HINT})")


def parse_int_list(text: object, label: str) -> list[int]:
    """"1,8,64"; "1:1024" (powers of two from 1 to 1024); "1:1024:x4" (×4 steps); "128:1024:128" (+128
    steps); each number as parse_positive_int reads it (1k:128k). At most MAX_LIST_VALUES values."""
    out: list[int] = []
    usage = (f"{label}: cannot read {{part}}; write a list like 1,8,64 or a range like 1:1024 (powers of two), "
             "1:1024:x4 or 128:1024:128 (counts take k = 1000 or Ki = 1024: 1k:128k)")
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        if ":" not in part:
            if len(out) + 1 > MAX_LIST_VALUES:
                raise UnitError(f"{label}: more than {MAX_LIST_VALUES:,} values")
            out.append(parse_positive_int(part, label))
            continue
        bits = part.split(":")
        ends = [_whole(b) for b in bits[:2]]
        step = bits[2] if len(bits) == 3 else "x2"
        times = step.startswith("x")
        inc = _whole(step[1:] if times else step)
        if len(bits) not in (2, 3) or ends[0] is None or ends[1] is None or inc is None:
            raise UnitError(usage.format(part=_shown(part)))
        lo, hi = ends[0], ends[1]
        if lo < 1 or hi < lo:
            raise UnitError(f"{label}: range {_shown(part)} must go from a positive start up to its end")
        if hi > MAX_COUNT:
            raise _too_large(label, part)
        if inc < (2 if times else 1):
            raise UnitError(f"{label}: the step of {_shown(part)} must be " + ("x2 or more" if times else "1 or more"))
        if times:
            values = []
            v = lo
            while v <= hi:  # at most 54 values: hi <= 2**53
                values.append(v)
                v *= inc
        else:
            count = (hi - lo) // inc + 1
            if len(out) + count > MAX_LIST_VALUES:
                raise UnitError(f"{label}: {_shown(part)} is {count:,} values; at most {MAX_LIST_VALUES:,} "
                                f"(take a larger step, e.g. {lo}:{hi}:x2)")
            values = list(range(lo, hi + 1, inc))
        if len(out) + len(values) > MAX_LIST_VALUES:
            raise UnitError(f"{label}: more than {MAX_LIST_VALUES:,} values")
        out.extend(values)
    if not out:
        raise UnitError(f"{label}: no values given")
    return out
