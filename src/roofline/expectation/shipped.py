"""The fitted expected-time files: the ones shipped in expectation/data/, and a user's own.

    expectation/data/<machine>.<engine>.json      one per catalog GPU × engine the tables cover,
                                                  written by `roofline calibrate --from aiconfigurator`

`for_machine(machine, engine)` picks the file of the machine and engine (default: the engine whose
file used the most GEMM and attention rows). A machine without a file of its own (an H100 PCIe, an MI300X, a TPU, a
measured CPU) takes the nearest architecture's (NEAREST, then the default below) and says so.

Layering: imports roofline.errors, roofline.fileio and this room's model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.expectation.model import Fit
from roofline.expectation.times import FORMAT, READS, VERSION, ExpectedTimes

# the nearest measured architecture of a catalog machine without tables of its own
NEAREST: Mapping[str, str] = {
    "h100-pcie": "h100-sxm",  # the same GH100 die, fewer SMs and HBM2e
    "gb200": "b200",  # the same Blackwell GPU, on a Grace board
    "b300": "b200",
    "gb300": "b300",  # the same Blackwell Ultra GPU, on a Grace board
    "l4": "l40s",  # Ada
    "rtx-4090": "l40s",  # Ada
    "mi300x": "h200",  # HBM3-class accelerators of the same year: no AMD tables exist
    "mi325x": "h200",
    "mi355x": "b200",
}
DEFAULT_NEAREST = "h100-sxm"
ENGINES = ("trtllm", "vllm", "sglang")
# the kinds whose rows pick a machine's default engine (default_engine); MLA and MoE fits are shipped
# where an engine's tables have them, and do not count
DEFAULT_KINDS = ("gemm.", "context_attention.", "generation_attention.")


# the shipped files sit beside this module: read as plain files (importlib.resources would cost the
# start-up ~20 ms of imports, zipfile and tempfile among them, for a package always installed as files)
DATA = Path(__file__).parent / "data"


@cache
def shipped_files() -> tuple[tuple[str, str], ...]:
    """(machine, engine) of every shipped file, from the file names alone (nothing read)."""
    names = [name[:-5].rpartition(".") for name in os.listdir(DATA) if name.endswith(".json")]
    return tuple(sorted((machine, engine) for machine, _, engine in names))


def shipped_index() -> tuple[tuple[str, str, int], ...]:
    """(machine, engine, rows used) of every shipped file (each file read)."""
    return tuple((m, e, sum(f.rows for f in shipped(m, e).fits.values())) for m, e in shipped_files())


def _rows(machine: str, engine: str) -> int:
    return sum(f.rows for k, f in shipped(machine, engine).fits.items() if k.startswith(DEFAULT_KINDS))


def parse(raw: Any, where: str) -> ExpectedTimes:
    """ExpectedTimes from a decoded file; a malformed one fails in one line naming it."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise RooflineError(f"{where}: not an expected-time file (format must be {FORMAT!r}; write one with "
                            "`roofline calibrate --from aiconfigurator --save FILE`)")
    if raw.get("version") not in READS:
        raise RooflineError(f"{where}: version {raw.get('version')!r} is not supported (this roofline reads "
                            f"{', '.join(map(str, READS))}; write version {VERSION} with `roofline calibrate --save`)")
    try:
        fits = {}
        for kind, f in raw["fits"].items():
            tile, small = f.get("tile"), f.get("small_band")
            fits[kind] = Fit(kind, float(f["efficiency"]), float(f["t0_s"]), float(f["band"][0]),
                             float(f["band"][1]), int(f["rows"]), (int(tile[0]), int(tile[1])) if tile else None,
                             None if f.get("mape") is None else float(f["mape"]), float(f.get("per_tile_s", 0.0)),
                             float(f.get("per_head_s", 0.0)), float(f.get("per_kv_head_s", 0.0)),
                             float(f.get("compute_ratio", 1.0)),
                             float(f.get("matrix_weight", 0.0)), float(f.get("exp_weight", 0.0)),
                             float(f.get("per_input", 0.0)), float(f.get("per_output", 0.0)),
                             (float(small[0]), float(small[1])) if small else None, int(f.get("max_group", 0)),
                             float(f.get("regroup_weight", 0.0)),
                             tuple(sorted((int(d), float(w)) for d, w in (f.get("head_dim_weights") or {}).items())),
                             float(f.get("single_group_weight", 0.0)), float(f.get("block_latency_s", 0.0)),
                             float(f.get("head_latency_s", 0.0)),
                             tuple((str(p), float(h)) for p, h in (f.get("host_floors_s") or {}).items()),
                             float(f.get("kv_read_weight", 0.0)), bool(f.get("tile_padded", False)),
                             float(f.get("stream_blocks", 0.0)), float(f.get("short_stream_weight", 0.0)),
                             float(f.get("wave_weight", 0.0)), int(f.get("wave_slots", 0)),
                             float(f.get("query_tile_latency_s", 0.0)), bool(f.get("deepgemm_blocks", False)),
                             float(f.get("k_step_s", 0.0)),
                             tuple(sorted((int(d), float(w)) for d, w in (f.get("narrow_kv_weights") or {}).items())),
                             float(f.get("long_stream_weight", 0.0)))
        return ExpectedTimes(str(raw["machine"]), str(raw["engine"]), str(raw.get("engine_version", "")),
                             dict(raw.get("source", {})), fits, where)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RooflineError(f"{where}: malformed expected-time file ({type(exc).__name__}: {exc})") from None


@cache
def shipped(machine: str, engine: str) -> ExpectedTimes:
    """The shipped file of one catalog machine and engine."""
    entry = DATA / f"{machine}.{engine}.json"
    if not entry.is_file():
        have = ", ".join(f"{m}/{e}" for m, e in shipped_files())
        raise RooflineError(f"no shipped fit for {machine} with {engine}; shipped: {have}")
    return parse(json.loads(entry.read_text(encoding="utf-8")), f"expectation/data/{machine}.{engine}.json")


def default_engine(machine: str) -> str:
    """The engine whose file used the most GEMM and attention rows for `machine` (DEFAULT_KINDS: the
    kinds every engine's tables time, so an engine is not the default for tables the others lack)."""
    mine = [(_rows(m, engine), engine) for m, engine in shipped_files() if m == machine]
    if not mine:
        raise RooflineError(f"no shipped fit for {machine}")
    return max(mine)[1]


def for_machine(machine: str, engine: str | None = None) -> ExpectedTimes:
    """The fit for a catalog machine: its own, or the nearest architecture's (said in `borrowed_for`)."""
    if engine is not None and engine not in ENGINES:
        raise RooflineError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    have = {m for m, _ in shipped_files()}
    source = machine if machine in have else NEAREST.get(machine, DEFAULT_NEAREST)
    if source not in have:
        source = DEFAULT_NEAREST
    times = shipped(source, engine or default_engine(source))
    if source != machine:
        from dataclasses import replace

        return replace(times, borrowed_for=machine)
    return times


def load_file(path: str | os.PathLike[str]) -> ExpectedTimes:
    """A user's expected-time file (from `roofline calibrate --save`)."""
    from roofline.fileio import read_text_file

    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"expected-time file {p} does not exist (write one with `roofline calibrate --save FILE`)")
    try:
        raw = json.loads(read_text_file(p, "expected-time"))
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{p}: not JSON (line {exc.lineno}: {exc.msg})") from None
    return parse(raw, str(p))


__all__ = ["DEFAULT_NEAREST", "ENGINES", "NEAREST", "default_engine", "for_machine", "load_file", "parse",
           "shipped", "shipped_files", "shipped_index"]
