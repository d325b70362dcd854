"""Validation: our floor and expected band beside every measured row, summarised per GPU × engine × kind.

Per group of rows (one catalog machine, one engine, one kind: gemm.bf16, context_attention.bf16, ...):

    share of roof     floor / measured, its median, 10th and 90th percentiles (type 7 quantiles)
    MAPE              mean |t − measured| / measured of the expected time t (roofline.expectation)
    inside band       share of rows with low ≤ measured ≤ high
    ≥ 10 µs           the same MAPE and share over the rows whose floor is at least 10 µs
    faster than floor every row with measured < floor, each explained or flagged:
                      explained when within TIMING_TOLERANCE of the floor (timing scatter); when a
                      compute-bound row beats its own FLOPs at the dense peak (the table's error: no
                      cache shortens arithmetic); when its working set (the bytes our kernel moves to
                      and from DRAM) fits in the machine's L2: the benchmark reran one shape, so the
                      operands stayed in L2 between runs and DRAM was never the limit (an H100 bf16
                      GEMM 32768×64×512 ran 8.8 µs against an 11.3 µs DRAM floor); or, for a
                      DRAM-bound stream larger than L2, when it is no faster than (working set − L2) /
                      bandwidth, within TIMING_TOLERANCE (the stream's last L2-sized part is still in
                      L2 when the next run starts); when, for a MoE layer, it is above the floor with
                      the fewest experts any router hits (RELAXED);
                      flagged as our error otherwise

The rows of a group are held as numpy columns (roofline.calibration.floors): the floor, the expected
time and its band are computed for the whole group at once, the faster-than-floor points one by one.
The expected time is evaluated by the formula of roofline.expectation.model's Fit.expected_s, as
columns; each group checks it against Fit.expected_s on a few rows and, where they differ, scores
every row by the model itself (so a change of the model cannot leave validation scoring another
formula; it only makes validation slower).

Which tables are joined, and by what, is one table: JOINERS (a table kind -> its joiner). Adding a
kind is one entry there (and its files in roofline.calibration.tables.TABLES).

Layering: imports roofline.errors, roofline.units, roofline.vocab, roofline.expectation and this room's
tables, floors, join and fit; numpy and roofline.hardware (a machine's architecture) lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any

from roofline.calibration.fit import ATTENTION_TILES, GEMM_TILES, fit_kind
from roofline.calibration.floors import Floors
from roofline.calibration.join import TABLE_JOINS, Joined, JoinedTable
from roofline.calibration.mla import join_mla
from roofline.calibration.moe import join_moe
from roofline.calibration.tables import Table
from roofline.errors import RooflineError
from roofline.expectation.columns import Columns
from roofline.expectation.columns import expected_columns as columns_band
from roofline.expectation.model import Fit, Shape, l2_stream_time_s
from roofline.expectation.placed import l2_stream_s
from roofline.expectation.times import ExpectedTimes
from roofline.frozen import frozen
from roofline.units import format_bytes, format_time
from roofline.vocab import Level

BIG_FLOOR_S = 10e-6  # the Done-when's "kernels whose floor is at least 10 µs"
# CUDA-event timings of a kernel rerun in a loop scatter by about 1% (launch jitter, clocks): a point
# within 2% of a floor that L2 reuse lowers is that floor, not an error
TIMING_TOLERANCE = 0.02
FIT_MAX_ROWS = 4000  # a group without a shipped fit is fitted on at most this many rows, at an even stride
CHECKED_ROWS = 16  # rows a group checks its columnar expected time on against Fit.expected_s

# table kind -> the joiner of a whole table: what `validate` reads (one entry a kind of table)
JOINERS: Mapping[str, Callable[[Table], JoinedTable]] = {
    **TABLE_JOINS, "context_mla": join_mla, "generation_mla": join_mla, "moe": join_moe,
}
PER_TILE_KINDS = ("context_attention", "generation_attention", "context_mla", "generation_mla")
# the kind and architecture whose fit tries DeepGEMM's sm90 blocks (roofline.expectation.deepgemm)
DEEPGEMM_KIND, DEEPGEMM_ARCHITECTURE = "gemm.fp8_block", "Hopper"


@frozen
class Faster:
    """One measured row faster than our floor, explained or flagged."""

    name: str
    measured_s: float
    floor_s: float
    explained: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.name, "measured_s": self.measured_s, "floor_s": self.floor_s,
                "explained": self.explained, "why": self.why}


@frozen
class Point:
    """One row for the chart and the CSV: measured, floor, expected and band."""

    name: str
    kind: str
    measured_s: float
    floor_s: float
    expected_s: float
    low_s: float
    high_s: float


@frozen
class Points(Sequence[Point]):
    """A group's rows as columns; indexing or iterating makes the Point of a row (the chart's, the CSV's)."""

    kind: str
    name: Callable[[int], str]
    measured_s: Any  # numpy float arrays
    floor_s: Any
    expected_s: Any
    low_s: Any
    high_s: Any

    def __len__(self) -> int:
        return len(self.measured_s)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return Point(self.name(i), self.kind, float(self.measured_s[i]), float(self.floor_s[i]),
                     float(self.expected_s[i]), float(self.low_s[i]), float(self.high_s[i]))

    def __iter__(self) -> Iterator[Point]:
        return (self[i] for i in range(len(self)))


