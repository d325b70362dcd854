"""The hostile sweep, values inside files and names (issue 24, items 3, 4, 7 and 8).

Where test_hostile_sweep.py holds bad command lines, this file holds bad *contents*: a trace or an ncu
CSV or a calibration file whose fields have the wrong type or an absurd size, events nested thousands
deep, names carrying rich markup, matplotlib mathtext, terminal escape sequences, NUL or the
right-to-left override. The rule is the sweep's: a refused input is exit 2, one `roofline: error:`
line naming the field, nothing on stdout; an accepted one runs and shows every name as written, with
its control characters escaped (`\\x1b`), never parsed as markup or TeX and never sent raw to the
terminal.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from roofline.cli import main
from roofline.hardware.catalog import DATA as DATA_DIR
from test_hostile_sweep import _cuda_trace

FIXTURES = Path(__file__).parent / "fixtures"
MATH = "a$\\frac{$b"  # an unbalanced \frac: matplotlib's mathtext raised ValueError on it
RAW = ("\x1b", "\x07", "\x00", "\u202e")  # ESC, BEL (ends an OSC), NUL, RIGHT-TO-LEFT OVERRIDE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert out == "", out
    assert err.count("\n") == 1 and err.startswith("roofline: error: "), err
    return err


def cuda_trace() -> dict[str, Any]:
    """One aten::mm 1024³ (fp16) whose launch (correlation 2) ran one 20 µs kernel on stream 7: the hostile
    sweep's valid Kineto trace, a fresh copy each call (a test mutates it)."""
    return _cuda_trace()  # type: ignore[return-value]


def cpu_op(name: str, ts: float = 40.0, dur: float = 10.0, tid: int = 1) -> dict[str, Any]:
    """One CPU op adding two float32 [64, 64] tensors: 64·64 = 4096 FLOPs (add: 1 FLOP an element)."""
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}}


def write(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


# --- item 3: fields of the wrong type, integers too large for a float ---------------------------------------

BIG = 10**400  # json.dumps writes it whole; float(BIG) raises OverflowError


def _set(event: int, key: str, value: Any, in_args: bool = False) -> dict[str, Any]:
    doc = cuda_trace()
    target = doc["traceEvents"][event]["args"] if in_args else doc["traceEvents"][event]
    target[key] = value
    return doc


@pytest.mark.parametrize(("doc", "says"), [
    # keys that group events by thread or join a launch to its kernels: a list or an object cannot be a key
    (_set(0, "pid", [1]), "event 'aten::mm' has a pid that is a list, not a number or a string"),
    (_set(0, "tid", {"a": 1}), "has a tid that is an object, not a number or a string"),
    (_set(2, "tid", [7]), "event 'sm80_xmma_gemm_f16f16_f16f32' has a tid that is a list"),
    (_set(1, "correlation", [2], in_args=True), "event 'cudaLaunchKernel' has a correlation that is a list"),
    (_set(2, "correlation", {"id": 2}, in_args=True), "has a correlation that is an object"),
    (_set(2, "stream", [7], in_args=True), "has a stream that is a list"),
    (_set(2, "device", {"0": 0}, in_args=True), "has a device that is an object"),
    # integers past a float's range, and floats past any real time (1e18 µs is about 31,700 years)
    (_set(0, "ts", BIG), "has a ts that is not a finite number of microseconds of at most 1e18 in size"),
    (_set(0, "dur", BIG), "has a dur that is not a finite number of microseconds from 0 to 1e18"),
    (_set(2, "ts", BIG), "event 'sm80_xmma_gemm_f16f16_f16f32' has a ts"),
    (_set(2, "dur", 1.7e308), "has a dur that is not a finite number of microseconds from 0 to 1e18 (got 1.7e+308)"),
    (_set(0, "Input Dims", [[BIG, 1024], [1024, 1024]], in_args=True),
     "has an 'Input Dims' entry larger than 2**53 = 9,007,199,254,740,992"),
    (_set(0, "Input Strides", [[2**60, 1], [1024, 1]], in_args=True), "has an 'Input Strides' entry larger than 2**53"),
])
def test_a_trace_field_of_the_wrong_type_or_size_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             doc: dict[str, Any], says: str) -> None:
    err = refused(capsys, "import", write(tmp_path / "t.json", doc), "--machine", "h100")
    assert says in err, err


def test_a_huge_concrete_input_is_text_not_a_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a scalar argument of 400 digits: kept as text (never a huge int reaching a formula); the op still counts
    doc = _set(0, "Concrete Inputs", ["", str(BIG)], in_args=True)
    code, out, err = run(capsys, "import", write(tmp_path / "t.json", doc), "--machine", "h100", "--json")
    assert code == 0, err
    (mm,) = json.loads(out)["kernels"]
    assert mm["flop"] == 2 * 1024**3  # 2·M·N·K for the 1024³ matmul


