"""LatentMoE's two projections in a step graph (Nemotron 3 Super and Ultra, `moe_latent_size`).

NVIDIA's LatentMoE (the Nemotron 3 Super technical report; transformers NemotronHMoE, vLLM
nemotron_h.py): the router scores the token in the full hidden width h, then `fc1_latent_proj`
(h -> ℓ) projects it once into the latent of ℓ = moe_latent_size; every routed expert runs in the
latent (up ℓ -> f, ReLU², down f -> ℓ); their weighted sum is taken in the latent, and
`fc2_latent_proj` (ℓ -> h) projects it back, once a token. The shared expert runs on the full
hidden state beside them. Per token and layer that is 2·h·ℓ·2 FLOPs for the projections and
2·k·ℓ for the sum, instead of the experts' 2·k·h; the experts' weights and the rows dispatched to
them (and sent between devices under EP) shrink by h/ℓ (4096/1024 = 4 for Super).

Kimi K3 (`routed_expert_hidden_size`, `latent_moe_use_norm`; TensorRT-LLM@000a860 modeling_kimi_linear.py
KimiK3MoERuntime): routed_expert_down_proj (h -> ℓ), the experts in ℓ, their sum normed by routed_expert_norm (an
RMSNorm over ℓ, its gain in part "norms"), routed_expert_up_proj (ℓ -> h); its shared experts in h beside them.

Under TP the projections are replicated (each device runs both on its rows); their weights are
2·h·ℓ a layer, counted in part "latent_proj".
"""

from __future__ import annotations

from roofline.graph import Op, Tensor
from roofline.kernels import matmul_op
from roofline.models.deltanet import StepBuilder
from roofline.vocab import Unit


def latent_in(bd: StepBuilder, x: Tensor, count: int, p: str) -> Tensor:
    """fc1_latent_proj: the normed hidden state [N, h] into the latent [N, ℓ]."""
    lat = bd.cfg.moe_latent_size
    out = bd.act(f"{p}latent_proj.fc1.out", (x.shape[0], lat))
    bd.add(matmul_op(f"{p}latent_proj.fc1", x, bd.weight(f"{p}latent_proj.fc1.weight", (bd.cfg.hidden_size, lat)),
                     out, count))
    return out


def latent_out(bd: StepBuilder, rows: Tensor, route: Tensor, count: int, p: str) -> Tensor:
    """The routed experts' rows [N·k, ℓ] weighted and summed per token in the latent (2·k·N·ℓ), then
    fc2_latent_proj back to [N, h]."""
    lat, h = bd.cfg.moe_latent_size, bd.cfg.hidden_size
    k = bd.cfg.experts_per_token
    n = rows.shape[0] // k
    summed = bd.act(f"{p}latent.sum", (n, lat))
    add = bd.add(Op(f"{p}latent.combine", "moe_combine", (rows, route), (summed,), {Unit.VECTOR: 2.0 * k * n * lat},
                    count, formula=f"weighted sum of k expert rows in the latent: 2·k·N·ℓ = 2·{k}·{n}·{lat}"))
    if bd.cfg.moe_latent_norm:  # Kimi K3's routed_expert_norm: RMSNorm over the latent sum
        normed = bd.act(f"{p}latent.norm.out", (n, lat))
        bd.fuse(add, bd.norm(f"{p}latent_norm", summed, normed, count))
        add, summed = "", normed
    out = bd.act(f"{p}latent_proj.fc2.out", (n, h))
    proj = bd.add(matmul_op(f"{p}latent_proj.fc2", summed, bd.weight(f"{p}latent_proj.fc2.weight", (lat, h)),
                            out, count))
    bd.fuse(add, proj)
    return out


__all__ = ["latent_in", "latent_out"]