@frozen
class Rows:
    """The rows of one machine × engine × kind as columns: floors, measured times, names."""

    machine: str
    engine: str
    version: str
    kind: str
    floors: Floors
    measured_s: Any  # numpy float array
    sms: int
    l2_bytes: float | None
    name: Callable[[int], str]
    l2_s: float = 0.0  # τ = L2 capacity / DRAM bandwidth (decode's short stream, Shape.l2_s)

    def shape(self, i: int) -> Shape:
        f = self.floors

        def at(col: Any) -> float:
            return 0.0 if col is None else float(col[i])

        return Shape(self.kind, float(f.floor_s[i]), float(f.compute_s[i]), int(f.m[i]), int(f.n[i]), self.sms,
                     float(f.tile_pairs[i]), float(f.heads[i]), memory_s=float(f.dram_s[i]), exp_s=at(f.exp_s),
                     kv_heads=at(f.kv_heads), head_dim=int(at(f.head_dim)), input_s=at(f.input_s),
                     output_s=at(f.output_s), k=int(at(f.depth)), l2_s=self.l2_s, query_tiles=at(f.query_tiles),
                     narrow_kv=bool(at(f.narrow_kv)))

    def columns(self) -> Columns:
        """The group's Shapes as columns (roofline.expectation.columns.expected_columns)."""
        import numpy as np

        f = self.floors
        zero = np.zeros_like(f.floor_s)

        def col(c: Any) -> Any:
            return zero if c is None else np.asarray(c, dtype=np.float64)

        return Columns(f.floor_s, f.compute_s, f.dram_s, col(f.exp_s), f.m, f.n, f.tile_pairs, f.heads,
                       col(f.kv_heads), col(f.head_dim), col(f.input_s), col(f.output_s), self.sms,
                       None if f.depth is None else np.asarray(f.depth), self.l2_s,
                       None if f.query_tiles is None else np.asarray(f.query_tiles, dtype=np.float64),
                       None if f.narrow_kv is None else np.asarray(f.narrow_kv, dtype=bool))


@frozen
class Group:
    """The summary of one machine × engine × kind."""

    machine: str
    engine: str
    engine_version: str
    kind: str
    rows: int
    share_median: float
    share_p10: float
    share_p90: float
    mape: float
    inside: float
    big_rows: int
    big_mape: float | None
    big_inside: float | None
    faster: tuple[Faster, ...]
    fit: Fit
    fit_origin: str
    points: Sequence[Point] = field(default=(), repr=False)

    @property
    def unexplained(self) -> int:
        return sum(not f.explained for f in self.faster)

    def to_dict(self, with_points: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "machine": self.machine, "engine": self.engine, "engine_version": self.engine_version,
            "kind": self.kind, "rows": self.rows,
            "share_of_roof": {"median": self.share_median, "p10": self.share_p10, "p90": self.share_p90},
            "mape": self.mape, "inside_band": self.inside,
            "floor_at_least_10us": {"rows": self.big_rows, "mape": self.big_mape, "inside_band": self.big_inside},
            "faster_than_floor": [f.to_dict() for f in self.faster], "unexplained": self.unexplained,
            "fit": self.fit.to_dict(), "fit_origin": self.fit_origin}
        if with_points:
            d["points"] = [vars(p) for p in self.points]
        return d


