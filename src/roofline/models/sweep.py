"""Sweeps and comparisons: a step's totals over batch × length × dtype × machine, and models side
by side.

`sweep` fits the vectorised step model (`roofline.models.stepmodel`) once per dtype combination
and split and evaluates the whole batch × length grid with numpy; `compare` runs the full analysis
per model × machine × split × dtype. Lengths left out default as `analyze_model`'s do:
DEFAULT_LENGTH capped at the model's max_position_embeddings.

Splits (tp, pp, ep, dp) are axes of both: a row per split, its degrees in the columns tp, pp, ep, dp
and split_devices (tp × pp × dp; `devices` stays the fewest devices of a valid split that holds
the model). A machine given with a split is resolved as analyze_model resolves it: a system, or a
bare device made one node of max(devices, 8), the collectives on its link and network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roofline.errors import RooflineError, T
from roofline.expectation.shipped import for_machine
from roofline.expectation.times import ExpectedTimes
from roofline.frozen import frozen
from roofline.hardware import DEFAULT_MACHINE, Machine, get_machine
from roofline.models.analysis import analyze_model, decode_limit
from roofline.models.build import DEFAULT_PLAN, as_phase, as_plan
from roofline.models.config import load_config
from roofline.models.dtypes import ModelDtypes, compute_dtype, for_checkpoint, model_dtypes
from roofline.models.memory import DEFAULT_UTILIZATION, candidate_splits, device_weights_bytes
from roofline.models.split import check_split, shard, stage_share
from roofline.models.step import Step, describe_step
from roofline.models.stepband import Band, expected_band, share_band, shipped_band, step_total
from roofline.models.stepmodel import RESOURCE_CODES, StepModel, batch_unit
from roofline.models.transformer import ModelConfig
from roofline.parallel import MOST_DEVICES, NODE_DEVICES, Deployment, Split, deploy
from roofline.units import require_positive_int
from roofline.vocab import Phase, Plan, Resource, bound_class

# the codes StepModel.evaluate returns
SWEPT_RESOURCES: tuple[Resource, ...] = RESOURCE_CODES
SPLIT_COLUMNS = ("tp", "pp", "ep", "dp", "split_devices")
# a device id -> its expected-time fit, or a bench calibration's (low, high) share of the roof by bound class
Expected = Callable[[str], ExpectedTimes | Mapping[str, tuple[float, float]]]
SWEEP_COLUMNS = ("model", "machine", "phase", "plan", "weights_dtype", "kv_dtype", "compute_dtype", "batch", "seq",
                 "flop", "bytes", "flop_per_byte", "time_s", "expected_time_s", "memory_bound_time_s", "tokens_per_s",
                 "bound",
                 "bound_class",
                 "ridge_flop_per_byte", "memory_bytes", "devices", *SPLIT_COLUMNS)


def split_columns(split: Split) -> dict[str, int]:
    """A row's split columns: the degrees and the split's devices (tp × pp × dp)."""
    return {"tp": split.tp, "pp": split.pp, "ep": split.ep, "dp": split.dp, "split_devices": split.devices}


def resolve(machine: str | Machine, split: Split) -> tuple[Machine, int | None]:
    """The device machine a split's kernels are placed on and the devices per node its graph is
    built for (None: one device): the deployment's (roofline.parallel.deploy)."""
    d = deploy(machine, split)
    return d.machine, d.graph_devices_per_node


def check_splits(cfg: ModelConfig, splits: Sequence[Split], batches: Sequence[int]) -> None:
    """Every split valid for the model, and every batch a multiple of each split's dp, and of tp × dp
    when expert parallelism splits a replica's tokens over its tp ranks (one clear error)."""
    if not splits:
        raise RooflineError("give at least one split")
    for sp in splits:
        if not isinstance(sp, Split):
            raise RooflineError(f"a split is a roofline.parallel.Split, got {sp!r}")
        unit = batch_unit(sp)
        for b in batches:
            if b % sp.dp:
                raise RooflineError(f"{T.batch} {b} is not a multiple of {T.dp} {sp.dp} (each replica runs batch/dp "
                                    f"sequences); give batches that are multiples of {sp.dp}")
            if b % unit:
                raise RooflineError(f"{T.batch} {b} is not a multiple of tp × dp = {sp.tp} × {sp.dp} = {unit} "
                                    f"(with {T.ep} and {T.tp} each tensor-parallel rank routes 1/tp of a replica's "
                                    f"tokens); give batches that are multiples of {unit}")
            if unit > sp.dp and sp.pp > 1 and b // sp.dp >= sp.pp and (b // sp.dp // sp.pp) % sp.tp:
                raise RooflineError(f"{T.batch} {b}: its {sp.pp} pipeline micro-batches of {b // sp.dp // sp.pp} "
                                    f"sequences a replica are not multiples of {T.tp} {sp.tp} (with {T.ep} and "
                                    f"{T.tp} each tensor-parallel rank routes 1/tp of a micro-batch's tokens); give "
                                    f"batches that are multiples of {unit * sp.pp}")
        if not sp.trivial:
            check_split(cfg, sp, sp.dp)


