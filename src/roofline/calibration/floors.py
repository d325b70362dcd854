"""The floor of every row of a measured table at once (numpy), by the formulas placement applies to
one kernel: the same FLOPs by unit, bytes by level and roofs, so a table of 400,000 GEMMs is placed in
milliseconds instead of building a graph, a kernel and a placement per shape.

Per row, with the machine's roofs (roofline.hardware: the dtype's dense matrix peak, the vector peak,
the exponential rate, shared-memory, L2 and DRAM bandwidths; a machine without per-SM data has its
datasheet units and DRAM only, as `roofline.placement.place` does):

    time floor = max(FLOPs of each unit / its peak, bytes of each level / its bandwidth)

GEMM C[m, n] = A[m, k] @ B[k, n] (roofline.kernels.matmul_op, matmul_graph):
    matrix FLOPs  2·m·n·k
    DRAM bytes    (m·k + k·n)·operand bytes + m·n·output bytes (bf16 out for 8-bit and 4-bit operands)
    SMEM = L2     operand bytes · m·n·k · (1/min(256, n) + 1/min(256, m))  (256×256 tiles, MATMUL_TILE)

Attention, FlashAttention-style, q [b, h, nq, d], K [b, g, nkv, d], V [b, g, nkv, dv], out
[b, h, nq, dv] in bf16 (roofline.kernels.attention_ops under the flash plan); causal prefill has
nq = nkv and pairs = nq·(nq + 1)/2 per head, decode nq = 1 and pairs = nkv; P = b·h·pairs:
    matrix FLOPs  2·P·d + 2·P·dv              (q·kᵀ and p·v)
    vector FLOPs  5·P + P·dv/128              (softmax, and the online rescale of each 128-key tile)
    exp ops       P + P/128
    DRAM bytes    q + K + V + out
    SMEM bytes    q bytes·P·d·(1/Bc + 1/Br) + kv bytes·P·dv/Br,  Br = min(128, nq·h/g), Bc = min(128, nkv)
    L2 bytes      q bytes·P·d/Br + q + kv bytes·P·dv/Br + out

The `Shape` columns the expected-time model reads (roofline.expectation.placed.shape_of) come out
beside the floor: output rows and columns, tile pairs and sequences × heads.

Layering: imports roofline.dtypes, roofline.vocab, roofline.hardware, roofline.kernels (the tiles)
and roofline.expectation.model (the attention tile); numpy is imported lazily.
"""

from __future__ import annotations

from typing import Any

from roofline.dtypes import get_dtype, storage_dtype
from roofline.expectation.model import ACTIVATION_BYTES, ATTENTION_TILE
from roofline.frozen import frozen
from roofline.hardware import Machine
from roofline.kernels import ATTENTION_TILE as FLASH_TILE
from roofline.kernels import MATMUL_TILE
from roofline.vocab import Level, Unit


@frozen
class Roofs:
    """One machine's roofs at one dtype, as `place` takes them (None: the machine has no such figure)."""

    machine: str
    matrix_flop_per_s: float
    vector_flop_per_s: float
    exp_per_s: float | None
    dram_bytes_per_s: float
    l2_bytes_per_s: float | None
    smem_bytes_per_s: float | None
    l2_capacity_bytes: float | None
    sms: int
    per_sm: bool  # the machine has per-SM data: on-chip levels and the softmax's extra work are placed


def roofs(m: Machine, dtype: str) -> Roofs:
    """The roofs `place` uses for a kernel at `dtype` on `m` (RooflineError when it has no matrix peak)."""
    dt = get_dtype(dtype)
    chip = m.chip
    mem = {lv.name: lv for lv in m.memory.values()}

    def level_bw(level: Level, per_chip: float | None) -> float | None:
        # a measured [memory.<level>] bandwidth wins over the per-SM figure, as in place()
        lv = mem.get(level)
        return (lv.bytes_per_s if lv is not None and lv.bytes_per_s else None) or per_chip

    l2 = mem.get(Level.L2)
    return Roofs(m.id, m.peak_flop_per_s(dt, Unit.MATRIX), m.peak_flop_per_s(dt, Unit.VECTOR),
                 chip.exp_per_s if chip is not None else None, m.memory_bytes_per_s,
                 level_bw(Level.L2, chip.l2_bytes_per_s if chip is not None else None),
                 level_bw(Level.SMEM, chip.smem_bytes_per_s if chip is not None else None),
                 l2.capacity_bytes if l2 is not None else None, chip.sms if chip is not None else 0,
                 chip is not None)