# why a kind's relaxed floor (Floors.relaxed_s) may be the one that holds, by kind family
RELAXED = {
    "moe": ("the router hit fewer experts than a balanced spread of T·k picks: the table does not record "
            "which experts its (skewed or model-grouped) router hit; with the fewest any router can hit "
            "(⌈k/ep⌉ on the device, each taking all T tokens) the floor is {relaxed}, below the measured time"),
}


def explain(name: str, measured_s: float, floor_s: float, working: float, dram_s: float, l2_bytes: float | None,
            memory_bound: bool, compute_s: float, machine: str, relaxed_s: float | None = None,
            kind: str = "") -> Faster:
    """Explained when the DRAM working set fits in L2, or when a DRAM-bound stream larger than L2 is no
    faster than (working set − L2) / bandwidth (module docstring), or when the measured time is above the
    kind's relaxed floor (RELAXED); flagged otherwise."""
    cap = l2_bytes
    gap = f"{format_time(measured_s)} measured against a {format_time(floor_s)} floor"
    if measured_s >= floor_s * (1 - TIMING_TOLERANCE):
        return Faster(name, measured_s, floor_s, True,
                      f"{gap}: within the {TIMING_TOLERANCE:.0%} scatter of CUDA-event timings of a kernel rerun "
                      "in a loop (launch jitter, clocks)")
    if not memory_bound and compute_s > 0 and measured_s < compute_s * (1 - TIMING_TOLERANCE):
        return Faster(name, measured_s, floor_s, True,
                      f"{gap}: its FLOPs at the datasheet's dense peak alone take {format_time(compute_s)}; no "
                      "cache shortens arithmetic, so the row did not time the whole kernel: the table's error, not "
                      "the floor's (a kernel that faulted or skipped work; aiconfigurator's collectors record such "
                      "aborts at these sizes, collector/trtllm/collect_attn.py)")
    why = RELAXED.get(kind.split(".")[0])
    if relaxed_s is not None and why and relaxed_s < floor_s and measured_s >= relaxed_s:
        return Faster(name, measured_s, floor_s, True, f"{gap}: " + why.format(relaxed=format_time(relaxed_s)))
    if cap and working <= cap:
        return Faster(name, measured_s, floor_s, True,
                      f"{gap}: its working set, {format_bytes(working)}, fits in the {format_bytes(cap, binary=True)} "
                      "L2; the benchmark reran one shape, so the operands stayed in L2 and DRAM never limited it")
    if cap and working > cap and dram_s >= floor_s * (1 - 1e-9):
        # rerun in a loop, the last L2-sized part of the stream is still in L2 when the next run starts
        partial = dram_s * (1 - cap / working)
        if measured_s >= partial * (1 - TIMING_TOLERANCE):
            return Faster(name, measured_s, floor_s, True,
                          f"{gap}: the benchmark reran one shape, so the last {format_bytes(cap, binary=True)} "
                          f"of its {format_bytes(working)} stream stayed in L2: (working set − L2) / DRAM "
                          f"bandwidth = {format_time(partial)}, within {TIMING_TOLERANCE:.0%} of the measured time")
    if cap is None and memory_bound and measured_s >= compute_s:
        return Faster(name, measured_s, floor_s, False,
                      f"{gap}: {machine} has no L2 size in the catalog, so L2 reuse cannot be checked; flagged")
    return Faster(name, measured_s, floor_s, False,
                  f"{gap} with a {format_bytes(working)} working set beyond L2: our error (floor too high)")


def _l2(j: Joined) -> float | None:
    l2 = j.placement.machine.memory.get(Level.L2)
    return l2.capacity_bytes if l2 is not None else None


def explain_faster(j: Joined) -> Faster:
    """`explain` for one joined row (its placement's DRAM bytes and time)."""
    p = j.placement
    return explain(p.name, j.measured_s, j.floor_s, p.cost.bytes_by_level.get(Level.DRAM, p.bytes),
                   p.level_times_s.get(Level.DRAM, 0.0), _l2(j), p.bound_class == "memory", p.compute_time_s,
                   p.machine.id)


def _tiles(kind: str) -> tuple[tuple[int, int] | None, ...]:
    """The wave tiles a kind's fit tries: GEMM's output tiles, prefill attention's query tiles."""
    return GEMM_TILES if kind.startswith("gemm") else ATTENTION_TILES if kind.startswith("context") else (None,)


