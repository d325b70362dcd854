"""A trace's events checked before anything is read off them: one line naming the event and the field.

A Chrome/Kineto trace is JSON anyone can write, so each field the reader uses is held to what
torch.profiler writes (its `export_chrome_trace`):

    ts, dur        microseconds, finite numbers; |ts| and dur at most MAX_US (1e18 µs, about 31,700
                   years: a timestamp since the epoch is about 1.8e15 µs), dur not negative. An integer
                   too large for a float (10**400) is refused here, not met later as an OverflowError.
    pid, tid,      a number or a string (Kineto writes integers; a thread's name is sometimes a string):
    correlation,   they are keys that join a launch to its kernels and group events by thread and
    stream, device stream. A list or an object there is refused (it cannot be a key).
    args           an object; "Input Dims" and "Input Strides" lists whose integers are at most
                   2**53 in size (the size limit every other input has); "Input type" and
                   "Concrete Inputs" lists of strings.

The events that pass come back as copies with ts and dur as floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from roofline.errors import RooflineError

MAX_US = 1e18  # microseconds: far beyond any real timestamp (about 1.8e15 µs since 1970) or duration
MAX_DIM = 2**53  # the largest size or count any input may give (units.MAX_COUNT's limit)
KEY_FIELDS = ("pid", "tid")
ARG_KEY_FIELDS = ("correlation", "stream", "device")


def _where(source: str, e: Mapping[str, Any]) -> str:
    return f"{source or 'the trace'}: event {str(e.get('name', ''))[:60]!r}"


def _time(value: Any, what: str, where: str, *, signed: bool) -> float:
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    number = math.nan
    if not bad:
        try:
            number = float(value)
        except OverflowError:  # an integer past a float's range
            bad = True
    if bad or not math.isfinite(number) or abs(number) > MAX_US or (not signed and number < 0):
        text = "an integer of hundreds of digits" if isinstance(value, int) and bad else repr(value)[:40]
        span = "of at most 1e18 in size" if signed else "from 0 to 1e18"
        raise RooflineError(f"{where} has a {what} that is not a finite number of microseconds {span} (got {text}); "
                            "export the trace again")
    return number


def _key(value: Any, what: str, where: str) -> None:
    if value is not None and not isinstance(value, (int, float, str)):
        kind = {"list": "a list", "dict": "an object"}.get(type(value).__name__, type(value).__name__)
        raise RooflineError(f"{where} has a {what} that is {kind}, not a number or a string; "
                            "export the trace again")


def _ints_in_range(value: Any, depth: int = 0) -> bool:
    """Every integer in a dims or strides list (nested: a TensorList's shapes) at most MAX_DIM in size."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) <= MAX_DIM
    if isinstance(value, list) and depth < 3:
        return all(_ints_in_range(v, depth + 1) for v in value)
    return True  # another kind of value: not a size, read (or skipped) as before


def checked_events(raw: Iterable[Any], source: str = "") -> list[dict[str, Any]]:
    """The complete ("X") events with a numeric ts, each checked (see the module doc); ts and dur floats."""
    out: list[dict[str, Any]] = []
    for e in raw:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts = e.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            continue  # an event with no time: not one the reader places
        where = _where(source, e)
        start = _time(ts, "ts", where, signed=True)
        dur = _time(e.get("dur", 0.0), "dur", where, signed=False)
        args = e.get("args")
        if args is not None and not isinstance(args, dict):
            raise RooflineError(f"{where} has args that are not an object; export the trace again")
        for name in KEY_FIELDS:
            _key(e.get(name), name, where)
        for name in ARG_KEY_FIELDS:
            _key((args or {}).get(name), name, where)
        for arg_key, item in (("Input Dims", None), ("Input Strides", None), ("Input type", str),
                              ("Concrete Inputs", str)):
            value = (args or {}).get(arg_key)
            if value is not None and (not isinstance(value, list)
                                      or (item is not None and not all(isinstance(v, item) for v in value))):
                raise RooflineError(f"{where} has a malformed {arg_key!r} (record_shapes writes a list"
                                    + (" of strings" if item is not None else "") + "); export the trace again")
            if item is None and value is not None and not _ints_in_range(value):
                raise RooflineError(f"{where} has an {arg_key!r} entry larger than 2**53 = {MAX_DIM:,} "
                                    "(no tensor has that many elements along one dimension); export the trace again")
        out.append({**e, "ts": start, "dur": dur})
    return out


__all__ = ["MAX_US", "checked_events"]
