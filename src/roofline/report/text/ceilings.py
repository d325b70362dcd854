"""Text for measured ceilings: the runs as a table, the ceilings, the datasheet comparison, the environment.
"""

from __future__ import annotations

from typing import Any

from roofline.report.text.tables import render
from roofline.units import format_bytes_per_s, format_flop_per_s, format_time
from roofline.vocab import Bound


def noise_lines(c: Any) -> list[str]:
    """Whether each ceiling's best sample was confirmed by a second within 5% (measure.timing.CONFIRM),
    and, where one was not, that a rerun may differ: the run was noisy (a busy machine)."""
    from roofline.measure.timing import CONFIRM

    chosen = [c.memory_run, *(c.matrix_run(k) for k in c.peak_flop_per_s)]
    loose = [r for r in chosen if not r.timing.confirmed]
    load = c.environment.details.get("load average", "")
    if not loose:
        return [f"noise: each ceiling's best sample was matched within {CONFIRM:.0%} by another (stable)"]
    what = ", ".join(f"{r.dtype} {r.name} ({r.backend}): the next-best sample took {1 + (r.timing.best_gap or 0):.3g}× "
                     "as long" if r.timing.best_gap is not None else f"{r.dtype} {r.name} ({r.backend}): one sample"
                     for r in loose)
    return [f"noise: NOT STABLE: no second sample came within {CONFIRM:.0%} of the best for {what}; "
            f"a rerun may differ (best to worst in the table: their spread){'; load average ' + load if load else ''}; "
            "measure on an idle machine, or without --quick for more samples"]


def ceilings_text(c: Any) -> str:
    """The runs as a table, then the ceilings, the datasheet comparison and the environment."""
    from roofline.report.text.grid import Table


    t = Table(title=f"Measured ceilings: {c.environment.device_name} ({c.device})", title_justify="left")
    for col, just in (("ceiling", "left"), ("backend", "left"), ("dtype", "left"), ("best", "right"),
                      ("median", "right"), ("worst", "right"), ("median time", "right"), ("runs", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in c.runs:
        fmt = format_bytes_per_s if r.kind is Bound.MEMORY else format_flop_per_s
        t.add_row(r.name, r.backend, r.dtype, fmt(r.best_rate), fmt(r.median_rate), fmt(r.worst_rate),
                  format_time(r.timing.median_s), f"{r.timing.repeats}×{r.timing.inner}")
    lines = [render(t), "", *noise_lines(c), ""]
    mem = c.memory_run
    lines.append(f"memory bandwidth: {format_bytes_per_s(c.memory_bytes_per_s, 4)} "
                 f"(best of {', '.join(sorted({r.name for r in c.runs if r.kind is Bound.MEMORY}))}: "
                 f"{mem.name} with {mem.backend}; STREAM byte count)")
    for key, rate in c.peak_flop_per_s.items():
        run = c.matrix_run(key)
        lines.append(f"{key} matmul peak: {format_flop_per_s(rate, 4)} ({run.name}, {run.backend})")
    for key, why in c.skipped.items():
        lines.append(f"{key}: not measured ({why})")
    datasheet = c.catalog_match()
    if datasheet is not None:
        for row in c.comparison(datasheet):
            fmt = format_bytes_per_s if row["ceiling"] == "memory bandwidth" else format_flop_per_s
            lines.append(f"vs {datasheet.id} datasheet: {row['ceiling']} {fmt(row['measured'])} of "
                         f"{fmt(row['datasheet'])} = {row['ratio']:.1%}")
    elif c.device == "cuda":
        lines.append("this GPU is not in the catalog: no datasheet comparison")
    from roofline.report.text.levels import chip_lines, ladder_lines

    lines += ladder_lines(getattr(c, "ladder", None)) + chip_lines(c)
    lines += [f"environment: {line}" for line in c.environment.summary_lines()]
    lines.append(f"measured in {c.wall_s:.1f} s" + (" (--quick)" if c.quick else ""))
    return "\n".join(lines)
