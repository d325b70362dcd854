"""A table of plain-text cells, drawn without importing rich where it fits as it is.

Importing rich's table machinery and rendering through it took ~40% of a one-analysis run (issue 24,
item 12). Every table the tool prints is a few columns of one-line or few-line strings, left or
right justified, under a left-justified title, in rich's HEAVY_HEAD box (or no box): while the table
fits its width, each column is as wide as its widest line and nothing wraps, and the drawing is a
few string joins. `text` draws exactly what rich 15 draws in that case (the same box characters,
the padding of one space each side, a title word-wrapped as rich wraps it to the table's width);
a table that must wrap or drop to fit, or holds a character rich may count as other than one cell
wide, returns None and is drawn by rich (`to_rich`), so the output is rich's byte for byte in every
case (tests/test_grid.py renders tables through both).
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, Literal

Justify = Literal["left", "right"]

# Code points rich 15 counts as one cell each (tests/test_grid.py checks every one against
# rich.cells.cell_len): printable ASCII, Latin-1 to Spacing Modifiers, Greek, general punctuation,
# super/subscripts and currency, letterlike symbols to mathematical operators, box drawing.
NARROW = ((0x20, 0x7E), (0xA0, 0x2FF), (0x370, 0x3FF), (0x2010, 0x2027), (0x2030, 0x205E), (0x2070, 0x20BF),
          (0x2100, 0x22FF), (0x2500, 0x257F))
_NARROW_CACHE: dict[str, bool] = {}


def narrow(text: str) -> bool:
    """Whether every character of `text` is one cell wide (NARROW), so that its width is len(text)."""
    if text.isascii():
        return True
    for ch in text:
        known = _NARROW_CACHE.get(ch)
        if known is None:
            cp = ord(ch)
            known = ch == "\n" or any(lo <= cp <= hi for lo, hi in NARROW)
            _NARROW_CACHE[ch] = known
        if not known:
            return False
    return True


def cell_len(text: str) -> int:
    """The cells `text` takes on a terminal: its length where every character is narrow, else rich's count."""
    if narrow(text):
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return int(rich_cell_len(text))


class Column:
    """One column: its header, justification and cells (strings; the names rich's Column uses)."""

    def __init__(self, header: str, justify: Justify, style: str | None) -> None:
        self.header = header
        self.justify: Justify = justify
        self.style = style
        self._cells: list[str] = []
        self.overflow = "fold"
        self.no_wrap = False


