"""The architecture table (roofline.models.architectures._FAMILY_OF) against the family modules: every
model_type a family's PARSERS reads is in the table under that family, once, and nothing else is, so
that importing a family only when its config is read (start-up: 24 modules not loaded for one model)
finds the parser the eager registry found."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import roofline.models.architectures as arch


def test_the_table_names_each_familys_model_types_and_nothing_else() -> None:
    claimed: dict[str, str] = {}
    for m in pkgutil.iter_modules(arch.__path__):
        if m.name == "common":
            continue
        family = importlib.import_module(f"{arch.__name__}.{m.name}")
        for model_type in family.PARSERS:
            assert model_type not in claimed, f"{model_type!r} is parsed by {claimed[model_type]} and {m.name}"
            claimed[model_type] = m.name
    assert dict(arch._FAMILY_OF) == claimed
    for model_type, name in claimed.items():
        assert arch.PARSERS[model_type] is importlib.import_module(f"{arch.__name__}.{name}").PARSERS[model_type]
    assert arch.SUPPORTED == tuple(arch._FAMILY_OF) and len(arch.PARSERS) == len(claimed)


def test_reading_one_config_imports_its_family_only() -> None:
    code = ("import sys\nfrom roofline.models import load_config\nload_config('llama-3-8b')\n"
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('roofline.models.architectures.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["['common',", "'llama']"]
