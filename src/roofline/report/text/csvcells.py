"""Every CSV the tool writes, through one writer that neutralises formula injection.

Kernel and op names come from files a user did not write (an Nsight Compute CSV, a Kineto trace), and
a spreadsheet runs a cell that begins with `=`, `+`, `-` or `@` as a formula (`=cmd|' /C calc'!A0`,
`=HYPERLINK(...)`); a leading tab or carriage return hides such a formula from a quick look. As the
OWASP CSV-injection guidance says (owasp.org/www-community/attacks/CSV_Injection), a text cell that
begins with one of those six characters is written with a single quote before it, which a spreadsheet
shows as text; a cell holding a comma, a quote or a line break is then quoted (RFC 4180). Numbers are left
as numbers: a negative number is data, not a formula, and only text cells are neutralised.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any

# the first characters a spreadsheet reads as the start of a formula (OWASP: = + - @ tab CR)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell: None is empty; a number or bool stays what it is; text beginning with a
    formula character gets a leading single quote (OWASP)."""
    if value is None:
        return ""
    if isinstance(value, numbers.Number):  # numpy's scalars too
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _field(value: Any) -> str:
    """One field as RFC 4180 writes it: quoted (inner quotes doubled) where it holds a comma, a quote,
    a newline or a carriage return; the csv module leaves a lone CR bare when lines end in LF."""
    text = str(value)
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header of `columns`, then each row's cells (`csv_cell`), one line each, ending in LF.

    The cells a sweep writes by the million go first: a float or an int is its str() (no comma, quote
    or line break can be in it), None is empty, and a text cell is neutralised once per distinct text
    (a sweep repeats its model, machine and dtype names in every row); the rest as csv_cell says."""
    texts: dict[tuple[type, Any], str] = {}

    def text(value: Any) -> str:
        kind = type(value)
        if kind is float or kind is int:
            return str(value)
        if value is None:
            return ""
        if kind is str or isinstance(value, Enum):  # names and enums (the phase, the bound) repeat row after row
            done = texts.get((kind, value))
            if done is None:
                done = texts[kind, value] = _field(csv_cell(value))
            return done
        return _field(csv_cell(value))

    lines = [",".join(_field(csv_cell(c)) for c in columns)]
    lines.extend(",".join(map(text, row)) for row in rows)
    return "\n".join(lines) + "\n"


__all__ = ["FORMULA_STARTS", "csv_cell", "csv_text"]
