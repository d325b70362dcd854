"""Expert parallel as DeepSeek deploys it: what dispatch and combine send, and how many rows.

Per token, a router picks k of E experts. What crosses the links, by option:

    default              one row per expert pick: N·k rows, each h values in the activation dtype
    --dispatch-per-node  DeepEP (deepseek-ai/DeepEP): a token crosses the network once per destination
                         node, then NVLink once per destination GPU inside it; over m nodes of g GPUs,
                         k uniform picks reach, in expectation,
                             nodes   d_node = m · (1 − (1 − 1/m)^k)
                             GPUs    d_gpu  = m·g · (1 − (1 − 1/(m·g))^k)
                         m = min(M, the ep group's nodes) with node-limited routing (DeepSeek-V3,
                         arXiv 2412.19437 §2.1.2: each token to at most M = 4 nodes; config.json's
                         topk_group), else the group's nodes. DeepSeek-V3 on 4+ nodes: d_node =
                         4 · (1 − 0.75^8) = 3.5996 network rows a token instead of 8.
    --dispatch-dtype fp8 dispatch sends e4m3 values with one FP32 scale per 128 channels, h + 4·⌈h/128⌉
                         bytes a row (DeepEP's FP8 dispatch); combine returns rows in BF16, as DeepEP does.
    --redundant-experts R  E + R expert slots, (E + R)/ep whole experts a device (EPLB's replicas of the
                         busiest experts: DeepSeek-V3 serves prefill with 32, decode EP 144 over
                         256 + 32 = 288 slots, 2 a device); memory holds them; routing still picks k of E.
    --two-batch-overlap  the batch runs as two micro-batches: one's all-to-all (dispatch and combine)
                         under the other's compute (DeepSeek's deployment; SGLang --enable-two-batch-
                         overlap): the step takes max(compute, all-to-all) + the other collectives. The
                         output names what it hides and shows the step with and without it.

Layering: imports dtypes, errors, graph, vocab, parallel and the models room's config.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.graph import Op, Tensor
from roofline.kernels import elementwise_op, matmul_op
from roofline.models.transformer import ModelConfig
from roofline.parallel.collectives import Collective
from roofline.vocab import Level

SCALE_GROUP = 128  # DeepEP FP8 dispatch: one FP32 scale per 128 channels of a row
SCALE_BYTES = 4


def expected_distinct(places: int, picks: int) -> float:
    """Distinct places `picks` uniform draws over `places` reach, in expectation: m·(1 − (1 − 1/m)^k)."""
    if places < 1:
        raise RooflineError(f"a token's destinations need at least one place, got {places}")
    return places * (1.0 - (1.0 - 1.0 / places) ** picks)


def reachable_nodes(cfg: ModelConfig, nodes: int) -> int:
    """m: the nodes a token's experts may sit on, min(M, the group's nodes) under node-limited routing."""
    limit = cfg.routing_node_limit
    return min(limit, nodes) if limit else nodes


def destination_nodes(cfg: ModelConfig, nodes: int) -> float:
    """d_node: the nodes one token is sent to (once each), in expectation."""
    return expected_distinct(reachable_nodes(cfg, nodes), cfg.experts_per_token)


def destination_devices(cfg: ModelConfig, nodes: int, node_devices: int) -> float:
    """d_gpu: the GPUs one token is delivered to (once each), in expectation."""
    return expected_distinct(reachable_nodes(cfg, nodes) * node_devices, cfg.experts_per_token)


def routed_width(cfg: ModelConfig) -> int:
    """The width of a row the experts take: the hidden size, or LatentMoE's latent (moe_latent_size),
    which is what is dispatched and combined."""
    return cfg.moe_latent_size or cfg.hidden_size


def dispatch_row(cfg: ModelConfig, activations: DType) -> tuple[int, DType, str]:
    """(width, dtype, formula) of one dispatched row: h in the activations' dtype, or with
    --dispatch-dtype fp8 h e4m3 values and ⌈h/128⌉ FP32 scales stored as h + 4·⌈h/128⌉ one-byte elements
    (h: `routed_width`)."""
    h, dt = routed_width(cfg), cfg.dispatch_dtype
    if dt is None or dt.name == activations.name:
        return h, activations, f"h = {h} values in {activations.name}"
    if dt.bytes_per_element != 1:
        raise RooflineError(f"--dispatch-dtype {dt.name}: dispatch sends 1-byte values with per-128-channel scales "
                            "(DeepEP's FP8 dispatch); use fp8, or the activation dtype")
    scales = math.ceil(h / SCALE_GROUP)
    width = h + SCALE_BYTES * scales
    return width, get_dtype("fp8"), f"h + 4·⌈h/128⌉ = {h} + 4·{scales} = {width} B ({dt.name} values, FP32 scales)"


def dispatch_ops(b: Any, p: str, xm: Tensor, route: Tensor, nm: int, count: int) -> Tensor:
    """Dispatch under expert parallel (ep > 1) on builder `b`: the gather into the send buffer and the
    all-to-all(s), as the options say (module docstring). Returns the experts' input rows [N·k, h].
    A deduplicated buffer is [N, ⌈d·w⌉]: each token's d copies of its w-byte row side by side, so its
    bytes stay linear in the tokens (the step model fits them as such)."""
    cfg, comm = b.cfg, b.comm
    k, h, ep = cfg.experts_per_token, routed_width(cfg), comm.ep
    width, dt, row = dispatch_row(cfg, b.dt.activations)
    routed = Tensor(f"{p}experts.in", (nm * k, h), dt)
    if not cfg.dispatch_per_node:
        send = Tensor(f"{p}experts.send", (nm * k, width), dt)
        b.add(Op(f"{p}dispatch", "gather", (xm, route), (send,), {}, count,
                 formula=f"copy each token's row to its {k} experts: N·k = {nm}·{k} rows of {row}, no FLOPs"))
        b.collective(f"{p}dispatch.all_to_all", Collective.ALL_TO_ALL, send, routed, ep, comm.ep_level, count)
        return routed
    nodes, g = comm.ep_nodes, comm.ep_node_devices
    m = reachable_nodes(cfg, nodes)
    d_gpu = destination_devices(cfg, nodes, g)
    gpu_text = f"d_gpu = {m * g}·(1 − (1 − 1/{m * g})^{k}) = {d_gpu:.4f}"
    if nodes == 1:
        send = Tensor(f"{p}experts.send", (nm, math.ceil(d_gpu * width)), dt)
        b.add(Op(f"{p}dispatch", "gather", (xm, route), (send,), {}, count,
                 formula=f"each token's row once per destination GPU: N·d_gpu = {nm}·{d_gpu:.4f} rows of {row} "
                         f"({gpu_text}), no FLOPs"))
        b.collective(f"{p}dispatch.all_to_all", Collective.ALL_TO_ALL, send, routed, ep, comm.ep_level, count)
        return routed
    d_node = destination_nodes(cfg, nodes)
    limit = f" (node-limited routing: at most M = {cfg.routing_node_limit} nodes)" if cfg.routing_node_limit else ""
    send = Tensor(f"{p}experts.send", (nm, math.ceil(d_node * width)), dt)
    b.add(Op(f"{p}dispatch", "gather", (xm, route), (send,), {}, count,
             formula=f"each token's row once per destination node: N·d_node = {nm}·{d_node:.4f} rows of {row}; "
                     f"d_node = {m}·(1 − (1 − 1/{m})^{k}) over m = {m} of the group's {nodes} nodes{limit}; "
                     f"then once per destination GPU inside them ({gpu_text}); no FLOPs"))
    arrived = Tensor(f"{p}experts.arrived", send.shape, dt)
    b.collective(f"{p}dispatch.network", Collective.ALL_TO_ALL, send, arrived, nodes, Level.NETWORK, count)
    forward = Tensor(f"{p}experts.forward", (nm, math.ceil(d_gpu * width)), dt)
    b.collective(f"{p}dispatch.nvlink", Collective.ALL_TO_ALL, forward, routed, g, Level.LINK, count)
    return routed


def combine_ops(b: Any, p: str, eo: Tensor, count: int) -> Tensor:
    """Combine under expert parallel: the experts' output rows back to their tokens' devices, in the
    activation dtype (BF16, as DeepEP combines); once per destination GPU and node with the per-node
    layout (each GPU sums its experts' rows of a token first), as [N, ⌈d·h⌉] buffers."""
    cfg, comm = b.cfg, b.comm
    k, h, ep = cfg.experts_per_token, routed_width(cfg), comm.ep
    act = b.dt.activations
    rows = eo.shape[0]
    if not cfg.dispatch_per_node:
        back = Tensor(f"{p}experts.returned", (rows, h), act)
        b.collective(f"{p}combine.all_to_all", Collective.ALL_TO_ALL, eo, back, ep, comm.ep_level, count)
        return back
    nodes, g = comm.ep_nodes, comm.ep_node_devices
    nm = rows // k
    reduced = Tensor(f"{p}experts.reduced", (nm, math.ceil(destination_devices(cfg, nodes, g) * h)), act)
    if nodes == 1:
        back = Tensor(f"{p}experts.returned", reduced.shape, act)
        b.collective(f"{p}combine.all_to_all", Collective.ALL_TO_ALL, reduced, back, ep, comm.ep_level, count)
        return back
    gathered = Tensor(f"{p}experts.node_reduced", (nm, math.ceil(destination_nodes(cfg, nodes) * h)), act)
    b.collective(f"{p}combine.nvlink", Collective.ALL_TO_ALL, reduced, gathered, g, Level.LINK, count)
    back = Tensor(f"{p}experts.returned", gathered.shape, act)
    b.collective(f"{p}combine.network", Collective.ALL_TO_ALL, gathered, back, nodes, Level.NETWORK, count)
    return back


def shared_experts(b: Any, xm: Tensor, nm: int, m: int, fe: int, count: int, p: str) -> Tensor:
    """The shared experts on builder `b`: one dense MLP of num_shared_experts × f, its gate and up (m = 2,
    or up alone) and down matmuls over the layer's N rows, beside the routed experts. Returns its output."""
    cfg, h = b.cfg, b.cfg.hidden_size
    fs = cfg.num_shared_experts * fe
    sg = b.act(f"{p}shared.gate_up", (nm, m * fs))
    sgu = b.add(matmul_op(f"{p}shared.gate_up", xm, b.weight(f"{p}shared.gate_up.weight", (h, m * fs)), sg, count))
    sa = b.act(f"{p}shared.act.out", (nm, fs))
    sact = b.add(elementwise_op(f"{p}shared.act", cfg.activation, (sg,), sa, count))
    b.fuse(sgu, sact)
    so = b.act(f"{p}shared.out", (nm, h))
    b.add(matmul_op(f"{p}shared.down", sa, b.weight(f"{p}shared.down.weight", (fs, h)), so, count))
    return so


ALL_TO_ALL_NAMES = re.compile(r"(^|\.)(dispatch|combine)\.(all_to_all|network|nvlink)$")


def overlapped_all_to_all(names: Sequence[str], cfg: ModelConfig, ep: int) -> list[bool] | None:
    """Per kernel, whether --two-batch-overlap hides it (the MoE dispatch and combine all-to-all);
    None when the option is off, the model has no experts or there is no expert parallel."""
    if not (cfg.two_batch_overlap and cfg.is_moe and ep > 1):
        return None
    return [bool(ALL_TO_ALL_NAMES.search(n)) for n in names]


__all__ = [
    "ALL_TO_ALL_NAMES",
    "combine_ops",
    "destination_devices",
    "destination_nodes",
    "dispatch_ops",
    "dispatch_row",
    "expected_distinct",
    "overlapped_all_to_all",
    "reachable_nodes",
]
