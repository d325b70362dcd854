"""Fuzzing the trace loaders (`roofline import`): a Chrome/Kineto trace JSON and an Nsight Compute CSV.

Whatever a file holds, a loader either returns what it read or raises RooflineError (one line on the
command line, exit 2): never another exception. What it returns is sound: every op's FLOPs, bytes and
measured time are finite and non-negative, and every timed kernel is one of its ops or fused groups.
The documents are built around what the real formats carry (torch.profiler's "X" events with
"Input Dims"/"Input type", ncu's raw page with a units row), with every field allowed to be wrong:
negative, huge or non-integer dims, foreign types, missing keys.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineError
from roofline.tracing.kineto import Profile, load_kineto, parse_kineto
from roofline.tracing.ncu import ncu_profile, parse_ncu_csv

FIXTURE = Path(__file__).parent / "fixtures" / "ncu_raw_small.csv"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))  # CI: 200 a property (a few seconds); raise it to dig
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

OPS = ["aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::add", "aten::mul", "aten::softmax",
       "aten::_grouped_mm", "aten::scaled_dot_product_attention", "aten::index_copy_", "aten::layer_norm",
       "aten::embedding", "aten::cat", "aten::silu", "aten::rsqrt", "aten::unknown_op", "foo"]
TYPES = ["float", "c10::BFloat16", "c10::Half", "long int", "bool", "c10::Float8_e4m3fn", "Scalar", "TensorList",
         "", "weird<type>"]

dims = st.one_of(st.lists(st.integers(-3, 2**40), max_size=4), st.integers(-5, 5), st.none(), st.text(max_size=5))
scalars = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=8), st.none(),
                    st.booleans())


def assert_sound(profile: Profile) -> None:
    """What a report does with a loaded profile at once (a table, a chart, a sum) needs finite,
    non-negative numbers: FLOPs and tensor bytes per op, a measured time per timed kernel."""
    trace = profile.trace
    names = {op.name for op in trace.ops} | set(trace.groups)
    for op in trace.ops:
        assert op.count >= 1
        assert all(math.isfinite(f) and f >= 0 for f in op.flop_by_unit.values()), op
        assert all(math.isfinite(t.bytes) and t.bytes >= 0 for t in (*op.inputs, *op.outputs)), op
    for kernel, seconds in trace.times_s.items():
        assert kernel in names, kernel
        assert math.isfinite(seconds) and seconds >= 0, (kernel, seconds)
    assert math.isfinite(profile.measured_time_s) and profile.measured_time_s >= 0


@st.composite
def events(draw: st.DrawFn) -> dict:
    n = draw(st.integers(0, 4))
    args = {"Input Dims": draw(st.lists(dims, max_size=n + 1)),
            "Input type": draw(st.lists(st.sampled_from(TYPES), max_size=n + 1)),
            "Concrete Inputs": draw(st.lists(scalars.map(str), max_size=n + 1))}
    if draw(st.booleans()):
        args = draw(st.dictionaries(st.sampled_from(["Input Dims", "Input type", "Input Strides", "External id"]),
                                    st.one_of(dims, scalars), max_size=3))
    return {"ph": draw(st.sampled_from(["X", "X", "X", "i", "B"])),
            "cat": draw(st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "python_function"])),
            "name": draw(st.sampled_from(OPS)),
            "ts": draw(st.one_of(st.floats(-1e3, 1e12, allow_nan=False), st.integers(-10, 10**12))),
            "dur": draw(st.one_of(st.floats(-1.0, 1e9), st.just(float("nan")), st.integers(-5, 10**9), st.none(),
                                  st.text(max_size=3))),
            "pid": draw(st.integers(0, 2)), "tid": draw(st.integers(0, 2)),
            "args": args}


@SETTINGS
@given(st.lists(events(), max_size=12))
def test_any_kineto_trace_loads_or_is_one_error(evs: list[dict]) -> None:
    try:
        profile = parse_kineto({"traceEvents": evs}, "fuzz.json")
    except RooflineError:
        return
    assert_sound(profile)


@SETTINGS
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                 st.sampled_from([b'{"traceEvents": [', b'{"traceEvents": 5}', b"[]", b"null", b'{"a": 1}',
                                  b"\xff\xfe{", b"[" * 5000])))
def test_any_bytes_as_a_trace_file_load_or_are_one_error(tmp_path_factory: object, data: bytes) -> None:
    path = Path(str(tmp_path_factory.mktemp("t"))) / "trace.json"  # type: ignore[attr-defined]
    path.write_bytes(data)
    try:
        profile = load_kineto(path)
    except RooflineError:
        return
    assert_sound(profile)


def _fixture_rows() -> list[list[str]]:
    lines = [line for line in FIXTURE.read_text().splitlines() if not line.startswith("#")]
    return list(csv.reader(lines))


CELLS = st.one_of(st.text(max_size=6), st.sampled_from(["", "n/a", "1,234.5", "-3", "1e999", "nan", "inf", "0"]),
                  st.floats(allow_nan=True).map(str), st.integers(-(2**64), 2**64).map(str))


@SETTINGS
@given(st.data())
def test_any_mutation_of_an_ncu_csv_loads_or_is_one_error(data: st.DataObject) -> None:
    rows = _fixture_rows()
    for _ in range(data.draw(st.integers(1, 6))):
        r = data.draw(st.integers(0, len(rows) - 1))
        action = data.draw(st.sampled_from(["cell", "drop_row", "drop_col", "truncate"]))
        if action == "cell" and rows[r]:
            c = data.draw(st.integers(0, len(rows[r]) - 1))
            rows[r][c] = data.draw(CELLS)
        elif action == "drop_row" and len(rows) > 1:
            rows.pop(r)
        elif action == "drop_col" and rows[r]:
            c = data.draw(st.integers(0, len(rows[r]) - 1))
            for row in rows:
                if c < len(row):
                    row.pop(c)
        elif action == "truncate" and rows[r]:
            rows[r] = rows[r][: data.draw(st.integers(0, len(rows[r])))]
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    try:
        kernels = parse_ncu_csv(out.getvalue(), "fuzz.csv")
        profile = ncu_profile(kernels, "fuzz.csv")
    except RooflineError:
        return
    assert_sound(profile)
    assert len(profile.trace.ops) == len(kernels)  # one op per kernel ncu measured


def test_the_unmutated_fixture_loads() -> None:
    # the fuzz above starts from this file: it must load as it stands (three kernels)
    out = io.StringIO()
    csv.writer(out).writerows(_fixture_rows())
    assert len(parse_ncu_csv(out.getvalue(), "fixture")) == 3
