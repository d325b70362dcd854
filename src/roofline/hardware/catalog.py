"""Machine files (TOML) in, Machines out; and a Machine back out to TOML (for `measure --save`).

One file per machine under data/, every section citing its source. A user's file works the same
way (`--machine path/to/file.toml`). Every malformed file fails with one line naming the file, the
field and what was expected.

Layering: imports roofline.units, roofline.errors, roofline.hardware.machine.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, unknown
from roofline.hardware.machine import PEAK_KEYS, Machine, MemoryLevel
from roofline.units import UnitError, format_bytes, format_bytes_per_s, format_flop_per_s, parse_quantity
from roofline.vocab import Level

DATA = Path(__file__).parent / "data"
DEFAULT_MACHINE = "h100"  # the machine the library and the command line analyse on when none is named

_TOP = {"id", "name", "aliases", "vendor", "kind", "architecture", "year", "note", "notes",
        "measured", "peak", "memory", "interconnect"}
_PEAK_SECTIONS = {"matrix", "sparse", "vector"}
_MEMORY_KEYS = {"source", "technology", "bandwidth", "capacity", "note"}
_KINDS = {"gpu", "cpu", "tpu", "accelerator"}


class MachineFileError(RooflineError):
    pass


def _fail(path: Path | str, text: str) -> MachineFileError:
    return MachineFileError(f"machine file {path}: {text}")


def _table(raw: Mapping[str, Any], key: str, path: Path | str) -> Mapping[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise _fail(path, f"[{key}] must be a table")
    return value


def _quantity(value: Any, kind: str, where: str, path: Path | str) -> float:
    try:
        number = parse_quantity(value, kind)  # type: ignore[arg-type]
    except UnitError as exc:
        raise _fail(path, f"{where}: {exc}") from None
    if not number > 0:
        raise _fail(path, f"{where} must be positive, got {value!r}")
    return number


def _peaks(section: Mapping[str, Any], name: str, path: Path | str,
           sources: dict[str, str], notes: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in section.items():
        if key == "source":
            sources[f"peak.{name}"] = str(value)
        elif key == "note":
            notes.append(f"peak.{name}: {value}")
        elif key in PEAK_KEYS:
            out[key] = _quantity(value, "flop_per_s", f"[peak.{name}] {key}", path)
        else:
            raise _fail(path, f"[peak.{name}] has unknown dtype {key!r}; use one of {', '.join(PEAK_KEYS)}")
    return out


def parse_machine(raw: Mapping[str, Any], path: Path | str = "<data>", require_sources: bool = False) -> Machine:
    """Build a Machine from a parsed TOML document, checking every field."""
    extra = set(raw) - _TOP
    if extra:
        raise _fail(path, f"unknown field(s) {', '.join(sorted(extra))}")
    for key in ("id", "name"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _fail(path, f"missing {key!r} (a non-empty string)")
    kind = raw.get("kind", "gpu")
    if kind not in _KINDS:
        raise _fail(path, f"kind must be one of {', '.join(sorted(_KINDS))}, got {kind!r}")
    sources: dict[str, str] = {}
    notes: list[str] = [str(raw["note"])] if "note" in raw else []
    notes += [str(n) for n in raw.get("notes", [])]

    peak = _table(raw, "peak", path)
    if set(peak) - _PEAK_SECTIONS:
        raise _fail(path, f"[peak] sections are {', '.join(sorted(_PEAK_SECTIONS))}, "
                          f"got {', '.join(sorted(set(peak) - _PEAK_SECTIONS))}")
    matrix = _peaks(_table(peak, "matrix", path), "matrix", path, sources, notes)
    if not matrix:
        raise _fail(path, "missing [peak.matrix] with at least one dtype (e.g. bf16 = \"989.4 TFLOP/s\")")
    vector = _peaks(_table(peak, "vector", path), "vector", path, sources, notes)
    sparse = _peaks(_table(peak, "sparse", path), "sparse", path, sources, notes)

    memory: dict[Level, MemoryLevel] = {}
    for level_name, level in _table(raw, "memory", path).items():
        if level_name not in tuple(Level):
            raise _fail(path, f"unknown memory level [memory.{level_name}]; levels are {', '.join(Level)}")
        if not isinstance(level, Mapping):
            raise _fail(path, f"[memory.{level_name}] must be a table")
        bad = set(level) - _MEMORY_KEYS
        if bad:
            raise _fail(path, f"[memory.{level_name}] has unknown field(s) {', '.join(sorted(bad))}")
        bw = level.get("bandwidth")
        cap = level.get("capacity")
        memory[Level(level_name)] = MemoryLevel(
            name=Level(level_name),
            bytes_per_s=None if bw is None else _quantity(bw, "bytes_per_s", f"[memory.{level_name}] bandwidth", path),
            capacity_bytes=None if cap is None else _quantity(cap, "bytes", f"[memory.{level_name}] capacity", path),
            technology=str(level.get("technology", "")),
            source=str(level.get("source", "")),
        )
        if "source" in level:
            sources[f"memory.{level_name}"] = str(level["source"])
        if "note" in level:
            notes.append(f"memory.{level_name}: {level['note']}")
    if Level.DRAM not in memory or memory[Level.DRAM].bytes_per_s is None:
        raise _fail(path, "missing [memory.dram] bandwidth (e.g. bandwidth = \"3.35 TB/s\")")

    ic = _table(raw, "interconnect", path)
    ic_bw = None
    if ic:
        if "bandwidth" not in ic:
            raise _fail(path, "[interconnect] needs a bandwidth")
        ic_bw = _quantity(ic["bandwidth"], "bytes_per_s", "[interconnect] bandwidth", path)
        if "source" in ic:
            sources["interconnect"] = str(ic["source"])
        if "note" in ic:
            notes.append(f"interconnect: {ic['note']}")

    if require_sources:
        needed = ["peak.matrix", "memory.dram"]
        needed += [f"peak.{s}" for s in ("vector", "sparse") if s in peak]
        needed += [f"memory.{m}" for m in memory]
        needed += ["interconnect"] if ic else []
        missing = [s for s in needed if not sources.get(s, "").strip()]
        if missing:
            raise _fail(path, f"section(s) without a source: {', '.join(missing)}")

    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise _fail(path, "aliases must be a list of strings")
    year = raw.get("year")
    if year is not None and not isinstance(year, int):
        raise _fail(path, "year must be an integer")
    return Machine(
        id=raw["id"].strip().lower(),
        name=raw["name"],
        matrix_flop_per_s=matrix,
        vector_flop_per_s=vector,
        sparse_flop_per_s=sparse,
        memory=memory,
        aliases=tuple(a.lower() for a in aliases),
        vendor=str(raw.get("vendor", "")),
        kind=kind,
        architecture=str(raw.get("architecture", "")),
        year=year,
        interconnect_bytes_per_s=ic_bw,
        interconnect_name=str(ic.get("name", "")) if ic else "",
        sources=sources,
        notes=tuple(notes),
        measured=bool(raw.get("measured", False)),
        path=str(path),
    )


def read_toml(path: Path, what: str, error: type[RooflineError]) -> dict[str, Any]:
    """A TOML file's document, or one line naming the file and what is wrong with it."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{what} file {path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} file {path} is not valid TOML: {exc}") from None


