"""The text tables (roofline.report.text): what is per run and what is summed over runs labelled, a
table fitting 80 columns without cutting a number, a wide terminal keeping every column, each source
cited once under its table."""

from __future__ import annotations

import re

import pytest

from roofline.cli import main
from roofline.models import analyze_model
from roofline.units import format_flop, format_time


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err

BOX = ("┏", "┃", "┡", "│", "├", "└")  # the lines of a rich table (its title and notes are prose)


def _row(out: str, name: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"│ {name} "))
    return [c.strip() for c in line.strip("│").split("│")]


def test_model_table_labels_per_run_and_all_runs(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "model", "llama-3-8b", "--batch", "1", "--context", "4096")
    assert code == 0
    header = next(ln for ln in out.splitlines() if ln.startswith("┃ kernel"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == [
        "kernel", "×", "FLOPs/run", "bytes/run", "FLOP/B", "bound", "time, × runs", "share"]
    assert "× = runs per step (the layers that run it); FLOPs and bytes per run" in out
    qkv = _row(out, "qkv_proj")
    assert qkv[1] == "32"  # Llama 3 8B: 32 layers
    # one run: 2·M·N·K = 2 · 1 token · (32 + 2·8 heads)·128 · 4096 = 50,331,648 FLOP
    assert qkv[2] == format_flop(2 * 1 * (32 + 2 * 8) * 128 * 4096)
    a = analyze_model("llama-3-8b", "h100", "decode", 1, 4096)
    p = next(p for p in a.placements if p.name == "qkv_proj")
    assert qkv[6] == format_time(32 * p.time_s)  # the time column is the 32 runs'
    total = _row(out, "total (Σ × runs)")
    # the last row sums every kernel × its runs: the step's FLOPs and its time floor, all of the time
    assert total[2] == format_flop(sum(q.flop * q.count for q in a.placements)) == format_flop(a.flop)
    assert total[6] == format_time(a.time_s) and total[7] == "100.0%"
    assert "step total (every kernel × its runs)" in out


@pytest.mark.parametrize("argv", [
    ("model", "llama-3-70b", "--machine", "h100", "--tp", "8", "--batch", "64", "--context", "8192"),
    ("compare", "llama-3-70b", "qwen2.5-72b", "--machine", "h100,b200", "--batch", "8"),
    ("sweep", "llama-3-8b", "--batch", "1:64", "--context", "4096"),
    ("machines",),
    ("models",),
    ("plan", "llama-3-70b", "--machine", "dgx-h100", "--batch", "64", "--context", "8192"),
])
def test_tables_fit_80_columns_without_cutting_a_number(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        argv: tuple[str, ...]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    rows = [ln for ln in out.splitlines() if ln.startswith(BOX)]
    assert rows and max(len(ln) for ln in rows) <= 80
    assert "…" not in out  # nothing cut short
    monkeypatch.delenv("COLUMNS")
    _, full, _ = run(capsys, *argv)
    assert "leaves out" not in full  # a pipe: every column
    if "leaves out" in out:
        dropped = re.search(r"this table leaves out: ([^;]+);", out)
        assert dropped is not None
        full_header = next(ln for ln in full.splitlines() if ln.startswith("┃"))
        for column in dropped.group(1).split(", "):
            assert column in full_header and column not in next(ln for ln in out.splitlines() if ln.startswith("┃"))


def test_a_wide_terminal_keeps_every_column(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    _, out, _ = run(capsys, "model", "llama-3-8b")
    assert "share" in out and "leaves out" not in out
    full = max(len(ln) for ln in out.splitlines() if ln.startswith(BOX))
    monkeypatch.setenv("COLUMNS", str(full - 1))
    _, narrow, _ = run(capsys, "model", "llama-3-8b")
    # one column short: the least important column, share ("│ 100.0% " and its borders), goes, and the
    # note says so; the FLOPs and bytes of one run stay
    assert f"to fit {full - 1} columns this table leaves out: share;" in narrow and "FLOPs/run" in narrow
    assert max(len(ln) for ln in narrow.splitlines() if ln.startswith(BOX)) == full - len("│ 100.0% ") + 1 - 1


def test_machine_cites_each_source_once_under_its_table(capsys: pytest.CaptureFixture[str], wide: None) -> None:
    code, out, _ = run(capsys, "machine", "h100")
    assert code == 0
    table, listed = out.split("\nsources\n")
    cited = set(re.findall(r"│ \[(\d+)\] +│", table))
    numbers = re.findall(r"^    \[(\d+)\] ", listed, flags=re.MULTILINE)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)] and cited == set(numbers)
    # the H100 datasheet's page is named once per figure it gives, never in the table itself
    assert "https://" not in table
    assert "(H100 SXM: GPU memory 80GB, GPU memory bandwidth 3.35TB/s)" in listed
