"""Text and CSV of `roofline validate`: one line per GPU × engine × kind, then every point faster
than our floor with its explanation (or the flag that it is our error)."""

from __future__ import annotations

from collections.abc import Sequence

from roofline.calibration.validate import Group


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def validate_text(groups: Sequence[Group], source: str, command: str = "") -> str:
    head = (f"{'machine':<14}{'engine':<8}{'kind':<38}{'rows':>7}  {'floor/measured p10 med p90':<27}"
            f"{'MAPE':>7}{'in band':>8}  {'floor>=10us: rows MAPE in band':<31}{'faster':>7}")
    lines = [f"Measured kernels ({source}) against our floor and expected band", "",
             "share of roof = floor / measured; MAPE = mean |expected - measured| / measured of the expected "
             "time t = max(DRAM, rho x compute x waves)/e + t0 + the kind's terms (GEMM: quantize pass, epilogue, "
             "the last tile's padding, a host floor per launch path, on Hopper block-scaled FP8 DeepGEMM's blocks "
             "and a cost per k-block; attention: matrix (apart for prefill over a narrower K/V cache), exp, per "
             "tile pair, per head, per K/V head, prefill's K/V read and waves, decode's latency, streaming and "
             "query-tile roofs, short and long stream and MHA term; roofline.expectation.model); "
             "band = t x [Wilks's tolerance interval of cross-fitted measured / t: half of new kernels at 99% "
             "confidence]",
             *(["kind@kernel_source: rows the table times on another kernel than its main one for the same "
                "shapes (the engine's backend choosing, not the shape), fitted and scored apart "
                "(roofline.calibration.tables.kernel_groups)"] if any("@" in g.kind for g in groups) else []),
             "", head]
    for g in groups:
        share = f"{g.share_p10:.2f} {g.share_median:.2f} {g.share_p90:.2f}"
        big = f"{g.big_rows:>5} {_pct(g.big_mape):>7} {_pct(g.big_inside):>7}"
        lines.append(f"{g.machine:<14}{g.engine:<8}{g.kind:<38}{g.rows:>7}  {share:<27}{_pct(g.mape):>7}"
                     f"{_pct(g.inside):>8}  {big:<31}{len(g.faster):>7}")
    faster = [(g, f) for g in groups for f in g.faster]
    unexplained = [(g, f) for g, f in faster if not f.explained]
    lines += ["", f"faster than our floor: {len(faster)} points, {len(unexplained)} unexplained"]
    for g, f in faster:
        mark = "explained" if f.explained else "OUR ERROR"
        lines.append(f"  [{mark}] {g.machine} {g.engine} {f.name}: {f.why}")
    if command:
        lines += ["", f"command: {command}"]
    return "\n".join(lines)


def validate_csv(groups: Sequence[Group]) -> str:
    from roofline.report.text.csvcells import csv_text

    header = ["machine", "engine", "engine_version", "kind", "rows", "share_p10", "share_median", "share_p90",
                "mape", "inside_band", "rows_floor_ge_10us", "mape_floor_ge_10us", "inside_band_floor_ge_10us",
                "faster_than_floor", "unexplained", "efficiency", "t0_s", "per_tile_s", "per_head_s", "band_low",
                "band_high"]
    return csv_text(header, ([g.machine, g.engine, g.engine_version, g.kind, g.rows, g.share_p10, g.share_median,
                              g.share_p90, g.mape, g.inside, g.big_rows, g.big_mape, g.big_inside, len(g.faster),
                              g.unexplained, g.fit.efficiency, g.fit.t0_s, g.fit.per_tile_s, g.fit.per_head_s,
                              g.fit.low, g.fit.high] for g in groups))


__all__ = ["validate_csv", "validate_text"]
