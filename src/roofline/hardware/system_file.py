"""System files, the catalog of systems, and a bare device made a system; the types they build
(`System`, `Link`, `Topology`) are roofline.hardware.system.

System file format (TOML; one file per system under data/systems/, or a user's file by path)::

    id = "dgx-h100"
    name = "NVIDIA DGX H100"
    aliases = ["dgx-h100-superpod"]      # optional
    kind = "system"                      # optional; if present it must be "system"
    device = "h100-sxm"                  # a catalog machine id or alias, or a path to a machine file
    devices_per_node = 8
    max_nodes = 1                        # how many such nodes the system can have (default 1)
    source = "..."                       # where devices_per_node and max_nodes come from
    note = "..."                         # optional; also `notes = [...]`

    [link.node]                          # between devices in a node (required)
    name = "NVLink 4 through NVSwitch"
    bandwidth = "450 GB/s"               # per device, per direction (required, positive)
    latency = "15 us"                    # alpha (required, positive)
    topology = "switch"                  # switch | fully_connected | ring | torus_2d | torus_3d | pcie
    source = "..."
    note = "..."
    measured = false                     # true: fitted by `roofline measure --collectives`

    [link.network]                       # between nodes, per device (optional; same keys)

`roofline measure --collectives` writes exactly a [link.node] section of this form, with
`measured = true`. Catalog files must cite a source for the system and for every link; every malformed
file fails with one line naming the file, the field and what was expected.

A bare device works as a system too (`get_system("h100", devices=4)`): one node of `devices` devices,
with the device's id and `from_device = True`,
whose node link is the device's [interconnect] figure halved (machine files store the vendor's
bidirectional total), with the topology and latency of the catalog system built from that device, or
a stated default (`DEFAULT_LINK_LATENCY_S`) when there is none.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, unknown
from roofline.hardware.catalog import (
    DATA,
    FileRefusals,
    MachineFileError,
    _names,
    catalog_entry,
    catalog_machine,
    get_machine,
    load_folder,
    load_machine_file,
    name_index,
    name_key,
    names_a_path,
    read_toml,
)
from roofline.hardware.index import read_index
from roofline.hardware.machine import Machine
from roofline.hardware.system import Link, System, Topology
from roofline.units import format_bytes_per_s

SYSTEMS = DATA / "systems"
DEFAULT_DEVICES = 8  # a bare device becomes one node of this many devices unless told otherwise

# α for a bare device whose catalog has no system to borrow one from: NCCL's own cost model of a
# small all-reduce over one node of 8 NVLink GPUs (ring, LL protocol): 6.6 + 2 x 7 x 0.6 us.
DEFAULT_LINK_LATENCY_S = 15.0e-6
DEFAULT_LINK_LATENCY_SOURCE = (
    "NCCL's tuning model, NVIDIA/nccl src/graph/tuning.cc (ncclTunerConstantsDefaults, commit 5067397, "
    "'Latencies in us': base latency Ring/LL 6.6, hwLatencies NVLINK Ring/LL 0.6 per step); "
    "all-reduce over 8 GPUs = 6.6 + 2 x (8 - 1) x 0.6 = 15.0 us")


class SystemFileError(RooflineError):
    pass


# --- system files ---------------------------------------------------------------------------------

_TOP = {"id", "name", "aliases", "kind", "device", "devices_per_node", "max_nodes", "source", "note", "notes",
        "link"}
_LINKS = ("node", "network")
_LINK_KEYS = {"name", "bandwidth", "latency", "topology", "source", "note", "measured"}


_SYSTEM_FILE = FileRefusals("system file", SystemFileError)
_fail = _SYSTEM_FILE.fail
_quantity = _SYSTEM_FILE.quantity  # within catalog.FIGURE_RANGES, as machine files are
_text = _SYSTEM_FILE.text


def _positive_int(raw: Mapping[str, Any], key: str, path: Path | str, default: int | None = None) -> int:
    if key not in raw:
        if default is None:
            raise _fail(path, f"missing {key!r} (a positive integer)")
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"{key} must be an integer, got {value!r}")
    if value < 1:
        raise _fail(path, f"{key} must be positive, got {value!r}")
    return value


def _link(section: Any, which: str, path: Path | str, require_sources: bool) -> Link:
    where = f"[link.{which}]"
    if not isinstance(section, Mapping):
        raise _fail(path, f"{where} must be a table")
    bad = set(section) - _LINK_KEYS
    if bad:
        raise _fail(path, f"{where} has unknown field(s) {', '.join(sorted(bad))}; "
                          f"fields are {', '.join(sorted(_LINK_KEYS))}")
    for key, example in (("bandwidth", "450 GB/s"), ("latency", "15 us")):
        if key not in section:
            raise _fail(path, f"{where} needs a {key} (e.g. {key} = \"{example}\")")
    topology = section.get("topology", "switch")
    if topology not in tuple(Topology):
        raise _fail(path, f"{where} topology must be one of {', '.join(Topology)}, got {topology!r}")
    measured = section.get("measured", False)
    if not isinstance(measured, bool):
        raise _fail(path, f"{where} measured must be true or false, got {measured!r}")
    source = _text(section, "source", f"{where} ", path)
    if require_sources and not source.strip():
        raise _fail(path, f"{where} has no source")
    return Link(
        name=_text(section, "name", f"{where} ", path),
        bytes_per_s=_quantity(section["bandwidth"], "bytes_per_s", f"{where} bandwidth", path),
        latency_s=_quantity(section["latency"], "time_s", f"{where} latency", path),
        topology=Topology(topology),
        source=source,
        note=_text(section, "note", f"{where} ", path),
        measured=measured,
    )


def _device(value: Any, path: Path | str) -> Machine:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, "missing 'device' (a catalog machine id such as \"h100-sxm\", or a machine file path)")
    text = value.strip()
    if text.endswith(".toml") or "/" in text:
        candidate = Path(text)
        if not candidate.is_absolute() and isinstance(path, Path):
            beside = path.parent / candidate
            if beside.is_file():
                text = str(beside)
    try:
        return get_machine(text)
    except RooflineError as exc:
        raise _fail(path, f"device: {exc}") from None


def parse_system(raw: Mapping[str, Any], path: Path | str = "<data>", require_sources: bool = False) -> System:
    """Build a System from a parsed TOML document, checking every field."""
    _SYSTEM_FILE.check_top(raw, _TOP, path)
    if raw.get("kind", "system") != "system":
        raise _fail(path, f"kind must be \"system\", got {raw['kind']!r}")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise _fail(path, "aliases must be a list of strings")
    notes_raw = raw.get("notes", [])
    if not isinstance(notes_raw, list) or not all(isinstance(n, str) for n in notes_raw):
        raise _fail(path, "notes must be a list of strings")
    if "note" in raw and not isinstance(raw["note"], str):
        raise _fail(path, "note must be a string")
    devices_per_node = _positive_int(raw, "devices_per_node", path)
    max_nodes = _positive_int(raw, "max_nodes", path, default=1)

    links = raw.get("link")
    if not isinstance(links, Mapping) or "node" not in links:
        raise _fail(path, "missing [link.node] (bandwidth per device per direction, latency, topology)")
    bad = set(links) - set(_LINKS)
    if bad:
        raise _fail(path, f"unknown link section(s) {', '.join(f'[link.{b}]' for b in sorted(bad))}; "
                          "links are [link.node] and [link.network]")
    node = _link(links["node"], "node", path, require_sources)
    network = _link(links["network"], "network", path, require_sources) if "network" in links else None
    if max_nodes > 1 and network is None:
        raise _fail(path, f"max_nodes = {max_nodes} needs a [link.network] between the nodes")

    source = raw.get("source", "")
    if not isinstance(source, str):
        raise _fail(path, "source must be a string")
    if require_sources and not source.strip():
        raise _fail(path, "no top-level source (where devices_per_node and max_nodes come from)")
    sources = {"system": source} if source.strip() else {}
    sources["link.node"] = node.source
    if network is not None:
        sources["link.network"] = network.source
    notes = ([raw["note"]] if "note" in raw else []) + list(notes_raw)
    notes += [f"link.node: {node.note}"] if node.note else []
    notes += [f"link.network: {network.note}"] if network is not None and network.note else []
    return System(
        id=raw["id"].strip().lower(),
        name=raw["name"],
        device=_device(raw.get("device"), path),
        devices_per_node=devices_per_node,
        max_nodes=max_nodes,
        node_link=node,
        network_link=network,
        aliases=tuple(a.lower() for a in aliases),
        sources={k: v for k, v in sources.items() if v},
        notes=tuple(notes),
        path=str(path),
    )


def _read_toml(path: Path) -> dict[str, Any]:
    return read_toml(path, "system", SystemFileError)


def load_system_file(path: str | Path, require_sources: bool = False) -> System:
    p = Path(path)
    return parse_system(_read_toml(p), p, require_sources=require_sources)


@functools.cache
def _system_names() -> dict[str, str]:
    """Every system id and alias → its id, from the index (roofline.hardware.index), reading no TOML."""
    return name_index(((sid, e["aliases"]) for sid, e in read_index()["systems"].items()), "system")


@functools.cache
def catalog_system(system_id: str) -> System:
    """One catalog system by its id (data/systems/<id>.toml)."""
    return catalog_entry(SYSTEMS, system_id, load_system_file, "system")


def system_catalog() -> dict[str, System]:
    """Every catalog system, by id (each file read once, then kept)."""
    return {f.stem: catalog_system(f.stem) for f in sorted(SYSTEMS.glob("*.toml"))}


def build_index() -> dict[str, Any]:
    """The index (roofline.hardware.index) as the TOML files give it: every file read and checked."""
    machines = load_folder(DATA, load_machine_file)
    systems = load_folder(SYSTEMS, load_system_file)
    return {"generated": "python scripts/write_hardware_index.py (from hardware/data/*.toml and systems/*.toml)",
            "machines": {m.id: list(m.aliases) for m in machines.values()},
            "systems": {s.id: {"aliases": list(s.aliases), "device": s.device.id} for s in systems.values()}}


# --- a bare device as a system --------------------------------------------------------------------

def _reference_system(device: Machine) -> System | None:
    """The catalog system built from `device` (the first by id), whose topology and α a bare device borrows."""
    for sid, entry in sorted(read_index()["systems"].items()):
        if entry["device"] == device.id:
            return catalog_system(sid)
    return None


class NoLinkError(RooflineError):
    """A device with no [interconnect] figure made a node of several: one device needs no link, a
    split over several does (`device` says which)."""

    def __init__(self, text: str, device: Machine) -> None:
        self.device = device
        super().__init__(text)


def device_system(device: Machine, devices: int = DEFAULT_DEVICES) -> System:
    """One node of `devices` copies of `device`, its node link the device's [interconnect] figure halved
    (machine files store vendors' bidirectional totals)."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise RooflineError(f"devices must be a positive integer, got {devices!r}")
    ref = _reference_system(device)
    if not device.interconnect_bytes_per_s:
        hint = f", or use the system {ref.id}" if ref is not None else ""
        raise NoLinkError(
            f"{device.id} has no device-to-device link figure, so it cannot be made a node of {devices}: add an "
            f"[interconnect] section with bandwidth = the vendor's bidirectional total (e.g. \"900 GB/s\") to "
            f"a machine file and pass that file{hint}", device)
    per_direction = device.interconnect_bytes_per_s / 2
    name = device.interconnect_name or "device link"
    derivation = (f"{format_bytes_per_s(device.interconnect_bytes_per_s, 4)} "
                  f"(the device's [interconnect], a bidirectional total) / 2")
    ic_source = device.sources.get("interconnect", device.path or device.id)
    if ref is not None:
        topology, latency = ref.node_link.topology, ref.node_link.latency_s
        alpha = (f"latency {ref.node_link.latency_s * 1e6:g} us and topology {ref.node_link.topology} as in the "
                 f"catalog system {ref.id} (see the source of its [link.node])")
        if topology is Topology.FULLY_CONNECTED and ref.devices_per_node > 1:
            peers = ref.devices_per_node - 1
            per_direction = per_direction / peers * max(min(devices, ref.devices_per_node) - 1, 1)
            derivation += (f", a sum over {peers} peer links, times {max(min(devices, ref.devices_per_node) - 1, 1)}"
                           f" peers in a node of {devices}")
    else:
        topology, latency = Topology.SWITCH, DEFAULT_LINK_LATENCY_S
        alpha = f"latency: the default {DEFAULT_LINK_LATENCY_S * 1e6:g} us, {DEFAULT_LINK_LATENCY_SOURCE}"
    link = Link(
        name=name,
        bytes_per_s=per_direction,
        latency_s=latency,
        topology=topology,
        source=f"{ic_source}; {alpha}",
        note=(f"{format_bytes_per_s(per_direction, 4)} per direction = {derivation}."
              + ("" if ref is not None else " Topology unknown from a machine file: taken as a switch "
                 "(every pair of devices at the full figure); the latency is a typical value.")),
    )
    return System(
        id=device.id,
        name=f"{devices} x {device.name} (one node)",
        device=device,
        devices_per_node=devices,
        max_nodes=1,
        node_link=link,
        sources={"link.node": link.source},
        notes=(f"one node of {devices} {device.id}, made from the device: no network between nodes",
               f"link.node: {link.note}"),
        path=device.path,
        from_device=True,
    )


def _fit(s: System, devices: int | None) -> System:
    if devices is not None:
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise RooflineError(f"devices must be a positive integer, got {devices!r}")
        if devices > s.max_devices:
            raise RooflineError(f"{devices} devices is more than {s.id} has ({s._size_text()})")
    return s


def _is_system_document(raw: Mapping[str, Any]) -> bool:
    return raw.get("kind") == "system" or "devices_per_node" in raw or "link" in raw


def is_system_file(path: str | os.PathLike[str]) -> bool:
    """A readable TOML file that describes a system (devices per node, links). Anything else, even an
    unreadable file, a FIFO or a device, is False (never read past 1 MiB, never waited on): the
    machine loader then says what is wrong with it."""
    try:
        return _is_system_document(_read_toml(Path(path)))
    except RooflineError:
        return False


def get_system(name: str | os.PathLike[str] | System | Machine, devices: int | None = None) -> System:
    """A catalog system by id or alias ("dgx-h100"), a system file by path, or a bare device (a catalog
    machine or a machine file) made one node of `devices` devices (default 8). With a system,
    `devices` is only checked against the devices the system has."""
    if isinstance(name, System):
        return _fit(name, devices)
    if isinstance(name, Machine):
        return device_system(name, DEFAULT_DEVICES if devices is None else devices)
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str):
        raise RooflineError(f"a system is a name or a file path, got {name!r}")
    text = name.strip()
    if names_a_path(text):
        p = Path(text)
        raw = _read_toml(p)
        if _is_system_document(raw):
            return _fit(parse_system(raw, p), devices)
        try:
            machine = load_machine_file(p)
        except MachineFileError as exc:
            raise SystemFileError(f"{exc} (a system file needs devices_per_node and [link.node])") from None
        return device_system(machine, DEFAULT_DEVICES if devices is None else devices)
    key = name_key(text)
    systems = _system_names()
    if key in systems:
        return _fit(catalog_system(systems[key]), devices)
    machines = _names()
    if key in machines:
        return device_system(catalog_machine(machines[key]), DEFAULT_DEVICES if devices is None else devices)
    raise unknown("system", text, {**systems, **machines},
                  "see `roofline machines --systems`, or pass a system or machine file path")


