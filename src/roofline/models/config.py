"""Transformer configs: a Hugging Face `config.json` (or a preset, which is one) in, a ModelConfig out.

The rooms behind this name, one concern each:
  roofline.models.config_input    a file, a model folder or a preset; JSON; `--set` overrides
  roofline.models.architectures   one small parser per architecture (`model_type`) onto layer kinds
  roofline.models.quantization    quantization_config: what the checkpoint stores its weights in
  roofline.models.fields          reading a value, naming the file and the field in every error
ModelConfig itself (the shape, the KV cache, the parameter counts) is in roofline.models.transformer.
"""

from __future__ import annotations

from roofline.models.architectures import SUPPORTED, config_from_dict
from roofline.models.config_input import PRESETS_DIR, apply_overrides, load_config, preset_dict, preset_names
from roofline.models.fields import MAX_SIZE
from roofline.models.quantization import checkpoint_weights
from roofline.models.transformer import ModelConfig

__all__ = ["MAX_SIZE", "PRESETS_DIR", "SUPPORTED", "ModelConfig", "apply_overrides", "checkpoint_weights",
           "config_from_dict", "load_config", "preset_dict", "preset_names"]
