"""One GPU × engine's fitted expected-time model (roofline.expectation.model), kind by kind, and its file:
which fit a kernel takes (its own kind's, else the nearest measured kind's, saying so), where the fits came
from, and the JSON they are saved as (`roofline calibrate --save`; the shipped files of expectation/data/,
read by roofline.expectation.shipped).

Layering: imports roofline.errors, roofline.frozen, roofline.vocab and this room's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError
from roofline.expectation.model import FALLBACK_MEMORY, GEMM, NEAREST_KEY, Fit
from roofline.frozen import frozen
from roofline.vocab import Bound

FORMAT = "roofline-expected-times"
VERSION = 3
READS = (1, 2, 3)  # version 1-2 files (without the later terms: host floors, ...) read with them at 0
MODEL = ("t = max(memory, rho x compute x waves) / e + a_mm x matrix + a_exp x exp + t0 "
         "+ c_in x activation read + c_out x output write + per-tile cost x tile pairs / SMs "
         "+ per-head cost x sequences x heads / SMs + per-K/V-head cost x sequences x K/V heads / SMs "
         "+ c_g x (heads / K/V heads) x memory beyond the largest group + c_1 x memory if one head per K/V head, "
         "decode's streaming roof kappa x memory / (sequences x K/V heads) beside memory in the max, "
         "decode's query-tile roof lambda_q x max(0, sequences x K/V heads / SMs - 2) x ceil(heads per K/V head, 8) "
         "x padded width / 256 beside it, "
         "+ c_kvr x prefill's K/V share of memory, "
         "+ c_L2 x min(memory, L2 capacity / DRAM bandwidth) for decode, "
         "+ c_w x compute x (prefill's waves of query tiles on k x SMs slots - 1), "
         "+ lambda_k x DeepGEMM's waves x ceil(k / 128) where its blocks set the waves, "
         "+ c_far x max(0, memory - L2 capacity / DRAM bandwidth / 2) / (sequences x K/V heads) for decode "
         "where kappa > 0, "
         "a_mm per head width and, for prefill with K/V narrower than Q, apart, "
         "at least the host floor of the kernel's launch path; "
         "waves = ceil(tiles / SMs) x SMs / tiles (x the last tile's padding where tile_padded; "
         "DeepGEMM's waves x SMs x block_m x block_n / (m x n) where deepgemm_blocks); "
         "band = t x [Wilks tolerance interval of cross-fitted measured / t: half of new kernels at 99% confidence], "
         "one per class of floor below and above 10 us")

@frozen
class ExpectedTimes:
    """Fits of one GPU × engine, with where they came from. `borrowed_for` names the machine they
    are applied to when it has no tables of its own (the nearest architecture's fit)."""

    machine: str
    engine: str
    engine_version: str
    source: Mapping[str, Any]
    fits: Mapping[str, Fit] = field(default_factory=dict)
    file: str = ""
    borrowed_for: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "fits", MappingProxyType(dict(self.fits)))
        object.__setattr__(self, "source", MappingProxyType(dict(self.source)))

    @property
    def origin(self) -> str:
        """In words: the tables, the engine, the rows, and a borrowing if there is one."""
        rows = sum(f.rows for f in self.fits.values())
        pkg = f"{self.source.get('package', 'measured tables')} {self.source.get('version', '')}".strip()
        text = (f"fitted on {rows} measured kernels of {self.machine} ({self.engine} {self.engine_version}, "
                f"{pkg})")
        if self.borrowed_for:
            text += f"; {self.borrowed_for} has no measured tables: the nearest architecture's fit, {self.machine}"
        return text

    def fit_for(self, kind: str, bound: Bound) -> tuple[Fit, str]:
        """The fit of `kind`, or of the kind nearest its bound (and why), or an error listing the kinds."""
        if kind in self.fits:
            return self.fits[kind], ""
        family, _, dtype = kind.partition(".")
        nearer = (f"{family}.{NEAREST_KEY[dtype]}",) if dtype in NEAREST_KEY else ()
        if bound is Bound.COMPUTE:
            for near in (*nearer, f"{GEMM}.{dtype}", f"{GEMM}.bf16"):
                if near in self.fits:
                    return self.fits[near], f"no {kind} rows: the {near} fit (a compute-bound kernel)"
        for near in (*nearer, f"{family}.bf16", FALLBACK_MEMORY, f"{GEMM}.bf16"):
            if near in self.fits:
                return self.fits[near], f"no {kind} rows: the {near} fit (the nearest measured kind)"
        raise RooflineError(f"no fit for {kind} in {self.file or self.machine}; it has: {', '.join(self.fits)}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "machine": self.machine, "engine": self.engine,
                "engine_version": self.engine_version, "source": dict(self.source), "model": MODEL,
                "fits": {k: f.to_dict() for k, f in self.fits.items()}}


__all__ = ["FORMAT", "MODEL", "READS", "VERSION", "ExpectedTimes"]
