"""Each measured row turned into our kernel of the same shape, placed on the matching catalog machine.

    gemm row (gemm_dtype, m, n, k)         C[m, n] = A[m, k] @ B[k, n] (`roofline.kernels.matmul_graph`),
                                           operands in the row's dtype, C in bf16 (the engines' output);
                                           fp8_block (128×128 block scales, DeepSeek-V3's recipe) is placed
                                           as fp8: its scales are 1/16384 of the weight's bytes
    context_attention row                  causal attention of isl queries against isl keys per sequence,
                                           batch_size sequences, num_heads query heads over
                                           num_key_value_heads K/V heads of head_dim, fused (FlashAttention);
                                           q in attn_dtype, K and V in kv_cache_dtype; the
                                           matrix units run in q's dtype, except where the
                                           engine casts q to the cache's (FP8_QUERY_CAST)
    generation_attention row               one query per sequence (isl = 1) against `step` cached keys
                                           (collector/trtllm/collect_attn.py writes step = the KV length);
                                           V as wide as K, except SGLang's head_dim 192 (NARROW_V);
                                           TensorRT-LLM before 1.3.0rc20 timed decode on a K-only
                                           cache: one tensor streamed (K_ONLY_BEFORE)

An attention row timed on another kernel than its table's main one for the same shapes is its own kind,
`<kind>@<kernel_source>` (roofline.calibration.tables.kernel_groups says which and why).

A row with a sliding window shorter than its length is left out (its pairs are not the causal
triangle); so is a dtype the catalog machine has no peak for. Each left-out row says why.

`join` places one row through a graph, a kernel and a placement (what `calibrate` fits on);
`join_table` reads a whole table at once with the same formulas in numpy (roofline.calibration.floors),
for `validate`; the two agree to 1e-12 on every fixture row (tests/test_validate_floors.py).

Layering: imports roofline.dtypes, roofline.errors, roofline.graph, roofline.kernels,
roofline.placement, roofline.hardware, roofline.expectation and this room's tables and floors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from functools import cache
from typing import Any

from roofline.calibration.floors import FIELDS, Floors, Roofs, attention_floors, gemm_floors, roofs
from roofline.calibration.tables import KERNEL_GROUP, Row, Table, version_key
from roofline.dtypes import get_dtype
from roofline.errors import RooflineError
from roofline.expectation.model import Shape
from roofline.expectation.placed import shape_of
from roofline.frozen import frozen
from roofline.graph import Graph, tensor
from roofline.hardware import Machine, get_machine
from roofline.kernels import attention_ops, attention_plans, matmul_graph
from roofline.placement import Placement, place
from roofline.vocab import Plan

# the tables' dtype names -> ours
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8_e4m3", "fp8_block": "fp8_e4m3", "nvfp4": "nvfp4",
          "int8": "int8"}


@frozen
class Joined:
    """A measured row beside our placement of its shape (placed once per shape, without the measured
    time: `measured_s` is the row's). `kind` keys the fit (gemm.bf16, ...)."""

    row: Row
    placement: Placement
    kind: str
    shape: Shape  # what the expected-time model reads of the placement, taken once per shape

    @property
    def measured_s(self) -> float:
        return self.row.measured_s

    @property
    def floor_s(self) -> float:
        return self.shape.floor_s


@cache
def _machine(machine_id: str) -> Machine:
    return get_machine(machine_id)


def _int(row: Row, key: str) -> int:
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or v < 0:
        raise RooflineError(f"column {key} is {v!r}, not a whole number")
    return int(v)


def _dtype(name: object) -> str:
    if not isinstance(name, str) or name not in DTYPES:
        raise RooflineError(f"dtype {name!r} has no counterpart here")
    return DTYPES[name]


def _gemm(row: Row) -> Joined:
    raw = row.get("gemm_dtype")
    p, shape = _gemm_placed(row.machine, str(raw), _int(row, "m"), _int(row, "n"), _int(row, "k"))
    return Joined(row, p, f"gemm.{raw if raw == 'fp8_block' else _key(_dtype(raw))}", shape)


# The engines' tables share most shapes (three engines time the same GEMMs): each shape is placed once.
@cache
def _gemm_placed(machine: str, raw: str, mm: int, n: int, k: int) -> tuple[Placement, Shape]:
    dt = _dtype(raw)
    out = "bf16" if dt not in ("bf16", "fp16") else dt
    kernel = matmul_graph(mm, n, k, dt, out_dtype=out).kernels()[0]
    p = place(kernel, _machine(machine), dt, name=f"gemm {raw} {mm}×{n}×{k}")
    return p, shape_of(p)


# SGLang times head_dim 192 only as MiMo-V2-Flash's attention, whose V is 128 wide: its collector refuses
# 192 without that contract ("head_dim=192 requires the explicit MiMo-V2 SGLang attention contract",
# collector/sglang/collect_attn.py; v_head_dim 128 in collector/cases/models/MiMoV2FlashForCausalLM_cases.yaml).
# TensorRT-LLM and vLLM run 192 with V as wide as K (vLLM's (192, 192), collector/vllm/collect_attn.py).
NARROW_V: Mapping[tuple[str, int], int] = {("sglang", 192): 128}


# aiconfigurator's TensorRT-LLM attention collector allocated the KV cache as CacheType.SELFKONLY (one
# K-only pool, the MLA layout) until its 1.3.0rc20 upgrade (commit dec5f4cd2, 2026-08-03), which says:
# "Serving allocates dense-attention KV cache as CacheType.SELF ...; SELFKONLY is reserved for MLA.
# Regular GQA/MHA has separate K and V tensors" (collector/trtllm/collect_attn.py; SELFKONLY in every
# tag v0.3.0 to v0.11.0). Decode rows timed on the K-only pool read V from the same blocks as K: one
# cache tensor streamed, not two. Of the tables shipped, A100's TensorRT-LLM 1.0.0 is the one so timed.
K_ONLY_BEFORE = ("trtllm", "1.3.0rc20")

# TensorRT-LLM's FlashInfer backend on Blackwell, as aiconfigurator times it (kernel_source
# 'torch_flow_flashinfer'): the collector pins FlashInfer's trtllm-gen sub-backend, as Gemma4's serving does
# (collector/trtllm/collect_attn.py:108-136 and 246-259, `attn.flashinfer_backend = "trtllm-gen"`;
# ai-dynamo/aiconfigurator 095f58a), and with an FP8 KV cache that backend casts the BF16 query to the
# cache's FP8 before prefill, "so context cubins (QkvE4m3OBfloat16) can be used. trtllm-gen context cubins
# require same Q/KV dtype" (tensorrt_llm/_torch/attention_backend/flashinfer.py, forward_impl; the collector
# cites it as flashinfer.py:1789-1791@1.3.0rc20): Q·Kᵀ and P·V run on FP8 operands, at FP8's matrix rate,
# while the table's attn_dtype says bfloat16 (the model's). Such a prefill row is placed with q in the
# cache's dtype and is of the kind context_attention.fp8@torch_flow_flashinfer. What the table shows (B200,
# 1.3.0rc20, aiconfigurator-core 0.12.0): at the same shape the FP8-cache rows took a median 0.59x the
# BF16-cache rows' time at 6,144-16,384 tokens (10th-90th percentile 0.53-0.66; b8 isl 16384 h16/2 d512:
# 24.9 against 43.1 ms), where the matrix units bind (FP8 dense 4.5 PFLOP/s against BF16's 2.25), and 1.2-1.3x
# at 1-512 tokens, where the casts (K and V before the cache append, Q before the prefill: three more kernels
# in the timed graph; collector/helper.py's benchmark_with_power replays one CUDA graph, so FlashInfer's
# host-side plan() is not timed) cost more than the FP8 matrix units save. Pooled as BF16 the 737 rows of
# floors >= 10 us fitted at 18.9% MAPE, apart 7.6% (BF16 cache, 371 rows) and 6.6% (FP8 cache, 321); fitted
# on half of a kind's rows and scored on the other half, 7.7-7.8% and 6.3-7.1% (pooled: 19.1-19.3%).
FP8_QUERY_CAST = {("trtllm", "torch_flow_flashinfer")}


def matrix_dtype(casts: bool, generation: bool, qdt: str, kvdt: str) -> str:
    """The dtype a row's attention multiplies in: q's, or an FP8 cache's in a prefill whose kernel casts q
    to it (`casts`: the row's engine and kernel_source among FP8_QUERY_CAST)."""
    cast = casts and not generation and kvdt.startswith("fp8")
    return kvdt if cast and get_dtype(kvdt).bytes_per_element < get_dtype(qdt).bytes_per_element else qdt


def k_only_cache(engine: str, version: str) -> bool:
    """Whether a decode row of this engine and version was timed on a K-only cache (K_ONLY_BEFORE)."""
    return engine == K_ONLY_BEFORE[0] and version_key(version) < version_key(K_ONLY_BEFORE[1])


def value_width(engine: str, head_dim: int) -> int:
    """V's width for a row of `engine` with this head_dim (NARROW_V, else the head_dim)."""
    return NARROW_V.get((engine, head_dim), head_dim)


def _key(dt: str) -> str:
    return {"bf16": "bf16", "fp16": "bf16", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}.get(dt, dt)


def _attention(row: Row, generation: bool) -> Joined:
    b, h, g, d = (_int(row, c) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
    g = g or h  # 0 in a few tables means MHA
    nq = 1 if generation else _int(row, "isl")
    nkv = _int(row, "step") if generation else nq
    if nkv < 1 or b < 1 or h < 1 or d < 1:
        raise RooflineError("an empty shape")
    window = row.get("window_size") or 0
    if isinstance(window, int | float) and 0 < window < nkv:
        raise RooflineError(f"sliding window {int(window)} < length {nkv}")
    qdt, kvdt = _dtype(row.get("attn_dtype", "bfloat16")), _dtype(row.get("kv_cache_dtype", "bfloat16"))
    table = "generation_attention" if generation else "context_attention"
    dv = value_width(row.engine, d)
    shared = generation and k_only_cache(row.engine, row.version)
    qdt = matrix_dtype((row.engine, row.get("kernel_source")) in FP8_QUERY_CAST, generation, qdt, kvdt)
    p, shape = _attention_placed(row.machine, generation, b, h, g, d, nq, nkv, qdt, kvdt, dv, shared)
    return Joined(row, p, f"{table}.{_key(kvdt if generation else qdt)}", shape)


@cache
def _attention_placed(machine: str, generation: bool, b: int, h: int, g: int, d: int, nq: int, nkv: int, qdt: str,
                      kvdt: str, dv: int | None = None, shared_kv: bool = False) -> tuple[Placement, Shape]:
    dv = d if dv is None else dv
    q = tensor("q", (b, h, nq, d), get_dtype(qdt))
    k = tensor("k", (b, g, nkv, d), get_dtype(kvdt))
    v = k if shared_kv else tensor("v", (b, g, nkv, dv), get_dtype(kvdt))  # a K-only pool: V read from K's blocks
    o = tensor("o", (b, h, nq, dv), get_dtype("bf16"))
    graph = Graph(attention_ops("attention", q, k, v, o, causal=not generation), name="attention")
    kernel = graph.kernels(attention_plans("attention")[Plan.FLASH])[0]
    what = f"b{b} h{h}/{g} d{d} " + (f"kv {nkv}" if generation else f"isl {nq}")
    table = "generation_attention" if generation else "context_attention"
    p = place(kernel, _machine(machine), qdt, name=f"{table} {what}")
    return p, shape_of(p)


def join(row: Row) -> Joined:
    """Our placement of the row's shape on its catalog machine; RooflineError saying why it cannot be."""
    if row.table == "gemm":
        return _gemm(row)
    if row.table in ("context_attention", "generation_attention"):
        return _attention(row, row.table == "generation_attention")
    raise RooflineError(f"table {row.table} is not joined yet")


# --- a whole table at once (numpy): the same reading, the floors of roofline.calibration.floors -----

@frozen
class JoinedTable:
    """A measured table's rows that join (`keep`, indexes into the table), their kinds and floors, and
    the count of rows left out by why. `name(i)` names kept row i as `join` would."""

    table: Table
    keep: Any  # numpy int array
    kinds: Any  # numpy object array of kind keys (gemm.bf16, ...)
    floors: Floors
    roofs: Mapping[str, Roofs]  # kind -> the roofs its floors were placed on
    left_out: Mapping[str, int] = field(default_factory=dict)
    namer: Callable[[Table, int], str] | None = None

    @property
    def measured_s(self) -> Any:
        return self.table.measured_s[self.keep]

    def name(self, i: int) -> str:
        row = int(self.keep[i])
        return self.namer(self.table, row) if self.namer else f"{self.table.table} row {row}"


def count_left(left: dict[str, int], why: str, n: int) -> None:
    left[why] = left.get(why, 0) + n


def numbers(raw: Any) -> Any:
    """A column as floats, NaN where an entry is not a number (None, a string, a bool)."""
    import numpy as np

    if raw.dtype.kind in "iuf":
        return raw.astype(float)
    return np.array([float(x) if isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool)
                     else np.nan for x in raw], dtype=float)


def whole(t: Table, key: str, ok: Any, left: dict[str, int]) -> Any:
    """Column `key` as floats, rows that are not whole numbers ≥ 0 struck from `ok` (and counted)."""
    import numpy as np

    v = numbers(t.column(key))
    bad = ok & ~(np.isfinite(v) & (v >= 0) & (v == np.floor(np.where(np.isfinite(v), v, 0))))
    if bad.any():
        count_left(left, f"column {key} is not a whole number", int(bad.sum()))
    ok &= ~bad
    return np.where(ok, v, 1.0)


def machine_roofs(machine: str, dt: str, left: dict[str, int], rows: int) -> Roofs | None:
    try:
        return roofs(_machine(machine), dt)
    except RooflineError as exc:
        left[str(exc)] = left.get(str(exc), 0) + rows
        return None


def assemble(t: Table, parts: list[tuple[Any, str, Roofs, Floors]], left: dict[str, int],
              namer: Callable[[Table, int], str]) -> JoinedTable:
    import numpy as np

    if not parts:
        empty = np.zeros(0)
        return JoinedTable(t, empty.astype(np.int64), empty.astype(object),
                           Floors(*(empty for _ in range(9))), {}, left, namer)
    idx = np.concatenate([p[0] for p in parts])
    order = np.argsort(idx, kind="stable")
    kinds = np.concatenate([np.full(len(p[0]), p[1], dtype=object) for p in parts])[order]
    cols: list[Any] = []
    for f in FIELDS:
        got = [getattr(p[3], f) for p in parts]
        if all(g is None for g in got):
            cols.append(None)
            continue
        # a part without the column: its floor where the column is a floor (relaxed_s), else 0
        got = [(p[3].floor_s if f == "relaxed_s" else np.zeros_like(p[3].floor_s)) if g is None else g
               for p, g in zip(parts, got, strict=True)]
        cols.append(np.concatenate(got)[order])
    return JoinedTable(t, idx[order], kinds, Floors(*cols), {p[1]: p[2] for p in parts}, left, namer)


def _gemm_name(t: Table, i: int) -> str:
    c = t.columns
    return f"gemm {c['gemm_dtype'][i]} {int(c['m'][i])}×{int(c['n'][i])}×{int(c['k'][i])}"


def _gemm_table(t: Table) -> JoinedTable:
    import numpy as np

    left: dict[str, int] = {}
    ok = np.ones(len(t), dtype=bool)
    m, n, k = (whole(t, c, ok, left) for c in ("m", "n", "k"))
    raw = np.asarray(t.column("gemm_dtype"), dtype=object)
    parts = []
    for name in sorted({str(x) for x in raw[ok]}):
        sel = ok & (raw == name)
        if name not in DTYPES:
            left[f"dtype {name!r} has no counterpart here"] = int(sel.sum())
            continue
        dt = DTYPES[name]
        r = machine_roofs(t.machine, dt, left, int(sel.sum()))
        if r is None:
            continue
        i = np.flatnonzero(sel)
        parts.append((i, f"gemm.{name if name == 'fp8_block' else _key(dt)}", r, gemm_floors(r, dt, m[i], n[i], k[i])))
    return assemble(t, parts, left, _gemm_name)


def _attention_name(t: Table, i: int) -> str:
    c = t.columns
    b, h, d = (int(c[x][i]) for x in ("batch_size", "num_heads", "head_dim"))
    g = int(c["num_key_value_heads"][i]) or h
    what = f"kv {int(c['step'][i])}" if t.table == "generation_attention" else f"isl {int(c['isl'][i])}"
    return f"{t.table} b{b} h{h}/{g} d{d} {what}"


def _attention_table(t: Table) -> JoinedTable:
    import numpy as np

    generation = t.table == "generation_attention"
    left: dict[str, int] = {}
    ok = np.ones(len(t), dtype=bool)
    b, h, g, d = (whole(t, c, ok, left) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
    g = np.where(g == 0, h, g)  # 0 in a few tables means MHA
    n = whole(t, "step" if generation else "isl", ok, left)
    empty = ok & ((n < 1) | (b < 1) | (h < 1) | (d < 1))
    if empty.any():
        left["an empty shape"] = int(empty.sum())
    ok &= ~empty
    uneven = ok & (np.mod(h, g) != 0)
    if uneven.any():
        left["query heads not a multiple of key/value heads"] = int(uneven.sum())
    ok &= ~uneven
    window = np.nan_to_num(numbers(t.column("window_size", 0)))
    windowed = ok & (window > 0) & (window < n)
    if windowed.any():
        left["sliding window"] = int(windowed.sum())
    ok &= ~windowed
    qraw = np.asarray(t.column("attn_dtype", "bfloat16"), dtype=object)
    kvraw = np.asarray(t.column("kv_cache_dtype", "bfloat16"), dtype=object)
    source = np.asarray(t.column(KERNEL_GROUP, ""), dtype=object)  # roofline.calibration.tables.kernel_groups
    casting = {k for e, k in FP8_QUERY_CAST if e == t.engine}
    casts = np.fromiter((k in casting for k in t.column("kernel_source", "").tolist()), bool, len(t))
    parts = []
    for qn, kvn, src, cast in sorted({(str(a), str(c), s, bool(k)) for a, c, s, k in
                                      zip(qraw[ok], kvraw[ok], source[ok], casts[ok], strict=True)}):
        sel = ok & (qraw == qn) & (kvraw == kvn) & (source == src) & (casts == cast)
        bad = next((x for x in (qn, kvn) if x not in DTYPES), None)
        if bad is not None:
            count_left(left, f"dtype {bad!r} has no counterpart here", int(sel.sum()))
            continue
        qdt, kvdt = DTYPES[qn], DTYPES[kvn]
        qdt = matrix_dtype(cast, generation, qdt, kvdt)
        r = machine_roofs(t.machine, qdt, left, int(sel.sum()))
        if r is None:
            continue
        i = np.flatnonzero(sel)
        kind = f"{t.table}.{_key(kvdt if generation else qdt)}{src}"
        dv = np.array([value_width(t.engine, int(x)) for x in d[i]], dtype=float)
        shared = generation and k_only_cache(t.engine, t.version)
        parts.append((i, kind, r, attention_floors(r, generation, qdt, kvdt, b[i], h[i], g[i], d[i], n[i], dv,
                                                   shared_kv=shared)))
    return assemble(t, parts, left, _attention_name)


TABLE_JOINS: Mapping[str, Callable[[Table], JoinedTable]] = {
    "gemm": _gemm_table, "context_attention": _attention_table, "generation_attention": _attention_table,
}


def join_table(t: Table) -> JoinedTable:
    """Every row of a measured table beside our floor of its shape (`join`'s reading, whole-table)."""
    joiner = TABLE_JOINS.get(t.table)
    if joiner is None:
        raise RooflineError(f"table {t.table} is not joined yet")
    return joiner(t)


__all__ = ["DTYPES", "FP8_QUERY_CAST", "TABLE_JOINS", "Joined", "JoinedTable", "join", "join_table", "matrix_dtype"]