def deepgemm_kind(kind: str, machine: str) -> bool:
    """A block-scaled FP8 GEMM on a Hopper machine: the kernel DeepGEMM's sm90 heuristic tiles
    (roofline.expectation.deepgemm; its fit tries DeepGEMM's waves)."""
    from roofline.hardware import get_machine

    if kind != DEEPGEMM_KIND:
        return False
    try:
        return get_machine(machine).architecture == DEEPGEMM_ARCHITECTURE
    except RooflineError:
        return False


def fit_rows(kind: str, joined: Sequence[Joined]) -> Fit:
    """The fit of one kind over its joined rows (wave tiles tried where the kind has them)."""
    machine = joined[0].placement.machine.id if joined else ""
    return fit_kind(kind, [j.shape for j in joined], [j.measured_s for j in joined], _tiles(kind),
                    per_tile="attention" in kind, deepgemm=deepgemm_kind(kind, machine))


def fit_group(rows: Rows, max_rows: int = FIT_MAX_ROWS) -> tuple[Fit, int]:
    """The fit of one group's kind on at most `max_rows` of its rows, at an even stride (the stride returned)."""
    n = len(rows.measured_s)
    stride = max(1, math.ceil(n / max_rows))
    idx = range(0, n, stride)
    fit = fit_kind(rows.kind, [rows.shape(i) for i in idx], [float(rows.measured_s[i]) for i in idx],
                   _tiles(rows.kind), per_tile=rows.kind.startswith(PER_TILE_KINDS),
                   deepgemm=deepgemm_kind(rows.kind, rows.machine))
    return fit, stride


