"""Write src/roofline/hardware/data/index.json from the catalog's TOML files (after adding or renaming a
machine or system file; tests/test_catalog.py fails until the index agrees with the files).

Usage: python scripts/write_hardware_index.py
"""

from __future__ import annotations

import json

from roofline.hardware.catalog import DATA, _names, load_folder, load_machine_file
from roofline.hardware.index import INDEX, read_index
from roofline.hardware.system_file import build_index

# the machines first: a system file names its device, which is looked up in the index
machines = {m.id: list(m.aliases) for m in load_folder(DATA, load_machine_file).values()}
INDEX.write_text(json.dumps({"machines": machines, "systems": {}}), encoding="utf-8")
read_index.cache_clear()
_names.cache_clear()
INDEX.write_text(json.dumps(build_index(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
print(f"wrote {INDEX}")
