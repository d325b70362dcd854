"""MoE rows (aiconfigurator's moe_perf) joined to our MoE experts: the grouped expert GEMMs.

What the collectors time (ai-dynamo/aiconfigurator, collector/trtllm/collect_moe.py; the SGLang and
vLLM collectors alike): one fused MoE layer's forward on one device, router logits given: the
routing, the expert GEMMs and the weighted combine. Per row: num_tokens T on the device,
hidden_size h, inter_size (the whole expert's; moe_tp_size devices split it, f = inter_size / tp),
topk k, num_experts E (moe_ep_size devices hold E / ep each), moe_dtype, and the routing
`distribution` (balanced, or power-law skewed).

Our kernels, as roofline.models.build's MoE counts them under the fused plan (routing, gate and up
projection and activation one kernel, the down projection, the combine):

    rows R        = T·k / ep                    the routed (token, expert) pairs on this device under
                                                balanced routing (a skewed router puts at least as
                                                many on its busiest device: the floor stays a bound)
    experts hit   = ⌈max(k, min(E, T·k, round(E·(1 − (1 − k/E)^T)))) / ep⌉
                                                roofline.models.formulas.experts_hit, shared with the
                                                model: the distinct experts T tokens × k uniform picks hit
                                                (the model's stated assumption)
    relaxed       the same with ⌈k / ep⌉ experts, the fewest any router can hit on the device (an
                  expert takes at most the T tokens): the power-law rows draw a skewed router at random
                  (collector/helper.py power_law_logits_v3, the busiest device's experts put on the one
                  timed), and the newer collectors route through the model's own router, so how many
                  experts a row hit is not in the table. A point under the floor and above the relaxed
                  floor is explained by that (roofline.calibration.validate.RELAXED)
    gate_up+act   2·R·h·m·f matrix FLOPs (m = 2 gated SwiGLU, 1 for the non-gated ReLU² experts:
                  TRT-LLM's moe_torch_flow_nongated, and the Nemotron 3 shapes, `relu2_shapes`), act
                  FLOPs on R·f; reads T·h activations
                  and hit·h·m·f weights, writes R·f
    down          2·R·f·h; reads R·f and hit·f·h weights, writes R·h
    combine       2·k·T·h vector FLOPs; reads R·h, writes T·h

floor = the sum of the three kernels' floors (each the larger of its FLOPs over the dtype's matrix
or vector peak and its bytes over DRAM bandwidth). Weights in the table's dtype (bf16, fp8, fp8
block-scaled as fp8, NVFP4, MXFP4 of w4a16 and w4a8, int4 of int4_wo, scales of int4_wo left out),
activations in bf16 except fp8 (fp8, fp8_block) and MXFP8 (w4a8) inputs; the matrix roof is that of
the activations' dtype (w4a16 and int4_wo run on the bf16 units). Kind: moe.<moe_dtype>.

Layering: imports roofline.dtypes, roofline.kernels, roofline.models.formulas and this room's
floors, join and tables; numpy lazily.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from roofline.calibration.floors import Floors, Roofs
from roofline.calibration.join import JoinedTable, assemble, count_left, machine_roofs, whole
from roofline.calibration.tables import Table
from roofline.dtypes import get_dtype
from roofline.kernels import FLOP_PER_ELEMENT
from roofline.models.formulas import experts_hit

# moe_dtype -> (weight dtype, activation dtype): what the collectors quantize (collect_moe.py's moe_type)
MOE_DTYPES: Mapping[str, tuple[str, str]] = {
    "bfloat16": ("bf16", "bf16"), "fp8": ("fp8_e4m3", "fp8_e4m3"), "fp8_block": ("fp8_e4m3", "fp8_e4m3"),
    "nvfp4": ("nvfp4", "nvfp4"), "w4a16_mxfp4": ("mxfp4", "bf16"), "w4a8_mxfp4_mxfp8": ("mxfp4", "mxfp8"),
    "int4_wo": ("int4", "bf16"),
}
NONGATED = "nongated"  # TRT-LLM's moe_torch_flow_nongated: ReLU² experts, up alone (Nemotron-H)


@cache
def relu2_shapes() -> frozenset[tuple[int, int, int, int]]:
    """(hidden, inter, experts, topk) of the ReLU² (non-gated) expert models among the configs the package
    ships (aiconfigurator_core/model_configs: Nemotron 3 Nano, Super, Ultra, each on its hub page), hidden
    being the latent width of a LatentMoE (moe_latent_size): the collectors time these models' experts
    non-gated (NON_GATED_MOE_MODELS = ["Nemotron-3"], collector/trtllm/collect_moe.py), and the SGLang and
    vLLM tables do not say so in kernel_source."""
    import json

    from roofline.calibration.tables import installed

    out: set[tuple[int, int, int, int]] = set()
    folder = installed().root.parent.parent / "model_configs"
    for path in sorted(folder.glob("*_config.json")) if folder.is_dir() else ():
        try:
            c = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(c, dict) or c.get("mlp_hidden_act") != "relu2":
            continue
        try:
            shape = [int(c[k]) for k in ("moe_intermediate_size", "n_routed_experts", "num_experts_per_tok")]
        except (KeyError, TypeError, ValueError):
            continue
        for width in (c.get("moe_latent_size"), c.get("hidden_size")):
            if isinstance(width, int):
                out.add((width, *shape))  # type: ignore[arg-type]
    return frozenset(out)


def _name(t: Table, i: int) -> str:
    c = t.columns
    what = " ".join(f"{k}{int(c[col][i])}" for k, col in (("T", "num_tokens"), ("h", "hidden_size"),
                                                          ("f", "inter_size"), ("k", "topk"), ("E", "num_experts"),
                                                          ("tp", "moe_tp_size"), ("ep", "moe_ep_size")))
    return f"moe {c['moe_dtype'][i]} {what} {c['distribution'][i]}"


def moe_floors(r: Roofs, weight_dt: str, act_dt: str, tokens: Any, hidden: Any, inter: Any,
               topk: Any, experts: Any, tp: Any, ep: Any, gated: Any) -> Floors:
    """Floors of one MoE layer on one device (module docstring), every row at once."""
    import numpy as np

    t, h, k, e, ep = (np.asarray(x, dtype=float) for x in (tokens, hidden, topk, experts, ep))
    f = np.asarray(inter, dtype=float) / np.asarray(tp, dtype=float)
    m = np.where(gated, 2.0, 1.0)
    act_flop = np.where(gated, FLOP_PER_ELEMENT["swiglu"], FLOP_PER_ELEMENT["relu2"])
    wb, ab = get_dtype(weight_dt).bytes_per_element, get_dtype(act_dt).bytes_per_element
    rows = t * k / ep
    hit = np.array([experts_hit(int(ei), int(ki), int(ti)) for ei, ki, ti in zip(e, k, t, strict=True)], dtype=float)
    fewest = np.ceil(k / ep)  # the fewest experts any router hits on the device, each taking all T tokens
    floor, compute, moved = _layer(r, wb, ab, np.ceil(hit / ep), rows, t, h, f, m, k, act_flop)
    relaxed = _layer(r, wb, ab, fewest, rows, t, h, f, m, k, act_flop)[0]
    dram = r.dram_bytes_per_s
    zero = np.zeros_like(floor)
    return Floors(floor, compute, moved, moved / dram, moved / dram >= compute, zero.astype(np.int64),
                  zero.astype(np.int64), zero, zero, relaxed)


def _layer(r: Roofs, wb: float, ab: float, hit_here: Any, rows: Any, t: Any, h: Any, f: Any, m: Any, k: Any,
           act_flop: Any) -> tuple[Any, Any, Any]:
    """(floor, compute time, DRAM bytes) of the three kernels together, with `hit_here` experts' weights."""
    import numpy as np

    ob = get_dtype("bf16").bytes_per_element
    dram = r.dram_bytes_per_s

    def kernel(matrix: Any, vector: Any, moved: Any) -> tuple[Any, Any, Any]:
        compute = np.maximum(matrix / r.matrix_flop_per_s, vector / r.vector_flop_per_s)
        return np.maximum(compute, moved / dram), compute, moved

    k1 = kernel(2 * rows * h * m * f, act_flop * rows * f, t * h * ab + hit_here * h * m * f * wb + rows * f * ob)
    k2 = kernel(2 * rows * f * h, 0.0 * rows, rows * f * ob + hit_here * f * h * wb + rows * h * ob)
    k3 = kernel(0.0 * rows, 2 * k * t * h, rows * h * ob + t * h * ob)
    return k1[0] + k2[0] + k3[0], k1[1] + k2[1] + k3[1], k1[2] + k2[2] + k3[2]


