"""Collectives against aiconfigurator-core's measured NCCL and custom all-reduce tables: the fit we
ship (parallel/data/collectives.json) and `roofline validate --kind collective`.

The tables (aiconfigurator collector/network/collect_nccl.py and collect_all_reduce.py):

    comm/nccl/<version>/nccl_perf.parquet             nccl-tests binaries (all_reduce_perf, ...), one
        op_name, nccl_dtype (half, int8), num_gpus, message_size, latency (ms)     size at a time,
                                                                                   out-of-place time
    comm/<engine>/<version>/custom_allreduce_perf.parquet   the engine's own all-reduce under a CUDA graph
        allreduce_dtype (bfloat16), num_gpus, message_size, latency (ms), kernel_source

`message_size` is ELEMENTS (collect_nccl.py logs size // bytes_per_element; collect_all_reduce.py
allocates a tensor of `size` elements): S bytes = message_size × 2 for half and bfloat16, × 1 for int8.
S is nccl-tests' size (the whole buffer; for all-gather the gathered one).

The fit, per system, path (nccl; custom: TensorRT-LLM's, the one kernel its AUTO strategy picks) and
group size n, on the newest version: t = α + B / busbw with B = 2(n−1)/n · S (nccl-tests' bus bytes),
Hockney's two regimes: α from the small messages (≤ 64 KiB), busbw from the three largest; the band
is the 10th and 90th percentile of measured / fitted (NCCL switches protocol and algorithm with size,
so one line misses the middle: the band says by how much). α_floor, the start-up floor, is the
fastest all-reduce row of any engine, version and group on the system (rounded down to 0.1 µs): no row
can then be faster than α_floor + bytes / BW, which validation checks row by row.

pyarrow and numpy are imported only inside the functions (the extra brings pyarrow).
Layering: imports errors, hardware, parallel and this room.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from roofline.calibration.tables import Source, read_table, version_key
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware import System, get_system
from roofline.parallel.algorithms import all_reduce_bytes, available, estimate
from roofline.parallel.collectives import BUS_FACTOR, Collective

# aiconfigurator's system -> our catalog system (the link roofs)
COLLECTIVE_SYSTEMS = {"h100_sxm": "dgx-h100", "h200_sxm": "hgx-h200", "b200_sxm": "hgx-b200", "gb200": "gb200-nvl72",
                      "l40s": "l40s-pcie-8"}
OPS = {"all_reduce": Collective.ALL_REDUCE, "all_gather": Collective.ALL_GATHER,
       "reduce_scatter": Collective.REDUCE_SCATTER, "alltoall": Collective.ALL_TO_ALL}
BYTES_PER_ELEMENT = {"half": 2, "bfloat16": 2, "float16": 2, "int8": 1, "float32": 4}
FIT_ENGINE = "trtllm"  # the custom path's fit: TensorRT-LLM's all-reduce (AUTO strategy, one kernel a size)
NVLS_SOURCE = ("NCCL 2.17 release notes (NVLink SHARP on third-generation NVSwitch); measured: stas00/ml-engineering "
               "network/benchmarks/results/all-reduce-8xH200.md (NCCL 2.27.7: NVLS from 2 MiB, 482.26 GB/s busbw at "
               "16 GiB, 367.61 GB/s with SHARP disabled)")
NVLS_SYSTEMS = ("dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72")


@frozen
class CommRow:
    system: str  # aiconfigurator's
    engine: str  # nccl, trtllm, vllm, sglang
    version: str
    source: str  # kernel_source (vLLM_custom_graph, NCCL, ...)
    dtype: str
    kind: Collective
    group: int
    message_bytes: float
    measured_s: float


def _versions(base: Path) -> list[str]:
    return sorted((p.name for p in base.iterdir() if p.is_dir()), key=version_key) if base.is_dir() else []


def comm_rows(source: Source, system: str, newest_only: bool = True) -> Iterator[CommRow]:
    """Every measured collective row of one system: NCCL's tables and each engine's custom all-reduce."""
    base = source.root / system / "comm"
    if not base.is_dir():
        return
    for engine_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        versions = _versions(engine_dir)
        for version in versions[-1:] if newest_only else versions:
            for stem in ("nccl_perf", "custom_allreduce_perf"):
                path = engine_dir / version / f"{stem}.parquet"
                if path.is_file():
                    yield from _rows_of(read_table(path), system, engine_dir.name, version)


def _rows_of(raw: Sequence[dict[str, Any]], system: str, engine: str, version: str) -> Iterator[CommRow]:
    for r in raw:
        kind = OPS.get(str(r.get("op_name")))
        dtype = r.get("nccl_dtype", r.get("allreduce_dtype"))
        bpe = BYTES_PER_ELEMENT.get(str(dtype))
        ms, size, n = r.get("latency"), r.get("message_size"), r.get("num_gpus")
        if kind is None or bpe is None or not isinstance(ms, int | float) or not math.isfinite(ms) or ms <= 0:
            continue
        if not isinstance(size, int) or size <= 0 or not isinstance(n, int) or n < 2:
            continue
        yield CommRow(system, engine, version, str(r.get("kernel_source", "")), str(dtype), kind, n, float(size * bpe),
                      float(ms) * 1e-3)


SMALL_BYTES = 64 * 2**10  # rows at most this size give α (the latency regime)
LARGEST = 3  # the largest sizes give busbw (the bandwidth regime, its asymptote)


def fit_group(rows: Sequence[CommRow]) -> dict[str, float]:
    """t = α + B / busbw over one group's all-reduce rows (Hockney's two regimes): α the median time of
    rows of at most 64 KiB, busbw the median of B / (t − α) over the three largest sizes; the band is
    the 10th-90th percentile of measured / fitted over every row."""
    import numpy as np

    n = rows[0].group
    s = np.array([r.message_bytes for r in rows])
    b = BUS_FACTOR[Collective.ALL_REDUCE](n) * s
    t = np.array([r.measured_s for r in rows])
    small = s <= SMALL_BYTES
    alpha = float(np.median(t[small])) if small.any() else float(t.min())
    top = s >= np.sort(np.unique(s))[-min(LARGEST, len(np.unique(s)))]
    busbw = float(np.median(b[top] / np.maximum(t[top] - alpha, 1e-12)))
    fitted = alpha + b / busbw
    ratio = t / fitted
    return {"alpha_s": alpha, "busbw_bytes_per_s": busbw, "low": float(np.quantile(ratio, 0.1)),
            "high": float(np.quantile(ratio, 0.9)), "rows": len(rows),
            "mape": float(np.mean(np.abs(fitted - t) / t))}


def _slack(r: CommRow, system: System) -> float:
    """Measured time less the fewest bytes any algorithm the system runs moves for it over the link."""
    spans = r.group > system.devices_per_node
    _, link = system.link(r.group, spans)
    if r.kind is Collective.ALL_REDUCE:
        fewest = min(all_reduce_bytes(a, r.message_bytes, r.group) for a in available(system, r.group, spans))
    else:
        fewest = BUS_FACTOR[r.kind](r.group) * r.message_bytes
    return r.measured_s - fewest / link.bytes_per_s


def fit_system(source: Source, system: str) -> dict[str, Any]:
    """One system's shipped entry: NVLS, α_floor (the fastest all-reduce row of every version) and the
    fits of the newest NCCL and TensorRT-LLM tables per group size."""
    every = list(comm_rows(source, system, newest_only=False))
    if not every:
        raise RooflineError(f"{source.label} has no collective rows for {system}")
    ours = COLLECTIVE_SYSTEMS[system]
    fastest, slack = min(((r, _slack(r, get_system(ours))) for r in every), key=lambda p: p[1])
    alpha_floor = math.floor(slack * 1e7) / 1e7
    newest = [r for r in comm_rows(source, system) if r.kind is Collective.ALL_REDUCE]
    fits: dict[str, Any] = {}
    for path, engine in (("nccl", "nccl"), ("custom", FIT_ENGINE)):
        mine = [r for r in newest if r.engine == engine and (path == "nccl") == (r.source == "NCCL")
                and r.dtype != "int8"]
        groups: dict[str, Any] = {}
        for n in sorted({r.group for r in mine}):
            rs = [r for r in mine if r.group == n and r.message_bytes >= 256]
            if len(rs) >= 4:
                groups[str(n)] = fit_group(rs)
        if groups:
            fits[path] = {"engine": engine, "version": mine[0].version, "groups": groups}
    return {"table": system, "nvls": ours in NVLS_SYSTEMS, "nvls_source": NVLS_SOURCE if ours in NVLS_SYSTEMS else "",
            "alpha_floor_s": alpha_floor,
            "alpha_floor_from": (f"the least start-up time any measured collective on {system} leaves, measured − "
                                 f"its fewest bytes / the link's bandwidth: {fastest.engine} {fastest.version} "
                                 f"{fastest.source} {fastest.kind}, {fastest.group} GPUs, {fastest.message_bytes:g} B, "
                                 f"{fastest.measured_s * 1e6:.2f} us measured, {slack * 1e6:.2f} us left (rounded "
                                 "down to 0.1 us)"),
            "fits": fits}


def fit_all(source: Source) -> dict[str, Any]:
    """The whole shipped file (parallel/data/collectives.json)."""
    have = [s for s in sorted(COLLECTIVE_SYSTEMS) if (source.root / s / "comm").is_dir()]
    return {"format": "roofline-collective-fits", "version": 1,
            "source": f"{source.label}, systems/data/<system>/comm (nccl_perf, custom_allreduce_perf)",
            "nvls": {s: NVLS_SOURCE for s in NVLS_SYSTEMS},
            "systems": {COLLECTIVE_SYSTEMS[s]: fit_system(source, s) for s in have}}


@frozen
class CommGroup:
    """Validation of one system × engine × collective: every row against the lowest floor and the band."""

    system: str
    engine: str
    version: str
    kind: str
    rows: int
    share_median: float  # floor / measured
    faster_than_floor: int
    worst_share: float
    mape: float | None
    in_band: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "engine": self.engine, "version": self.version, "kind": self.kind,
                "rows": self.rows, "share_of_floor_median": self.share_median,
                "faster_than_floor": self.faster_than_floor, "highest_share": self.worst_share,
                "mape": self.mape, "in_band": self.in_band}


def validate_rows(rows: Sequence[CommRow]) -> list[CommGroup]:
    """Per system × engine × version × collective: floor / measured (median, highest: above 1 would be
    a row faster than the floor), and for all-reduce the MAPE and in-band share of the expected time."""
    groups: dict[tuple[str, str, str, str], list[tuple[float, float, float | None, tuple[float, float] | None]]] = {}
    for r in rows:
        e = estimate(r.kind, r.message_bytes, COLLECTIVE_SYSTEMS[r.system], r.group, nccl_only=r.source == "NCCL")
        groups.setdefault((r.system, r.engine, r.version, str(r.kind)), []).append(
            (r.measured_s, e.lowest.floor_s, e.expected_s, e.band_s))
    out = []
    for (system, engine, version, kind), pts in sorted(groups.items()):
        shares = sorted(f / m for m, f, _, _ in pts)
        exp = [(m, x, b) for m, _, x, b in pts if x is not None and b is not None]
        mape = sum(abs(x - m) / m for m, x, _ in exp) / len(exp) if exp else None
        inside = sum(1 for m, _, b in exp if b[0] <= m <= b[1]) / len(exp) if exp else None
        out.append(CommGroup(COLLECTIVE_SYSTEMS[system], engine, version, kind, len(pts), shares[len(shares) // 2],
                             sum(1 for s in shares if s > 1.0), shares[-1], mape, inside))
    return out


def validate_text(groups: Sequence[CommGroup], label: str) -> str:
    lines = [f"collectives: measured ({label}) against our lowest floor (every algorithm the system runs) and "
             "the expected band (all-reduce)",
             f"{'system':<12} {'engine':<7} {'version':<10} {'collective':<15} {'rows':>5} {'floor/meas':>10} "
             f"{'highest':>8} {'faster':>6} {'MAPE':>6} {'in band':>7}"]
    for g in groups:
        mape = f"{100 * g.mape:.0f}%" if g.mape is not None else "-"
        band = f"{100 * g.in_band:.0f}%" if g.in_band is not None else "-"
        lines.append(f"{g.system:<12} {g.engine:<7} {g.version:<10} {g.kind:<15} {g.rows:>5} {g.share_median:>10.2f} "
                     f"{g.worst_share:>8.2f} {g.faster_than_floor:>6} {mape:>6} {band:>7}")
    total = sum(g.faster_than_floor for g in groups)
    lines.append(f"rows faster than the floor: {total}" + ("" if total else " (the floor holds on every row)"))
    return "\n".join(lines)


def validate_collectives(source: Source, system: str | None = None, engine: str | None = None) -> list[CommGroup]:
    """Every newest-version collective row of the covered systems (or one catalog system), validated."""
    names = [s for s, ours in sorted(COLLECTIVE_SYSTEMS.items()) if system is None or ours == system]
    if not names:
        raise RooflineError(f"no measured collective tables for {system}; systems covered: "
                            f"{', '.join(sorted(COLLECTIVE_SYSTEMS.values()))}")
    rows = [r for s in names for r in comm_rows(source, s) if engine is None or r.engine in (engine, "nccl")]
    return validate_rows(rows)


def validate_command(machine: str | None, engine: str | None, as_json: bool) -> str:
    """`roofline validate --kind collective`: the text (or JSON) of every covered system's rows, or of
    the one system `machine` names (a system, or a device of one)."""
    import json

    from roofline.calibration.tables import installed

    source = installed()
    system = None
    if machine is not None:
        found = get_system(machine)
        covered = {ours: get_system(ours).device.id for ours in COLLECTIVE_SYSTEMS.values()}
        system = next((s for s, dev in covered.items() if found.id == s or found.device.id == dev), found.id)
    groups = validate_collectives(source, system, engine)
    if as_json:
        return json.dumps({"source": source.label, "groups": [g.to_dict() for g in groups],
                           "faster_than_floor": sum(g.faster_than_floor for g in groups)}, indent=2)
    return validate_text(groups, source.label)


def write_shipped(path: str | Path) -> None:
    """Refit every covered system on the installed tables and write the shipped file (JSON)."""
    import json

    from roofline.calibration.tables import installed

    Path(path).write_text(json.dumps(fit_all(installed()), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":  # python -m roofline.calibration.collective src/roofline/parallel/data/collectives.json
    import sys

    write_shipped(sys.argv[1])


__all__ = ["COLLECTIVE_SYSTEMS", "CommGroup", "CommRow", "comm_rows", "fit_all", "fit_group", "fit_system",
           "validate_collectives", "validate_command", "validate_rows", "validate_text"]
