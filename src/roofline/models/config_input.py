"""Where a config comes from: a file, a model folder holding `config.json`, or a preset.

Nothing is downloaded. A preset is one JSON file under `presets/`, shaped like the model's own
`config.json`. A file is read only if it is a regular file of at most MAX_CONFIG_BYTES = 16 MiB
(roofline.fileio.read_text_file), UTF-8 or UTF-16/32 with a byte-order mark; malformed JSON, JSON
nested too deeply and numbers of too many digits are one line each. `--set key=value` overrides are
applied before parsing, and one that names a field no parser reads is refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, T, unknown
from roofline.fileio import parse_document, read_text_file
from roofline.models.architectures import config_from_dict
from roofline.models.transformer import ModelConfig

PRESETS_DIR = Path(__file__).parent / "presets"
# A config (and the hf_quant_config.json beside it) is at most 16 MiB. The cap stands against hostile
# input (a 20 GB file, or /dev/zero renamed, is refused before a byte is parsed); it must pass the
# largest real ones: NVIDIA's MiniMax-M3-NVFP4 config.json is 3,087,083 B and its hf_quant_config.json
# 3,081,956 B (a per-module table over 60 layers × 128 experts), so 1 MiB refused a real checkpoint.
# 16 MiB is 5× that; parsing it takes well under a second and a few hundred MB at most.
MAX_CONFIG_BYTES = 16 << 20


def _max_digits() -> str:
    return f"{sys.get_int_max_str_digits():,}"


def _loads(text: str, where: str) -> Any:
    """JSON text in, its value out; malformed, too deeply nested or too long a number is one line."""
    return parse_document(json.loads, text, json.JSONDecodeError, RooflineError,
                          lambda exc: f"{where}: not valid JSON ({getattr(exc, 'msg', exc)} at line "
                                      f"{getattr(exc, 'lineno', '?')})",
                          f"{where}: not a config: its JSON is nested too deeply",
                          f"{where}: a number in it has more than {_max_digits()} digits")


def _read_json(path: Path) -> dict[str, Any]:
    raw = _loads(read_text_file(path, "config", MAX_CONFIG_BYTES), f"config {path}")
    if not isinstance(raw, dict):
        raise RooflineError(f"config {path}: expected a JSON object at the top level")
    return raw


@cache
def _preset_raw(name: str) -> Mapping[str, Any]:
    return MappingProxyType(_read_json(PRESETS_DIR / f"{name}.json"))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_dict(name: str) -> dict[str, Any]:
    """A preset's HF-shaped config dict (a copy: overrides may change it)."""
    key = name.strip().lower()
    names = preset_names()
    if key not in names:
        raise unknown("model", name, names, "give a preset name or a path to a config.json")
    return dict(_preset_raw(key))


def _coerce(text: str, key: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except RecursionError:
        raise RooflineError(f"{T.overrides} {key}: the value is nested too deeply") from None
    except ValueError:  # Python's limit on the digits of an int
        raise RooflineError(f"{T.overrides} {key}: the number has more than {_max_digits()} digits") from None


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None) -> dict[str, Any]:
    """`--set num_key_value_heads=64` style what-ifs: values are JSON (numbers, true, null) or strings."""
    out = dict(raw)
    for key, value in (overrides or {}).items():
        out[key] = _coerce(value, key) if isinstance(value, str) else value
    return out


class _Reads(dict[str, Any]):
    """A config dict that remembers which fields the parser looked at, so that a `--set` of a field
    no parser reads (a typo, or another architecture's name for it) is an error, not a silent no-op."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        super().__init__(raw)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.seen.add(key)
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)


def _parse_with_overrides(raw: Mapping[str, Any], overrides: Mapping[str, str] | None, name: str,
                          where: str) -> ModelConfig:
    reads = _Reads(apply_overrides(raw, overrides))
    cfg = config_from_dict(reads, name, where)
    for key in overrides or {}:
        if key not in reads.seen:
            import difflib

            close = difflib.get_close_matches(key, sorted(reads.seen), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise RooflineError(f"{T.overrides} {key}: {where} has no field {key!r} that the model is built from{hint}")
    return cfg


def load_config(model: str | ModelConfig, overrides: Mapping[str, str] | None = None) -> ModelConfig:
    """A preset name, a config.json path, or a folder holding config.json. Nothing is downloaded."""
    if isinstance(model, ModelConfig):
        if overrides:
            raise RooflineError("overrides apply to a preset or a config file, not to a parsed ModelConfig")
        return model
    text = model.strip()
    path = Path(text).expanduser()
    if text.endswith(".json") or "/" in text or path.exists():
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise RooflineError(f"no config file at {path} (give a config.json, a folder holding one, "
                                f"or a preset: {', '.join(preset_names())})")
        raw = _with_quant_file(_read_json(path), path)
        name = path.parent.name if path.name == "config.json" else path.stem
        cfg = _parse_with_overrides(raw, overrides, name, str(path))
        return _with_source(cfg, str(path))
    return _parse_preset(text, overrides) if overrides else _preset_config(text)


def _parse_preset(text: str, overrides: Mapping[str, str] | None) -> ModelConfig:
    return _with_source(_parse_with_overrides(preset_dict(text), overrides, text.lower(), f"preset {text}"),
                        f"preset {text.lower()}")


@cache
def _preset_config(text: str) -> ModelConfig:
    """A preset without overrides, parsed once per spelling (the config is a frozen dataclass; a bad name raises
    and is not cached)."""
    return _parse_preset(text, None)


def quant_file(path: Path) -> Path:
    """Where NVIDIA ModelOpt puts a checkpoint's quantization beside its config: hf_quant_config.json
    beside config.json (X_hf_quant_config.json beside X_config.json, as collections of configs name them)."""
    if path.name.endswith("_config.json"):
        return path.with_name(path.name[: -len("config.json")] + "hf_quant_config.json")
    return path.with_name("hf_quant_config.json")


def _with_quant_file(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """A config without quantization_config takes the ModelOpt hf_quant_config.json beside it (its
    "quantization" object: quant_algo, group_size, exclude_modules)."""
    beside = quant_file(path)
    if "quantization_config" in raw or not beside.is_file():
        return raw
    q = _read_json(beside).get("quantization")
    if not isinstance(q, dict):
        raise RooflineError(f"{beside}: expected a 'quantization' object (NVIDIA ModelOpt's hf_quant_config.json)")
    return {**raw, "quantization_config": {"quant_method": "modelopt", **q}}


def _with_source(cfg: ModelConfig, source: str) -> ModelConfig:
    return replace(cfg, source=source)


__all__ = ["MAX_CONFIG_BYTES", "PRESETS_DIR", "apply_overrides", "load_config", "preset_dict", "preset_names"]
