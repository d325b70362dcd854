"""`roofline.cli.common.indented_json` against its reference, `json.dumps(obj, indent=2, allow_nan=False)`
(the standard library's encoder, which every `--json` output was written by): the same text for every
kind of value and key json accepts, the same errors for those it refuses, and a real output unchanged."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from enum import IntEnum

import pytest

from roofline.cli.common import indented_json
from roofline.vocab import Level, Unit


class Small(IntEnum):
    TWO = 2


CASES = [
    None, True, False, 0, -7, 10**30, 0.1, -0.0, 1e16, 1e-300, 2.5e-7, float(2**53), "", "plain", "é ü ✓ \u202e",
    "tab\there \"quoted\" back\\slash \x1b[31m\x00", [], {}, (), [[]], [{}], {"a": []}, {"a": {}},
    [1, [2, [3, []]], {"x": (4, 5)}],
    {"k": {"nested": {"deeper": [None, True, 1.5, "s"]}}, "after": 1},
    {Unit.MATRIX: 1.0, Level.DRAM: {"bytes": 3, "time_s": 4e-6}},  # StrEnum keys and values, as the library's
    [Unit.VECTOR, Small.TWO, Small.TWO.value],
    {3: "int key", 2.5: "float key", True: "bool key", None: "none key", False: 0},
]


@pytest.mark.parametrize("obj", CASES, ids=[repr(c)[:30] for c in CASES])
def test_the_same_text_as_json_dumps(obj: object) -> None:
    assert indented_json(obj) == json.dumps(obj, indent=2, allow_nan=False)


@pytest.mark.parametrize("bad, error", [
    *((b, ValueError) for b in (math.nan, math.inf, -math.inf, [1, math.nan], {"a": {"b": math.inf}}, {math.nan: 1})),
    *((b, TypeError) for b in ({1, 2}, [object()], {"a": b"bytes"}, {(1, 2): "tuple key"}))])
def test_what_json_refuses_is_refused_with_its_message(bad: object, error: type[Exception]) -> None:
    # NaN and infinity (allow_nan=False): ValueError; what JSON cannot encode: TypeError; json.dumps's words
    with pytest.raises(error) as ours:
        indented_json(bad)
    with pytest.raises(error) as theirs:
        json.dumps(bad, indent=2, allow_nan=False)
    assert str(ours.value) == str(theirs.value)


def test_a_train_analysis_json_is_json_dumps_of_its_parse() -> None:
    # the whole output of one `roofline train --json` (49 kernels: issue 23's bench) read back and written
    # by the standard library gives the same bytes
    out = subprocess.run([sys.executable, "-m", "roofline.cli", "train", "llama-3-70b", "--machine", "dgx-h100",
                          "--seq", "8192", "--global-batch", "512", "--tp", "8", "--pp", "4", "--dp", "16", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert out == json.dumps(json.loads(out), indent=2, allow_nan=False) + "\n"
