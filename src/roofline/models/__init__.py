"""Transformers on the roofline: configs (HF config.json, presets), the graph of one forward step
(prefill or decode) under three fusion plans, and its analysis on a machine.

    from roofline.models import analyze_model
    a = analyze_model("llama-3-70b", "h100", "decode", batch=64, seq=8192)
    a.flop_per_byte, a.decode_limit.flop_per_byte, a.crossover.reason

Layering: core. No torch, no plotting, no measurement at import time (numpy only inside sweeps).
"""

from roofline.models.analysis import (
                                      ModelAnalysis,
                                      analyze_model,
                                      compare,
                                      decode_limit,
                                      memory_fit,
                                      sweep,
                                      sweep_arrays,
)
from roofline.models.build import (
                                      PLANS,
                                      ModelDtypes,
                                      ModelGraph,
                                      build_graph,
                                      expected_experts_hit,
                                      model_dtypes,
)
from roofline.models.config import ModelConfig, config_from_dict, load_config, preset_names

__all__ = ["PLANS", "ModelAnalysis", "ModelConfig", "ModelDtypes", "ModelGraph", "analyze_model",
           "build_graph", "compare", "config_from_dict", "decode_limit", "expected_experts_hit", "load_config",
           "memory_fit", "model_dtypes", "preset_names", "sweep", "sweep_arrays"]
