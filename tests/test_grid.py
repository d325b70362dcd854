"""The plain table renderer (report.text.grid) draws what rich 15 draws, byte for byte.

rich is the reference here (a third party's renderer, not ours): every table is drawn both ways on
the same width, the grid's own drawing (Table.text) and rich's drawing of the same table
(Table.to_rich through the console render() falls back to). Tables are generated to cover what the
grid claims to draw itself: left and right columns, empty and multi-line cells, cells with spaces
either side, sections, a header or none, the box or none, no padding at the edges, and titles
longer than the table (word-wrapped, a word longer than a line folded)."""

from __future__ import annotations

import random

import pytest
from rich.cells import cell_len as rich_cell_len

from roofline.errors import printable_lines
from roofline.report.text import grid
from roofline.report.text.tables import _rich_text, render

WORDS = ("a", "kernel", "qkv_proj", "4096×4096×4096", "1.41 FLOP/B", "—", "µs", "Σ × runs", "≤", "α", "→",
         "[bold]x[/bold]", "[/x]", "x" * 41, "", " ", "  pad ", "line\nbreak", "two\n\nblank", "trail\n")


def _phrase(rng: random.Random, most: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, most)))


def _table(seed: int) -> grid.Table:
    rng = random.Random(seed)
    t = grid.Table(title=rng.choice([None, "", _phrase(rng, 4), _phrase(rng, 30), "x" * 150 + " y"]),
                   show_header=rng.random() < 0.8, box=rng.choice(["heavy_head", None]),
                   pad_edge=rng.random() < 0.7)
    for _ in range(rng.randint(1, 6)):
        t.add_column(_phrase(rng, 2), justify=rng.choice(["left", "right"]), style=rng.choice([None, "bold"]))
    for _ in range(rng.randint(0, 8)):
        t.add_row(*[_phrase(rng, 3) for _ in range(rng.randint(0, len(t.columns)))], end_section=rng.random() < 0.2)
        if rng.random() < 0.1:
            t.add_section()
    return t


@pytest.mark.parametrize("seed", range(300))
def test_the_grid_draws_what_rich_draws(seed: int) -> None:
    width = random.Random(-seed).choice([80, 120, 1000])
    ours, theirs = _table(seed), _table(seed)
    ours.map_cells(printable_lines)
    theirs.map_cells(printable_lines)
    text = ours.text(width)
    drawn = _rich_text(theirs.to_rich(), width)
    if text is None:  # wider than `width` unwrapped, or a table of no rows and no header: rich draws it
        whole = _rich_text(theirs.to_rich(), 10_000)
        assert max(len(line) for line in whole.splitlines()) > width or not (ours.end_sections or ours.show_header)
        return
    assert text == drawn


def test_most_generated_tables_take_the_grid_path() -> None:
    # the comparison above is only worth what the grid draws itself: most of the 300 must
    drawn = 0
    for seed in range(300):
        t = _table(seed)
        t.map_cells(printable_lines)
        drawn += t.text(1000) is not None
    assert drawn > 200


def test_a_table_wider_than_the_output_is_left_to_rich() -> None:
    t = grid.Table(title="t")
    t.add_column("name")
    t.add_column("value", justify="right")
    t.add_row("a long kernel name that wraps", "12.5 ms")
    assert t.text(20) is None
    # through render(): rich wraps the text column, the number stays whole
    out = render(t, width=24)
    assert "12.5 ms" in out and max(len(line) for line in out.splitlines()) <= 24


def test_a_wide_character_is_left_to_rich() -> None:
    t = grid.Table()
    t.add_column("name")
    t.add_row("名前")  # two cells each on a terminal (East Asian Wide)
    assert t.text(1000) is None
    assert render(t).splitlines()[3] == "│ 名前 │"


def test_every_narrow_code_point_is_one_cell_in_rich() -> None:
    # grid counts len() cells for these; rich's own count decides
    for lo, hi in grid.NARROW:
        wide = [hex(cp) for cp in range(lo, hi + 1) if chr(cp).isprintable() and rich_cell_len(chr(cp)) != 1]
        assert wide == [], (hex(lo), hex(hi))
    assert grid.cell_len("4096×4096 µs ≤ Σ") == rich_cell_len("4096×4096 µs ≤ Σ") == 16
    assert grid.cell_len("名前") == rich_cell_len("名前") == 4
