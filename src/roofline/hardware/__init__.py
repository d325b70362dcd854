"""Machines: their ceilings, the datasheet catalog, and machine files; systems: devices and the links between them."""

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

__all__ = ["DEFAULT_MACHINE", "Link", "Machine", "MemoryLevel", "System", "Topology", "catalog", "get_machine",
           "get_system", "load_machine_file", "load_system_file", "lookup", "machine_to_toml", "parse_machine",
           "system_catalog"]