def join_moe(t: Table) -> JoinedTable:
    """Every row of a MoE table beside our floor of its experts (module docstring)."""
    import numpy as np

    left: dict[str, int] = {}
    ok = np.ones(len(t), dtype=bool)
    cols = [whole(t, c, ok, left) for c in ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                                              "moe_tp_size", "moe_ep_size")]
    tokens, hidden, inter, topk, experts, tp, ep = cols
    bad = ok & ((tokens < 1) | (hidden < 1) | (inter < 1) | (topk < 1) | (experts < topk) | (tp < 1) | (ep < 1)
                | (np.mod(inter, np.maximum(tp, 1)) != 0))
    if bad.any():
        count_left(left, "an empty or uneven shape", int(bad.sum()))
    ok &= ~bad
    raw = np.asarray(t.column("moe_dtype"), dtype=object)
    relu2 = relu2_shapes()
    gated = np.array([NONGATED not in str(s) and (int(hh), int(ff), int(ee), int(kk)) not in relu2
                      for s, hh, ff, ee, kk in zip(t.column("kernel_source", ""), hidden, inter, experts, topk,
                                                   strict=True)], dtype=bool)
    parts = []
    for name in sorted({str(x) for x in raw[ok]}):
        sel = ok & (raw == name)
        if name not in MOE_DTYPES:
            count_left(left, f"moe dtype {name!r} has no counterpart here", int(sel.sum()))
            continue
        wdt, adt = MOE_DTYPES[name]
        r = machine_roofs(t.machine, adt, left, int(sel.sum()))
        if r is None:
            continue
        i = np.flatnonzero(sel)
        fl = moe_floors(r, wdt, adt, tokens[i], hidden[i], inter[i], topk[i], experts[i], tp[i],
                        ep[i], gated[i])
        parts.append((i, f"moe.{name}", r, fl))
    return assemble(t, parts, left, _name)


__all__ = ["MOE_DTYPES", "join_moe", "moe_floors"]
