"""Text for transformer steps, sweeps and comparisons: the step's table and totals, and row tables/CSV.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roofline.explain.fit import fit_words
from roofline.models.memory import gib
from roofline.report.text.tables import RUNS_NOTE, placements_table, render
from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time
from roofline.vocab import Phase, Plan, Role

KERNEL_CSV_COLUMNS = ("name", "kind", "count", "flop", "bytes", "flop_per_byte", "bound", "bound_class", "time_s",
                      "total_time_s", "share", "compute_time_s", "memory_time_s", "attainable_flop_per_s",
                      "ridge_flop_per_byte", "machine", "dtype", "link_bytes", "flop_per_link_byte")


def kernel_csv(rows: list[dict[str, Any]]) -> str:
    """A model's kernels as CSV. A collective also gets the bytes one device sends on its link and its
    FLOPs per link byte: the intensity the chart, the page and the table place it at
    (report.points.intensity), beside its FLOPs per DRAM byte (`flop_per_byte`)."""
    from roofline.vocab import LINKS

    out = []
    for r in rows:
        levels = r.get("levels") or {}
        timed = {lv: v for lv, v in levels.items() if lv in LINKS and v.get("bytes")}
        lv = max(timed, key=lambda k: timed[k]["time_s"]) if timed else None  # as points.link_level picks
        link = float(timed[lv]["bytes"]) if lv is not None else None
        out.append({**r, "link_bytes": link, "flop_per_link_byte": r["flop"] / link if link else None})
    return rows_csv(out, KERNEL_CSV_COLUMNS)


# which columns of a sweep or comparison a narrow terminal leaves out first (least important first)
ROWS_DROP = ("devices to fit", "weights+KV", "active", "ridge", "compute", "crossover", "tokens/s", "bytes", "FLOPs",
             "params", "weights", "KV/token", "limit", "expected")


def rows_table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, Callable[[Any], str]]], title: str) -> str:
    from roofline.report.text.grid import Table

    t = Table(title=title, title_justify="left")
    for _, header, _fmt in columns:
        t.add_column(header, justify="left" if header in ("model", "machine", "bound", "dtypes") else "right")
    for r in rows:
        t.add_row(*[fmt(r.get(key)) for key, _h, fmt in columns])
    return render(t, drop=ROWS_DROP)


def rows_csv(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """The `columns` of each row as CSV, names neutralised against formula injection (csvcells)."""
    from roofline.report.text.csvcells import csv_text

    return csv_text(columns, ([r.get(k) for k in columns] for r in rows))


def _kv_line(a: Any) -> list[str]:
    """The capped and per-sequence KV figures, where they differ from the uncapped per-token one."""
    from roofline.units import format_bytes

    kv = a.kv_cache
    out = []
    if kv["window_tokens"] is not None and kv["bytes_per_token_at_length"] != kv["bytes_per_token_uncapped"]:
        out.append(f"  {kv['bytes_per_token_uncapped']:,.0f} B per token uncapped; at {a.seq:,} tokens "
                   f"{kv['bytes_per_token_at_length']:,.0f} B per token (windowed layers capped at "
                   f"{kv['window_tokens']:,} tokens)")
    if kv["state_bytes_per_sequence"]:
        la, mb = a.config.linear_attention, a.config.mamba  # the recurrent kinds this model runs, by name
        kinds = ", ".join([*([la.name] if la else []), *(["Mamba2"] if mb else [])])
        out.append(f"  + recurrent state ({kinds} layers) {kv['state_bytes_per_sequence']:,.0f} B "
                   f"({format_bytes(kv['state_bytes_per_sequence'], 4, binary=True)}) per sequence, whatever "
                   f"its length (recurrent and conv state)")
    return out


def model_text(a: Any) -> str:
    from roofline.units import format_bytes, format_count, format_flop, format_intensity, format_time

    cfg, dt = a.config, a.model.dtypes
    what = "context" if a.phase == Phase.DECODE else "prompt"
    lines = [f"{cfg.name} ({cfg.architecture}) {a.phase}: batch {a.batch}, {what} {a.seq}, on {a.machine.name}",
             f"dtypes: compute {a.dtype.name}, weights {dt.weights.name}, KV cache {dt.kv_cache.name}, "
             f"activations {dt.activations.name}",
             f"params: {format_count(cfg.total_params)} total, {format_count(cfg.active_params)} active; "
             f"KV cache {a.kv_cache_bytes_per_token:,.0f} B "
             f"({format_bytes(a.kv_cache_bytes_per_token, 4, binary=True)}) per token"
             + (f"; {a.model.experts_hit} of {cfg.num_experts} experts hit per MoE layer" if cfg.is_moe else ""),
             *_kv_line(a), ""]
    lines.append(placements_table(a.placements, title=f"kernels, plan {a.plan}: {RUNS_NOTE}"))
    roles = a.bytes_by_role()
    lines.append("")
    lines.append(f"step total (every kernel × its runs): {format_flop(a.flop)}, {format_bytes(a.bytes)} "
                 f"(weights {format_bytes(roles[Role.WEIGHT])}, "
                 f"KV cache {format_bytes(roles[Role.KV_CACHE])}, activations {format_bytes(roles[Role.ACTIVATION])})")
    lines.append(f"       {format_intensity(a.flop_per_byte, 4)} vs ridge {format_intensity(a.ridge_flop_per_byte, 4)}"
                 f" → {a.bound_class}-bound; time floor {format_time(a.time_s)}, {a.tokens_per_s:,.0f} tokens/s; "
                 f"{a.memory_bound_share:.0%} of the time memory-bound")
    lines.append("")
    lines.append("fusion plans (same FLOPs, fewer bytes):")
    base = a.plans[Plan.NONE]
    for name, g in a.plans.items():
        lines.append(f"  {name:<6} {len(g.placements):>3} kernels  {format_bytes(g.bytes):>9}  "
                     f"{format_intensity(g.flop_per_byte):>12}  {format_time(g.time_s):>9}  "
                     f"({g.time_s / base.time_s:.2f}× the time of none)")
    if a.phase == Phase.DECODE:
        lim = a.decode_limit
        lines.append("")
        graph_limit = format_intensity(a.crossover.limit_flop_per_byte, 4)
        formula = ("(2·P + attention FLOPs + recurrent FLOPs) / (L · KV bytes per token + 2 · state bytes per "
                   "sequence, read and written)" if lim.state_bytes_per_sequence
                   else "(2·P + attention FLOPs) / (L · KV bytes per token)")
        alone = ("the matmuls, the KV cache and the state alone" if lim.state_bytes_per_sequence
                 else "the matmuls and the KV cache alone")
        lines.append(f"decode limit as the batch grows: {format_intensity(lim.flop_per_byte, 4)} by {formula}, "
                     f"{alone}; the step's kernels tend to {graph_limit} (its graph totals as the batch grows), "
                     "lower because each sequence also moves its activations and logits")
    cross = a.crossover
    lines.append(f"crossover batch: {cross.reason}")
    mem = a.memory
    where = f"one {a.machine.id}" if a.split.trivial else f"each of {a.split.devices} {a.machine.id} ({a.split})"
    usable = (f"{gib(mem.usable_bytes)} usable = {mem.utilization:.0%} of {gib(mem.capacity_bytes or 0)}"
              if mem.usable_bytes is not None else "capacity unknown")
    if mem.fits:
        fit = f"{fit_words(mem.total_bytes, mem.usable_bytes or 0.0)} on {where} ({usable})"
    elif mem.min_split is not None:
        kind = f"split of this layout ({mem.layout})" if mem.layout else "valid split"
        fit = f"DOES NOT FIT on {where} ({usable}): the smallest {kind} that fits is {mem.min_split}"
    else:
        fit = mem.warning
    lines.append(f"memory per device: weights {gib(mem.weights_bytes)} + KV cache {gib(mem.kv_cache_bytes)} + "
                 f"workspace {gib(mem.workspace_bytes)} = {gib(mem.total_bytes)}; {fit}")
    if mem.max_batch is not None and a.phase is Phase.DECODE:
        lines.append(f"the largest batch this split holds at {what} {a.seq}: {mem.max_batch:,} "
                     f"(the weights stay; KV cache and workspace grow with the sequences)")
    if not a.split.trivial:
        c = a.communication()
        kinds: dict[str, int] = {}
        algorithms: dict[str, str] = {}  # each all-reduce algorithm that runs, and why (the first reason met)
        for r in c["collectives"]:
            key = f"{r['kind']} ({r['link']}{', ' + r['algorithm'] if r.get('algorithm') else ''})"
            kinds[key] = kinds.get(key, 0) + r["count"]
            if r.get("algorithm"):
                algorithms.setdefault(r["algorithm"], r["why"])
        lines.append(f"split {a.split} on {a.system or a.machine.id}: {sum(kinds.values())} collectives per step "
                     f"({', '.join(f'{n} {k}' for k, n in kinds.items())}), {format_time(c['time_s'])} = "
                     f"{c['time_s'] / a.time_s:.0%} of the step"
                     + f"; {format_bytes(c['bytes_per_device'])} per device on the links")
        for alg, why in algorithms.items():
            lines.append(f"all-reduce {alg}: {why} (--allreduce; roofline collective all-reduce SIZE for its band)")
        if (hid := a.overlap_summary()) is not None:
            lines.append(f"{hid['option']} hides {hid['hides']}: {format_time(hid['hidden_collectives_s'])} under "
                         f"compute {format_time(hid['compute_s'])}; step floor {format_time(hid['time_with_s'])} with "
                         f"it, {format_time(hid['time_without_s'])} without")
        if a.split.pp > 1:
            lines.append(f"pipeline: the step time is the {a.split.pp} stages' in turn; tokens/s runs the batch as "
                         f"{a.split.pp} micro-batches, one in each stage (a stage: ⌈L/pp⌉ of the L layers)")
    return "\n".join(lines)


def _f(fmt: Callable[[float], str]) -> Callable[[Any], str]:
    return lambda v: "—" if v is None else fmt(v)


def band_text(v: Any) -> str:
    """An expected band {low, high} (each kernel's calibrated band, summed) as 'low–high'."""
    return "—" if not v else f"{format_time(v['low'])}–{format_time(v['high'])}"


def sweep_text(rows: list[dict[str, Any]], seq_key: str) -> str:

    cols: list[tuple[str, str, Callable[[Any], str]]] = [
            ("machine", "machine", str), ("weights_dtype", "weights", str), ("kv_dtype", "KV", str),
            ("compute_dtype", "compute", str), ("batch", "batch", str), ("seq", seq_key, str),
            ("flop", "FLOPs", _f(format_flop)), ("bytes", "bytes", _f(format_bytes)),
            ("flop_per_byte", "FLOP/B", _f(format_intensity)), ("bound", "bound", str),
            ("time_s", "time floor", _f(format_time)), ("expected_time_s", "expected", band_text),
            ("tokens_per_s", "tokens/s", _f(lambda v: f"{v:,.0f}")),
            ("memory_bytes", "weights+KV", _f(format_bytes)), ("devices", "devices to fit", _f(lambda v: str(v)))]
    first = rows[0]
    return rows_table(rows, cols, f"{first['model']} {first['phase']} sweep, plan {first['plan']}") + devices_note(rows)


def devices_note(rows: list[dict[str, Any]]) -> str:
    """Where a row needs more devices to fit than it runs on, a line saying what each column counts: the
    times are the row's own split (one device without --tp, --pp or --dp), "devices to fit" the fewest
    devices whose memory holds its weights and KV cache (was: a "devices" column of 4 beside the time
    of one device, unexplained)."""
    def runs_on(r: dict[str, Any]) -> int:
        return int(r.get("tp") or 1) * int(r.get("pp") or 1) * int(r.get("dp") or 1)

    if not any((r.get("devices") or 0) > runs_on(r) for r in rows):
        return ""
    return ("\ntime floor and tokens/s: each row's own split (one device without --tp, --pp or --dp), as if its "
            "weights and KV fit; devices to fit: the fewest devices whose memory holds them (split with --tp or "
            "--pp to time that)")


def compare_text(rows: list[dict[str, Any]]) -> str:

    cols: list[tuple[str, str, Callable[[Any], str]]] = [("model", "model", str), ("machine", "machine", str),
            ("kv_dtype", "KV", str), ("params_total", "params", _f(format_count)),
            ("params_active", "active", _f(format_count)),
            ("kv_cache_bytes_per_token", "KV/token", _f(lambda v: format_bytes(v, binary=True))),
            ("flop_per_byte", "FLOP/B", _f(format_intensity)), ("ridge_flop_per_byte", "ridge", _f(format_intensity)),
            ("decode_limit_flop_per_byte", "limit", _f(format_intensity)),
            ("crossover_batch", "crossover", lambda v: "never" if v is None else str(v)),
            ("time_s", "time floor", _f(format_time)), ("expected_time_s", "expected", band_text),
            ("tokens_per_s", "tokens/s", _f(lambda v: f"{v:,.0f}")),
            ("memory_bytes", "weights+KV", _f(format_bytes)), ("devices", "devices to fit", _f(lambda v: str(v)))]
    first = rows[0]
    what = "prompt" if first["phase"] == "prefill" else "context"
    return rows_table(rows, cols,
                      f"{first['phase']}, batch {first['batch']}, {what} {first['seq']}, plan {first['plan']}"
                      ) + devices_note(rows)


def _row_labels(rows: list[dict[str, Any]]) -> list[str]:
    """Each row named by what varies between the rows: 'llama-3-70b on h100-sxm', 'KV fp8', 'TP 8'."""
    def varies(key: str) -> bool:
        return len({str(r.get(key)) for r in rows}) > 1

    labels = []
    for r in rows:
        parts = [str(r["model"])] if varies("model") or not varies("machine") else []
        if varies("machine") or not parts:
            parts.append(("on " if parts else "") + str(r["machine"]))
        for key, name in (("weights_dtype", "weights"), ("kv_dtype", "KV"), ("compute_dtype", "compute")):
            if varies(key):
                parts.append(f"{name} {r.get(key)}")
        for key in ("tp", "pp", "ep", "dp"):
            if varies(key):
                parts.append(f"{key.upper()} {r.get(key)}")
        labels.append(" ".join(parts))
    return labels


def grouped_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """A comparison's warnings, each said once with the rows it concerns: the same text on several rows
    is one line, and the rows whose memory does not fit (each row's last warning when `fits` is False)
    are one line that names the fewest devices each needs (the devices column)."""
    labels = _row_labels(rows)
    by_text: dict[str, list[str]] = {}
    unfit: list[str] = []
    for r, label in zip(rows, labels, strict=True):
        warnings = list(r.get("warnings") or [])
        if r.get("fits") is False and warnings:
            warnings.pop()  # the memory fit's own warning, summed up below
            unfit.append(f"{label} ({r['devices']} devices)" if r.get("devices") else label)
        for w in warnings:
            by_text.setdefault(w, []).append(label)
    lines = [f"{w} ({'every row' if len(who) == len(rows) > 1 else ', '.join(who)})" for w, who in by_text.items()]
    if unfit:
        lines.append(f"{len(unfit)} of {len(rows)} rows do not fit in their devices' usable memory (weights + KV "
                     f"cache + workspace); the fewest devices that hold each: {', '.join(unfit)} (the devices "
                     f"column; --format json has each row's sums)")
    return lines


def attention_kind(cfg: Any) -> str:
    """'GQA 64/8' (query heads / K-V heads), 'MHA 12', 'MQA 8', 'MLA (latent 512 + 64)', and the window."""
    from roofline.models import AttentionKind

    h, g = cfg.num_heads, cfg.num_kv_heads
    if cfg.is_mla:
        kind = f"MLA {h} heads (latent {cfg.kv_lora_rank} + {cfg.qk_rope_head_dim})"
    elif g == h:
        kind = f"MHA {h}"
    elif g == 1:
        kind = f"MQA {h}/1"
    else:
        kind = f"GQA {h}/{g}"
    local = cfg.attention_layers(AttentionKind.LOCAL)
    if cfg.sliding_window and local:
        every = "every layer" if local == cfg.num_layers else f"{local} of {cfg.num_layers} layers"
        kind += f", {'chunks' if cfg.attention_chunked else 'window'} {cfg.sliding_window:,} on {every}"
    sparse, bs = cfg.attention_layers(AttentionKind.SPARSE), cfg.block_sparse
    if bs is not None and sparse:  # MiniMax-M3 (roofline.models.block_sparse)
        kind += f", top {bs.topk} blocks of {bs.block} on {sparse} of {cfg.num_layers} layers"
    if not cfg.is_mla and not cfg.uniform_attention:  # the full layers at a shape of their own (Gemma 4)
        kind = (f"{cfg.attention_shape(AttentionKind.LOCAL).describe()}, window {cfg.sliding_window:,} on {local} "
                f"of {cfg.num_layers} layers; full: {cfg.attention_shape(AttentionKind.GLOBAL).describe()}")
    return kind


def preset_rows() -> list[dict[str, Any]]:
    """Every preset: id, family (HF model_type), parameters, layers, attention, experts, maximum length,
    the checkpoint's dtype and the dtypes `roofline model` uses unless told (--weights-dtype, --kv-dtype)."""
    from roofline.models import load_config
    from roofline.models.config import preset_dict, preset_names

    rows = []
    for name in preset_names():
        cfg = load_config(name)
        weights = cfg.weights_dtype.name if cfg.weights_dtype is not None else "bf16"
        rows.append({"id": name, "family": cfg.architecture, "params_total": cfg.total_params,
                     "params_active": cfg.active_params, "layers": cfg.num_layers,
                     "attention": attention_kind(cfg),
                     "layer_kinds": " + ".join(f"{n} {kind}" for kind, n in cfg.layer_groups()),
                     "experts": f"{cfg.experts_per_token} of {cfg.num_experts}" if cfg.is_moe else "",
                     "max_length": cfg.max_position_embeddings,
                     "checkpoint_dtype": _checkpoint(preset_dict(name)),
                     "default_dtypes": f"{weights} / bf16 / bf16"})
    return rows


def presets_text(rows: list[dict[str, Any]]) -> str:
    from roofline.report.text.grid import Table

    t = Table(title="model presets (offline; a local config.json works as well): roofline model ID",
              title_justify="left")
    cols = (("id", "id", "left"), ("family", "family", "left"), ("params", "params_total", "right"),
            ("active", "params_active", "right"), ("layers", "layers", "right"), ("layer kinds", "layer_kinds", "left"),
            ("attention", "attention", "left"),
            ("experts", "experts", "left"), ("max length", "max_length", "right"),
            ("checkpoint", "checkpoint_dtype", "left"), ("weights / KV / compute", "default_dtypes", "left"))
    for header, _key, justify in cols:
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(*[format_count(r[key]) if key.startswith("params") else
                    f"{r[key]:,}" if key == "max_length" else str(r[key]) for _h, key, _j in cols])
    return (render(t, drop=("layer kinds", "checkpoint", "max length", "active", "family", "experts"))
            + "\nlayer kinds: each token mixer and MLP kind and the layers that run it;"
              "\nattention: query heads/K-V heads (GQA), MHA, MLA's cached latent; experts: routed per token of all;"
              "\nweights / KV / compute: the dtypes `roofline model` uses unless --weights-dtype, --kv-dtype or "
              "--dtype says otherwise; checkpoint: config.json's quantization_config (its method and format) where "
              "it has one, else its torch_dtype")


def _checkpoint(raw: Mapping[str, Any]) -> str:
    """What the checkpoint stores: its quantization method and format, else config.json's torch_dtype."""
    q = raw.get("quantization_config")
    if isinstance(q, dict) and q.get("quant_method"):
        fmt = q.get("fmt") or (f"{q['bits']}-bit" if q.get("bits") else "")
        return f"{q['quant_method']} {fmt}".strip()
    return str(raw.get("torch_dtype") or "—")
