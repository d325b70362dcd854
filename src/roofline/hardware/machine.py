"""A machine is its ceilings: peak FLOP/s per unit and dtype, bandwidth and capacity per memory level.

Figures are never hard-coded in formulas; they come from a data file (datasheet machines) or from
`roofline measure` (measured machines), in the same form. Sparse (2:4) peaks are kept apart and
used only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.hardware.chip import Chip
from roofline.vocab import Level, Unit

PEAK_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "int8", "fp4", "int4")


@frozen
class MemoryLevel:
    """One level of a machine's memory or links: its bandwidth, capacity, latency and source."""

    name: Level
    bytes_per_s: float | None = None
    capacity_bytes: float | None = None
    technology: str = ""
    source: str = ""
    latency_s: float = 0.0  # α of a transfer over a link (the alpha-beta model); 0 for memories


def _frozen(d: Mapping[str, float] | None) -> Mapping[str, float]:
    return MappingProxyType(dict(d or {}))


@frozen
class Machine:
    """One device's datasheet: matrix and vector peaks by dtype, its memory levels, with sources."""

    id: str
    name: str
    matrix_flop_per_s: Mapping[str, float]  # dense peaks of the matrix units, by peak key
    memory: Mapping[Level, MemoryLevel]
    vector_flop_per_s: Mapping[str, float] = field(default_factory=dict)
    sparse_flop_per_s: Mapping[str, float] = field(default_factory=dict)  # flagged; never default
    aliases: tuple[str, ...] = ()
    vendor: str = ""
    kind: str = "gpu"
    architecture: str = ""
    year: int | None = None
    interconnect_bytes_per_s: float | None = None
    interconnect_name: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)  # section -> citation
    notes: tuple[str, ...] = ()
    measured: bool = False
    path: str = ""  # file it was read from
    chip: Chip | None = None  # per-SM rates (exp units, shared memory, L2); None: DRAM and the datasheet units only

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix_flop_per_s", _frozen(self.matrix_flop_per_s))
        object.__setattr__(self, "vector_flop_per_s", _frozen(self.vector_flop_per_s))
        object.__setattr__(self, "sparse_flop_per_s", _frozen(self.sparse_flop_per_s))
        object.__setattr__(self, "memory", MappingProxyType(dict(self.memory)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    # --- ceilings -------------------------------------------------------------------------------
    @property
    def memory_bytes_per_s(self) -> float:
        """Off-chip (DRAM/HBM) bandwidth: the slope of the roofline."""
        level = self.memory.get(Level.DRAM)
        if level is None or level.bytes_per_s is None:
            raise RooflineError(f"machine {self.id} has no DRAM bandwidth")
        return level.bytes_per_s

    @property
    def memory_capacity_bytes(self) -> float | None:
        level = self.memory.get(Level.DRAM)
        return None if level is None else level.capacity_bytes

    def peak_flop_per_s(self, dtype: str | DType, unit: Unit = Unit.MATRIX, sparse: bool = False) -> float:
        """Peak of `unit` for `dtype`. The vector unit falls back to its fp32 peak for narrower types,
        because elementwise work on bf16/fp8 data is done in fp32 registers."""
        key = get_dtype(dtype).peak_key
        if unit not in Unit.__members__.values():
            raise RooflineError(f"unknown compute unit {unit!r}; units are {', '.join(Unit)}")
        unit = Unit(unit)
        if unit is Unit.MATRIX:
            table = self.sparse_flop_per_s if sparse else self.matrix_flop_per_s
            if key in table:
                return table[key]
            kind = "sparse matrix" if sparse else "matrix"
            have = ", ".join(sorted(table, key=PEAK_KEYS.index)) or "none"
            raise RooflineError(f"{self.id} lists no {kind} peak for {key}; it has: {have}")
        if not self.vector_flop_per_s:  # Unit.VECTOR
            # TPUs publish no vector peak; the matrix peak is the only ceiling there is
            return self.peak_flop_per_s(dtype, Unit.MATRIX)
        return self.vector_flop_per_s[self.vector_peak_key(dtype)]

    def vector_peak_key(self, dtype: str | DType) -> str:
        """Which vector figure `peak_flop_per_s(dtype, Unit.VECTOR)` uses: its own, else fp32 (never for fp64);
        with no vector figures at all (TPUs), the dtype's own key, for the matrix peak stands in."""
        key = get_dtype(dtype).peak_key
        if key in self.vector_flop_per_s or not self.vector_flop_per_s:
            return key
        if key != "fp64" and "fp32" in self.vector_flop_per_s:
            return "fp32"
        have = ", ".join(sorted(self.vector_flop_per_s))
        raise RooflineError(f"{self.id} lists no vector peak for {key}; it has: {have}")

    def ridge_flop_per_byte(self, dtype: str | DType, unit: Unit = Unit.MATRIX) -> float:
        """I* = peak / bandwidth: 989.4e12 / 3.35e12 = 295.3 FLOP/byte for an H100 in BF16."""
        return self.peak_flop_per_s(dtype, unit) / self.memory_bytes_per_s

    def dtypes(self) -> list[str]:
        """Peak keys with a dense matrix figure, narrowest last."""
        return sorted(self.matrix_flop_per_s, key=PEAK_KEYS.index)

    def has_peak(self, dtype: str | DType) -> bool:
        return get_dtype(dtype).peak_key in self.matrix_flop_per_s

    def default_dtype(self) -> str:
        """bf16 where the machine has it, else the widest float it has (a CPU: fp32)."""
        for key in ("bf16", "fp16", "fp32", "fp64"):
            if key in self.matrix_flop_per_s:
                return key
        return self.dtypes()[0]

    def to_dict(self) -> dict[str, Any]:
        """The machine as JSON: every ceiling in base units, its ridges and the sources."""
        return {
            "name": self.id,
            "full_name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "kind": self.kind,
            "peak_flop_per_s": dict(self.matrix_flop_per_s),
            "vector_flop_per_s": dict(self.vector_flop_per_s),
            "sparse_flop_per_s": dict(self.sparse_flop_per_s),
            "memory_bytes_per_s": self.memory_bytes_per_s,
            "memory_capacity_bytes": self.memory_capacity_bytes,
            "interconnect_bytes_per_s": self.interconnect_bytes_per_s,
            "ridge_flop_per_byte": {d: self.ridge_flop_per_byte(d) for d in self.matrix_flop_per_s},
            "sources": dict(self.sources),
            "measured": self.measured,
            "chip": self.chip.to_dict() if self.chip is not None else None,
        }