def expected_columns(fit: Fit, rows: Rows) -> tuple[Any, Any, Any]:
    """(t, low, high) of every row: Fit.expected_s and Fit.band_around as columns
    (roofline.expectation.columns.expected_columns), checked against Fit.expected_s on CHECKED_ROWS rows;
    where they differ (a term the columns miss), every row is scored by Fit.expected_s itself."""
    import numpy as np

    t, low, high = columns_band(fit, rows.columns())
    floor = rows.floors.floor_s
    n = len(floor)
    for i in range(0, n, max(1, n // CHECKED_ROWS)):
        if not math.isclose(float(t[i]), fit.expected_s(rows.shape(i)), rel_tol=1e-9, abs_tol=1e-15):
            t = np.array([fit.expected_s(rows.shape(j)) for j in range(n)], dtype=float)
            bands = [fit.band_around(float(tj), float(fj)) for tj, fj in zip(t, floor, strict=True)]
            return t, np.array([b[0] for b in bands]), np.array([b[1] for b in bands])
    return t, low, high


def summarise_rows(rows: Rows, fit: Fit, origin: str) -> Group:
    """The summary of one group (module docstring), every row scored at once."""
    import numpy as np

    measured, floor = rows.measured_s, rows.floors.floor_s
    t, low, high = expected_columns(fit, rows)
    shares = floor / measured
    err = np.abs(t - measured) / measured
    inside = (low <= measured) & (measured <= high)
    big = floor >= BIG_FLOOR_S

    def q(p: float) -> float:
        return float(np.quantile(shares, p))  # linear interpolation: the type-7 quantile

    f = rows.floors
    faster = tuple(explain(rows.name(i), float(measured[i]), float(floor[i]), float(f.dram_bytes[i]),
                           float(f.dram_s[i]), rows.l2_bytes, bool(f.memory_bound[i]), float(f.compute_s[i]),
                           rows.machine, None if f.relaxed_s is None else float(f.relaxed_s[i]), rows.kind)
                   for i in np.flatnonzero(measured < floor).tolist())
    nbig = int(big.sum())
    points = Points(rows.kind, rows.name, measured, floor, t, low, high)
    return Group(rows.machine, rows.engine, rows.version, rows.kind, len(measured), q(0.5), q(0.1), q(0.9),
                 float(err.mean()), float(inside.mean()), nbig, float(err[big].mean()) if nbig else None,
                 float(inside[big].mean()) if nbig else None, faster, fit, origin, points)


def rows_of(machine: str, engine: str, version: str, kind: str, joined: Sequence[Joined]) -> Rows:
    """One group's Joined rows (each placed through the graph) as columns."""
    import numpy as np

    def col(get: Callable[[Joined], float], dtype: Any = float) -> Any:
        return np.array([get(j) for j in joined], dtype=dtype)

    floors = Floors(col(lambda j: j.shape.floor_s), col(lambda j: j.shape.compute_s),
                    col(lambda j: j.placement.cost.bytes_by_level.get(Level.DRAM, j.placement.bytes)),
                    col(lambda j: j.placement.level_times_s.get(Level.DRAM, 0.0)),
                    col(lambda j: j.placement.bound_class == "memory", bool), col(lambda j: j.shape.m, np.int64),
                    col(lambda j: j.shape.n, np.int64), col(lambda j: j.shape.tile_pairs), col(lambda j: j.shape.heads),
                    exp_s=col(lambda j: j.shape.exp_s), kv_heads=col(lambda j: j.shape.kv_heads),
                    head_dim=col(lambda j: j.shape.head_dim), input_s=col(lambda j: j.shape.input_s),
                    output_s=col(lambda j: j.shape.output_s), depth=col(lambda j: j.shape.k, np.int64),
                    query_tiles=col(lambda j: j.shape.query_tiles), narrow_kv=col(lambda j: j.shape.narrow_kv, bool))
    sms = joined[0].shape.sms if joined else 0
    return Rows(machine, engine, version, kind, floors, col(lambda j: j.measured_s), sms,
                _l2(joined[0]) if joined else None, lambda i: joined[i].placement.name,
                l2_stream_s(joined[0].placement.machine) if joined else 0.0)


def summarise(machine: str, engine: str, version: str, kind: str, joined: Sequence[Joined], fit: Fit,
              origin: str) -> Group:
    """`summarise_rows` over rows joined one by one."""
    return summarise_rows(rows_of(machine, engine, version, kind, joined), fit, origin)


def _score(groups: Iterable[Rows], shipped: Mapping[tuple[str, str], ExpectedTimes]) -> list[Group]:
    out = []
    for rows in sorted(groups, key=lambda r: (r.machine, r.engine, r.version, r.kind)):
        times = shipped.get((rows.machine, rows.engine))
        if times is not None and rows.kind in times.fits:
            fit, origin = times.fits[rows.kind], f"shipped: {times.file}"
        else:
            fit, stride = fit_group(rows)
            every = f", every {stride}th of them" if stride > 1 else ""
            origin = f"fitted here on these rows{every} (no shipped fit for this engine and kind)"
        out.append(summarise_rows(rows, fit, origin))
    return out


def validate(joined: Iterable[Joined], shipped: Mapping[tuple[str, str], ExpectedTimes]) -> list[Group]:
    """Groups by machine × engine × kind; each scored with the shipped fit of its machine and engine
    where there is one, else with a fit made here on the same rows (and said so)."""
    groups: dict[tuple[str, str, str, str], list[Joined]] = {}
    for j in joined:
        groups.setdefault((j.row.machine, j.row.engine, j.row.version, j.kind), []).append(j)
    return _score((rows_of(*key, js) for key, js in groups.items()), shipped)


def split(jt: JoinedTable) -> list[Rows]:
    """A joined table's rows, one Rows a kind."""
    import numpy as np

    t = jt.table
    out = []
    for kind in sorted(set(jt.kinds.tolist())):
        sel = np.flatnonzero(jt.kinds == kind)
        floors = jt.floors.take(sel)
        r = jt.roofs[kind]

        def name(i: int, sel: Any = sel) -> str:
            return jt.name(int(sel[i]))

        out.append(Rows(t.machine, t.engine, t.version, kind, floors, jt.measured_s[sel], r.sms,
                        r.l2_capacity_bytes, name, l2_stream_time_s(r.l2_capacity_bytes, r.dram_bytes_per_s)))
    return out


def join_any(t: Table) -> JoinedTable:
    """A measured table joined by its kind's joiner (JOINERS); RooflineError for a kind not joined."""
    joiner = JOINERS.get(t.table)
    if joiner is None:
        raise RooflineError(f"table {t.table} is not joined yet; joined: {', '.join(JOINERS)}")
    return joiner(t)


def validate_tables(joined: Iterable[JoinedTable], shipped: Mapping[tuple[str, str], ExpectedTimes]) -> list[Group]:
    """`validate` over whole tables joined at once (roofline.calibration.join.join_table)."""
    return _score((r for jt in joined for r in split(jt)), shipped)


__all__ = [
    "BIG_FLOOR_S",
    "JOINERS",
    "Faster",
    "Group",
    "Point",
    "Points",
    "Rows",
    "expected_columns",
    "explain",
    "explain_faster",
    "fit_group",
    "fit_rows",
    "split",
    "summarise",
    "summarise_rows",
    "validate",
    "validate_tables",
]
