"""Training on the roofline: a training step's kernels per device under a split (forward, backward,
recompute, optimizer, gradient collectives), its memory (ZeRO, Korthikanti's activations, 1F1B in
flight), its time (floor and expected band), MFU and HFU, and the search for the split that wins.

    from roofline.training import TrainSplit, analyze_training, describe_training
    setup = describe_training("llama-3-70b", seq=8192, global_batch=512, split=TrainSplit(tp=8, pp=4, dp=32))
    a = analyze_training(setup, "dgx-h100")
    a.floor.step_s, a.mfu(a.floor.step_s), a.memory.fits

Modules, by concern:
    setup     the step described and checked (TrainSplit, TrainSetup, Zero, Recompute, ...)
    flops     model FLOPs a token (PaLM's 6·N + 12·L·h·s)
    memory    weights, gradients, optimizer states, activations per device
    backward  the backward of a forward graph, op by op
    step      a step's kernels on one device: passes and scopes
    analysis  the step placed and assembled: step time, bubble, MFU, communication
    search    every valid split of a system, ranked (`roofline plan --train`)
"""

from roofline.training.analysis import TrainAnalysis, analyze_training
from roofline.training.flops import model_flop_per_token
from roofline.training.memory import korthikanti_layer_bytes, zero_bytes_per_param
from roofline.training.setup import (
    Optimizer,
    Precision,
    Recompute,
    TrainSetup,
    TrainSplit,
    Zero,
    describe_training,
    parse_tokens,
)

__all__ = ["Optimizer", "Precision", "Recompute", "TrainAnalysis", "TrainSetup", "TrainSplit", "Zero",
           "analyze_training", "describe_training", "korthikanti_layer_bytes", "model_flop_per_token",
           "parse_tokens", "zero_bytes_per_param"]