@frozen
class Floors:
    """Per row: the floor and what the expected-time model and the faster-than-floor check read."""

    floor_s: Any  # numpy float arrays, one entry a row
    compute_s: Any  # the slowest FLOP unit (matrix or vector; exponentials are ops, not FLOPs)
    dram_bytes: Any
    dram_s: Any
    memory_bound: Any  # bool: a level's term sets the floor (ties go to memory, roofline.vocab.binding)
    m: Any  # int: the Shape's output rows (gemm m; attention query rows of all heads) and columns
    n: Any
    tile_pairs: Any
    heads: Any
    # the floor under the weakest assumption the table leaves open (MoE: the fewest experts any router
    # can hit), where the floor above assumes more (the balanced spread); None: no such assumption
    relaxed_s: Any = None
    # what the expected-time model reads beyond the floor (roofline.expectation.model.Shape); None: 0
    exp_s: Any = None  # attention: the exponential units' time
    kv_heads: Any = None  # attention: sequences × K/V heads
    head_dim: Any = None  # attention: the width of a head
    input_s: Any = None  # gemm: the BF16 activation's m·k bytes over DRAM bandwidth (the quantize pass)
    output_s: Any = None  # gemm: the BF16 output's m·n bytes over DRAM bandwidth
    depth: Any = None  # gemm: k (int; the host floor's launch path reads it)
    query_tiles: Any = None  # prefill attention: sequences × query heads × ⌈nq/128⌉ (its CTAs; Shape.query_tiles)
    narrow_kv: Any = None  # bool, prefill attention: K/V stored narrower than Q (Shape.narrow_kv)

    def take(self, sel: Any) -> Floors:
        """The rows `sel` (an index array) of every column."""
        return Floors(*(None if getattr(self, f) is None else getattr(self, f)[sel] for f in FIELDS))


FIELDS = tuple(Floors.__dataclass_fields__)


def _floor(r: Roofs, matrix: Any, vector: Any, exp: Any, dram: Any, smem: Any, l2: Any) -> tuple[Any, ...]:
    import numpy as np

    t_mat = matrix / r.matrix_flop_per_s
    t_vec = vector / r.vector_flop_per_s
    t_exp = exp / r.exp_per_s if r.exp_per_s and r.per_sm else np.zeros_like(t_mat)
    t_dram = dram / r.dram_bytes_per_s
    t_smem = smem / r.smem_bytes_per_s if r.smem_bytes_per_s else np.zeros_like(t_mat)
    t_l2 = l2 / r.l2_bytes_per_s if r.l2_bytes_per_s else np.zeros_like(t_mat)
    compute = np.maximum(t_mat, t_vec)
    units = np.maximum(compute, t_exp)
    levels = np.maximum(np.maximum(t_dram, t_smem), t_l2)
    return np.maximum(units, levels), compute, t_dram, levels >= units


