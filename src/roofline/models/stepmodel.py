"""The vectorised step model: a step's totals over whole grids of (batch, length) without
rebuilding the graph per point, and the crossover batch found with it.

Every FLOP and byte count of a step's kernels is a linear combination of a few features of
(batch B, length S): 1, B, B·S, B·S² (prefill), B·min(S, W) (windowed decode), B·pairs_W(S)
(windowed prefill) and the number of experts hit (MoE). The windowed and the MoE features are the
graph builder's own formulas (`ModelConfig.cached_tokens`, `roofline.models.formulas`), evaluated
on numpy arrays. `StepModel` builds the real graph at a handful of sample points, solves for those
coefficients exactly, checks the fit reproduces every sample, and then evaluates any grid of
(B, S) with numpy: the same kernels, the same max(compute, memory) per kernel.

Layering: imports roofline.placement, roofline.graph, roofline.hardware, roofline.dtypes,
roofline.errors and the models room's config, build and formulas; numpy only inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType
from roofline.errors import RooflineError
from roofline.graph import Kernel
from roofline.hardware import Machine
from roofline.models.build import DEFAULT_PLAN, as_phase, build_graph
from roofline.models.dtypes import ModelDtypes
from roofline.models.formulas import experts_hit, windowed_pairs
from roofline.models.transformer import AttentionKind, ModelConfig
from roofline.placement import crossover
from roofline.units import finite_or_none
from roofline.vocab import Level, Phase, Plan, Unit

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass(frozen=True)
class Crossover:
    """The smallest batch at which the step's intensity reaches the ridge, or None ("never")."""

    batch: int | None
    ridge_flop_per_byte: float
    limit_flop_per_byte: float  # the step's intensity as the batch grows without bound (graph totals)
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "never": self.batch is None, "ridge_flop_per_byte": self.ridge_flop_per_byte,
                "limit_flop_per_byte": finite_or_none(self.limit_flop_per_byte), "reason": self.reason}


def _features(cfg: ModelConfig, phase: Phase, batch: np.ndarray, seq: np.ndarray,
              hit_override: int | None) -> np.ndarray:
    """The columns every kernel's FLOPs and bytes are linear in (see the module docstring)."""
    import numpy as np

    b = batch.astype(np.float64)
    s = seq.astype(np.float64)
    cols = [np.ones_like(b), b, b * s]
    window = cfg.sliding_window if cfg.attention_layers(AttentionKind.LOCAL) else None
    if phase == Phase.PREFILL:
        cols.append(b * s * s)
        if window:
            cols.append(b * windowed_pairs(s, window))
    elif window:
        cols.append(b * cfg.cached_tokens(AttentionKind.LOCAL, s))
    if cfg.is_moe:
        tokens = b * (s if phase == Phase.PREFILL else 1.0)
        hit = experts_hit(cfg.num_experts, cfg.experts_per_token, tokens, hit_override)
        cols.append(np.broadcast_to(np.asarray(hit, dtype=np.float64), b.shape))
    return np.stack(cols, axis=1)


