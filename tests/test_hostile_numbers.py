"""Hostile numbers on the command line and in the library (issue 13, "Every bad input").

Every quantity parsed is finite and at most units.MAX_QUANTITY (1e30 base units); every size or
token count is a whole number from 1 to units.MAX_COUNT (2**53). Anything else is one line on stderr
beginning `roofline: error:`, exit code 2, never a traceback. Counts take k = 1000 and Ki = 1024.
"""

from __future__ import annotations

import json
import re

import pytest

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.units import (
    MAX_COUNT,
    MAX_QUANTITY,
    format_bytes,
    format_bytes_per_s,
    format_count,
    format_flop,
    format_flop_per_s,
    format_intensity,
    format_si,
    format_time,
    parse_int_list,
    parse_positive_int,
    parse_quantity,
    require_positive_int,
)

HUGE = str(10**400)  # a literal 401-digit integer, as a user might paste it
BIG = str(10**200)
TOO_BIG = str(2**53 + 1)  # the first whole number past MAX_COUNT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str) -> None:
    assert code == 2, err
    assert out == ""
    assert err.startswith("roofline: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert not re.search(r"\d{30}", err), err  # a 400-digit number is never echoed back whole


@pytest.mark.parametrize(("argv", "words"), [
    # float("1e999") is inf: refused, naming the flag and the range
    (["kernel", "custom", "--flop", "1e999", "--bytes", "1e9"], ["--flop", "at most 1e+30 FLOP"]),
    (["kernel", "custom", "--flop", "1e9", "--bytes", "1e999 B"], ["--bytes", "at most 1e+30 bytes"]),
    # finite as typed, infinite once scaled: 1e308 × 1e15 overflows to inf
    (["kernel", "custom", "--flop", "1e308 PFLOP", "--bytes", "1e9"], ["--flop", "'1e308 PFLOP'", "too large"]),
    # finite but past the stated maximum: 1e31 FLOP > 1e30
    (["kernel", "custom", "--flop", "1e31", "--bytes", "1e9"], ["--flop", "at most 1e+30"]),
    (["kernel", "matmul", HUGE, "1", "1"], ["M ", "401 characters", "at most 2**53 = 9,007,199,254,740,992"]),
    (["kernel", "matmul", TOO_BIG, "1", "1"], ["M '9007199254740993'", "too large"]),
    (["kernel", "attention", "--seq", BIG, "--head-dim", "128"], ["--seq", "at most 2**53"]),
    (["kernel", "add", "1.5"], ["N must be a positive integer", "'1.5'", "128k"]),
    (["model", "llama-3-8b", "--batch", HUGE], ["--batch", "at most 2**53"]),
    (["model", "llama-3-8b", "--context", "1e999"], ["--context", "positive integer", "128Ki"]),
    (["serve", "llama-3-8b", "--prompt", HUGE, "--output", "1"], ["--prompt", "at most 2**53"]),
    (["serve", "llama-3-8b", "--prompt", "1k", "--output", "1", "--draft-tokens", HUGE], ["--draft-tokens", "2**53"]),
    (["serve", "llama-3-8b", "--prompt", "1k", "--output", "1", "--disaggregate", f"{HUGE}:1"],
     ["--disaggregate P", "about 10**400", "2**53"]),
    # click's FLOAT reads "nan", "inf" and 1e308; a price is above 0 and at most 1e6 per device-hour
    (["serve", "llama-3-8b", "--prompt", "1k", "--output", "1", "--price-per-device-hour", "nan"],
     ["--price-per-device-hour must be a positive number", "at most 1e+06", "got nan"]),
    (["serve", "llama-3-8b", "--prompt", "1k", "--output", "1", "--price-per-device-hour", "1e308"],
     ["--price-per-device-hour", "at most 1e+06"]),
    (["serve", "llama-3-8b", "--prompt", "1k", "--output", "1", "--step-overhead", "1e999s"],
     ["--step-overhead", "at most 1e+30 seconds"]),
    (["sweep", "llama-3-8b", "--batch", f"1:{HUGE}"], ["--batch", "at most 2**53"]),
    (["sweep", "llama-3-8b", "--batch", "1:100000:1"], ["--batch", "100,000 values", "at most 10,000"]),
    (["sweep", "llama-3-8b", "--machine", ","], ["--machine ','", "names no machine", "h100,b200"]),
    (["compare", "llama-3-8b", "--machine", ","], ["--machine ','", "names no machine"]),
    (["compare", "llama-3-8b", "--machine", " , ,"], ["names no machine"]),
    # 1:1001:1 is 1,001 batches, each a whole step analysed: refused before any is
    (["compare", "llama-3-8b", "--batch", "1:1001:1"], ["1,001 rows", "at most 1,000"]),
    (["compare", "llama-3-8b", "--batch", "1,0"], ["--batch", "positive integer", "got 0"]),
])
def test_hostile_number_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                                           words: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    one_line_error(code, out, err)
    assert all(w in err for w in words), err


@pytest.mark.parametrize(("size", "words"), [
    ("1e999 B", ["--buffer-size", "at most 1e+30 bytes"]),
    ("1 TB", ["--buffer-size '1 TB'", "1 MiB to 64 GiB"]),  # 1e12 B > 64 · 2**30 B
    ("1 KiB", ["1 MiB to 64 GiB"]),  # below measure_ceilings' least, 2**20 B
])
def test_measure_refuses_buffer_size_before_measuring(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, size: str,
                                                       words: list[str]) -> None:
    import roofline.measure.ceilings as ceilings

    def measured(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("measured before --buffer-size was checked")

    monkeypatch.setattr(ceilings, "measure_ceilings", measured)
    code, out, err = run(capsys, "measure", "--quick", "--buffer-size", size)
    one_line_error(code, out, err)
    assert all(w in err for w in words), err


def test_largest_size_is_accepted_and_printed_in_engineering_notation(capsys: pytest.CaptureFixture[str]) -> None:
    n = MAX_COUNT
    code, out, _ = run(capsys, "kernel", "matmul", str(n), str(n), str(n), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["flop"] == pytest.approx(2.0 * n**3)  # 2·M·N·K = 2·(2**53)**3 = 2**160 ≈ 1.46e48
    assert d["bytes"] == pytest.approx(3 * 2 * n**2)  # A, B, C of n² bf16 elements each
    code, out, _ = run(capsys, "kernel", "matmul", str(n), str(n), str(n))
    assert code == 0
    assert "1.46e+48 FLOP" in out  # 2**161 = 1.4615e48
    assert not re.search(r"\d{20}", out.replace(str(n), ""))  # nothing printed as 48 digits


def test_huge_finite_quantity_prints_short(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernel", "custom", "--flop", "1e30", "--bytes", "1")
    assert code == 0
    assert "1e+30 FLOP" in out
    assert "1.01e+15 s" in out  # 1e30 FLOP / 989.4e12 FLOP/s = 1.0107e15 s
    assert not re.search(r"\d{10}", out)


@pytest.mark.parametrize(("formatted", "expected"), [
    (format_flop(1e300), "1e+300 FLOP"),  # past E (1e18 · 1000): no prefix, scientific
    (format_flop_per_s(1e300), "1e+300 FLOP/s"),
    (format_bytes(1e300), "1e+300 B"),
    (format_bytes(1e300, binary=True), "1e+300 B"),
    (format_bytes_per_s(1.2e30), "1.2e+30 B/s"),
    (format_time(1e300), "1e+300 s"),
    (format_time(2021427128.0), "2.02e+09 s"),  # 2·10**8·10**8·10**8 FLOP / 989.4 TFLOP/s
    (format_time(123456.0), "123456 s"),  # below a million: whole digits
    (format_intensity(1e300), "1e+300 FLOP/B"),
    (format_intensity(4096 / 3), "1,365 FLOP/B"),  # unchanged below 1e9
    (format_count(1e300), "1e+300"),
    (format_si(1.2e30, "B"), "1.2e+30 B"),
    (format_flop(999e18), "999 EFLOP"),  # the largest prefix still used
    (format_flop(4.4e12), "4.4 TFLOP"),
    (format_time(1e-300), "1e-288 ps"),  # 1e-300 s = 1e-288 ps: never 300 zeros
])
def test_format_never_prints_hundreds_of_digits(formatted: str, expected: str) -> None:
    assert formatted == expected
    assert len(formatted) < 20


@pytest.mark.parametrize(("text", "value"), [
    ("128k", 128 * 1000),
    ("128K", 128 * 1000),
    ("128Ki", 128 * 1024),  # 131,072: what Llama 3.1's "128K context" holds
    ("1M", 10**6),
    ("1Mi", 2**20),
    ("1.5k", 1500),
    ("8_192", 8192),
    (" 64 ", 64),
    (str(MAX_COUNT), 2**53),
])
def test_count_suffixes(text: str, value: int) -> None:
    assert parse_positive_int(text, "--context") == value


@pytest.mark.parametrize("text", ["1.5", "1.0001k", "0", "-5", "1e3", "abc", "128kb", "", "nan", "inf", TOO_BIG, HUGE])
def test_count_rejects(text: str) -> None:
    with pytest.raises(RooflineError, match="--context"):
        parse_positive_int(text, "--context")


def test_token_counts_take_suffixes_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "model", "llama-3-8b", "--context", "8Ki", "--batch", "1k", "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["context"], d["batch"]) == (8 * 1024, 1000)
    code, out, _ = run(capsys, "kernel", "attention", "--seq", "4Ki", "--head-dim", "128", "--json")
    assert code == 0
    # 4·N²·d + 5·N² (two matmuls and the softmax), N = 4096, d = 128
    assert json.loads(out)["flop"] == 4 * 4096**2 * 128 + 5 * 4096**2
    code, out, _ = run(capsys, "serve", "llama-3-8b", "--prompt", "1k", "--output", "1Ki", "--batch", "8", "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["prompt"], d["output"]) == (1000, 1024)


def test_compare_takes_sweeps_list_syntax(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compare", "llama-3-8b", "--batch", "1:4", "--context", "1k,2k", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    # 1:4 is powers of two (1, 2, 4), the same list sweep reads; × 2 lengths
    assert [(r["batch"], r["seq"]) for r in rows] == [(b, s) for b in parse_int_list("1:4", "--batch")
                                                      for s in (1000, 2000)]
    assert [r["batch"] for r in rows] == [1, 1, 2, 2, 4, 4]
    code, out, _ = run(capsys, "compare", "llama-3-8b", "--batch", "1,8")
    assert code == 0
    assert "batch 1, context 2048" in out and "batch 8, context 2048" in out  # one table per batch


def test_library_refuses_huge_sizes() -> None:
    from roofline.kernels import attention_graph, elementwise_graph, matmul_graph

    with pytest.raises(RooflineError, match="M about 10\\*\\*400 is too large"):
        matmul_graph(10**400, 1, 1)
    with pytest.raises(RooflineError, match="seq"):
        attention_graph(10**200, 128)
    with pytest.raises(RooflineError, match="cols"):
        elementwise_graph("add", 1, MAX_COUNT + 1)
    assert require_positive_int(MAX_COUNT, "n") == 2**53


@pytest.mark.parametrize("value", [10**400, float("inf"), float("nan"), -1e31, "1e999", "1e308 PFLOP"])
def test_parse_quantity_is_finite_and_in_range(value: object) -> None:
    with pytest.raises(RooflineError):
        parse_quantity(value, "flop")  # type: ignore[arg-type]
    assert parse_quantity("1e30", "flop") == MAX_QUANTITY
    assert parse_quantity("1000 EFLOP", "flop") == 1000 * 1e18