def test_events_nested_3000_deep_are_read_without_recursion(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # 3,000 user annotations, each inside the one before (Python's recursion limit is 1,000), around one
    # aten::add: the add is the outermost aten op of its call stack, so the one kernel
    events = [{"ph": "X", "cat": "cpu_op", "name": f"user_{i}", "pid": 1, "tid": 1, "ts": 100.0 + i * 0.001,
               "dur": 10.0 - i * 0.002, "args": {}} for i in range(3000)]
    events.append(cpu_op("aten::add", ts=105.0, dur=0.5))
    code, out, err = run(capsys, "import", write(tmp_path / "t.json", {"traceEvents": events}), "--machine", "h100",
                         "--json")
    assert code == 0, err
    (add,) = json.loads(out)["kernels"]
    assert add["name"] == "add"
    assert add["flop"] == 64 * 64  # one FLOP an element of the [64, 64] result
    assert add["measured_time_s"] == pytest.approx(0.5e-6)  # its 0.5 µs


def test_aten_ops_nested_3000_deep_are_one_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 3,000 aten::add nested in one another: the outermost is the op, the rest its dispatch, walked by a loop
    events = [cpu_op("aten::add", ts=100.0 + i * 0.001, dur=10.0 - i * 0.002) for i in range(3000)]
    code, out, err = run(capsys, "import", write(tmp_path / "t.json", {"traceEvents": events}), "--machine", "h100",
                         "--json")
    assert code == 0, err
    assert [k["name"] for k in json.loads(out)["kernels"]] == ["add"]


def _calibration(low: Any) -> dict[str, Any]:
    return {"format": "roofline-calibration", "version": 1, "classes": {"memory": {"low": low, "high": 1}}}


@pytest.mark.parametrize(("low", "says"), [
    (BIG, "classes.memory.low must be a number, got an integer of hundreds of digits"),  # was: OverflowError
    (1e-320, "classes.memory.low is a share of the roof, at least 1e-06; got 9.99989e-321"),  # was: inf in --json
])
def test_a_calibration_value_too_large_or_subnormal_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                low: Any, says: str) -> None:
    cal = write(tmp_path / "cal.json", _calibration(low))
    err = refused(capsys, "serve", "gpt2", "--prompt", "16", "--output", "16", "--calibration", cal, "--json")
    assert says in err, err


@pytest.mark.parametrize("option", ["--efficiency-comm"])
def test_a_subnormal_efficiency_is_refused_not_inf(capsys: pytest.CaptureFixture[str], option: str) -> None:
    # floor / 1e-320 is infinite: it reached --json as a ValueError and the text as "inf s" (the constant
    # efficiency left is --disaggregate's KV transfer; the kernels' bands are calibrated)
    err = refused(capsys, "serve", "gpt2", "--prompt", "16", "--output", "16", option, "1e-320:0.5", "--json")
    assert "an efficiency is a share of the roofline in (0, 1], at least 1e-06; got 9.99989e-321" in err, err


def _ncu(tmp_path: Path, column: str, value: str, unit: str | None = None) -> str:
    """The small ncu fixture (Nsight Compute's raw page) with one cell of its first kernel replaced."""
    lines = [line for line in (FIXTURES / "ncu_raw_small.csv").read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    at = rows[0].index(column)
    rows[2][at] = value
    if unit is not None:
        rows[1][at] = unit
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "k.csv"
    path.write_text(out.getvalue())
    return str(path)


@pytest.mark.parametrize(("column", "value", "unit", "says"), [
    # 1.7e308 Mbyte is infinite once scaled to bytes; 1.7e308 tensor ops is finite but sums to infinity
    ("dram__bytes_read.sum", "1.7e308", None, "'1.7e308' is not a finite, non-negative number"),
    ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "1.7e308", None,
     "is not a count: a count of bytes or operations is 0 or from 1 to 1e+30"),
    ("gpu__time_duration.sum", "1e-300", "second", "is not a kernel's time: a time is from 1 ps to 1e+30 s"),
])
def test_an_ncu_counter_or_time_out_of_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         column: str, value: str, unit: str | None, says: str) -> None:
    err = refused(capsys, "import", _ncu(tmp_path, column, value, unit), "--machine", "h100", "--json")
    assert f"row 3, column {column}" in err and says in err, err


# --- items 3 and 4: names shown as written: no markup, no mathtext, no raw control characters -------------

