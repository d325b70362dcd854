"""Machine files (TOML) in, Machines out; and a Machine back out to TOML (for `measure --save`).

One file per machine under data/, every section citing its source. A user's file works the same
way (`--machine path/to/file.toml`; a path always means the file, even when its id is a catalog
name: `shadow_note`). Every malformed file fails with one line naming the file, the field and what
was expected: a string where a string belongs, every figure finite and within FIGURE_RANGES, and
only a regular file of at most 1 MiB is read (roofline.fileio.read_text_file). `machine_to_toml`
writes through tomli_w, every figure exact, so any id, name or note reads back equal.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from roofline.errors import RooflineError, shown, unknown
from roofline.fileio import parse_document, read_text_file
from roofline.frozen import frozen
from roofline.hardware.chip import parse_chip
from roofline.hardware.index import read_index
from roofline.hardware.machine import PEAK_KEYS, Machine, MemoryLevel
from roofline.units import UnitError, format_bytes, format_bytes_per_s, format_flop_per_s, format_time, parse_quantity
from roofline.vocab import Level

DATA = Path(__file__).parent / "data"
DEFAULT_MACHINE = "h100"  # the machine the library and the command line analyse on when none is named

# [chip] is the chip's own table (SMs, clocks, per-SM rates), parsed by roofline.hardware.chip
_TOP = {"id", "name", "aliases", "vendor", "kind", "architecture", "year", "note", "notes",
        "measured", "peak", "memory", "interconnect", "chip"}
_PEAK_SECTIONS = {"matrix", "sparse", "vector"}
_MEMORY_KEYS = {"source", "technology", "bandwidth", "capacity", "note"}
_INTERCONNECT_KEYS = {"source", "name", "bandwidth", "note"}
_KINDS = {"gpu", "cpu", "tpu", "accelerator"}

# The range a figure in a machine or system file may take: wide enough for a phone CPU and for a
# whole rack, narrow enough that a typo (1e300, a unit forgotten) is caught and the ridge
# (peak / bandwidth) and every chart stay finite. Outside it, one line states the range.
FIGURE_RANGES: dict[str, tuple[float, float]] = {
    "flop_per_s": (1e6, 1e19),  # 1 MFLOP/s to 10 EFLOP/s
    "bytes_per_s": (1e6, 1e16),  # 1 MB/s to 10 PB/s
    "bytes": (1.0, 2.0**50),  # 1 B to 1 PiB
    "time_s": (1e-10, 10.0),  # 0.1 ns to 10 s (a link's latency)
}
_FORMAT: dict[str, Callable[[float, int], str]] = {
    "flop_per_s": format_flop_per_s,
    "bytes_per_s": format_bytes_per_s,
    "bytes": lambda v, d: format_bytes(v, d, binary=True),
    "time_s": format_time,
}
_EXAMPLE = {"flop_per_s": "989.4 TFLOP/s", "bytes_per_s": "3.35 TB/s", "bytes": "80 GiB", "time_s": "15 us"}
YEARS = (1940, 2200)


class MachineFileError(RooflineError):
    pass


@frozen
class FileRefusals:
    """How one kind of hardware file (a machine file, a system file) refuses a field: one line
    "<kind> <path>: <what was wrong>", raised as that kind's own error class."""
    kind: str  # "machine file", "system file"
    error: type[RooflineError]

    def fail(self, path: Path | str, text: str) -> RooflineError:
        return self.error(f"{self.kind} {path}: {text}")

    def quantity(self, value: Any, kind: str, where: str, path: Path | str) -> float:
        """A finite figure within the range hardware files allow (FIGURE_RANGES), or this file's refusal."""
        try:
            return check_figure(value, kind, where)
        except UnitError as exc:
            raise self.fail(path, str(exc)) from None

    def text(self, section: Mapping[str, Any], key: str, where: str, path: Path | str) -> str:
        """A string field ("" when absent); a number, a date, a list or a table is refused. `where`
        is the table's name and its separator ("[peak.fp16] "), or "" at the top."""
        value = section.get(key, "")
        if not isinstance(value, str):
            raise self.fail(path, f"{where}{key} must be a string, got {shown(value)}")
        return value

    def check_top(self, raw: Mapping[str, Any], fields: set[str], path: Path | str) -> None:
        """The document's own top-level fields only, and an id and a name, each a non-empty string."""
        extra = set(raw) - fields
        if extra:
            raise self.fail(path, f"unknown field(s) {', '.join(sorted(map(str, extra)))}")
        for key in ("id", "name"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise self.fail(path, f"missing {key!r} (a non-empty string)")


_MACHINE_FILE = FileRefusals("machine file", MachineFileError)
_fail = _MACHINE_FILE.fail
_quantity = _MACHINE_FILE.quantity
_text = _MACHINE_FILE.text


def _table(raw: Mapping[str, Any], key: str, path: Path | str) -> Mapping[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise _fail(path, f"[{key}] must be a table")
    return value


def check_figure(value: Any, kind: str, where: str) -> float:
    """A figure of a machine or system file: a quantity string ("3.35 TB/s") or a number in base units,
    finite and within FIGURE_RANGES[kind]. Raises UnitError with what was wrong and the range."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UnitError(f"{where} must be a quantity like {_EXAMPLE[kind]!r} or a number, got {shown(value)}")
    lo, hi = FIGURE_RANGES[kind]
    span = f"from {_FORMAT[kind](lo, 3)} to {_FORMAT[kind](hi, 3)}"
    if isinstance(value, int) and value > hi:  # before float(): 10**400 has no float
        raise UnitError(f"{where} must be {span}, got {shown(value)}")
    try:
        number = parse_quantity(value, kind)  # type: ignore[arg-type]
    except UnitError as exc:
        raise UnitError(f"{where}: {exc}") from None
    except (OverflowError, ValueError):
        raise UnitError(f"{where} must be {span}, got {shown(value)}") from None
    if not math.isfinite(number):
        raise UnitError(f"{where} must be a finite figure {span}, got {shown(value)}")
    if not number > 0:
        raise UnitError(f"{where} must be positive ({span}), got {shown(value)}")
    if not lo <= number <= hi:
        raise UnitError(f"{where} must be {span}, got {shown(value)}")
    return number


def _peaks(section: Mapping[str, Any], name: str, path: Path | str,
           sources: dict[str, str], notes: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in section.items():
        if key == "source":
            if text := _text(section, key, f"[peak.{name}] ", path):
                sources[f"peak.{name}"] = text
        elif key == "note":
            notes.append(f"peak.{name}: {_text(section, key, f'[peak.{name}] ', path)}")
        elif key in PEAK_KEYS:
            out[key] = _quantity(value, "flop_per_s", f"[peak.{name}] {key}", path)
        else:
            raise _fail(path, f"[peak.{name}] has unknown dtype {key!r}; use one of {', '.join(PEAK_KEYS)}")
    return out


def parse_machine(raw: Mapping[str, Any], path: Path | str = "<data>", require_sources: bool = False) -> Machine:
    """Build a Machine from a parsed TOML document, checking every field: strings are strings, figures
    finite and within FIGURE_RANGES, lists lists of strings."""
    if not isinstance(raw, Mapping):
        raise _fail(path, "expected a TOML document (a table of fields)")
    _MACHINE_FILE.check_top(raw, _TOP, path)
    kind = raw.get("kind", "gpu")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise _fail(path, f"kind must be one of {', '.join(sorted(_KINDS))}, got {shown(kind)}")
    sources: dict[str, str] = {}
    notes: list[str] = [_text(raw, "note", "", path)] if "note" in raw else []
    notes += _strings(raw, "notes", path)

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
        where = f"[memory.{level_name}] "
        if not isinstance(level, Mapping):
            raise _fail(path, f"{where.strip()} must be a table")
        bad = set(level) - _MEMORY_KEYS
        if bad:
            raise _fail(path, f"{where}has unknown field(s) {', '.join(sorted(bad))}")
        bw = level.get("bandwidth")
        cap = level.get("capacity")
        memory[Level(level_name)] = MemoryLevel(
            name=Level(level_name),
            bytes_per_s=None if bw is None else _quantity(bw, "bytes_per_s", f"{where}bandwidth", path),
            capacity_bytes=None if cap is None else _quantity(cap, "bytes", f"{where}capacity", path),
            technology=_text(level, "technology", where, path),
            source=_text(level, "source", where, path),
        )
        if memory[Level(level_name)].source:
            sources[f"memory.{level_name}"] = memory[Level(level_name)].source
        if "note" in level:
            notes.append(f"memory.{level_name}: {_text(level, 'note', where, path)}")
    if Level.DRAM not in memory or memory[Level.DRAM].bytes_per_s is None:
        raise _fail(path, "missing [memory.dram] bandwidth (e.g. bandwidth = \"3.35 TB/s\")")

    ic = _table(raw, "interconnect", path)
    ic_bw = None
    if ic:
        bad = set(ic) - _INTERCONNECT_KEYS
        if bad:
            raise _fail(path, f"[interconnect] has unknown field(s) {', '.join(sorted(bad))}; "
                              f"fields are {', '.join(sorted(_INTERCONNECT_KEYS))}")
        if "bandwidth" not in ic:
            raise _fail(path, "[interconnect] needs a bandwidth")
        ic_bw = _quantity(ic["bandwidth"], "bytes_per_s", "[interconnect] bandwidth", path)
        if text := _text(ic, "source", "[interconnect] ", path):
            sources["interconnect"] = text
        if "note" in ic:
            notes.append(f"interconnect: {_text(ic, 'note', '[interconnect] ', path)}")

    if require_sources:
        needed = ["peak.matrix", "memory.dram"]
        needed += [f"peak.{s}" for s in ("vector", "sparse") if s in peak]
        needed += [f"memory.{m}" for m in memory]
        needed += ["interconnect"] if ic else []
        missing = [s for s in needed if not sources.get(s, "").strip()]
        if missing:
            raise _fail(path, f"section(s) without a source: {', '.join(missing)}")

    aliases = _strings(raw, "aliases", path)
    year = raw.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int) or not YEARS[0] <= year <= YEARS[1]):
        raise _fail(path, f"year must be an integer from {YEARS[0]} to {YEARS[1]}, got {shown(year)}")
    measured = raw.get("measured", False)
    if not isinstance(measured, bool):
        raise _fail(path, f"measured must be true or false, got {shown(measured)}")
    return Machine(
        id=raw["id"].strip().lower(),
        name=raw["name"],
        matrix_flop_per_s=matrix,
        vector_flop_per_s=vector,
        sparse_flop_per_s=sparse,
        memory=memory,
        aliases=tuple(a.lower() for a in aliases),
        vendor=_text(raw, "vendor", "", path),
        kind=kind,
        architecture=_text(raw, "architecture", "", path),
        year=year,
        interconnect_bytes_per_s=ic_bw,
        interconnect_name=_text(ic, "name", "[interconnect] ", path) if ic else "",
        sources=sources,
        notes=tuple(notes),
        measured=measured,
        path=str(path),
        chip=parse_chip(raw.get("chip"), path, matrix, vector, require_sources),
    )


def _strings(raw: Mapping[str, Any], key: str, path: Path | str) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise _fail(path, f"{key} must be a list of strings, got {shown(value)}")
    return list(value)


def read_toml(path: Path, what: str, error: type[RooflineError]) -> dict[str, Any]:
    """A TOML file's document, or one line naming the file and what is wrong with it. Only a regular
    file of at most 1 MiB is read (roofline.fileio.read_text_file): never a FIFO or /dev/zero."""
    text = read_text_file(path, what, error=error)
    doc: dict[str, Any] = parse_document(
        tomllib.loads, text, tomllib.TOMLDecodeError, error, lambda exc: f"{what} file {path} is not valid TOML: {exc}",
        f"{what} file {path} is not a {what} file: its arrays or tables nest too deeply",
        f"{what} file {path}: a number in it is too long to read")
    return doc


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


class _Named(Protocol):
    @property
    def id(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def load_folder(folder: Path, load: Callable[..., _N]) -> dict[str, _N]:
    """Every *.toml file in `folder` (in name order) read by `load` with its sources required, as
    the catalogs are: machines in hardware/data, systems in hardware/data/systems. By id."""
    entries = {}
    for f in sorted(folder.glob("*.toml")):
        entry = load(f, require_sources=True)
        entries[entry.id] = entry
    return entries


def catalog_entry(folder: Path, entry_id: str, load: Callable[..., _N], what: str) -> _N:
    """One catalog entry by its id, read by `load` from its own file (<folder>/<id>.toml, as the name index
    roofline.hardware.index finds it), sources required."""
    entry = load(folder / f"{entry_id}.toml", require_sources=True)
    if entry.id != entry_id:
        raise RooflineError(f"the catalog file {entry_id}.toml names its {what} {entry.id!r}; a catalog file is "
                            "named by its id")
    return entry


@functools.cache
def catalog_machine(machine_id: str) -> Machine:
    """One datasheet machine by its id (data/<id>.toml)."""
    return catalog_entry(DATA, machine_id, load_machine_file, "machine")


def catalog() -> dict[str, Machine]:
    """Every datasheet machine, by id (each file read once, then kept)."""
    return {f.stem: catalog_machine(f.stem) for f in sorted(DATA.glob("*.toml"))}


@functools.cache
def _names() -> dict[str, str]:
    """Every machine id and alias → its id, from the index (roofline.hardware.index), reading no TOML."""
    return name_index(read_index()["machines"].items(), "machine")


def shadow_note(m: Machine) -> str:
    """For a machine read from a file whose id or an alias is also a catalog name: one line saying the
    file is used, not the catalog machine (a path always names the file). "" otherwise."""
    if not m.path or Path(m.path).parent == DATA:
        return ""
    names = _names()
    taken = [n for n in (m.id, *m.aliases) if n in names]
    if not taken:
        return ""
    return (f"{m.path} names its machine {taken[0]!r}, as the catalog's {names[taken[0]]} is named; the file's "
            f"figures are used (a path always means the file; `roofline machine {names[taken[0]]}` shows the "
            f"catalog's)")


def names_a_file(text: str) -> bool:
    """`text` is there and is not a folder: a file, or a FIFO or device (refused when read, never taken
    for a catalog name and called unknown)."""
    try:
        return Path(text).exists() and not Path(text).is_dir()
    except OSError:  # a name too long to be a path: a name
        return False


def names_a_path(text: str) -> bool:
    """A machine or system name that means a file: a .toml name, a name with a folder, or a file that is there."""
    return text.endswith(".toml") or "/" in text or names_a_file(text)


def name_key(text: str) -> str:
    """How a catalog name is matched: case, '_' and ' ' do not matter ("H100_SXM" is "h100-sxm")."""
    return text.lower().replace("_", "-").replace(" ", "-")


def get_machine(name: str | Machine) -> Machine:
    """A catalog machine by id or alias ("h100", "H100-SXM"), or a machine file by path. A path
    always means the file, even if its id is a catalog name (`shadow_note` says so)."""
    if isinstance(name, Machine):
        return name
    text = name.strip()
    if names_a_path(text):
        return load_machine_file(text)
    key = name_key(text)
    names = _names()
    if key in names:
        return catalog_machine(names[key])
    raise unknown("machine", text, names, "see `roofline machines`, or pass a machine file path")


def _figure(value: float, kind: str, digits: int | None = None) -> str | float:
    """A figure as the file writes it: the shortest quantity string (4 significant digits or more,
    "989.4 TFLOP/s") that reads back to exactly `value`; a bare number in base units where none does.
    With `digits`, exactly that many significant digits (a measured figure: its noise is larger)."""
    if digits is not None:
        return _FORMAT[kind](value, digits)
    for digits in range(4, 18):
        text = _FORMAT[kind](value, digits)
        try:
            if parse_quantity(text, kind) == value:  # type: ignore[arg-type]
                return text
        except UnitError:
            break
    return float(value)


def machine_to_toml(m: Machine, header: str = "", digits: int | None = None) -> str:
    """The machine file form of `m`, readable back by load_machine_file to an equal Machine (every
    figure exact; strings escaped by tomli_w, so any id, name or note survives the trip). `digits`:
    round every figure to that many significant digits instead (measured machines: 4)."""
    import tomli_w  # only a writer needs it: the command line starts without it

    doc: dict[str, Any] = {"id": m.id, "name": m.name}
    if m.aliases:
        doc["aliases"] = list(m.aliases)
    for key in ("vendor", "kind", "architecture"):
        if getattr(m, key):
            doc[key] = getattr(m, key)
    if m.year is not None:
        doc["year"] = m.year
    if m.measured:
        doc["measured"] = True
    if m.notes:
        doc["notes"] = list(m.notes)
    peak: dict[str, Any] = {}
    for section, table in (("matrix", m.matrix_flop_per_s), ("sparse", m.sparse_flop_per_s),
                           ("vector", m.vector_flop_per_s)):
        if not table and not m.sources.get(f"peak.{section}"):
            continue
        out: dict[str, Any] = {}
        if m.sources.get(f"peak.{section}"):
            out["source"] = m.sources[f"peak.{section}"]
        for key in sorted(table, key=PEAK_KEYS.index):
            out[key] = _figure(table[key], "flop_per_s", digits)
        peak[section] = out
    if peak:
        doc["peak"] = peak
    memory: dict[str, Any] = {}
    for level in m.memory.values():
        out = {}
        if level.source:
            out["source"] = level.source
        if level.technology:
            out["technology"] = level.technology
        if level.bytes_per_s is not None:
            out["bandwidth"] = _figure(level.bytes_per_s, "bytes_per_s", digits)
        if level.capacity_bytes is not None:
            out["capacity"] = _figure(level.capacity_bytes, "bytes", digits)
        memory[str(level.name)] = out
    if memory:
        doc["memory"] = memory
    if m.interconnect_bytes_per_s:
        ic: dict[str, Any] = {}
        if m.sources.get("interconnect"):
            ic["source"] = m.sources["interconnect"]
        if m.interconnect_name:
            ic["name"] = m.interconnect_name
        ic["bandwidth"] = _figure(m.interconnect_bytes_per_s, "bytes_per_s", digits)
        doc["interconnect"] = ic
    # a comment holds no control character but tab: any other is written as "?"
    comment = "".join("# " + "".join(c if c == "\t" or (c >= " " and c != "\x7f") else "?" for c in line) + "\n"
                      for line in header.splitlines())
    return comment + tomli_w.dumps(doc)
