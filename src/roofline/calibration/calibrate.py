"""`roofline calibrate --from aiconfigurator`: fit the expected-time model on one GPU × engine's tables.

Per kind (gemm.bf16, context_attention.bf16, ...), the rows of the newest version that has each table
are joined to our kernels (roofline.calibration.join, as `validate` joins them) and fitted
(roofline.calibration.fit). (B200 TensorRT-LLM 1.3.0rc23's gemm folder only points back at 1.3.0rc20's
table: its GEMMs are fitted on 1.3.0rc20's.) Every row of a table is joined (in numpy, seconds for
100,000 rows), then at most `max_rows` rows of each *kind* are fitted, taken at an even stride through
the kind's rows (every ⌈n / max_rows⌉-th, in the table's order): a kernel an engine runs for a few
shapes (SGLang's Triton prefill beside FlashAttention-3: 900 of H200's 17,000 prefill rows) is fitted
on all its rows instead of its share of a stride through the whole table (181 rows). The file records,
per table, the rows used and each kind's stride.

Layering: imports roofline.errors, roofline.expectation and this room's tables, join and validate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from roofline.calibration.join import Joined, join
from roofline.calibration.tables import SYSTEMS, Family, Row, Source, newest_with, systems, tables
from roofline.calibration.validate import fit_group, join_any, split
from roofline.errors import RooflineError
from roofline.expectation.times import ExpectedTimes

DEFAULT_MAX_ROWS = 4000
FAMILIES = (Family.GEMM, Family.ATTENTION, Family.MLA, Family.MOE)  # MLA and MoE where the engine has them


def joined_rows(rs: Iterable[Row]) -> tuple[list[Joined], dict[str, int]]:
    """The rows joined to our kernels, and the count of those left out by why."""
    out: list[Joined] = []
    left: dict[str, int] = {}
    for r in rs:
        try:
            out.append(join(r))
        except RooflineError as exc:
            why = str(exc).split(" < ")[0] if "window" in str(exc) else str(exc)
            left[why] = left.get(why, 0) + 1
    return out, left


def strided(rs: Sequence[Row], max_rows: int) -> tuple[list[Row], int]:
    """Every ⌈n / max_rows⌉-th row of each table (the stride returned)."""
    stride = max(1, math.ceil(len(rs) / max_rows)) if max_rows > 0 else 1
    return list(rs[::stride]), stride


def engines_of(source: Source, system: str) -> dict[str, str]:
    """engine -> newest version, over the tables calibrated."""
    out: dict[str, str] = {}
    for op, stem in (("gemm", "gemm_perf"), ("attention", "context_attention_perf")):
        for engine, version in newest_with(source, system, op, stem).items():
            out.setdefault(engine, version)
    return out


def calibrate(source: Source, machine: str, engine: str, max_rows: int = DEFAULT_MAX_ROWS,
              families: Sequence[Family] = FAMILIES) -> ExpectedTimes:
    """The fitted expected times of one catalog machine and engine, with their source: each table of
    the engine's newest version that has it (tables.tables), joined as `validate` joins them (join_any:
    the same kinds, a kernel split off included) and fitted per kind on at most `max_rows` of its rows at
    an even stride (validate.fit_group; 0: every row)."""
    names = systems(source, machine)
    if not names:
        covered = sorted({SYSTEMS[s] for s in systems(source)})
        raise RooflineError(f"{source.label} has no tables for {machine}; it covers: {', '.join(covered)}")
    system = names[0]
    engines = engines_of(source, system)
    if engine not in engines:
        raise RooflineError(f"{source.label} has no {engine} tables for {machine}; engines: {', '.join(engines)}")
    fits = {}
    used_tables: list[dict[str, object]] = []
    left_out: dict[str, int] = {}
    for family in families:
        for table in tables(source, system, family, engine):
            jt = join_any(table)
            for k, v in jt.left_out.items():
                left_out[f"{table.table}: {k}"] = left_out.get(f"{table.table}: {k}", 0) + v
            strides: dict[str, int] = {}
            used = 0
            for rows_ in split(jt):
                cap = max_rows if max_rows > 0 else len(rows_.measured_s)
                fits[rows_.kind], strides[rows_.kind] = fit_group(rows_, cap)
                used += math.ceil(len(rows_.measured_s) / strides[rows_.kind])
            used_tables.append({"table": table.table, "version": table.version, "rows": len(table),
                                "strides": strides, "used": used})
    if not fits:
        raise RooflineError(f"no {engine} rows of {machine} could be joined to a kernel")
    src = {"package": "aiconfigurator-core", "version": source.version, "system": system,
           "path": f"aiconfigurator_core/systems/data/{system}/<op>/{engine}/<version>/", "tables": used_tables,
           "left_out": left_out}
    return ExpectedTimes(machine, engine, engines[engine], src, dict(sorted(fits.items())))


__all__ = ["DEFAULT_MAX_ROWS", "FAMILIES", "calibrate", "engines_of", "joined_rows", "strided"]
