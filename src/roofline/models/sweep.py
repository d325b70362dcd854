"""Sweeps and comparisons: a step's totals over batch × length × dtype × machine, and models side
by side.

`sweep` fits the vectorised step model (`roofline.models.stepmodel`) once per dtype combination
and evaluates the whole batch × length grid with numpy; `compare` runs the full analysis per model
× machine × dtype. Lengths left out default as `analyze_model`'s do: DEFAULT_LENGTH capped at the
model's max_position_embeddings.

Layering: imports roofline.hardware, roofline.errors, roofline.vocab and the models room's config,
build, dtypes, stepmodel and analysis; numpy only inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofline.errors import RooflineError
from roofline.hardware import DEFAULT_MACHINE, Machine, get_machine
from roofline.models.analysis import analyze_model
from roofline.models.build import DEFAULT_PLAN, as_phase, as_plan
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, compute_dtype, model_dtypes
from roofline.models.memory import DEFAULT_UTILIZATION, candidate_splits, device_weights_bytes
from roofline.models.split import shard, stage_layers
from roofline.models.stepmodel import StepModel
from roofline.models.transformer import ModelConfig
from roofline.units import require_positive_int
from roofline.vocab import Level, Phase, Plan, Resource, Unit, bound_class

SWEPT_RESOURCES: tuple[Resource, ...] = (Unit.MATRIX, Unit.VECTOR, Level.DRAM)  # the codes StepModel.evaluate returns
SWEEP_COLUMNS = ("model", "machine", "phase", "plan", "weights_dtype", "kv_dtype", "compute_dtype", "batch", "seq",
                 "flop", "bytes", "flop_per_byte", "time_s", "memory_bound_time_s", "tokens_per_s", "bound",
                 "bound_class",
                 "ridge_flop_per_byte", "memory_bytes", "devices")


def fewest_devices(cfg: ModelConfig, dtypes: ModelDtypes, kv_bytes: Any, capacity_bytes: float | None,
                   utilization: float = DEFAULT_UTILIZATION) -> Any:
    """Per point, the devices of the smallest valid split whose weights + KV cache per device fit
    (roofline.models.memory's search, vectorised; the activation workspace is left out here); 0: none."""
    import numpy as np

    out = np.zeros(np.shape(kv_bytes), dtype=np.int64)
    if capacity_bytes is None:
        return out
    per_layer = cfg.kv_elements_per_token_per_layer()
    for split in candidate_splits(cfg, 8, 64):
        share = (shard(cfg, split).kv_elements_per_token_per_layer() / per_layer
                 * stage_layers(cfg, split) / cfg.num_layers)
        fits = device_weights_bytes(cfg, split, dtypes) + kv_bytes * share <= capacity_bytes * utilization
        out = np.where((out == 0) & fits, split.devices, out)
    return out


def sweep(model: str | ModelConfig, machines: Sequence[str | Machine] = (DEFAULT_MACHINE,),
          phase: Phase | str = Phase.DECODE, batches: Sequence[int] = (1,), seqs: Sequence[int] | None = None,
          plan: Plan | str = DEFAULT_PLAN, weights_dtypes: Sequence[str] = ("bf16",),
          kv_dtypes: Sequence[str | None] = (None,), activation_dtype: str = "bf16",
          compute_dtypes: Sequence[str | None] = (None,), experts_hit_override: int | None = None,
          overrides: Mapping[str, str] | None = None, per_kernel: bool = False) -> list[dict[str, Any]]:
    """Every combination of machine × dtypes × batch × length, one row each (keys: SWEEP_COLUMNS;
    with `per_kernel`, also "kernels": each kernel's name, time per step and bound, for charts).
    `seqs` None: the default length (DEFAULT_LENGTH within the model's max_position_embeddings).

    Per dtype combination the step model is fitted once (a few dozen graph builds) and the
    batch × length grid is evaluated with numpy; per machine only the placement changes."""
    import numpy as np

    plan = as_plan(plan)
    cfg = load_config(model, overrides)
    if seqs is None:
        seqs = (cfg.default_length,)
    for label, values in (("batch", batches), ("length", seqs)):
        if not values:
            raise RooflineError(f"sweep needs at least one {label}")
        for v in values:
            require_positive_int(v, label)
    ms = [get_machine(m) for m in machines]
    phase = as_phase(phase)
    grid_b, grid_s = np.meshgrid(np.array(batches), np.array(seqs), indexing="ij")
    flat_b, flat_s = grid_b.ravel(), grid_s.ravel()
    rows: list[dict[str, Any]] = []
    for wdt in weights_dtypes:
        for kdt in kv_dtypes:
            for cdt_name in compute_dtypes:
                dt = model_dtypes(wdt, activation_dtype, kdt, cdt_name)
                fitted = StepModel.fit(cfg, phase, dt, plan, experts_hit_override)
                kv = cfg.kv_cache_bytes(flat_b, flat_s, dt.kv_cache.bytes_per_element)
                memory_bytes = cfg.total_params * dt.weights.bytes_per_element + kv
                for m in ms:
                    devices = fewest_devices(cfg, dt, kv, m.memory_capacity_bytes)
                    cdt = compute_dtype(dt, m)
                    r = fitted.evaluate(flat_b, flat_s, m, cdt)
                    ridge = m.ridge_flop_per_byte(cdt)
                    tokens = flat_b * (flat_s if phase == Phase.PREFILL else 1)
                    cap = m.memory_capacity_bytes
                    for i in range(flat_b.size):
                        t = float(r["time_s"][i])
                        fpb = float(r["flop_per_byte"][i])
                        rows.append({
                            "model": cfg.name, "machine": m.id, "phase": phase, "plan": plan,
                            "weights_dtype": dt.weights.name, "kv_dtype": dt.kv_cache.name,
                            "compute_dtype": cdt.name, "batch": int(flat_b[i]), "seq": int(flat_s[i]),
                            "flop": float(r["flop"][i]), "bytes": float(r["bytes"][i]), "flop_per_byte": fpb,
                            "time_s": t, "memory_bound_time_s": float(r["memory_bound_time_s"][i]),
                            "tokens_per_s": float(tokens[i]) / t if t else None,
                            "bound": SWEPT_RESOURCES[int(r["bound"][i])],
                            "bound_class": bound_class(SWEPT_RESOURCES[int(r["bound"][i])]),
                            "ridge_flop_per_byte": ridge,
                            "memory_bytes": float(memory_bytes[i]),
                            "devices": int(devices[i]) if cap and devices[i] else None,
                        })
                        if per_kernel:
                            rows[-1]["kernels"] = [
                                {"name": name, "total_time_s": float(r["kernel_time_s"][i, j]),
                                 "bound": SWEPT_RESOURCES[int(r["kernel_bound"][i, j])],
                                 "bound_class": bound_class(SWEPT_RESOURCES[int(r["kernel_bound"][i, j])])}
                                for j, name in enumerate(fitted.names)]
    return rows


def sweep_arrays(model: str | ModelConfig, machine: str | Machine, phase: Phase | str, batches: Any, seqs: Any,
                 plan: Plan | str = DEFAULT_PLAN, dtypes: ModelDtypes | None = None) -> dict[str, Any]:
    """The fast path for large grids: numpy arrays of totals for every (batch[i], seq[i]) pair."""
    import numpy as np

    cfg = load_config(model)
    m = get_machine(machine)
    dt = dtypes or model_dtypes()
    fitted = StepModel.fit(cfg, phase, dt, as_plan(plan))
    return fitted.evaluate(np.asarray(batches), np.asarray(seqs), m, compute_dtype(dt, m))


def compare(models: Sequence[str | ModelConfig], machines: Sequence[str | Machine] = (DEFAULT_MACHINE,),
            phase: Phase | str = Phase.DECODE, batch: int = 1, seq: int | None = None,
            plan: Plan | str = DEFAULT_PLAN, weights_dtypes: Sequence[str] = ("bf16",),
            kv_dtypes: Sequence[str | None] = (None,), activation_dtype: str = "bf16",
            compute_dtypes: Sequence[str | None] = (None,), experts_hit_override: int | None = None,
            overrides: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per model × machine × dtype: the step's totals, KV per token, decode limit,
    crossover and memory fit side by side (what GQA, MLA, an FP8 KV cache or a window change).
    `seq` None: each model's default length (DEFAULT_LENGTH within its max_position_embeddings)."""
    rows = []
    for name in models:
        for mach in machines:
            for wdt in weights_dtypes:
                for kdt in kv_dtypes:
                    for cdt in compute_dtypes:
                        dt = model_dtypes(wdt, activation_dtype, kdt, cdt)
                        a = analyze_model(name, mach, phase, batch, seq, plan, dt, experts_hit_override, overrides)
                        cross = a.crossover
                        rows.append({
                            "model": a.config.name, "machine": a.machine.id, "phase": a.phase, "batch": batch,
                            "seq": a.seq, "plan": a.plan, "weights_dtype": dt.weights.name,
                            "kv_dtype": dt.kv_cache.name,
                            "compute_dtype": a.dtype.name, "params_total": a.config.total_params,
                            "params_active": a.config.active_params,
                            "kv_cache_bytes_per_token": a.kv_cache_bytes_per_token,
                            "flop": a.flop, "bytes": a.bytes, "flop_per_byte": a.flop_per_byte, "time_s": a.time_s,
                            "tokens_per_s": a.tokens_per_s, "bound": a.bound, "bound_class": a.bound_class,
                            "ridge_flop_per_byte": a.ridge_flop_per_byte,
                            "decode_limit_flop_per_byte": (a.decode_limit.flop_per_byte
                                                           if a.phase == Phase.DECODE else None),
                            "crossover_batch": cross.batch, "crossover_reason": cross.reason,
                            "memory_bytes": a.memory.total_bytes, "devices": a.memory.devices,
                            "warnings": list(a.warnings) + ([a.memory.warning] if a.memory.warning else []),
                        })
    return rows


__all__ = ["SWEEP_COLUMNS", "SWEPT_RESOURCES", "compare", "sweep", "sweep_arrays"]