@pytest.mark.parametrize("name", ["[/x]", "[bold red]hidden[/bold red]"])
def test_rich_markup_in_a_name_is_shown_as_written(capsys: pytest.CaptureFixture[str], name: str) -> None:
    # "[/x]" raised rich's MarkupError; "[bold red]hidden[/bold red]" printed as "hidden"
    code, out, err = run(capsys, "kernel", "custom", "--flop", "1e9", "--bytes", "1e9", "--name", name)
    assert code == 0, err
    assert name in out, out


def test_rich_markup_in_a_traced_op_is_shown_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"traceEvents": [cpu_op("aten::[/x]"), cpu_op("aten::[bold red]hidden[/bold red]", ts=60.0)]}
    code, out, err = run(capsys, "import", write(tmp_path / "t.json", doc), "--machine", "h100")
    assert code == 0, err
    assert "[/x]" in out and "[bold red]hidden[/bold red]" in out, out


def _machine_named(tmp_path: Path, name: str) -> str:
    text = (DATA_DIR / "h100-sxm.toml").read_text()
    text = text.replace('id = "h100-sxm"', 'id = "my-h100"', 1)
    start = text.index("\nname = ") + 1
    end = text.index("\n", start)
    path = tmp_path / "m.toml"
    path.write_text(text[:start] + f"name = {json.dumps(name)}" + text[end:])
    return str(path)


def test_mathtext_in_names_is_drawn_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # each raised matplotlib's ParseSyntaxException (as ValueError) with --png; the SVG keeps text as text,
    # so the name is there to read, literally
    folder = tmp_path / MATH
    folder.mkdir()
    (folder / "config.json").write_text((FIXTURES / "readme" / "llama" / "config.json").read_text())
    machine = _machine_named(tmp_path, MATH)
    trace = write(tmp_path / f"{MATH}.json", {"traceEvents": [cpu_op("aten::add")]})
    for argv in (["kernel", "custom", "--flop", "1e9", "--bytes", "1e9", "--name", MATH],
                 ["kernel", "matmul", "64", "64", "64", "--machine", machine],
                 ["model", str(folder)], ["sweep", str(folder), "--batch", "1,2"],
                 ["serve", "gpt2", "--machine", machine, "--prompt", "16", "--output", "16"]):
        svg = tmp_path / "out.svg"
        code, _, err = run(capsys, *argv, "--svg", str(svg))
        assert code == 0, (argv, err)
        assert MATH in svg.read_text(), argv
    for argv in (["machines", "h100", machine], ["import", trace, "--machine", "h100"]):  # these draw PNG only
        png = tmp_path / "out.png"
        code, _, err = run(capsys, *argv, "--png", str(png))
        assert code == 0, (argv, err)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", argv


EVIL = "\x1b]0;owned\x07x\x1b[31mred\x00\u202eevil"


def test_control_characters_in_trace_and_ncu_names_are_escaped(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"traceEvents": [cpu_op(f"aten::{EVIL}")]}
    code, out, err = run(capsys, "import", write(tmp_path / "t.json", doc), "--machine", "h100")
    assert code == 0, err
    assert not any(c in out or c in err for c in RAW), repr(out)
    assert "\\x1b]0;owned\\x07x\\x1b[31mred\\x00\\u202eevil" in out  # as the error lines show them
    code, out, err = run(capsys, "import", _ncu(tmp_path, "Kernel Name", EVIL), "--machine", "h100")
    assert code == 0, err
    assert not any(c in out for c in RAW) and "\\x1b]0;owned" in out, repr(out)


def test_control_characters_in_a_machine_name_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = _machine_named(tmp_path, EVIL)
    for argv in (["machine", machine], ["kernel", "matmul", "64", "64", "64", "--machine", machine],
                 ["model", "gpt2", "--machine", machine]):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert not any(c in out or c in err for c in RAW), (argv, repr(out))
        assert "\\x1b]0;owned" in out, argv


def test_a_newline_in_an_output_name_keeps_wrote_on_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a\nb.csv"
    code, _, err = run(capsys, "model", "gpt2", "--csv", str(path))
    assert code == 0, err
    assert path.exists()
    assert err == f"wrote {tmp_path}/a\\nb.csv\n", repr(err)


# --- item 7: what was accepted without a word, decided ------------------------------------------------------

SERVE = ("serve", "gpt2", "--prompt", "16", "--output", "16")