def fewest_devices(cfg: ModelConfig, dtypes: ModelDtypes, kv_bytes: Any, capacity_bytes: float | None,
                   seq: Any, utilization: float = DEFAULT_UTILIZATION) -> Any:
    """Per point, the devices of the smallest valid split whose weights + KV cache per device fit
    (roofline.models.memory's search, vectorised; the activation workspace is left out here); 0: none.
    A device's share of the cache is its KV values over the model's at each point's length `seq` (each
    layer kind at its own shape: Gemma 4's 4 full-layer K/V heads stop shrinking at tp 4)."""
    import numpy as np

    out = np.zeros(np.shape(kv_bytes), dtype=np.int64)
    if capacity_bytes is None:
        return out
    whole = np.asarray(cfg.kv_elements_cached(seq), dtype=np.float64)
    for split in candidate_splits(cfg, NODE_DEVICES, MOST_DEVICES):
        part = np.asarray(shard(cfg, split).kv_elements_cached(seq), dtype=np.float64)
        share = np.divide(part, whole, out=np.ones_like(whole), where=whole > 0) * stage_share(cfg, split)
        fits = device_weights_bytes(cfg, split, dtypes) + kv_bytes * share <= capacity_bytes * utilization
        out = np.where((out == 0) & fits, split.devices, out)
    return out


def dtype_steps(model: str | ModelConfig, phase: Phase | str = Phase.DECODE, plan: Plan | str = DEFAULT_PLAN,
                weights_dtypes: Sequence[str | None] = (None,), kv_dtypes: Sequence[str | None] = (None,),
                activation_dtype: str = "bf16", compute_dtypes: Sequence[str | None] = (None,),
                experts_hit: int | None = None, overrides: Mapping[str, str] | None = None) -> list[Step]:
    """One step description per dtype combination (weights × KV cache × compute, in that order), at
    batch 1 and the default length: what sweep() grids over batch and length."""
    cfg = load_config(model, overrides)
    return [describe_step(cfg, phase, 1, None, model_dtypes(w, activation_dtype, k, c), plan, experts_hit)
            for w in weights_dtypes for k in kv_dtypes for c in compute_dtypes]


def deployments(machines: Sequence[str | Machine], splits: Sequence[Split] = (Split(),)) -> list[Deployment]:
    """Every machine under every split (splits outer), each deployed once (roofline.parallel.deploy)."""
    return [deploy(m, sp) for sp in splits for m in machines]