class Table:
    """A table of string cells with rich.table.Table's constructor and methods as this tool uses them:
    a title (left-justified), a header row or none, the HEAVY_HEAD box or none (`box=None`), cell
    padding of one space each side (none at the outer edges with `pad_edge=False`), sections."""

    def __init__(self, title: str | None = None, *, title_justify: str = "left", show_header: bool = True,
                 box: Literal["heavy_head"] | None = "heavy_head", pad_edge: bool = True) -> None:
        self.title = title
        self.title_justify = title_justify
        self.show_header = show_header
        self.box = box
        self.pad_edge = pad_edge
        self.columns: list[Column] = []
        self.end_sections: list[bool] = []

    def add_column(self, header: str = "", justify: Justify = "left", style: str | None = None) -> None:
        self.columns.append(Column(header, justify, style))

    def add_row(self, *cells: str | None, end_section: bool = False) -> None:
        if len(cells) > len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        for column, cell in zip(self.columns, (*cells, *[None] * (len(self.columns) - len(cells))), strict=True):
            column._cells.append("" if cell is None else cell)
        self.end_sections.append(end_section)

    def add_section(self) -> None:
        if self.end_sections:
            self.end_sections[-1] = True

    @property
    def _extra_width(self) -> int:
        """The borders' width: the two edges and one divider between columns, with a box."""
        return len(self.columns) + 1 if self.box and self.columns else 0

    def _get_padding_width(self, index: int) -> int:
        if self.pad_edge:
            return 2
        return (index != 0) + (index != len(self.columns) - 1)

    def map_cells(self, fn: Any) -> None:
        """Every string (title, headers, cells) replaced by fn(string)."""
        self.title = fn(self.title) if isinstance(self.title, str) else self.title
        for column in self.columns:
            column.header = fn(column.header)
            column._cells = [fn(c) for c in column._cells]

    def to_rich(self) -> Any:
        """The same table as a rich Table, every string literal text (never markup)."""
        from rich import box
        from rich.table import Table as RichTable
        from rich.text import Text

        t = RichTable(title=Text(self.title) if self.title else None, title_justify=self.title_justify,  # type: ignore[arg-type]
                      show_header=self.show_header, box=box.HEAVY_HEAD if self.box else None,
                      pad_edge=self.pad_edge)
        for c in self.columns:
            t.add_column(Text(c.header), justify=c.justify, style=c.style, overflow=c.overflow,  # type: ignore[arg-type]
                         no_wrap=c.no_wrap)
        for i, end in enumerate(self.end_sections):
            t.add_row(*(Text(c._cells[i]) for c in self.columns), end_section=end)
        return t

    def text(self, max_width: int) -> str | None:
        """The table as rich draws it on a console `max_width` wide, where it fits unwrapped and every
        character is narrow; else None (draw it with rich)."""
        columns = self.columns
        if not columns or (not self.end_sections and not self.show_header) or self.title_justify != "left":
            return None
        strings = [self.title or ""] + [s for c in columns for s in (c.header, *c._cells)]
        if not all(narrow(s) for s in strings):
            return None
        n = len(columns)
        left = [0 if not self.pad_edge and i == 0 else 1 for i in range(n)]
        right = [0 if not self.pad_edge and i == n - 1 else 1 for i in range(n)]
        cells = [([c.header] if self.show_header else []) + c._cells for c in columns]
        # a column is its widest line (rich measures splitlines(); printable text breaks lines only at \n)
        widths = [max(max((len(line) for line in s.splitlines()), default=0) for s in col) + left[i] + right[i] or 1
                  for i, col in enumerate(cells)]
        table_width = sum(widths) + self._extra_width
        if table_width > max_width:
            return None
        out = _wrap_left(self.title, table_width) if self.title else []
        heavy = bool(self.box)
        if heavy:
            top = ("┏", "━", "┳", "┓") if self.show_header else ("┌", "─", "┬", "┐")
            out.append(top[0] + top[2].join(top[1] * w for w in widths) + top[3])
        rows = list(zip(*cells, strict=True))
        for index, row in enumerate(rows):
            first, last = index == 0, index == len(rows) - 1
            header_row = first and self.show_header
            rendered = []
            for i, cell in enumerate(row):
                inner = widths[i] - left[i] - right[i]
                lines = [(line.rstrip().rjust(inner) if columns[i].justify == "right" else line.ljust(inner))
                         for line in cell.split("\n")]
                rendered.append([" " * left[i] + line + " " * right[i] for line in lines])
            height = max(len(c) for c in rendered)
            for i, lines in enumerate(rendered):
                blank = [" " * widths[i]] * (height - len(lines))
                rendered[i] = blank + lines if header_row else lines + blank  # a header sits at the bottom
            edge = "┃" if first and self.show_header else "│"
            for line_no in range(height):
                parts = [c[line_no] for c in rendered]
                out.append(edge + edge.join(parts) + edge if heavy else "".join(parts))
            if heavy and header_row:
                out.append("┡" + "╇".join("━" * w for w in widths) + "┩")
            body = index - self.show_header
            if heavy and not header_row and not last and self.end_sections[body]:
                out.append("├" + "┼".join("─" * w for w in widths) + "┤")
        if heavy:
            out.append("└" + "┴".join("─" * w for w in widths) + "┘")
        return "\n".join(out)


_WORD: re.Pattern[str] | None = None


def _wrap_left(text: str, width: int) -> list[str]:
    """`text` word-wrapped to `width` and each line padded to it, as rich wraps a left-justified
    title (rich._wrap.divide_line with fold, then Text.rstrip_end and truncate with padding); every
    character one cell wide."""
    global _WORD
    if _WORD is None:
        _WORD = re.compile(r"\s*\S+\s*")  # rich._wrap.re_word: a word with the spaces either side
    out = []
    for line in text.split("\n"):
        breaks: list[int] = []
        offset = 0
        match = _WORD.match(line, 0)
        while match is not None:
            start, end = match.span()
            word = match.group(0)
            length = len(word.rstrip())
            if width - offset >= length:
                offset += len(word)
            elif length > width:  # a word longer than a line is folded
                pieces = [word[i:i + width] for i in range(0, len(word), width)] or [""]
                for k, piece in enumerate(pieces):
                    if start:
                        breaks.append(start)
                    if k == len(pieces) - 1:
                        offset = len(piece)
                    else:
                        start += len(piece)
            elif offset and start:
                breaks.append(start)
                offset = len(word)
            match = _WORD.match(line, end)
        bounds = [0, *breaks, len(line)] if breaks else [0, len(line)]
        for a, b in pairwise(bounds):
            piece = line[a:b]
            if len(piece) > width:  # rstrip_end: trailing spaces past the width go
                spaces = len(piece) - len(piece.rstrip())
                piece = piece[:len(piece) - min(spaces, len(piece) - width)]
            out.append(piece[:width].ljust(width))
    return out


__all__ = ["NARROW", "Column", "Table", "cell_len", "narrow"]
