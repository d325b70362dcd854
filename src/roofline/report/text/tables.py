"""Human-readable tables (report.text.grid; rich only where one must wrap) for placements and machines.
Numbers always carry their units."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from roofline import units as u
from roofline.errors import printable_lines
from roofline.hardware import Machine
from roofline.hardware.machine import PEAK_KEYS
from roofline.placement import GraphAnalysis, Placement
from roofline.vocab import Level, Unit

PIPE_WIDTH = 1000  # not a terminal (a pipe, a file, a test): the table at its full width, up to this


def output_width() -> int | None:
    """The columns a table may take: $COLUMNS where set (as shells and tests set it), else the terminal's
    width when stdout is a terminal; None on a pipe or a file, where each table keeps its full width."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        if sys.stdout.isatty():
            import shutil  # only on a terminal: a pipe or a file never needs it

            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError):  # a closed or replaced stdout
        pass
    return None


TEXT_WRAP = 30  # a text column wider than this may wrap before a column is left out


def _width_at(table: Any, text_width: int) -> int:
    """The table's width with each right-justified (number) column at its widest cell and each text
    column at most `text_width` wide (at least its longest word, up to 24 characters: a URL folds),
    plus the padding and the borders; with text_width 0, the narrowest width that cuts no number."""
    from roofline.report.text.grid import cell_len

    total = table._extra_width  # borders
    for i, column in enumerate(table.columns):
        lines = [line for t in (str(column.header), *(str(c) for c in column._cells)) for line in t.splitlines()]
        widest = max((cell_len(line) for line in lines), default=0)
        if column.justify == "right":
            need = widest
        else:
            word = min(24, max((cell_len(w) for line in lines for w in line.split()), default=0))
            need = max(word, min(text_width, widest))
        total += need + table._get_padding_width(i)
    return int(total)


def _plain(value: Any) -> Any:
    """A cell as literal text: never read as rich markup (an op named `[/x]` or `[bold]x[/bold]` in a
    trace is shown as written, not parsed or swallowed), its control characters escaped (`printable`)."""
    from rich.text import Text

    return Text(printable_lines(value)) if isinstance(value, str) else value


def plain_table(table: Any) -> None:
    """Every string cell, header, title and caption of a rich Table made literal text (`_plain`)."""
    table.title = _plain(table.title)
    table.caption = _plain(table.caption)
    for column in table.columns:
        column.header = _plain(column.header)
        column.footer = _plain(column.footer)
        column._cells = [_plain(c) for c in column._cells]


def _fit(table: Any, target: int | None, drop: Sequence[str]) -> tuple[int | None, list[str]]:
    """Prepare a table for a `target`-column output (None: a pipe): long words fold, numbers never
    wrap, and the columns named in `drop` go (least important first) until it fits with its text
    columns at most TEXT_WRAP wide. Returns the console width to draw it at (None: keep the
    console's) and the headers left out."""
    dropped: list[str] = []
    for column in table.columns:
        column.overflow = "fold"  # a long word (a kernel name, a URL) wraps; never "…"
        if column.justify == "right":
            column.no_wrap = True
    for header in drop:
        if target is None or _width_at(table, TEXT_WRAP) <= target:
            break
        index = next((i for i, c in enumerate(table.columns) if str(c.header) == header), None)
        if index is not None and len(table.columns) > 1:
            del table.columns[index]
            dropped.append(header)
    return (max(target, _width_at(table, 0)) if target is not None else None), dropped


def render(table: Any, width: int | None = None, drop: Sequence[str] = ()) -> str:
    """A table (report.text.grid's, or any rich renderable) as plain text, fitted to `width` (default:
    output_width()).

    A table wider than that loses the columns named in `drop` (headers, least important first) until
    it fits with its text columns at most TEXT_WRAP wide, and says which; then its text columns wrap.
    A number is never cut: right-justified columns never wrap, and a table that still cannot fit is
    printed at its narrowest whole width. A grid table that fits unwrapped is drawn without rich
    (grid.Table.text, rich's drawing byte for byte); any other goes through rich.
    """
    from roofline.report.text.grid import Table as Grid

    target = width if width is not None else output_width()
    dropped: list[str] = []
    if isinstance(table, Grid):
        table.map_cells(printable_lines)
        console_width, dropped = _fit(table, target, drop)
        text = table.text(console_width or PIPE_WIDTH)
        if text is None:
            text = _rich_text(table.to_rich(), console_width)
    else:
        from roofline.report.text.grid import Table

        console_width = target
        if isinstance(table, Table):
            plain_table(table)
            console_width, dropped = _fit(table, target, drop)
        text = _rich_text(_plain(table), console_width)
    if dropped:
        text += (f"\n(to fit {target} columns this table leaves out: {', '.join(dropped)}; a wider terminal, "
                 f"COLUMNS=200 or a pipe shows every column)")
    return text


