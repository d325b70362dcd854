"""Machines: their ceilings, the datasheet catalog, and machine files."""

from roofline.hardware.catalog import (
    DEFAULT_MACHINE,
    catalog,
    get_machine,
    load_machine_file,
    machine_to_toml,
    parse_machine,
)
from roofline.hardware.machine import Machine, MemoryLevel

__all__ = ["DEFAULT_MACHINE", "Machine", "MemoryLevel", "catalog", "get_machine",
           "load_machine_file", "machine_to_toml", "parse_machine"]
