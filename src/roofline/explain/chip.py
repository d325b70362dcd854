"""Inside the chip, derived: each per-SM figure times the SMs and the clock, beside the datasheet
peak it must meet, with its source.

    peak = rate per clock per SM × SMs × clock        (4096 × 132 × 1.83 GHz = 989.4 TFLOP/s)

and what a kernel's resources cost against each other: the headline attention ratio

    exp time / matrix time = (1 / exp per clk per SM) / (4·d / matrix FLOP per clk per SM)

(one exponential and 4·d matrix FLOPs per score: (1/16) / (4·128/4096) = 0.5 on an H100).
"""

from __future__ import annotations

from roofline.hardware import Machine
from roofline.hardware.chip import Chip
from roofline.placement import Placement
from roofline.units import format_bytes, format_bytes_per_s, format_flop_per_s, format_time
from roofline.vocab import Unit


def _src(chip: Chip, key: str) -> str:
    source = chip.sources.get(key, "")
    return f"   [{source}]" if source else ""


def _ghz(hz: float) -> str:
    return f"{hz / 1e9:.5g} GHz"


def explain_chip(m: Machine) -> str:
    """The per-SM (per-CU) figures of `m`, each multiplied out to the whole chip and compared with the
    datasheet peak where there is one; '' for a machine without a [chip] table."""
    chip = m.chip
    if chip is None:
        return ""
    u = chip.unit
    lines = [f"inside the chip: {chip.sms} {u}s at {_ghz(chip.clock_hz)}" + _src(chip, "sms"),
             f"    clock = {_ghz(chip.clock_hz)}" + _src(chip, "clock_mhz")]
    lines.append("    matrix (dense), rate × SMs × clock = peak:" + _src(chip, "matrix_per_clk"))
    for key, per in chip.matrix_flop_per_clk.items():
        derived = per * chip.sms * chip.clock_hz
        sheet = m.matrix_flop_per_s.get(key)
        vs = f" (datasheet {format_flop_per_s(sheet, 4)}, {(derived / sheet - 1) * 100:+.2f}%)" if sheet else ""
        lines.append(f"        {key:<5} {per:g} FLOP/clk/{u} × {chip.sms} × {_ghz(chip.clock_hz)} = "
                     f"{format_flop_per_s(derived, 4)}{vs}")
    if chip.fp32_lanes is not None and chip.vector_flop_per_s is not None:
        clock = chip.vector_clock_hz or chip.clock_hz
        sheet = m.vector_flop_per_s.get("fp32")
        vs = f" (datasheet {format_flop_per_s(sheet, 4)}, {(chip.vector_flop_per_s / sheet - 1) * 100:+.2f}%)" \
            if sheet else ""
        lines.append(f"    vector: {chip.fp32_lanes} FP32 FMA lanes × 2 FLOPs × {chip.sms} × {_ghz(clock)} = "
                     f"{format_flop_per_s(chip.vector_flop_per_s, 4)}{vs}" + _src(chip, "fp32_lanes"))
        if chip.vector_clock_hz:
            lines.append(f"        the FP32 peak implies {_ghz(clock)}" + _src(chip, "vector_clock_mhz"))
    if chip.exp_per_s is not None:
        lines.append(f"    exp: {chip.exp_per_clk:g} exponentials/clk/{u} × {chip.sms} × {_ghz(chip.clock_hz)} = "
                     f"{chip.exp_per_s:.4g} per s" + _src(chip, "exp_per_clk"))
    else:
        lines.append("    exp: no published rate; each exponential is counted as its one vector FLOP")
    if chip.smem_bytes_per_s is not None:
        lines.append(f"    shared memory: {chip.smem_bytes_per_clk:g} B/clk/{u} × {chip.sms} × {_ghz(chip.clock_hz)} = "
                     f"{format_bytes_per_s(chip.smem_bytes_per_s, 4)}" + _src(chip, "smem_bytes_per_clk"))
    if chip.l2_bytes_per_s is not None:
        lines.append(f"    L2: {chip.l2_bytes_per_clk:g} B/clk × {_ghz(chip.clock_hz)} = "
                     f"{format_bytes_per_s(chip.l2_bytes_per_s, 4)}" + _src(chip, "l2_bytes_per_clk"))
    else:
        lines.append("    L2: no published bandwidth; not placed")
    for label, key, size in (("shared memory capacity", "smem_capacity", chip.smem_capacity_bytes),
                             ("register file", "register_file", chip.register_file_bytes),
                             ("tensor memory (TMEM)", "tmem", chip.tmem_bytes)):
        if size is not None:
            lines.append(f"    {label}: {format_bytes(size, 4, binary=True)} per {u}" + _src(chip, key))
    bf16 = chip.matrix_flop_per_clk.get("bf16")
    if bf16 and chip.exp_per_clk:
        lines.append("    attention, one exponential and 4·d matrix FLOPs per score: exp time / matrix time = "
                     f"(1/{chip.exp_per_clk:g}) / (4·d/{bf16:g}) = {bf16 / (4 * chip.exp_per_clk):g}/d "
                     f"(d = 128: {bf16 / (4 * chip.exp_per_clk * 128):.3g}; d = 64: "
                     f"{bf16 / (4 * chip.exp_per_clk * 64):.3g}), bf16")
    return "\n".join(lines)


def explain_resources(p: Placement) -> str:
    """Every unit and level of one placement, the binding one first, each with its share of the floor."""
    lines = ["every unit and level (the floor is the largest; margin = it over the next)"]
    for r, t in p.resource_times_s.items():
        share = t / p.time_s if p.time_s else 0.0
        what = "binds" if r == p.bound else f"{share:.0%} of the floor"
        if isinstance(r, Unit):
            work = p.cost.work(r)
            num = f"{work:.4g} exponentials" if r is Unit.EXP else f"{work:.4g} FLOP"
        else:
            num = f"{format_bytes(p.cost.bytes_by_level[r])}"
        lines.append(f"    {r:<7} {num} → {format_time(t)} ({what})")
    if p.margin is not None:
        lines.append(f"    margin = {p.margin:.3g}×" + ("  (a co-bottleneck: within 10%)" if p.margin < 1.1 else ""))
    for note in p.chip_notes:
        lines.append(f"    NB: {note}")
    return "\n".join(lines)


__all__ = ["explain_chip", "explain_resources"]
