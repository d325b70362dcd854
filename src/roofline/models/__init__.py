"""Transformers on the roofline: configs (HF config.json, presets), the graph of one forward step
(prefill or decode) under three fusion plans, and its analysis on a machine.

    from roofline.models import analyze_model
    a = analyze_model("llama-3-70b", "h100", "decode", batch=64, seq=8192)
    a.flop_per_byte, a.decode_limit.flop_per_byte, a.crossover.reason

Every name loads its module on first use (PEP 562): one analysis never pays for the split search or the
sweeps (their modules, dataclasses and enums), a train analysis for none of the inference ones it skips.
`search` and `sweep` are functions named as their modules; `_Package` keeps those two names the functions'
once the modules are imported (the import system sets a submodule as its package's attribute).

Modules, by concern:
    transformer  ModelConfig: the shape, attended tokens and KV cache, parameter counts
    config       HF config.json and presets in, a ModelConfig out
    formulas     the closed-form counts the builder and the step model share (ints or numpy arrays)
    dtypes       dtypes by tensor role, and the compute dtype on a machine
    build        the graph of one step and its fusion plans
    analysis     one step on one deployment: totals, memory fit, decode limit, crossover (analyze)
    stepmodel    the numpy step model over grids of (batch, length), and the crossover search
    sweep        sweeps over batch × length × dtype × machine × split, and model comparisons
    step         the step description (model, phase, batch, length, dtypes, fusion plan): describe_step
    search       the split search: every valid split of a step over a system's devices, ranked (search_splits)
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roofline.models.analysis import (
        Crossover,
        DecodeLimit,
        MemoryFit,
        ModelAnalysis,
        analyze,
        analyze_model,
        decode_limit,
        memory_fit,
    )
    from roofline.models.build import DEFAULT_PLAN, PLANS, ModelGraph, build_graph
    from roofline.models.config import SUPPORTED, config_from_dict, load_config, preset_dict, preset_names
    from roofline.models.dtypes import ModelDtypes, compute_dtype, model_dtypes
    from roofline.models.formulas import expected_experts_hit, experts_hit, windowed_pairs
    from roofline.models.search import OBJECTIVES, SplitRow, SplitSearch, search, search_splits
    from roofline.models.step import Step, describe_step
    from roofline.models.stepmodel import StepModel
    from roofline.models.sweep import (
        SPLIT_COLUMNS,
        SWEEP_COLUMNS,
        compare,
        deployments,
        dtype_steps,
        sweep,
        sweep_arrays,
    )
    from roofline.models.transformer import DEFAULT_LENGTH, AttentionKind, MlpKind, ModelConfig, ParamCounts

_NAMES = {
    "Crossover": "analysis",
    "DecodeLimit": "analysis",
    "MemoryFit": "analysis",
    "ModelAnalysis": "analysis",
    "analyze": "analysis",
    "analyze_model": "analysis",
    "decode_limit": "analysis",
    "memory_fit": "analysis",
    "DEFAULT_PLAN": "build",
    "PLANS": "build",
    "ModelGraph": "build",
    "build_graph": "build",
    "SUPPORTED": "config",
    "config_from_dict": "config",
    "load_config": "config",
    "preset_dict": "config",
    "preset_names": "config",
    "ModelDtypes": "dtypes",
    "compute_dtype": "dtypes",
    "model_dtypes": "dtypes",
    "expected_experts_hit": "formulas",
    "experts_hit": "formulas",
    "windowed_pairs": "formulas",
    "OBJECTIVES": "search",
    "SplitRow": "search",
    "SplitSearch": "search",
    "search": "search",
    "search_splits": "search",
    "Step": "step",
    "describe_step": "step",
    "StepModel": "stepmodel",
    "SPLIT_COLUMNS": "sweep",
    "SWEEP_COLUMNS": "sweep",
    "compare": "sweep",
    "deployments": "sweep",
    "dtype_steps": "sweep",
    "sweep": "sweep",
    "sweep_arrays": "sweep",
    "DEFAULT_LENGTH": "transformer",
    "AttentionKind": "transformer",
    "MlpKind": "transformer",
    "ModelConfig": "transformer",
    "ParamCounts": "transformer",
}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        value = getattr(import_module(f"roofline.models.{_NAMES[name]}"), name)
        globals()[name] = value  # once: later lookups find it without this hook
        return value
    raise AttributeError(f"module 'roofline.models' has no attribute {name!r}")


def _function(name: str) -> Any:
    return property(lambda self: getattr(import_module(f"roofline.models.{name}"), name),
                    lambda self, module: None)  # the import system's `setattr(package, name, module)`: ignored


class _Package(ModuleType):
    """roofline.models with `search` and `sweep` the functions, whatever has been imported (their modules
    stay in sys.modules, and `from roofline.models.search import ...` reads them there)."""

    search = _function("search")
    sweep = _function("sweep")


sys.modules[__name__].__class__ = _Package

__all__ = ["DEFAULT_LENGTH", "DEFAULT_PLAN", "OBJECTIVES", "PLANS", "SPLIT_COLUMNS", "SUPPORTED", "SWEEP_COLUMNS",
           "AttentionKind", "Crossover", "DecodeLimit", "MemoryFit", "MlpKind", "ModelAnalysis", "ModelConfig",
           "ModelDtypes", "ModelGraph", "ParamCounts", "SplitRow", "SplitSearch", "Step", "StepModel", "analyze",
           "analyze_model", "build_graph", "compare", "compute_dtype", "config_from_dict", "decode_limit",
           "deployments", "describe_step", "dtype_steps", "expected_experts_hit", "experts_hit", "load_config",
           "memory_fit", "model_dtypes", "preset_dict", "preset_names", "search", "search_splits", "sweep",
           "sweep_arrays", "windowed_pairs"]
