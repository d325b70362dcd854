"""One small parser per architecture: a Hugging Face config dict onto a ModelConfig's layer kinds.

Each family module gives `PARSERS`, its `model_type`s and their parser; a new architecture is one
new module added to `_FAMILIES`. A `model_type` named twice is refused at import: one parser a
spelling. `config_from_dict` picks the parser, reads the checkpoint's quantization_config
(roofline.models.quantization) and unwraps multimodal configs that nest the text model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType, ModuleType
from typing import Any

from roofline.errors import RooflineError, shown
from roofline.models.architectures import (
    deepseek,
    deepseek_v4,  # issue 22, third part
    gemma,
    gemma4,  # issue 22, second part
    glm,
    gpt2,
    gpt_oss,
    kimi,
    kimi_linear,  # issue 22, third part
    llama,
    llama4,
    mimo,  # issue 22, third part
    mimo_v2_flash,  # issue 22, third part
    minimax,  # issue 22, second part
    minimax_m3,  # issue 22, third part
    mistral,
    nemotron_h,
    nemotron_nas,  # issue 22, third part
    olmo2,  # issue 22, second part
    phi3,  # issue 22, second part
    qwen,
    qwen3_next,
    qwen3_vl,  # issue 22, second part
    step3p7,  # issue 22, third part
)
from roofline.models.architectures.common import Parser
from roofline.models.fields import Fields
from roofline.models.mixed import mixed_precision
from roofline.models.quantization import checkpoint_weights, excluded_modules, unquantized_parts
from roofline.models.transformer import ModelConfig

_FAMILIES: tuple[ModuleType, ...] = (llama, llama4, mistral, qwen, qwen3_next, deepseek, glm, kimi, gemma, gpt2,
                                     gpt_oss, nemotron_h)
_FAMILIES += (qwen3_vl, minimax, phi3, olmo2, gemma4)  # issue 22, second part
_FAMILIES += (kimi_linear, nemotron_nas, minimax_m3)  # issue 22, third part
_FAMILIES += (mimo, mimo_v2_flash, step3p7)  # issue 22, third part
_FAMILIES += (deepseek_v4,)  # issue 22, third part


def _registry() -> Mapping[str, Parser]:
    out: dict[str, Parser] = {}
    for family in _FAMILIES:
        for model_type, parser in family.PARSERS.items():
            if model_type in out:
                raise RuntimeError(f"model_type {model_type!r} has two parsers ({family.__name__})")
            out[model_type] = parser
    return MappingProxyType(out)


PARSERS = _registry()
SUPPORTED = tuple(PARSERS)


def config_from_dict(raw: Mapping[str, Any], name: str = "model", where: str = "") -> ModelConfig:
    """Parse a Hugging Face config dict. Gemma 3's multimodal config nests the text model in text_config.
    A quantization_config sets `weights_dtype` (`checkpoint_weights`)."""
    where = where or name
    if not isinstance(raw, Mapping):
        raise RooflineError(f"config {where}: expected a JSON object at the top level")
    kind = raw.get("model_type")
    if isinstance(kind, str) and kind in deepseek_v4.PARSERS:  # two quantized dtypes: it reads its quantization_config
        return deepseek_v4.PARSERS[raw["model_type"]](Fields(raw, where), name, raw["model_type"])
    q = raw.get("quantization_config")
    if isinstance(q, Mapping) and q.get("quant_algo") == "MIXED_PRECISION":  # a quant_algo per module
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
    if model_type not in PARSERS:
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
