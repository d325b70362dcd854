"""Fuzzing the number parsers: for any text, a parser returns a finite value in its stated range or
raises RooflineError (click.BadParameter from the click types), never another exception.

Ranges (roofline.units): a quantity is finite and at most MAX_QUANTITY (1e30) in magnitude; a size
or token count is a whole number from 1 to MAX_COUNT (2**53); a list holds 1 to MAX_LIST_VALUES.
Bounded to a few seconds: each property draws at most 300 examples.
"""

from __future__ import annotations

import math
from typing import Any, get_args

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.cli.common import PositiveInt, Quantity
from roofline.errors import RooflineError
from roofline.units import (
    COUNT_SUFFIXES,
    MAX_COUNT,
    MAX_LIST_VALUES,
    MAX_QUANTITY,
    Kind,
    parse_int_list,
    parse_positive_int,
    parse_quantity,
)

KINDS: tuple[Kind, ...] = get_args(Kind)
FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# pieces a user might type, glued at random: numbers of every size, prefixes, units, separators
NUMBERS = st.one_of(
    st.integers(min_value=-10**30, max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e999", "1e308", "1e-400", "0", "-0", ".5", "5.", "1_000", "8_192", "nan", "inf", "9" * 400,
                     str(2**53), str(2**53 + 1)]),
)
PREFIXES = st.sampled_from(["", "k", "K", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "m", "u", "µ", "n"])
UNITS = st.sampled_from(["", "FLOP", "FLOP/s", "FLOPS", "OPS", "B", "B/s", "Bps", "s", "ms", "us", "x", "/"])
QUANTITY_TEXT = st.one_of(
    st.text(max_size=40),
    st.builds(lambda n, sp, p, u: f"{n}{sp}{p}{u}", NUMBERS, st.sampled_from(["", " ", "  "]), PREFIXES, UNITS),
)
COUNT_TEXT = st.one_of(
    st.text(max_size=30),
    st.text(alphabet="0123456789kKMGi._-+ e", max_size=30),
    st.builds(lambda n, s: f"{n}{s}", NUMBERS, st.sampled_from(["", *COUNT_SUFFIXES, "Ti", "B", "kb"])),
)
LIST_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789kKMi:x,_ -", max_size=40),
    st.lists(st.one_of(COUNT_TEXT, st.builds(lambda a, b, c: f"{a}:{b}:{c}", COUNT_TEXT, COUNT_TEXT,
                                             st.one_of(COUNT_TEXT, COUNT_TEXT.map(lambda t: "x" + t)))),
             max_size=4).map(",".join),
)


def _in_range_quantity(value: Any) -> None:
    assert isinstance(value, float)
    assert math.isfinite(value) and abs(value) <= MAX_QUANTITY


def _in_range_count(value: Any) -> None:
    assert isinstance(value, int) and not isinstance(value, bool)
    assert 1 <= value <= MAX_COUNT


@FUZZ
@given(text=QUANTITY_TEXT, kind=st.sampled_from(KINDS))
def test_parse_quantity_any_text(text: str, kind: Kind) -> None:
    try:
        value = parse_quantity(text, kind)
    except RooflineError:
        return
    _in_range_quantity(value)


@FUZZ
@given(value=st.one_of(st.floats(), st.integers(min_value=-10**400, max_value=10**400), st.booleans()),
       kind=st.sampled_from(KINDS))
def test_parse_quantity_any_number(value: float | int, kind: Kind) -> None:
    try:
        parsed = parse_quantity(value, kind)
    except RooflineError:
        assert isinstance(value, bool) or not abs(value) <= MAX_QUANTITY  # a bool, NaN, infinite or too large
        return
    _in_range_quantity(parsed)
    assert parsed == float(value)


@FUZZ
@given(text=COUNT_TEXT)
def test_parse_positive_int_any_text(text: str) -> None:
    try:
        value = parse_positive_int(text, "--context")
    except RooflineError as exc:
        assert "--context" in str(exc)  # the error names the flag at fault
        return
    _in_range_count(value)


@FUZZ
@given(n=st.integers(min_value=1, max_value=MAX_COUNT), suffix=st.sampled_from(["", *COUNT_SUFFIXES]))
def test_count_round_trip(n: int, suffix: str) -> None:
    """n with a suffix is n × the suffix's scale (k = 1000, Ki = 1024), or refused as too large."""
    expected = n * COUNT_SUFFIXES.get(suffix, 1)
    if expected > MAX_COUNT:
        with pytest.raises(RooflineError, match="at most 2\\*\\*53"):
            parse_positive_int(f"{n}{suffix}", "--batch")
    else:
        assert parse_positive_int(f"{n}{suffix}", "--batch") == expected


@FUZZ
@given(text=LIST_TEXT)
def test_parse_int_list_any_text(text: str) -> None:
    try:
        values = parse_int_list(text, "--batch")
    except RooflineError as exc:
        assert "--batch" in str(exc)
        return
    assert 1 <= len(values) <= MAX_LIST_VALUES
    for v in values:
        _in_range_count(v)


@FUZZ
@given(lo=st.integers(min_value=1, max_value=2**20), hi=st.integers(min_value=1, max_value=2**20),
       factor=st.integers(min_value=2, max_value=16))
def test_geometric_range(lo: int, hi: int, factor: int) -> None:
    """lo:hi:xF is lo, lo·F, lo·F², ... up to hi; an empty or backward range is refused."""
    if hi < lo:
        with pytest.raises(RooflineError, match="positive start up to its end"):
            parse_int_list(f"{lo}:{hi}:x{factor}", "--batch")
        return
    values = parse_int_list(f"{lo}:{hi}:x{factor}", "--batch")
    assert values == [lo * factor**i for i in range(len(values))]
    assert values[-1] <= hi < values[-1] * factor


@FUZZ
@given(text=st.one_of(COUNT_TEXT, QUANTITY_TEXT), kind=st.sampled_from(KINDS))
def test_click_types_any_text(text: str, kind: Kind) -> None:
    try:
        count = PositiveInt().convert(text, None, None)
    except click.BadParameter:
        pass
    else:
        _in_range_count(count)
    try:
        quantity = Quantity(kind).convert(text, None, None)
    except click.BadParameter:
        return
    _in_range_quantity(quantity)
    assert quantity > 0


@FUZZ
@given(number=st.floats(min_value=0, max_value=1e6, allow_nan=False),
       unit=st.sampled_from([("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("ns", 1e-9)]))
def test_time_units(number: float, unit: tuple[str, float]) -> None:
    """2s, 50ms, 800us: the number times the prefix's scale."""
    assert parse_quantity(f"{number!r}{unit[0]}", "time_s") == pytest.approx(number * unit[1], rel=1e-12)
