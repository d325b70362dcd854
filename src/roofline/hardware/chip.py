"""Inside the chip: per-SM (per-CU) rates, each with its source, and what they add up to.

A datasheet gives whole-chip peaks; the units inside a kernel run at per-SM rates times the SM
count times the clock:

    peak = rate per clock per SM × SMs × clock      (989.4e12 = 4096 × 132 × 1.83e9 on an H100 SXM)

`Chip` holds those rates for the resources the datasheet does not list: the exponential units
(MUFU/SFU), shared memory (or AMD's LDS) bandwidth and capacity, the register file, TMEM, the L2
bandwidth. The matrix and FP32 rates are kept too, so that rate × SMs × clock can be checked
against the datasheet peaks (a machine file whose figures disagree by more than 1% is refused).

A machine file's optional `[chip]` table (see data/h100-sxm.toml):

    [chip]
    unit = "SM"                  # what the vendor calls one: SM (NVIDIA) or CU (AMD)
    sms = 132
    clock_mhz = 1830             # the clock the datasheet's dense matrix peak implies
    vector_clock_mhz = 1980      # the clock its FP32 vector peak implies, where that differs
    fp32_lanes = 128             # FP32 FMA lanes per SM (an FMA is 2 FLOPs)
    exp_per_clk = 16             # exponentials (MUFU.EX2) per clock per SM
    smem_bytes_per_clk = 128     # shared-memory bandwidth per SM
    smem_capacity = "228 KiB"    # per SM
    register_file = "256 KiB"    # per SM
    tmem = "256 KiB"             # tensor memory per SM (Blackwell)
    l2_bytes_per_clk = 5120      # the whole chip's L2 bandwidth, where published
    [chip.matrix_per_clk]        # dense FLOP per clock per SM, by dtype
    bf16 = 4096
    [chip.sources]               # one citation per figure above
    sms = "..."
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.units import UnitError, parse_quantity

TOLERANCE = 0.01  # rate × SMs × clock must meet the datasheet peak within 1%

_COUNTS = ("sms", "clock_mhz", "vector_clock_mhz", "fp32_lanes", "exp_per_clk", "smem_bytes_per_clk",
           "l2_bytes_per_clk")
_SIZES = ("smem_capacity", "register_file", "tmem")
_KEYS = {"unit", "note", "sources", "matrix_per_clk", *_COUNTS, *_SIZES}


@frozen
class Chip:
    """Per-SM rates of one chip. Every rate is per clock per SM unless it says otherwise."""

    sms: int
    clock_hz: float  # the clock the dense matrix peak implies
    matrix_flop_per_clk: Mapping[str, float] = field(default_factory=dict)  # dense, per SM, by peak key
    fp32_lanes: int | None = None
    vector_clock_hz: float | None = None  # the FP32 vector peak's clock, when the datasheet implies another
    exp_per_clk: float | None = None
    smem_bytes_per_clk: float | None = None
    smem_capacity_bytes: float | None = None  # per SM
    register_file_bytes: float | None = None  # per SM
    tmem_bytes: float | None = None  # per SM
    l2_bytes_per_clk: float | None = None  # whole chip
    unit: str = "SM"
    sources: Mapping[str, str] = field(default_factory=dict)  # figure -> citation
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix_flop_per_clk", MappingProxyType(dict(self.matrix_flop_per_clk)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    # --- whole-chip rates: per-SM rate × SMs × clock -----------------------------------------
    def matrix_flop_per_s(self, key: str) -> float | None:
        per = self.matrix_flop_per_clk.get(key)
        return None if per is None else per * self.sms * self.clock_hz

    @property
    def vector_flop_per_s(self) -> float | None:
        """FP32 lanes × 2 FLOPs per FMA × SMs × the vector clock."""
        if self.fp32_lanes is None:
            return None
        return self.fp32_lanes * 2.0 * self.sms * (self.vector_clock_hz or self.clock_hz)

    @property
    def exp_per_s(self) -> float | None:
        """Exponentials per second: MUFU ops per clock per SM × SMs × clock."""
        return None if self.exp_per_clk is None else self.exp_per_clk * self.sms * self.clock_hz

    @property
    def smem_bytes_per_s(self) -> float | None:
        """Shared-memory bandwidth of all SMs together: bytes per clock per SM × SMs × clock."""
        return None if self.smem_bytes_per_clk is None else self.smem_bytes_per_clk * self.sms * self.clock_hz

    @property
    def l2_bytes_per_s(self) -> float | None:
        """L2 bandwidth: bytes per clock (whole chip) × clock."""
        return None if self.l2_bytes_per_clk is None else self.l2_bytes_per_clk * self.clock_hz

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit, "sms": self.sms, "clock_hz": self.clock_hz,
            "vector_clock_hz": self.vector_clock_hz,
            "matrix_flop_per_clk_per_sm": dict(self.matrix_flop_per_clk),
            "fp32_lanes_per_sm": self.fp32_lanes, "exp_per_clk_per_sm": self.exp_per_clk,
            "smem_bytes_per_clk_per_sm": self.smem_bytes_per_clk, "smem_capacity_bytes": self.smem_capacity_bytes,
            "register_file_bytes": self.register_file_bytes, "tmem_bytes": self.tmem_bytes,
            "l2_bytes_per_clk": self.l2_bytes_per_clk,
            "exp_per_s": self.exp_per_s, "smem_bytes_per_s": self.smem_bytes_per_s,
            "l2_bytes_per_s": self.l2_bytes_per_s, "sources": dict(self.sources),
        }


class ChipTableError(RooflineError):
    pass


def _fail(path: Path | str, text: str) -> ChipTableError:
    return ChipTableError(f"machine file {path}: [chip] {text}")


def _number(value: Any, key: str, path: Path | str, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise _fail(path, f"{key} must be a positive number, got {value!r}")
    if integer and int(value) != value:
        raise _fail(path, f"{key} must be a whole number, got {value!r}")
    return float(value)


def _size(value: Any, key: str, path: Path | str) -> float:
    try:
        number = parse_quantity(value, "bytes")
    except UnitError as exc:
        raise _fail(path, f"{key}: {exc}") from None
    if not number > 0:
        raise _fail(path, f"{key} must be positive, got {value!r}")
    return number


def _agree(derived: float, peak: float, what: str, path: Path | str) -> None:
    if abs(derived / peak - 1) > TOLERANCE:
        raise _fail(path, f"{what} = {derived:.4g}, but the datasheet peak is {peak:.4g} "
                          f"({(derived / peak - 1) * 100:+.1f}%); fix the rate or the clock")


def parse_chip(raw: Any, path: Path | str, matrix_peaks: Mapping[str, float],
               vector_peaks: Mapping[str, float], require_sources: bool = False) -> Chip | None:
    """The `[chip]` table of a machine file, checked: each figure positive, each per-SM rate × SMs ×
    clock within 1% of the datasheet peak it implies, and (for the catalog) a source for each."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _fail(path, "must be a table")
    extra = set(raw) - _KEYS
    if extra:
        raise _fail(path, f"unknown field(s) {', '.join(sorted(extra))}; fields are {', '.join(sorted(_KEYS))}")
    for key in ("sms", "clock_mhz"):
        if key not in raw:
            raise _fail(path, f"needs {key} (the SM or CU count and the clock the matrix peak implies)")
    nums = {k: _number(raw[k], k, path, integer=k in ("sms", "fp32_lanes")) for k in _COUNTS if k in raw}
    sizes = {k: _size(raw[k], k, path) for k in _SIZES if k in raw}
    matrix = raw.get("matrix_per_clk", {})
    if not isinstance(matrix, Mapping):
        raise _fail(path, "matrix_per_clk must be a table of dtype = FLOP per clock per SM")
    per_clk = {str(k): _number(v, f"matrix_per_clk.{k}", path) for k, v in matrix.items()}
    sources = raw.get("sources", {})
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) for v in sources.values()):
        raise _fail(path, "sources must be a table of figure = \"citation\"")
    unit = raw.get("unit", "SM")
    if unit not in ("SM", "CU"):
        raise _fail(path, f"unit must be SM or CU, got {unit!r}")
    chip = Chip(
        sms=int(nums["sms"]), clock_hz=nums["clock_mhz"] * 1e6, matrix_flop_per_clk=per_clk,
        fp32_lanes=int(nums["fp32_lanes"]) if "fp32_lanes" in nums else None,
        vector_clock_hz=nums["vector_clock_mhz"] * 1e6 if "vector_clock_mhz" in nums else None,
        exp_per_clk=nums.get("exp_per_clk"), smem_bytes_per_clk=nums.get("smem_bytes_per_clk"),
        smem_capacity_bytes=sizes.get("smem_capacity"), register_file_bytes=sizes.get("register_file"),
        tmem_bytes=sizes.get("tmem"), l2_bytes_per_clk=nums.get("l2_bytes_per_clk"), unit=unit,
        sources={str(k): str(v) for k, v in sources.items()},
        notes=(str(raw["note"]),) if "note" in raw else (),
    )
    for key, per in per_clk.items():
        if key not in matrix_peaks:
            raise _fail(path, f"matrix_per_clk.{key} has no datasheet peak [peak.matrix] {key} to agree with")
        _agree(per * chip.sms * chip.clock_hz, matrix_peaks[key],
               f"{key} {per:g} FLOP/clk/{unit} × {chip.sms} × {chip.clock_hz / 1e9:g} GHz", path)
    if chip.vector_flop_per_s is not None and "fp32" in vector_peaks:
        clock = chip.vector_clock_hz or chip.clock_hz
        _agree(chip.vector_flop_per_s, vector_peaks["fp32"],
               f"fp32 {chip.fp32_lanes} lanes × 2 × {chip.sms} × {clock / 1e9:g} GHz", path)
    if require_sources:
        figures = [k for k in (*_COUNTS, *_SIZES) if k in raw] + (["matrix_per_clk"] if per_clk else [])
        missing = [k for k in figures if not chip.sources.get(k, "").strip()]
        if missing:
            raise _fail(path, f"figure(s) without a source in [chip.sources]: {', '.join(missing)}")
    return chip


__all__ = ["TOLERANCE", "Chip", "ChipTableError", "parse_chip"]
