"""Each measured row turned into our kernel of the same shape, placed on the matching catalog machine.

    gemm row (gemm_dtype, m, n, k)         C[m, n] = A[m, k] @ B[k, n] (`roofline.kernels.matmul_graph`),
                                           operands in the row's dtype, C in bf16 (the engines' output);
                                           fp8_block (128×128 block scales, DeepSeek-V3's recipe) is placed
                                           as fp8: its scales are 1/16384 of the weight's bytes
    context_attention row                  causal attention of isl queries against isl keys per sequence,
                                           batch_size sequences, num_heads query heads over
                                           num_key_value_heads K/V heads of head_dim, fused (FlashAttention);
                                           q in attn_dtype, K and V in kv_cache_dtype
    generation_attention row               one query per sequence (isl = 1) against `step` cached keys
                                           (collector/trtllm/collect_attn.py writes step = the KV length)

A row with a sliding window shorter than its length is left out (its pairs are not the causal
triangle); so is a dtype the catalog machine has no peak for. Each left-out row says why.

Layering: imports roofline.dtypes, roofline.errors, roofline.graph, roofline.kernels,
roofline.placement, roofline.hardware, roofline.expectation and this room's tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from roofline.calibration.tables import Row
from roofline.dtypes import get_dtype
from roofline.errors import RooflineError
from roofline.expectation.model import Shape, shape_of
from roofline.graph import Graph, tensor
from roofline.hardware import Machine, get_machine
from roofline.kernels import attention_ops, attention_plans, matmul_graph
from roofline.placement import Placement, place
from roofline.vocab import Plan

# the tables' dtype names -> ours
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8_e4m3", "fp8_block": "fp8_e4m3", "nvfp4": "nvfp4",
          "int8": "int8"}


@dataclass(frozen=True)
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
    p, shape = _attention_placed(row.machine, generation, b, h, g, d, nq, nkv, qdt, kvdt)
    return Joined(row, p, f"{table}.{_key(kvdt if generation else qdt)}", shape)


@cache
def _attention_placed(machine: str, generation: bool, b: int, h: int, g: int, d: int, nq: int, nkv: int, qdt: str,
                      kvdt: str) -> tuple[Placement, Shape]:
    q = tensor("q", (b, h, nq, d), get_dtype(qdt))
    k = tensor("k", (b, g, nkv, d), get_dtype(kvdt))
    v = tensor("v", (b, g, nkv, d), get_dtype(kvdt))
    o = tensor("o", (b, h, nq, d), get_dtype("bf16"))
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


__all__ = ["DTYPES", "Joined", "join"]
