"""One small parser per architecture: a Hugging Face config dict onto a ModelConfig's layer kinds.

Each family module gives `PARSERS`, its `model_type`s and their parser; a new architecture is one
new module, its `model_type`s named in `_FAMILY_OF` (the module is imported when such a config is read).
One parser a spelling: tests/test_models_architectures.py refuses a `model_type` two families claim, or
one the table and its family disagree on. `config_from_dict` picks the parser, reads the checkpoint's
quantization_config (roofline.models.quantization) and unwraps multimodal configs that nest the text model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from importlib import import_module
from types import MappingProxyType
from typing import Any

from roofline.errors import RooflineError, shown
from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.quantization import checkpoint_weights, excluded_modules, unquantized_parts
from roofline.models.transformer import ModelConfig

# model_type -> the family module (under roofline.models.architectures) whose PARSERS reads it, in the order
# `supported:` lists them. A family is imported when a config of one of its model_types is read, not at start-up
# (24 modules); tests/test_models_architectures.py checks this table against every family's PARSERS.
_FAMILY_OF: Mapping[str, str] = MappingProxyType({
    "llama": "llama", "llama4": "llama4", "llama4_text": "llama4", "mistral": "mistral", "mixtral": "mistral",
    "qwen2": "qwen", "qwen3": "qwen", "qwen3_moe": "qwen",
    "qwen3_next": "qwen3_next", "qwen3_5": "qwen3_next", "qwen3_5_moe": "qwen3_next",
    "deepseek_v3": "deepseek", "deepseek_v2": "deepseek", "kimi_k2": "deepseek", "deepseek_v32": "deepseek",
    "glm_moe_dsa": "glm", "kimi_k25": "kimi", "gemma2": "gemma", "gemma3_text": "gemma", "gemma3": "gemma",
    "gpt2": "gpt2", "gpt_oss": "gpt_oss", "nemotron_h": "nemotron_h",
    # issue 22, second part
    "qwen3_vl": "qwen3_vl", "qwen3_vl_moe": "qwen3_vl", "minimax_m2": "minimax", "phi3": "phi3", "olmo2": "olmo2",
    "gemma4": "gemma4", "gemma4_text": "gemma4",
    # issue 22, third part
    "kimi_linear": "kimi_linear", "kimi_k3": "kimi_linear", "nemotron-nas": "nemotron_nas",
    "minimax_m3": "minimax_m3", "minimax_m3_vl": "minimax_m3", "mimo": "mimo", "mimo_v2_flash": "mimo_v2_flash",
    "step3p7": "step3p7", "deepseek_v4": "deepseek_v4", "deepseek_ref": "deepseek_v4",
    # issue 22, fourth part
    "glm4_moe": "glm", "qwen3_5_text": "qwen3_next", "qwen3_5_moe_text": "qwen3_next",
})


class _Parsers(Mapping[str, Parser]):
    """model_type -> its parser, the family's module imported on first use."""

    def __getitem__(self, model_type: str) -> Parser:
        parser: Parser = import_module(f"roofline.models.architectures.{_FAMILY_OF[model_type]}").PARSERS[model_type]
        return parser

    def __iter__(self) -> Iterator[str]:
        return iter(_FAMILY_OF)

    def __len__(self) -> int:
        return len(_FAMILY_OF)


PARSERS: Mapping[str, Parser] = _Parsers()
SUPPORTED = tuple(_FAMILY_OF)


def config_from_dict(raw: Mapping[str, Any], name: str = "model", where: str = "") -> ModelConfig:
    """Parse a Hugging Face config dict. Gemma 3's multimodal config nests the text model in text_config.
    A quantization_config sets `weights_dtype` (`checkpoint_weights`)."""
    where = where or name
    if not isinstance(raw, Mapping):
        raise RooflineError(f"config {where}: expected a JSON object at the top level")
    kind = raw.get("model_type")
    if isinstance(kind, str) and _FAMILY_OF.get(kind) == "deepseek_v4":  # two quantized dtypes: it reads its
        return PARSERS[kind](Fields(raw, where), name, kind)                # quantization_config itself
    q = raw.get("quantization_config")
    if isinstance(q, Mapping) and q.get("quant_algo") == "MIXED_PRECISION":  # a quant_algo per module
        from roofline.models.mixed import mixed_precision

        plain = config_from_dict({k: v for k, v in raw.items() if k != "quantization_config"}, name, where)
        weights_dtype, kept, mixed = mixed_precision(plain, q, where)
        said = "; ".join(f"{part} {d.name} ({f:.1%})" for part, d, f in mixed)
        note = (f"{where}: MIXED_PRECISION read module by module: {weights_dtype.name} for most quantized weights"
                + (f", {said}" if said else "") + "; the modules it does not list stay bf16")
        return replace(plain, weights_dtype=weights_dtype, unquantized=kept, mixed_weights=mixed,
                       load_warnings=(*plain.load_warnings, note))
    weights, notes = checkpoint_weights(raw, where)
    outer = raw
    inner_q = raw.get("text_config", {}).get("quantization_config") if isinstance(raw.get("text_config"), Mapping) \
        else None
    if weights is None and not notes and inner_q is not None:  # Kimi K2.5 INT4: the language model's own
        weights, notes = checkpoint_weights(raw["text_config"], where)
        # it covers the language model only: the vision tower stays in 16 bits
        outer = {"quantization_config": {**inner_q, "ignore": [*_listed(inner_q), "vision_tower*"]}}
    model_type = raw.get("model_type")
    if model_type == "gemma3" and isinstance(raw.get("text_config"), Mapping):
        if raw.get("vision_config") is not None:  # its SigLIP tower is not read: said, not silently dropped
            notes = (*notes, f"{where}: the vision tower (vision_config) is not counted: the language model's "
                             f"weights only")
        raw = {**raw["text_config"], "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    if model_type is None:
        raise RooflineError(f"config {where}: missing field 'model_type'; supported: {', '.join(SUPPORTED)}")
    if not isinstance(model_type, str):
        raise RooflineError(f"config {where}: field 'model_type' must be a string, got {shown(model_type)}; "
                            f"supported: {', '.join(SUPPORTED)}")
    if model_type not in _FAMILY_OF:
        raise RooflineError(f"config {where}: architecture {shown(model_type)} is not supported; "
                            f"supported: {', '.join(SUPPORTED)}")
    config = PARSERS[model_type](Fields(raw, where), name, model_type)
    notes = (*config.load_warnings, *notes)
    if weights is None and not notes:
        return config
    if weights is None:
        return replace(config, load_warnings=notes)
    kept, unread = unquantized_parts(config, excluded_modules(outer, where), where,
                                     experts_only=weights.name == "mxfp4" and config.is_moe)
    return replace(config, weights_dtype=weights, unquantized=kept, load_warnings=(*notes, *unread))


def _listed(q: Any) -> list[Any]:
    names = q.get("ignore", []) if isinstance(q, Mapping) else []
    return list(names) if isinstance(names, list) else [names]


__all__ = ["PARSERS", "SUPPORTED", "config_from_dict"]
