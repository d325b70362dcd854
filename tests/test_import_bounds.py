"""`roofline import` within stated bounds (issue 24, item 6): a trace is streamed and an ncu CSV counted before
either is parsed, and a file past a bound is refused up front in one line, exit 2.

The bounds (README, "Import"): a trace of at most MAX_TRACE_BYTES (512 MiB) and MAX_TRACE_EVENTS (90,000)
operator, kernel and runtime events; an Nsight Compute CSV of at most MAX_NCU_BYTES (128 MiB) and
MAX_NCU_KERNELS (30,000) kernel rows. bench/bench_import.py times the refusals of a 1 GiB trace and a 1M-row
CSV, and the import of files at the bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.cli import main
from roofline.errors import RooflineError
from roofline.tracing import chrome
from roofline.tracing.kineto import MAX_TRACE_BYTES, MAX_TRACE_EVENTS, load_kineto, read_trace_json
from roofline.tracing.ncu import MAX_NCU_BYTES, MAX_NCU_KERNELS, load_ncu

FIXTURE = Path(__file__).parent / "fixtures" / "ncu_raw_small.csv"


def _event(i: int, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100.0 * i, "dur": 10.0,
            "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}}


def _trace(n: int, extra: int = 0) -> dict[str, Any]:
    """n operators, each with `extra` Python-function events the importer does not read."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        events.append(_event(i))
        events += [{"ph": "X", "cat": "python_function", "name": f"f{j}", "pid": 1, "tid": 1, "ts": 100.0 * i,
                    "dur": 1.0} for j in range(extra)]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "x" * 50}], "traceEvents": events,
            "traceName": "t"}


def _kept(doc: Any) -> list[Any]:
    """What the importer keeps, read the whole-file way: the "X" events of its categories."""
    return [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
            and e.get("cat") in ("cpu_op", "kernel", "cuda_runtime", "gpu_memcpy")]


json_leaves = (st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False)
               | st.text(max_size=6))
json_values = st.recursive(json_leaves, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c,
                                                                                             max_size=3),
                           max_leaves=8)
events = st.one_of(json_values, st.builds(lambda cat, ts, extra: {"ph": "X", "cat": cat, "ts": ts, **extra},
                                          st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "python_function",
                                                           "gpu_memcpy", "ac2g"]),
                                          st.integers(0, 10**18), st.dictionaries(st.text(max_size=3), json_values,
                                                                                  max_size=2)))


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(events, max_size=12), st.dictionaries(st.text(max_size=5), json_values, max_size=3),
       st.integers(1, 40), st.sampled_from(["", " ", "\n  ", "\t"]))
def test_streamed_events_are_the_whole_file_reading(tmp_path_factory: pytest.TempPathFactory, evs: list[Any],
                                                    others: dict[str, Any], chunk: int, ws: str) -> None:
    """Read in pieces as small as 1 byte (numbers and strings cut by a read), the kept events equal
    json.loads' of the same file; other keys before and after the list are skipped."""
    doc = {**others, "traceEvents": evs}
    # the whitespace after each colon as a separator (a str.replace of ": " would reach into keys holding ": ")
    text = json.dumps(doc, indent=1 if ws else None, separators=(",", ":" + ws))
    path = tmp_path_factory.mktemp("stream") / "t.json"
    path.write_text(text, encoding="utf-8")
    old = chrome.CHUNK_BYTES
    chrome.CHUNK_BYTES = chunk
    try:
        got = read_trace_json(path)["traceEvents"]
    finally:
        chrome.CHUNK_BYTES = old
    assert got == _kept(json.loads(text))


