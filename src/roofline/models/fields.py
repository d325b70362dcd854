"""Reading a config dict: every value checked where it is read, naming the file and the field.

Sizes are integers from 1 to MAX_SIZE (0, negatives, floats, true/false and 5,000-digit numbers are
refused in one line); counts that may be zero say so. The architectures' parsers
(roofline.models.architectures) and the quantization reader (roofline.models.quantization) share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline.errors import RooflineError, shown

MAX_SIZE = 2**31 - 1  # the largest size a config may give (an int32; no model comes near it)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Fields:
    """Reads a config dict, naming the file and field in every error."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def bad(self, key: str, want: str, value: Any) -> RooflineError:
        return RooflineError(f"config {self.where}: field {key!r} must be {want}, got {shown(value)}")

    def refuse(self, key: str, why: str) -> RooflineError:
        """A field this parser reads but whose value it cannot analyse: the field named, never guessed."""
        return RooflineError(f"config {self.where}: field {key!r} {why}")

    def integer(self, key: str, default: int | None = None, *alts: str, minimum: int = 1) -> int:
        """A size (`minimum` 1) or a count that may be zero (`minimum` 0), at most MAX_SIZE."""
        for k in (key, *alts):
            if k in self.raw and self.raw[k] is not None:
                value = self.raw[k]
                if not is_int(value) or not minimum <= value <= MAX_SIZE:
                    want = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
                    raise self.bad(k, f"{want} (at most {MAX_SIZE:,})", value)
                return int(value)
        if default is None:
            raise RooflineError(f"config {self.where}: missing field {key!r}"
                                + (f" (or {', '.join(repr(a) for a in alts)})" if alts else ""))
        return default

    def optional_int(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not is_int(value) or not 1 <= value <= MAX_SIZE:
            raise self.bad(key, f"a positive integer (at most {MAX_SIZE:,}) or null", value)
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.bad(key, "true or false", value)
        return value

    def text(self, key: str, default: str, *alts: str) -> str:
        for k in (key, *alts):
            value = self.raw.get(k)
            if value is not None:
                if not isinstance(value, str):
                    raise self.bad(k, "a string", value)
                return value
        return default

    def at_most(self, key: str, value: int, limit_key: str, limit: int) -> int:
        """`value` (read from `key`) if it is at most `limit` (read from `limit_key`)."""
        if value > limit:
            raise RooflineError(f"config {self.where}: field {key!r} ({value}) must be at most "
                                f"{limit_key} ({limit})")
        return value


__all__ = ["MAX_SIZE", "Fields", "is_int"]
