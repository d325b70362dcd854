"""The catalogs' names without reading the catalogs: every machine's and system's id, aliases and (for a
system) device, in data/index.json, so that one lookup ("h100", "dgx-h100") reads one TOML file, not all
25. The index is generated from the files (`python scripts/write_hardware_index.py` writes it, with
`system_file.build_index`) and tests/test_catalog.py holds it equal to what the files say.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

INDEX = Path(__file__).parent / "data" / "index.json"


@functools.cache
def read_index() -> dict[str, Any]:
    """The shipped index (data/index.json): {"machines": {id: aliases}, "systems": {id: {aliases, device}}}."""
    data: dict[str, Any] = json.loads(INDEX.read_text(encoding="utf-8"))
    return data


__all__ = ["INDEX", "read_index"]