def name_index(entries: Iterable[tuple[str, Sequence[str]]], what: str) -> dict[str, str]:
    """Every id and alias -> its id; a name two entries claim is an error of the catalog."""
    names: dict[str, str] = {}
    for entry_id, aliases in entries:
        for n in (entry_id, *aliases):
            if n in names and names[n] != entry_id:
                raise RooflineError(f"{what} name {n!r} is claimed by both {names[n]} and {entry_id}")
            names[n] = entry_id
    return names


def load_machine_file(path: str | Path, require_sources: bool = False) -> Machine:
    p = Path(path)
    return parse_machine(read_toml(p, "machine", MachineFileError), p, require_sources=require_sources)


@functools.cache
def catalog() -> dict[str, Machine]:
    """Every datasheet machine, by id."""
    machines = {}
    for f in sorted(DATA.glob("*.toml")):
        m = load_machine_file(f, require_sources=True)
        machines[m.id] = m
    return machines


@functools.cache
def _names() -> dict[str, str]:
    return name_index(((m.id, m.aliases) for m in catalog().values()), "machine")


def get_machine(name: str | Machine) -> Machine:
    """A catalog machine by id or alias ("h100", "H100-SXM"), or a machine file by path."""
    if isinstance(name, Machine):
        return name
    text = name.strip()
    if text.endswith(".toml") or "/" in text or Path(text).is_file():
        return load_machine_file(text)
    key = text.lower().replace("_", "-").replace(" ", "-")
    names = _names()
    if key in names:
        return catalog()[names[key]]
    raise unknown("machine", text, names, "see `roofline machines`, or pass a machine file path")


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def machine_to_toml(m: Machine, header: str = "") -> str:
    """The machine file form of `m`, readable back by load_machine_file (figures to 4 digits)."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    lines += [f"id = {_q(m.id)}", f"name = {_q(m.name)}"]
    if m.aliases:
        lines.append("aliases = [" + ", ".join(_q(a) for a in m.aliases) + "]")
    for key in ("vendor", "kind", "architecture"):
        if getattr(m, key):
            lines.append(f"{key} = {_q(getattr(m, key))}")
    if m.year is not None:
        lines.append(f"year = {m.year}")
    if m.measured:
        lines.append("measured = true")
    if m.notes:
        lines.append("notes = [" + ", ".join(_q(n) for n in m.notes) + "]")
    for section, table in (("matrix", m.matrix_flop_per_s), ("sparse", m.sparse_flop_per_s),
                           ("vector", m.vector_flop_per_s)):
        if not table:
            continue
        lines += ["", f"[peak.{section}]"]
        if m.sources.get(f"peak.{section}"):
            lines.append(f"source = {_q(m.sources[f'peak.{section}'])}")
        for key in sorted(table, key=PEAK_KEYS.index):
            lines.append(f"{key} = {_q(format_flop_per_s(table[key], 4))}")
    for level in m.memory.values():
        lines += ["", f"[memory.{level.name}]"]
        if level.source:
            lines.append(f"source = {_q(level.source)}")
        if level.technology:
            lines.append(f"technology = {_q(level.technology)}")
        if level.bytes_per_s is not None:
            lines.append(f"bandwidth = {_q(format_bytes_per_s(level.bytes_per_s, 4))}")
        if level.capacity_bytes is not None:
            lines.append(f"capacity = {_q(format_bytes(level.capacity_bytes, 4, binary=True))}")
    if m.interconnect_bytes_per_s:
        lines += ["", "[interconnect]"]
        if m.sources.get("interconnect"):
            lines.append(f"source = {_q(m.sources['interconnect'])}")
        if m.interconnect_name:
            lines.append(f"name = {_q(m.interconnect_name)}")
        lines.append(f"bandwidth = {_q(format_bytes_per_s(m.interconnect_bytes_per_s, 4))}")
    return "\n".join(lines) + "\n"