def _rich_text(renderable: Any, width: int | None) -> str:
    """A rich renderable drawn on a plain console `width` wide (None: PIPE_WIDTH)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width or PIPE_WIDTH, no_color=True, highlight=False, soft_wrap=False)
    console.print(renderable)
    return buf.getvalue().rstrip("\n")


def attainable_how(p: Placement) -> str:
    """The attainable rate's share, always of the peak the kernel's FLOPs run at (the dtype's matrix
    peak for a matmul; the vector peak, or matrix and vector units each at its own, otherwise: the
    ridge row's), so that the formula it names gives that share: min(peak, BW × I) where a unit's
    compute or DRAM sets the floor; FLOPs / that time where the exponentials, shared memory, L2 or a
    link do (the floor is theirs, below the two-ceiling roof). Never a share of the matrix peak beside
    "limited by exp" (was: 100.19% of the bf16 matrix peak, or 50.58% of it for a vector kernel, with
    min(peak, BW × I) named, which gave 100%)."""
    share = p.attainable_flop_per_s / p.peak_flop_per_s if p.peak_flop_per_s else 0.0
    matrix_peak = abs(p.peak_flop_per_s - p.roof_flop_per_s) <= 1e-9 * p.roof_flop_per_s
    of = (f"the {p.dtype.peak_key} peak" if matrix_peak
          else f"the {u.format_flop_per_s(p.peak_flop_per_s, 4)} its FLOPs run at")
    if p.bound in (Unit.MATRIX, Unit.VECTOR, Level.DRAM):
        return f"{share:.2%} of {of}; min(peak, BW × I)"
    return f"{share:.2%} of {of}; FLOPs / the {p.bound} time (the floor), below min(peak, BW × I)"


def placement_text(p: Placement, title: str = "") -> str:
    from roofline.report.text.grid import Table

    t = Table(title=title or f"{p.name} on {p.machine.name} ({p.dtype.name})", show_header=False,
              box=None, title_justify="left", pad_edge=False)
    t.add_column("quantity", style="bold")
    t.add_column("value")
    t.add_column("how")
    t.add_row("FLOPs", u.format_flop(p.flop), f"{p.flop:.6g} FLOP")
    t.add_row("bytes", u.format_bytes(p.bytes), f"{p.bytes:.6g} B to and from DRAM")
    t.add_row("intensity", u.format_intensity(p.flop_per_byte, 5), "FLOPs / bytes")
    t.add_row("ridge", u.format_intensity(p.ridge_flop_per_byte, 4),
              f"{u.format_flop_per_s(p.roof_flop_per_s, 4)} / {u.format_bytes_per_s(p.bytes_per_s, 4)}")
    if abs(p.kernel_ridge_flop_per_byte - p.ridge_flop_per_byte) > 1e-9 * p.ridge_flop_per_byte:
        units = sorted(u for u, f in p.cost.flop_by_unit.items() if f)
        where = f"{units[0]} units" if len(units) == 1 else f"{' and '.join(units)} units, each at its own peak"
        t.add_row("", u.format_intensity(p.kernel_ridge_flop_per_byte, 4),
                  f"at the {u.format_flop_per_s(p.peak_flop_per_s, 4)} its FLOPs run at ({where})")
    t.add_row("attainable", u.format_flop_per_s(p.attainable_flop_per_s, 4), attainable_how(p))
    inside = ""  # the exp units or an on-chip level set the floor: name its term too
    if p.bound in (Unit.EXP, Level.SMEM, Level.L2):
        inside = f", {p.bound} {u.format_time(p.time_s)}" + (f" (margin {p.margin:.3g}×)" if p.margin else "")
    t.add_row("time floor", u.format_time(p.time_s),
              f"compute {u.format_time(p.compute_time_s)}, memory {u.format_time(p.memory_time_s)}{inside}")
    t.add_row("bound", p.bound_class, f"limited by {p.bound}")
    if p.measured_time_s is not None:
        t.add_row("measured", u.format_time(p.measured_time_s),
                  f"{p.fraction_of_roof or 0:.1%} of the roof" + (" (ABOVE THE ROOF)" if p.above_roof else ""))
    return render(t)


RUNS_NOTE = "× = runs per step (the layers that run it); FLOPs and bytes per run; time and share of all runs"
# the headers of placements_table, and the order a narrow terminal leaves them out (least important first)
KERNEL_COLUMNS = (("kernel", "left"), ("×", "right"), ("FLOPs/run", "right"), ("bytes/run", "right"),
                  ("FLOP/B", "right"), ("bound", "left"), ("time, × runs", "right"), ("share", "right"))
KERNEL_DROP = ("share", "bytes/run", "FLOPs/run")


def intensity_cell(p: Placement) -> str:
    """A kernel's FLOP/B as the chart places it: per DRAM byte, or for a collective per byte on its
    link (report.intensity; LINK_NOTE under the table says so): one figure in the table, the
    CSV's flop_per_link_byte, the PNG and the page."""
    from roofline.report.intensity import intensity

    return u.format_intensity(intensity(p))


LINK_NOTE = "FLOP/B of a communication kernel: per byte on its link, as the charts place it"


def placements_table(placements: Sequence[Placement], title: str = "", total_time_s: float | None = None) -> str:
    """One row per kernel: FLOPs and bytes of one run, time floor and share of all its runs (× count),
    and a last row that sums every kernel × its runs."""
    from roofline.report.text.grid import Table

    t = Table(title=title, title_justify="left")
    for col, just in KERNEL_COLUMNS:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    total = total_time_s if total_time_s is not None else sum(p.total_time_s for p in placements)
    for i, p in enumerate(placements):
        share = p.total_time_s / total if total else 0.0
        t.add_row(p.name, str(p.count), u.format_flop(p.flop), u.format_bytes(p.bytes), intensity_cell(p),
                  p.bound_class, u.format_time(p.total_time_s), f"{share:.1%}",
                  end_section=i == len(placements) - 1)
    if len(placements) > 1:
        flop = sum(p.flop * p.count for p in placements)
        moved = sum(p.bytes * p.count for p in placements)
        t.add_row("total (Σ × runs)", "", u.format_flop(flop), u.format_bytes(moved),
                  u.format_intensity(flop / moved) if moved else "—", "", u.format_time(total), "100.0%")
    from roofline.report.intensity import link_bytes

    return render(t, drop=KERNEL_DROP) + (f"\n{LINK_NOTE}" if any(link_bytes(p) for p in placements) else "")


def analysis_text(a: GraphAnalysis, title: str) -> str:
    """The kernels of a sequence as a table, then its totals on one line."""
    return (placements_table(a.placements, title=title) + "\n"
            + f"total: {u.format_flop(a.flop)}, {u.format_bytes(a.bytes)}, {u.format_intensity(a.flop_per_byte)}, "
              f"time floor {u.format_time(a.time_s)}")


def machines_table(machines: Iterable[Machine], dtypes: Sequence[str] = ("bf16", "fp8", "fp4")) -> str:
    from roofline.report.text.grid import Table

    t = Table(title="Machines (dense peaks; ridge = peak / DRAM bandwidth)", title_justify="left")
    t.add_column("id")
    t.add_column("aliases")
    t.add_column("name")
    for d in dtypes:
        t.add_column(f"{d} peak", justify="right")
    t.add_column("DRAM BW", justify="right")
    t.add_column("capacity", justify="right")
    for d in dtypes:
        t.add_column(f"ridge {d}", justify="right")
    for m in machines:
        peaks = [u.format_flop_per_s(m.matrix_flop_per_s[d]) if d in m.matrix_flop_per_s else "—" for d in dtypes]
        ridges = [f"{m.ridge_flop_per_byte(d):.0f}" if d in m.matrix_flop_per_s else "—" for d in dtypes]
        cap = m.memory_capacity_bytes
        t.add_row(m.id, ", ".join(m.aliases), m.name, *peaks, u.format_bytes_per_s(m.memory_bytes_per_s),
                  u.format_bytes(cap, binary=True) if cap else "—", *ridges)
    return render(t, drop=("aliases", "name", *(f"ridge {d}" for d in reversed(dtypes[1:])), "capacity",
                           *(f"{d} peak" for d in reversed(dtypes[1:]))))


def machine_text(m: Machine) -> str:
    """Every ceiling with its ridge point; each source cited as [n] and listed once under the table."""
    from roofline.explain.placement import Sources
    from roofline.report.text.grid import Table

    sources = Sources()

    def cite(source: str) -> str:
        return sources.cite(source) if source else ""

    t = Table(title=f"{m.name} ({m.id})", title_justify="left")
    t.add_column("ceiling")
    t.add_column("value", justify="right")
    t.add_column("ridge", justify="right")
    t.add_column("source")
    bw = m.memory_bytes_per_s
    for section, table in (("matrix", m.matrix_flop_per_s), ("vector", m.vector_flop_per_s),
                           ("sparse (2:4, not used by default)", m.sparse_flop_per_s)):
        key = section.split()[0]
        for d in sorted(table, key=PEAK_KEYS.index):
            t.add_row(f"{section} {d}", u.format_flop_per_s(table[d], 4), f"{table[d] / bw:.1f} FLOP/B",
                      cite(m.sources.get(f"peak.{key}", "")))
    for level in m.memory.values():
        if level.bytes_per_s:
            t.add_row(f"{level.name} bandwidth", u.format_bytes_per_s(level.bytes_per_s, 4), "",
                      cite(level.source))
        if level.capacity_bytes:
            cap = f"{u.format_bytes(level.capacity_bytes, 4, binary=True)} ({u.format_bytes(level.capacity_bytes, 4)})"
            t.add_row(f"{level.name} capacity" + (f" ({level.technology})" if level.technology else ""),
                      cap, "", cite(level.source))
    if m.interconnect_bytes_per_s:
        t.add_row(f"interconnect {m.interconnect_name}".strip(), u.format_bytes_per_s(m.interconnect_bytes_per_s, 4),
                  "", cite(m.sources.get("interconnect", "")))
    text = render(t)
    if sources.text():
        text += "\n" + sources.text()
    if m.notes:
        text += "\nnotes:\n" + "\n".join(f"  - {n}" for n in m.notes)
    return text