def sweep(steps: Sequence[Step], deployed: Sequence[Deployment], batches: Sequence[int] | None = None,
          seqs: Sequence[int] | None = None, per_kernel: bool = False,
          expected: Expected | None = None) -> list[dict[str, Any]]:
    """Every step (one model, phase and plan: a dtype combination each, dtype_steps) × deployment ×
    batch × length, one row each (keys: SWEEP_COLUMNS; with `per_kernel`, also "kernels": each kernel's
    name, time per step and bound, for charts). `batches` and `seqs` None: the first step's batch and
    length. With a split the row is one device's step (as analyze(step, deployment) gives it) and every
    batch must be a multiple of its dp (of tp × dp with --ep and --tp, whose MoE splits the tokens).

    Each row's `expected_time_s` {low, high} is Σ runs × each kernel's calibrated band, as `roofline
    model` totals it (roofline.models.stepband over the grid): `expected(device id)` gives the fit (an
    ExpectedTimes) or a bench calibration's shares by bound class; default the device's shipped fit.

    Per step and split the step model is fitted once (a few dozen graph builds) and the batch × length
    grid is evaluated with numpy; per machine only the placement changes."""
    import numpy as np

    if not steps or not deployed:
        raise RooflineError("sweep needs at least one step and one deployment")
    first = steps[0]
    cfg, phase, plan = first.config, first.phase, first.plan
    if any((s.config, s.phase, s.plan) != (cfg, phase, plan) for s in steps):
        raise RooflineError("a sweep's steps are one model, phase and fusion plan (their dtypes vary)")
    batches = (first.batch,) if batches is None else batches
    seqs = (first.seq,) if seqs is None else seqs
    for label, values in (("batch", batches), ("length", seqs)):
        if not values:
            raise RooflineError(f"sweep needs at least one {label}")
        for v in values:
            require_positive_int(v, label)
    splits = list(dict.fromkeys(d.split for d in deployed))
    check_splits(cfg, splits, batches)
    grid_b, grid_s = np.meshgrid(np.array(batches), np.array(seqs), indexing="ij")
    flat_b, flat_s = grid_b.ravel(), grid_s.ravel()
    tokens = flat_b * (flat_s if phase == Phase.PREFILL else 1)
    rows: list[dict[str, Any]] = []
    for step in steps:
        dt = step.dtypes
        kv = cfg.kv_cache_bytes(flat_b, flat_s, dt.kv_cache.bytes_per_element)
        memory_bytes = dt.weights_bytes(cfg.param_counts().parts) + kv
        fits: dict[tuple[Split, int | None, bool], StepModel] = {}  # by the split, the devices per node, NVLS
        for d in deployed:
            sp, m, dpn = d.split, d.machine, d.graph_devices_per_node
            share = stage_share(cfg, sp)
            if (sp, dpn, d.nvls) not in fits:
                fits[sp, dpn, d.nvls] = StepModel.fit(cfg, phase, dt, plan, step.experts_hit, sp, dpn, d.nvls)
            fitted = fits[sp, dpn, d.nvls]
            devices = fewest_devices(cfg, dt, kv, m.memory_capacity_bytes, flat_s)
            cdt = compute_dtype(dt, m)
            r = fitted.evaluate(flat_b, flat_s, m, cdt)
            model = (expected or for_machine)(m.id)
            if isinstance(model, ExpectedTimes):
                lows, highs = expected_band(fitted, r, flat_b, flat_s, m, cdt, model)
            else:
                lows, highs = share_band(r, model, "the calibration")
            low_s, high_s = lows.sum(axis=1), highs.sum(axis=1)
            # pipeline: pp micro-batches of batch/pp in flight (ModelAnalysis.tokens_per_s)
            per = flat_b // sp.dp
            filled = (per >= sp.pp) & (sp.pp > 1)
            micro = fitted.evaluate(np.where(filled, per // sp.pp * sp.dp, flat_b), flat_s, m,
                                    cdt)["time_s"] if sp.pp > 1 else r["time_s"]
            ridge = m.ridge_flop_per_byte(cdt)
            cap = m.memory_capacity_bytes
            # the columns as Python lists once (indexing numpy a scalar at a time costs more than the rows)
            t_l, fpb_l, flop_l, bytes_l = (r[k].tolist() for k in ("time_s", "flop_per_byte", "flop", "bytes"))
            mbt_l, bound_l, low_l, high_l = (r["memory_bound_time_s"].tolist(), r["bound"].tolist(),
                                             low_s.tolist(), high_s.tolist())
            micro_l, tokens_l = micro.tolist(), tokens.tolist()
            filled_l = np.broadcast_to(filled, flat_b.shape).tolist()
            mem_l, dev_l, b_l, s_l = memory_bytes.tolist(), devices.tolist(), flat_b.tolist(), flat_s.tolist()
            bounds = {code: (SWEPT_RESOURCES[code], bound_class(SWEPT_RESOURCES[code])) for code in set(bound_l)}
            fixed = {"model": cfg.name, "machine": m.id, "phase": phase, "plan": plan,
                     "weights_dtype": dt.weights.name, "kv_dtype": dt.kv_cache.name, "compute_dtype": cdt.name}
            columns = split_columns(sp)
            for i in range(flat_b.size):
                t = t_l[i]
                # with a full pipeline a micro-batch's tokens leave every stage time (⌈L/pp⌉ of L)
                tokens_i = float(tokens_l[i]) / sp.pp if filled_l[i] else float(tokens_l[i])
                stage = micro_l[i] * share if filled_l[i] else t
                bound, cls = bounds[bound_l[i]]
                rows.append({
                    **fixed, "batch": b_l[i], "seq": s_l[i],
                    "flop": flop_l[i], "bytes": bytes_l[i], "flop_per_byte": fpb_l[i],
                    "time_s": t, "expected_time_s": {"low": low_l[i], "high": high_l[i]},
                    "memory_bound_time_s": mbt_l[i],
                    "tokens_per_s": tokens_i / stage if t else None,
                    "bound": bound, "bound_class": cls,
                    "ridge_flop_per_byte": ridge,
                    "memory_bytes": float(mem_l[i]),
                    "devices": int(dev_l[i]) if cap and dev_l[i] else None,
                    **columns,
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
    dt = for_checkpoint(dtypes or model_dtypes(), cfg.weights_dtype, cfg.unquantized, cfg.mixed_weights)
    fitted = StepModel.fit(cfg, phase, dt, as_plan(plan))
    return fitted.evaluate(np.asarray(batches), np.asarray(seqs), m, compute_dtype(dt, m))


def compare(models: Sequence[str | ModelConfig], machines: Sequence[str | Machine] = (DEFAULT_MACHINE,),
            phase: Phase | str = Phase.DECODE, batch: int = 1, seq: int | None = None,
            plan: Plan | str = DEFAULT_PLAN, weights_dtypes: Sequence[str | None] = (None,),
            kv_dtypes: Sequence[str | None] = (None,), activation_dtype: str = "bf16",
            compute_dtypes: Sequence[str | None] = (None,), experts_hit_override: int | None = None,
            overrides: Mapping[str, str] | None = None, splits: Sequence[Split] = (Split(),),
            utilization: float = DEFAULT_UTILIZATION, band: Band | None = None) -> list[dict[str, Any]]:
    """One row per model × machine × split × dtype: the step's totals, KV per token, decode limit,
    crossover and memory fit side by side (what GQA, MLA, an FP8 KV cache, a window or a split
    change). `seq` None: each model's default length (DEFAULT_LENGTH within its max_position_embeddings).
    With a split the totals are one device's (analyze_model(..., split=...)), `memory_bytes` is per
    device and `fits` says whether it fits in `utilization` of the device's memory; the decode limit
    and the crossover are the model's (as analyze_model reports them). `expected_time_s` {low, high}: Σ
    runs × each kernel's `band` (default: the device's shipped fit), as `roofline model` totals it."""
    if not splits:
        raise RooflineError("give at least one split")
    rows = []
    for name in models:
        for mach in machines:
            for sp in splits:
                for wdt in weights_dtypes:
                    for kdt in kv_dtypes:
                        for cdt in compute_dtypes:
                            dt = model_dtypes(wdt, activation_dtype, kdt, cdt)
                            a = analyze_model(name, mach, phase, batch, seq, plan, dt, experts_hit_override,
                                              overrides, sp, utilization)
                            row = _compare_row(a, batch, a.model.dtypes)  # the checkpoint's weights
                            row["expected_time_s"] = step_total(a.placements, band or shipped_band(a.machine.id))
                            rows.append(row)
    return rows


def _compare_row(a: Any, batch: int, dt: ModelDtypes) -> dict[str, Any]:
    cross = a.crossover
    return {
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
        **split_columns(a.split), "fits": a.memory.fits,
        "warnings": list(a.warnings) + ([a.memory.warning] if a.memory.warning else []),
    }


@frozen
class ChartSeries:
    """What a sweep's chart draws: intensity against the axis that varies most (batch, or the length
    when it has more values), for every machine and the first dtype and split combination, at the
    first value of the other axis; and, for decode against the batch, the decode limit it tends to."""

    rows: tuple[dict[str, Any], ...]  # the drawn rows, "seq" renamed to "prompt" or "context"
    x: str  # the row key the chart runs along: "batch", "prompt" or "context"
    fixed: str  # the axis held at its first value: "batch" or "seq"
    fixed_label: str  # how that axis is named: "batch", "prompt" or "context"
    limit_flop_per_byte: float | None  # roofline.models.analysis.decode_limit, decode against the batch only
    machines: tuple[str, ...]
    split: Split  # the first combination's
    of_rows: int  # the sweep's rows, of which `rows` are drawn

    @property
    def partial(self) -> bool:
        return len(self.rows) < self.of_rows


CHART_SERIES_KEYS = ("weights_dtype", "kv_dtype", "compute_dtype", "tp", "pp", "ep", "dp")


def chart_series(rows: Sequence[Mapping[str, Any]], cfg: ModelConfig, phase: Phase | str, batches: Sequence[int],
                 lengths: Sequence[int]) -> ChartSeries:
    """The one series a sweep's chart draws (ChartSeries), from the sweep's rows."""
    phase = as_phase(phase)
    first = rows[0]
    same = [r for r in rows if all(r.get(k) == first.get(k) for k in CHART_SERIES_KEYS)]
    x = "batch" if len(batches) >= len(lengths) else "seq"
    fixed = "seq" if x == "batch" else "batch"
    seq_key = "prompt" if phase == Phase.PREFILL else "context"
    picked = tuple({(seq_key if k == "seq" else k): v for k, v in r.items()} for r in same if r[fixed] == first[fixed])
    limit = None
    if phase == Phase.DECODE and x == "batch":
        limit = decode_limit(cfg, int(first["seq"]), first["kv_dtype"]).flop_per_byte
    split = Split(tp=first.get("tp", 1), pp=first.get("pp", 1), ep=first.get("ep", 1), dp=first.get("dp", 1))
    return ChartSeries(picked, seq_key if x == "seq" else x, fixed, seq_key if fixed == "seq" else fixed, limit,
                       tuple(dict.fromkeys(r["machine"] for r in picked)), split, len(rows))


__all__ = ["SPLIT_COLUMNS", "SWEEP_COLUMNS", "SWEPT_RESOURCES", "ChartSeries", "chart_series", "check_splits",
           "compare", "deployments", "dtype_steps", "resolve", "split_columns", "sweep", "sweep_arrays"]