def _sample_points(cfg: ModelConfig, phase: Phase) -> list[tuple[int, int]]:
    """(batch, length) points that separate every feature: small and large lengths, both sides of
    the window, and small token counts where the experts hit still grow with the batch."""
    lengths = {1, 2, 3, 5, 9, 33}
    if cfg.sliding_window and cfg.attention_layers(AttentionKind.LOCAL):
        w = cfg.sliding_window
        lengths |= {max(1, w // 2), w + 1, w + 7, 2 * w + 3}
    return [(b, s) for b in (1, 2, 3, 5, 8) for s in sorted(lengths)]


@dataclass(frozen=True)
class StepModel:
    """Per-kernel coefficients: flop_matrix, flop_vector and bytes = features · coefficients."""

    config: ModelConfig
    phase: Phase
    dtypes: ModelDtypes
    plan: Plan
    names: tuple[str, ...]
    counts: tuple[int, ...]
    coef_matrix: Any  # numpy arrays [features, kernels]
    coef_vector: Any
    coef_bytes: Any
    experts_hit_override: int | None = None

    @classmethod
    def fit(cls, cfg: ModelConfig, phase: Phase | str, dtypes: ModelDtypes, plan: Plan = DEFAULT_PLAN,
            experts_hit_override: int | None = None) -> StepModel:
        import numpy as np

        phase = as_phase(phase)
        points = _sample_points(cfg, phase)
        names: tuple[str, ...] = ()
        counts: tuple[int, ...] = ()
        rows_m, rows_v, rows_b = [], [], []
        for b, s in points:
            mg = build_graph(cfg, phase, b, s, dtypes, experts_hit_override)
            kernels: list[Kernel] = mg.graph.kernels(mg.plan(plan))
            if not names:
                names = tuple(k.name for k in kernels)
                counts = tuple(k.count for k in kernels)
            elif tuple(k.name for k in kernels) != names:
                raise RooflineError(f"{cfg.name}: the kernels of the step change with its shape; cannot sweep")
            rows_m.append([k.cost.flop_by_unit.get(Unit.MATRIX, 0.0) for k in kernels])
            rows_v.append([k.cost.flop_by_unit.get(Unit.VECTOR, 0.0) for k in kernels])
            rows_b.append([k.cost.bytes_by_level.get(Level.DRAM, 0.0) for k in kernels])
        x = _features(cfg, phase, np.array([p[0] for p in points]), np.array([p[1] for p in points]),
                      experts_hit_override)
        scale = np.abs(x).max(axis=0)
        scale[scale == 0] = 1.0
        xs = x / scale
        coefs = []
        for rows in (rows_m, rows_v, rows_b):
            y = np.array(rows, dtype=np.float64)
            c, *_ = np.linalg.lstsq(xs, y, rcond=None)
            c = c / scale[:, None]
            fitted = x @ c
            err = np.abs(fitted - y) / np.maximum(np.abs(y), 1.0)
            if err.size and float(err.max()) > 1e-6:
                raise RooflineError(f"{cfg.name}: the sweep model does not reproduce the graph "
                                    f"(error {float(err.max()):.2g}); use the graph path")
            coefs.append(c)
        return cls(cfg, phase, dtypes, plan, names, counts, coefs[0], coefs[1], coefs[2], experts_hit_override)

    def evaluate(self, batch: Iterable[int], seq: Iterable[int], machine: Machine, dtype: DType) -> dict[str, Any]:
        """Totals for every (batch[i], seq[i]): flop, bytes, time_s (Σ of the kernels' floors),
        memory_bound_time_s, flop_per_byte, as numpy arrays."""
        import numpy as np

        b = np.asarray(list(batch) if not hasattr(batch, "__array__") else batch)
        s = np.asarray(list(seq) if not hasattr(seq, "__array__") else seq)
        x = _features(self.config, self.phase, b, s, self.experts_hit_override)
        fm = x @ self.coef_matrix
        fv = x @ self.coef_vector
        by = x @ self.coef_bytes
        peak_m = machine.peak_flop_per_s(dtype, Unit.MATRIX)
        peak_v = machine.peak_flop_per_s(dtype, Unit.VECTOR)
        bw = machine.memory_bytes_per_s
        counts = np.array(self.counts, dtype=np.float64)
        t_matrix, t_vector, t_dram = fm / peak_m, fv / peak_v, by / bw
        compute = np.maximum(t_matrix, t_vector)
        t = np.maximum(compute, t_dram) * counts
        # `binding` per kernel (ties go to memory), then per point over the kernels' times
        kernel_bound = np.where(t_dram >= compute, 2, np.where(t_matrix >= t_vector, 0, 1))
        per = np.stack([np.where(kernel_bound == i, t, 0.0).sum(axis=1) for i in range(3)], axis=1)
        step_bound = np.where(per[:, 2] >= per[:, :2].max(axis=1), 2, np.where(per[:, 0] >= per[:, 1], 0, 1))
        flop = (fm + fv) @ counts
        byt = by @ counts
        return {"flop": flop, "bytes": byt, "time_s": t.sum(axis=1), "memory_bound_time_s": per[:, 2],
                "flop_per_byte": flop / byt, "kernel_time_s": t, "kernel_bound": kernel_bound, "bound": step_bound}

    def limit(self, seq: int) -> tuple[float, float, float]:
        """(FLOPs, bytes, FLOP/B) per extra sequence as the batch grows without bound."""
        import numpy as np

        big = np.array([1 << 30, 1 << 31])
        x = _features(self.config, self.phase, big, np.array([seq, seq]), self.experts_hit_override)
        counts = np.array(self.counts, dtype=np.float64)
        flop = (x @ (self.coef_matrix + self.coef_vector)) @ counts
        byt = (x @ self.coef_bytes) @ counts
        df, db = float(flop[1] - flop[0]), float(byt[1] - byt[0])
        per = 1 << 30
        return df / per, db / per, df / db if db else math.inf


def find_crossover(model: StepModel, seq: int, machine: Machine, dtype: DType) -> Crossover:
    ridge = machine.ridge_flop_per_byte(dtype)
    flop_seq, bytes_seq, limit = model.limit(seq)

    def intensity(b: int) -> float:
        return float(model.evaluate([b], [seq], machine, dtype)["flop_per_byte"][0])

    batch = crossover(intensity, ridge, 1, 1 << 24) if limit >= ridge or intensity(1 << 24) >= ridge else None
    if batch is not None:
        reason = (f"at batch {batch} the step's intensity {intensity(batch):.1f} FLOP/B reaches the ridge "
                  f"{ridge:.0f} FLOP/B")
    else:
        what = "KV cache and activation" if model.phase == Phase.DECODE else "activation"
        reason = (f"never: as the batch grows the intensity tends to {limit:.1f} FLOP/B, below the ridge "
                  f"{ridge:.0f} FLOP/B, because each sequence adds {bytes_seq:.4g} bytes of {what} traffic "
                  f"for {flop_seq:.4g} FLOPs: the bytes grow with the batch as fast as the FLOPs")
    return Crossover(batch, ridge, limit, reason)


__all__ = ["Crossover", "StepModel", "find_crossover"]
