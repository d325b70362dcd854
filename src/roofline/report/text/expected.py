"""The expected band beside the floor, in the kernel command's text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.units import format_time


def _source(cal: dict[str, Any]) -> str:
    if "fit" in cal:
        src = cal.get("source", {})
        where = cal.get("file") or "shipped"
        return (f"{cal.get('kind')} fit on {cal.get('machine')} {cal.get('engine')} {cal.get('engine_version')} "
                f"({src.get('package', '')} {src.get('version', '')}, {where})"
                + (f"; {cal['note']}" if cal.get("note") else ""))
    return f"{cal.get('file')}: {cal.get('class')} share of the roof measured on {cal.get('machine')}"


def expected_line(band: Any) -> str:
    """'expected    170-190 µs  measured kernels' band: ...' (the model: roofline.expectation.model)."""
    return (f"{'expected':<12}{format_time(band.low_s)}-{format_time(band.high_s):<10} "
            f"measured kernels' band: {_source(band.calibration)}")


def expected_total_line(placements: Sequence[Any], bands: Sequence[Any], described: dict[str, Any]) -> str:
    """The step's band: the sum of each kernel's, and the file it came from."""
    low = sum(b.low_s * p.count for b, p in zip(bands, placements, strict=True))
    high = sum(b.high_s * p.count for b, p in zip(bands, placements, strict=True))
    where = described.get("file") or "shipped"
    return (f"expected {format_time(low)}-{format_time(high)} in all, the sum of each kernel's band "
            f"({where}: {described.get('note', '')})")


def expected_overlap_line(option: str, band: dict[str, float]) -> str:
    """The step's band with the hidden communication (--overlap or --two-batch-overlap) taken out."""
    how = ("max(compute, every collective)" if option == "--overlap"
           else "max(compute, the MoE all-to-all) + the other collectives")
    return (f"expected with {option} {format_time(band['low'])}-{format_time(band['high'])} ({how}, at each end; "
            "the line above is without)")


__all__ = ["expected_line", "expected_overlap_line", "expected_total_line"]