def gemm_floors(r: Roofs, dtype: str, m: Any, n: Any, k: Any) -> Floors:
    """Floors of C[m, n] = A[m, k] @ B[k, n] with operands in `dtype` (module docstring)."""
    import numpy as np

    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    dt = storage_dtype(dtype)
    ab = dt.bytes_per_element
    ob = dt.bytes_per_element if dt.name in ("bf16", "fp16") else get_dtype("bf16").bytes_per_element
    tm, tn, _ = MATMUL_TILE
    matrix = 2.0 * m * n * k
    dram = ab * m * k + ab * k * n + ob * m * n
    onchip = ab * m * n * k * (1 / np.minimum(tn, n) + 1 / np.minimum(tm, m))
    zero = np.zeros_like(matrix)
    floor, compute, t_dram, mem = _floor(r, matrix, zero, zero, dram, onchip, onchip)
    act = ACTIVATION_BYTES / r.dram_bytes_per_s
    return Floors(floor, compute, dram, t_dram, mem, m.astype(np.int64), n.astype(np.int64), zero, zero,
                  input_s=m * k * act, output_s=m * n * act, depth=k.astype(np.int64))


def attention_floors(r: Roofs, generation: bool, qdt: str, kvdt: str, b: Any, h: Any, g: Any, d: Any,
                     nq: Any, dv: Any = None, shared_kv: bool = False, pv_width: Any = None) -> Floors:
    """Floors of fused attention (module docstring): causal prefill of nq tokens (`generation` False),
    or one query against nq cached keys (`generation` True). `dv` is V's width (default d). MLA's
    absorbed form (roofline.models.build) attends over one latent cache that is K and V at once
    (`shared_kv`: read once) and multiplies by its first `pv_width` columns (kv_lora_rank), so p·v
    costs 2·P·pv_width FLOPs and the output is pv_width wide."""
    import numpy as np

    b, h, g, d, n = (np.asarray(x, dtype=float) for x in (b, h, g, d, nq))
    dv = d if dv is None else np.asarray(dv, dtype=float)
    pw = dv if pv_width is None else np.asarray(pv_width, dtype=float)
    qb, kvb = get_dtype(qdt).bytes_per_element, get_dtype(kvdt).bytes_per_element
    ob = get_dtype("bf16").bytes_per_element
    q_rows = np.ones_like(n) if generation else n
    pairs = n if generation else n * (n + 1) / 2
    p = b * h * pairs
    br_tile, bc_tile = FLASH_TILE
    er = np.minimum(br_tile, q_rows * np.floor_divide(h, g))
    ec = np.minimum(bc_tile, n)
    matrix = 2.0 * p * d + 2.0 * p * pw
    vector = 5.0 * p + (p * dv / bc_tile if r.per_sm else 0.0)
    exp = p + p / bc_tile
    q_bytes, out_bytes = qb * b * h * q_rows * d, ob * b * h * q_rows * pw
    dram = q_bytes + kvb * b * g * n * (d if shared_kv else d + dv) + out_bytes
    smem_pv = kvb * p * dv / er
    smem = qb * p * d * (1 / ec + 1 / er) + smem_pv
    l2 = qb * p * d / er + q_bytes + smem_pv + out_bytes
    floor, compute, t_dram, mem = _floor(r, matrix, vector, exp, dram, smem, l2)
    tile = ATTENTION_TILE
    # shape_of reads one query per sequence as decode, a one-token prefill included: each sequence's
    # K/V heads stream their key tiles; longer prefill tiles b·g groups of nq·h/g query rows, and query
    # tile i visits the key tiles up to its own, qt·(qt + 1)/2 pairs per head
    one = q_rows == 1
    qt = np.ceil(n / tile)
    rows_ = np.where(one, 0.0, b * g * np.ceil(n * np.floor_divide(h, g) / tile) * tile)
    pairs_t = np.where(one, b * g * np.ceil(n / tile), b * h * qt * (qt + 1) / 2)
    t_exp = exp / r.exp_per_s if r.exp_per_s and r.per_sm else np.zeros_like(floor)
    return Floors(floor, compute, dram, t_dram, mem, rows_.astype(np.int64), np.zeros_like(n, dtype=np.int64),
                  pairs_t, b * h, exp_s=t_exp, kv_heads=b * g, head_dim=d, query_tiles=np.where(one, 0.0, b * h * qt),
                  narrow_kv=~one & (kvb < qb))


__all__ = ["FIELDS", "Floors", "Roofs", "attention_floors", "gemm_floors", "roofs"]
