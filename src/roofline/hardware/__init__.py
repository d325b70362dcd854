"""Machines: their ceilings, the datasheet catalog, and machine files; systems: devices and the links between them.

The system names load their modules on first use (PEP 562): a kernel query on one machine reads the
catalog and never pays for the system modules (their dataclasses and enums cost the start-up ~10 ms).
The catalog's names are imported here: `catalog` is also its submodule's name, which a lazy name
cannot shadow reliably (once `roofline.hardware.catalog` is imported, the package's attribute is the
module).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from roofline.hardware.catalog import (
    DEFAULT_MACHINE,
    catalog,
    get_machine,
    load_machine_file,
    machine_to_toml,
    parse_machine,
)
from roofline.hardware.machine import Machine, MemoryLevel

if TYPE_CHECKING:
    from roofline.hardware.system import Link, System, Topology
    from roofline.hardware.system_file import get_system, load_system_file, lookup, system_catalog

_NAMES = {"Link": "system", "System": "system", "Topology": "system", "get_system": "system_file",
          "load_system_file": "system_file", "lookup": "system_file", "system_catalog": "system_file"}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        value = getattr(import_module(f"roofline.hardware.{_NAMES[name]}"), name)
        globals()[name] = value  # once: later lookups find it without this hook
        return value
    raise AttributeError(f"module 'roofline.hardware' has no attribute {name!r}")


__all__ = ["DEFAULT_MACHINE", "Link", "Machine", "MemoryLevel", "System", "Topology", "catalog", "get_machine",
           "get_system", "load_machine_file", "load_system_file", "lookup", "machine_to_toml", "parse_machine",
           "system_catalog"]