@pytest.mark.parametrize(("argv", "says"), [
    # digits of other scripts: Python's float() and int() read "٣٠" as 30; a number here is 0-9 only
    ((*SERVE, "--itl-slo", "٣٠ms"), "--itl-slo: '٣٠ms' holds the digit '٣' (U+0663); write numbers with the digits"),
    ((*SERVE, "--batch", "٨"), "holds the digit '٨' (U+0668)"),
    ((*SERVE, "--batch", "８"), "holds the digit '８' (U+FF18)"),  # a fullwidth 8
    ((*SERVE, "--draft", "gpt2", "--acceptance", "٠.٨"), "--acceptance: '٠.٨' holds the digit '٠'"),
    ((*SERVE, "--price-per-device-hour", "٢"), "--price-per-device-hour must be a positive number"),
    ((*SERVE, "--disaggregate", "٤:٤"), "write P:D, the prefill and decode devices, like 4:4; got '٤:٤'"),
    (("model", "gpt2", "--memory-utilization", "٠.٩"), "--memory-utilization: '٠.٩' holds the digit"),
    (("kernel", "custom", "--flop", "١e9", "--bytes", "1e9"), "holds the digit '١' (U+0661)"),
    # a 400-digit --top was "all" without a word: a count is at most 2**53
    (("import", "TRACE", "--top", "9" * 400), "--top '99999999999999999999...' (400 characters) is too large"),
    # a subnormal acceptance rate is a typo, not a chance: refused as shares are, below 1e-6
    ((*SERVE, "--draft", "gpt2", "--acceptance", "1e-320"), "--acceptance must be in (0, 1] and at least 1e-06"),
    # item 8: a serving time target without its unit was seconds, silently: 30 is refused, 30ms suggested
    ((*SERVE, "--itl-slo", "30"), "--itl-slo 30: a time needs its unit, e.g. 30ms"),
    ((*SERVE, "--ttft-slo", "0.5"), "--ttft-slo 0.5: a time needs its unit, e.g. 0.5ms"),
    (("plan", "gpt2", "--latency-target", "20"), "--latency-target 20: a time needs its unit, e.g. 20ms"),
    # item 8: -o is an output file (model, sweep, compare); serve's output tokens are --output only
    (("serve", "gpt2", "--prompt", "16", "-o", "16"), "No such option '-o'"),
])
def test_decided_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                          says: str) -> None:
    trace = write(tmp_path / "t.json", cuda_trace())
    err = refused(capsys, *[trace if a == "TRACE" else a for a in argv])
    assert says in err, err


def test_spaces_around_a_count_are_allowed_as_in_every_count(capsys: pytest.CaptureFixture[str]) -> None:
    # decided: '4:4 ' is 4:4, as ' 8' is --batch 8 (a shell quoting leftover, not another number)
    code, out, err = run(capsys, *SERVE, "--disaggregate", "4:4 ", "--json")
    assert code == 0, err
    spaced = json.loads(out)
    code, out, _ = run(capsys, *SERVE, "--disaggregate", "4:4", "--json")
    assert json.loads(out) == spaced


@pytest.mark.parametrize(("argv", "says"), [
    (("model", "llama-3-8b", "--context", "4k", "--json"), "--context 4k is 4,000 tokens (k = 1000); for 4,096 = "
                                                           "4 × 1024 write 4Ki"),
    (("kernel", "attention", "--seq", "32k", "--head-dim", "128", "--json"), "--seq 32k is 32,000 tokens"),
    (("serve", "llama-3-8b", "--prompt", "2k", "--output", "16", "--json"), "--prompt 2k is 2,000 tokens"),
    # a range's ends: 1k:128k is 1000, 2000, ... 128,000 (×2 steps), the first power-of-two count named
    (("sweep", "llama-3-8b", "--context", "1k:128k", "--format", "json"),
     "--context 1k:128k: 128k is 128,000 tokens (k = 1000); for 131,072 = 128 × 1024 write 128Ki"),
])
def test_a_k_length_where_a_power_of_two_is_likelier_is_said(capsys: pytest.CaptureFixture[str],
                                                             argv: tuple[str, ...], says: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert says in err, err
    json.loads(out)


def test_a_k_length_that_is_no_power_of_two_is_not_remarked(capsys: pytest.CaptureFixture[str]) -> None:
    # 3k = 3 × 1000: no power of two nearby to mean instead; 4Ki is the power of two itself
    for length in ("3k", "4Ki", "4096"):
        code, _, err = run(capsys, "model", "llama-3-8b", "--context", length, "--json")
        assert code == 0 and "tokens (k = 1000)" not in err, (length, err)


def test_the_k_note_waits_for_the_command_to_end_well(capsys: pytest.CaptureFixture[str]) -> None:
    # an error after it is the one line: never a warning and then the error
    err = refused(capsys, "model", "llama-3-8b", "--context", "4k", "--batch", "0")
    assert "--batch must be a positive integer" in err