LOOKUP_HINT = "see `roofline machines` and `roofline machines --systems`, or pass a machine or system file path"


def bare_device(name: str) -> Machine | None:
    """The catalog machine `name` is where `get_system` would make it a node of bare devices (a machine's id
    or alias that names no system), read without building that node (nor reading its reference system);
    None for a system's name, a path or an unknown name."""
    text = name.strip()
    if names_a_path(text) or (key := name_key(text)) in _system_names():
        return None
    machines = _names()
    return catalog_machine(machines[key]) if key in machines else None


def lookup(name: str, devices_first: bool = False) -> Machine | System:
    """A catalog system or device by id or alias (a name in both catalogs is the system's, as for
    --machine; with `devices_first`, the device's), or a system or machine file by path (a system
    file if it has devices_per_node or [link.*], else a machine file). An unknown name is one error
    with the close matches from both catalogs."""
    text = name.strip()
    if names_a_path(text):
        return load_system_file(text) if is_system_file(Path(text)) else get_machine(text)
    systems, machines = _system_names(), _names()
    key = name_key(text)
    if devices_first and key in machines:
        return catalog_machine(machines[key])
    if key in systems:
        return catalog_system(systems[key])
    if key in machines:
        return catalog_machine(machines[key])
    raise unknown("machine or system", text, {**systems, **machines}, LOOKUP_HINT)


__all__ = ["DEFAULT_DEVICES", "DEFAULT_LINK_LATENCY_S", "LOOKUP_HINT", "NoLinkError", "SystemFileError",
           "bare_device", "device_system", "get_system", "is_system_file",
           "load_system_file", "lookup", "parse_system", "system_catalog"]