@pytest.mark.parametrize("text, message", [
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1', "not valid JSON (line 1, column"),
    ('{"traceEvents": [1, 2,]}', "not valid JSON (line 1, column 23"),
    ('{"traceEvents": []} x', "not valid JSON (line 1, column 21: Extra data"),
    ('{\n"a": 1,\n"traceEvents": [\n{"ph": "X" "cat": 1}]}', "not valid JSON (line 4, column 12"),
    ("", "not valid JSON (line 1, column 1: Expecting value"),
    ("null", "not a Chrome/Kineto trace (no traceEvents list)"),
    ("[1, 2]", "not a Chrome/Kineto trace (no traceEvents list)"),
    ('{"traceEvents": 5}', "not a Chrome/Kineto trace (no traceEvents list)"),
    ('{"events": []}', "not a Chrome/Kineto trace (no traceEvents list)"),
    ('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nests too deeply"),
])
def test_a_bad_trace_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    """The messages the whole-file reader gave, with json.loads' line and column (1-based, as its own)."""
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(RooflineError) as ours:
        read_trace_json(path)
    assert message in str(ours.value)
    if "column" in message:  # the same place json.loads names
        with pytest.raises(json.JSONDecodeError) as theirs:
            json.loads(text)
        assert f"line {theirs.value.lineno}, column {theirs.value.colno}" in str(ours.value)


def test_a_trace_past_the_event_bound_is_refused_without_reading_the_rest(tmp_path: Path) -> None:
    """50 kept events over a bound of 10: refused as the 11th is kept, the file's tail unread (a tail that
    is not JSON at all would otherwise be 'not valid JSON')."""
    path = tmp_path / "t.json"
    text = json.dumps(_trace(50))
    path.write_text(text[:len(text) // 2] + "GARBAGE" * 1000)
    with pytest.raises(RooflineError, match="holds more than 10 operator, kernel and runtime events"):
        read_trace_json(path, max_events=10)
    # the bound counts kept events only: 10 operators among 500 Python-function events pass
    path.write_text(json.dumps(_trace(10, extra=50)))
    assert len(read_trace_json(path, max_events=10)["traceEvents"]) == 10


def test_the_stated_bounds() -> None:
    """The figures the README states."""
    assert MAX_TRACE_BYTES == 512 * 2**20 and MAX_TRACE_EVENTS == 90_000
    assert MAX_NCU_BYTES == 128 * 2**20 and MAX_NCU_KERNELS == 30_000


def test_files_past_the_byte_bounds_are_refused_before_reading(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Sparse files one byte past each bound (no disk used): refused on their size, in one line, exit 2."""
    big_trace, big_csv = tmp_path / "big.json", tmp_path / "big.csv"
    for path, size in ((big_trace, MAX_TRACE_BYTES + 1), (big_csv, MAX_NCU_BYTES + 1)):
        with path.open("wb") as f:
            f.truncate(size)
    assert main(["import", str(big_trace)]) == 2
    err = capsys.readouterr().err
    assert f"is {MAX_TRACE_BYTES + 1:,} bytes; a trace is read up to {MAX_TRACE_BYTES:,}" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert main(["import", str(big_csv)]) == 2
    err = capsys.readouterr().err
    assert f"is {MAX_NCU_BYTES + 1:,} bytes; an Nsight Compute CSV is read up to {MAX_NCU_BYTES:,}" in err
    assert len(err.strip().splitlines()) == 1


def test_an_ncu_csv_past_the_row_bound_is_refused_on_its_line_count(tmp_path: Path) -> None:
    """The fixture's header and units rows, then MAX_NCU_KERNELS + 1 copies of one kernel row: refused
    on the count of lines, before a row is parsed (the rows here are not even valid)."""
    lines = [line for line in FIXTURE.read_text().splitlines() if not line.startswith("#")]
    path = tmp_path / "k.csv"
    path.write_text("\n".join(lines[:2] + ["x"] * (MAX_NCU_KERNELS + 1)) + "\n")
    with pytest.raises(RooflineError, match=f"has {MAX_NCU_KERNELS + 3:,} lines; the importer reads at most "
                                            f"{MAX_NCU_KERNELS:,} kernels"):
        load_ncu(path)
    # at the bound, the rows are parsed (and this one is refused for what it holds)
    path.write_text("\n".join(lines[:2] + ["x"] * MAX_NCU_KERNELS) + "\n")
    with pytest.raises(RooflineError, match="row 3: 1 columns where the header has"):
        load_ncu(path)


def test_a_streamed_trace_is_analysed_as_before(tmp_path: Path) -> None:
    """One aten::mm 64x64x64 in fp32 among Python-function events: 2 * 64^3 = 524,288 FLOPs (the matmul's
    count), its Python neighbours dropped as the file is read."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace(1, extra=3)))
    profile = load_kineto(path)
    assert profile.trace.flop == 2 * 64**3
