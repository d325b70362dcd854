"""Machines: their ceilings, the datasheet catalog, and machine files; systems: devices and the links between them.

Each name loads its module on first use (PEP 562): a kernel query on one machine reads the catalog and
never pays for the system modules (their dataclasses and enums cost the start-up ~10 ms).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roofline.hardware.catalog import (
        DEFAULT_MACHINE,
        catalog,
        get_machine,
        load_machine_file,
        machine_to_toml,
        parse_machine,
    )
    from roofline.hardware.machine import Machine, MemoryLevel
    from roofline.hardware.system import Link, System, Topology
    from roofline.hardware.system_file import get_system, load_system_file, lookup, system_catalog

_NAMES = {
    "DEFAULT_MACHINE": "catalog", "catalog": "catalog", "get_machine": "catalog", "load_machine_file": "catalog",
    "machine_to_toml": "catalog", "parse_machine": "catalog", "Machine": "machine", "MemoryLevel": "machine",
    "Link": "system", "System": "system", "Topology": "system", "get_system": "system_file",
    "load_system_file": "system_file", "lookup": "system_file", "system_catalog": "system_file",
}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        value = getattr(import_module(f"roofline.hardware.{_NAMES[name]}"), name)
        globals()[name] = value  # once: later lookups find it without this hook
        return value
    raise AttributeError(f"module 'roofline.hardware' has no attribute {name!r}")


__all__ = ["DEFAULT_MACHINE", "Link", "Machine", "MemoryLevel", "System", "Topology", "catalog", "get_machine",
           "get_system", "load_machine_file", "load_system_file", "lookup", "machine_to_toml", "parse_machine",
           "system_catalog"]
