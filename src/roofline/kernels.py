"""Op builders: one FLOP formula per kind of op, over shapes, with the convention in the docstring.

We count FLOPs, not MACs, hence the 2s in matmuls. A builder takes the tensors an op reads and
writes and returns the Op; the convenience functions at the bottom build one-kernel graphs for the
`roofline kernel` command.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.dtypes import DType, get_dtype, storage_dtype
from roofline.errors import RooflineError
from roofline.graph import FusionPlan, Graph, OnChip, Op, Tensor, tensor
from roofline.units import require_positive_int
from roofline.vocab import Level, Plan, Role, Unit

# FLOPs per output element of elementwise and row-wise ops: the one place these live.
FLOP_PER_ELEMENT: dict[str, float] = {
    "add": 1,  # a + b
    "mul": 1,  # a * b
    "relu": 1,  # max(x, 0)
    "relu2": 2,  # ReLU²: max(x, 0), squared (Nemotron-H's MLP, So et al. arXiv 2109.08668 "Primer")
    "silu": 4,  # x / (1 + exp(-x)): negate, exp, add, divide
    "gelu": 9,  # tanh form: x^3 (2), *0.044715, +x, *sqrt(2/pi), tanh, +1, *x, *0.5
    "swiglu": 5,  # silu(gate) * up: 4 + 1
    "geglu": 10,  # gelu(gate) * up: 9 + 1
    # gpt-oss's clamped SwiGLU (transformers GptOssExperts): gate.clamp(max=l) 1, up.clamp(-l, l) 2,
    # gate·sigmoid(1.702·gate) 1 + 4 + 1, (up + 1)·glu 2
    "swiglu_clamped": 11,
    # DeepSeek-V4's swiglu_limit (transformers DeepseekV4Experts._apply_gate): gate.clamp(max=l) 1,
    # up.clamp(-l, l) 2, silu(gate) 4, · up 1
    "swiglu_limited": 8,
    # Kimi K3's SiTU (TensorRT-LLM kimi_k3_moe/_mlp.py SituAndMul, the checkpoint's modeling_kimi.py):
    # β·tanh(gate/β)·sigmoid(gate) 1 + 1 + 1 + 4 + 1, times β_l·tanh(up/β_l) 3 (activation_situ_linear_beta), 1
    "situ": 12,
    "situ_gate": 9,  # without activation_situ_linear_beta: the up half as it is
    "rope": 3,  # x * cos + rotate_half(x) * sin: 2 multiplies, 1 add
    # RMSNorm: the textbook "about six FLOPs per element": square, accumulate, multiply by 1/rms,
    # multiply by the gain, plus the conversions to fp32 and back (per-row rsqrt is amortised)
    "rmsnorm": 6,
    # LayerNorm, same convention: sum, subtract mean, square, accumulate, multiply by 1/sigma,
    # multiply by gamma, add beta, plus the two conversions
    "layernorm": 9,
    "softmax": 5,  # running max, subtract, exp, accumulate, divide
}

# Exponentials per output element, evaluated on the exp units (MUFU.EX2 on NVIDIA). Each is also one
# of FLOP_PER_ELEMENT's FLOPs on the vector lanes: the multiply by log2(e) that precedes MUFU.EX2.
# GELU's tanh is one MUFU op (tanh.approx) as well.
EXP_PER_ELEMENT: dict[str, float] = {"silu": 1, "swiglu": 1, "swiglu_clamped": 1, "swiglu_limited": 1,
                                     "gelu": 1, "geglu": 1, "situ": 3, "situ_gate": 2,  # sigmoid's exp, the tanhs
                                     "softmax": 1}

# --- tiling: bytes through shared memory and L2 ----------------------------------------------
# Default tiles are those of kernels people run. Matmul: 256×256 outputs per pair of SMs sharing
# operands (CUTLASS's Blackwell 2-SM MMA, two 128×256 tiles that read B once; on Hopper a 2×1
# cluster of 128×256 tiles with TMA multicast), K step 32 so that two stages fit every catalog
# machine's shared memory (64 KiB on MI300X). 128×256 and 128×128 are the common single-SM tiles.
# Attention: FlashAttention-3 (H100, d = 128) and FlashAttention-4 (B200) tile 128 queries × 128 keys.
MATMUL_TILE = (256, 256, 32)
ATTENTION_TILE = (128, 128)
STAGES = 2  # operand tiles double-buffered: the least a pipelined kernel keeps in shared memory
# One exponential emulated on the FMA lanes (FlashAttention-4's 2^x = 2^floor(x) · p(x − floor(x)),
# p of degree 3 by Horner): floor, subtract and 3 FMAs, 5 FP32 lane instructions = 10 FLOPs of the
# vector peak's time (the exponent's integer add runs on the INT32 lanes).
EXP_EMULATION_VECTOR_FLOP = 10.0
# FlashAttention-4's conditional rescaling skips the output rescale unless the running max grows by
# more than a threshold: "avoid 90% of softmax rescaling" (T. Dao, FA4 announcement), so 10% remain.
CONDITIONAL_RESCALE = 0.1


def _tile(value: int, label: str) -> int:
    return require_positive_int(value, label)


def parse_tile(text: str, dims: int) -> tuple[int, ...]:
    """'128x256x64' (or with ×) -> (128, 256, 64): `dims` positive whole numbers."""
    parts = text.replace("×", "x").lower().split("x")
    try:
        tile = tuple(int(part) for part in parts)
    except ValueError:
        tile = ()
    if len(tile) != dims or any(t < 1 for t in tile):
        example = "x".join(str(t) for t in (MATMUL_TILE if dims == 3 else ATTENTION_TILE))
        raise RooflineError(f"tile {text!r}: expected {dims} positive whole numbers joined by x, like {example}")
    return tile


def matmul_onchip(m: int, n: int, k: int, batch: int, bytes_per_element: float,
                  tile: tuple[int, int, int] | None = None) -> tuple[dict[Level, float], OnChip]:
    """Bytes through shared memory and L2 of C[M, N] = A[M, K] @ B[K, N] tiled tile_m × tile_n × tile_k.

    Each tile_m × tile_n block of C reads a tile_m × K panel of A and a K × tile_n panel of B, so A is
    read N / tile_n times and B M / tile_m times (the 2·M·N·K / tile reuse arithmetic):

        smem bytes = bytes · M·N·K · (1/tile_n + 1/tile_m)     (per batch element)

    and the same bytes come from L2 (each tile enters shared memory once). A tile larger than the
    matrix is the matrix (a decode GEMV reuses nothing). The tiles need STAGES · (tile_m + tile_n) ·
    tile_k · bytes of shared memory per thread block.
    """
    tm, tn, tk = tile or MATMUL_TILE
    if tile:  # a tile the caller chose (MATMUL_TILE is one already checked)
        for label, v in (("tile-m", tm), ("tile-n", tn), ("tile-k", tk)):
            _tile(v, label)
    em, en = min(tm, m), min(tn, n)
    smem = bytes_per_element * batch * m * n * k * (1 / en + 1 / em)
    footprint = STAGES * (em + en) * min(tk, k) * bytes_per_element
    words = (f"CTA tile {tm}×{tn}×{tk}{' (clamped to ' + f'{em}×{en}' + ')' if (em, en) != (tm, tn) else ''}, "
             f"{STAGES} stages: smem bytes = bytes·M·N·K·(1/{en} + 1/{em})")
    return ({Level.SMEM: smem, Level.L2: smem},
            OnChip(smem_bytes=footprint, tiles=words, explicit=tile is not None))


def _dims(shape: Sequence[int]) -> str:
    return "×".join(str(s) for s in shape)


def matmul_op(name: str, a: Tensor, b: Tensor, out: Tensor, count: int = 1,
              extra_inputs: Sequence[Tensor] = (), compute_dtype: DType | None = None,
              tile: tuple[int, int, int] | None = None) -> Op:
    """out[..., M, N] = a[..., M, K] @ b[..., K, N]: 2·M·N·K FLOPs per batch element (a multiply
    and an add per MAC). Leading dims broadcast; `extra_inputs` (a bias) are read, not counted as
    FLOPs beyond the matmul's (a bias add is M·N, noted but negligible). Its shared-memory and L2
    bytes follow `matmul_onchip` with `tile` (default MATMUL_TILE)."""
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise RooflineError(f"{name}: matmul operands need at least 2 dims, got {a.shape} and {b.shape}")
    m, k = a.shape[-2], a.shape[-1]
    k2, n = b.shape[-2], b.shape[-1]
    if k != k2:
        raise RooflineError(f"{name}: inner dims differ: {_dims(a.shape)} @ {_dims(b.shape)}")
    batch = out.elements // (m * n) if m * n else 0
    if out.shape[-2:] != (m, n):
        raise RooflineError(f"{name}: output {_dims(out.shape)} is not [..., {m}, {n}]")
    flop = 2.0 * batch * m * n * k
    where = f"2·{batch}·M·N·K" if batch != 1 else "2·M·N·K"
    nums = f"2·{batch}·{m}·{n}·{k}" if batch != 1 else f"2·{m}·{n}·{k}"
    operand_bytes = max(a.dtype.bytes_per_element, b.dtype.bytes_per_element)
    traffic, onchip = matmul_onchip(m, n, k, batch, operand_bytes, tile)
    return Op(name, "matmul", (a, b, *extra_inputs), (out,), {Unit.MATRIX: flop}, count,
              formula=f"{where} = {nums}", compute_dtype=compute_dtype, traffic=traffic, onchip=onchip)


def elementwise_op(name: str, kind: str, inputs: Sequence[Tensor], out: Tensor, count: int = 1,
                   note: str = "") -> Op:
    """FLOP_PER_ELEMENT[kind] per output element, on the vector units."""
    if kind not in FLOP_PER_ELEMENT:
        raise RooflineError(f"no FLOP convention for {kind!r}; known: {', '.join(FLOP_PER_ELEMENT)}")
    per = FLOP_PER_ELEMENT[kind]
    flop = per * out.elements
    exps = EXP_PER_ELEMENT.get(kind, 0) * out.elements
    return Op(name, kind, tuple(inputs), (out,), {Unit.VECTOR: float(flop)}, count,
              formula=f"{per:g}·elements = {per:g}·{_dims(out.shape)}", note=note,
              onchip=OnChip({Unit.EXP: float(exps)}) if exps else None)


def norm_op(name: str, kind: str, x: Tensor, gain: Tensor, out: Tensor, count: int = 1,
            extra: Sequence[Tensor] = ()) -> Op:
    """RMSNorm / LayerNorm over the last dim: FLOP_PER_ELEMENT[kind] per element; reads x and the gain."""
    return elementwise_op(name, kind, (x, gain, *extra), out, count)


def attention_ops(prefix: str, q: Tensor, k: Tensor, v: Tensor, out: Tensor, causal: bool,
                  count: int = 1, scores_dtype: str | DType | None = None,
                  kv_offset: int | None = None, tile: tuple[int, int] | None = None,
                  exp_emulated: float = 0.0, rescale: float = 1.0) -> list[Op]:
    """Attention as three ops: scores = q·kᵀ, probabilities = softmax(scores), out = p·v.

    q [B, H, Nq, d], k [B, G, Nkv, d], v [B, G, Nkv, dv], out [B, H, Nq, dv]; G divides H (GQA).
    FLOPs: 2·d and 2·dv per (query, key) pair for the two matmuls (the textbook 4·N²·d per head when
    d = dv), and 5 per pair for the softmax. With `causal`, only unmasked pairs are counted: the
    queries are the last Nq of Nkv positions, so pairs = Nq·Nkv − Nq·(Nq−1)/2 (≈ N²/2 in prefill).
    The score and probability tensors are full [B, H, Nq, Nkv]: written to memory when the ops run
    as separate kernels (naive), kept on chip when fused. Plans: `attention_plans`.

    Inside the chip (FlashAttention's tiling, tile = Br queries × Bc keys, default ATTENTION_TILE):
    one exponential per score; the queries of the H/G heads sharing a K/V head fill a tile's rows
    together (so Br is at most Nq·H/G), K and V tiles pass through shared memory once per query
    tile and the query tile once per key tile, the scores stay in registers (TMEM on Blackwell):

        smem bytes = bytes · pairs · (d·(1/Bc + 1/Br) + dv/Br)
        L2 bytes   = bytes · pairs · (d + dv)/Br  + q and out once
        fused only: rescaling the running output, dv FLOPs and 1 exp per query row per key tile
                    (pairs·dv/Bc and pairs/Bc), times `rescale` (CONDITIONAL_RESCALE for FA4's)

    `exp_emulated` is the share of exponentials evaluated by a polynomial on the FMA lanes instead
    (FlashAttention-4 emulates 10–25%): EXP_EMULATION_VECTOR_FLOP vector FLOPs of time each.
    """
    b, h, nq, d = q.shape
    bk, g, nkv, dk = k.shape
    dv = v.shape[-1]
    if d != dk or bk != b or v.shape[:3] != k.shape[:3]:
        raise RooflineError(f"{prefix}: q {_dims(q.shape)}, k {_dims(k.shape)}, v {_dims(v.shape)} do not fit")
    if g < 1 or h % g:
        raise RooflineError(f"{prefix}: query heads ({h}) must be a multiple of key/value heads ({g})")
    if nq > nkv:
        raise RooflineError(f"{prefix}: more queries ({nq}) than keys ({nkv})")
    if causal:
        offset = nkv - nq if kv_offset is None else kv_offset
        pairs = nq * offset + nq * (nq + 1) // 2
        pair_text = f"Nq·(Nkv−Nq) + Nq·(Nq+1)/2 = {nq}·{offset} + {nq}·{nq + 1}/2 = {pairs}"
    else:
        pairs = nq * nkv
        pair_text = f"Nq·Nkv = {nq}·{nkv} = {pairs}"
    sdt = get_dtype(scores_dtype) if scores_dtype is not None else q.dtype
    scores = tensor(f"{prefix}.scores", (b, h, nq, nkv), sdt)
    probs = tensor(f"{prefix}.probs", (b, h, nq, nkv), sdt)
    note = "causal: FLOPs count unmasked pairs only" if causal else ""
    br, bc = tile or ATTENTION_TILE
    if tile:  # a tile the caller chose (ATTENTION_TILE is one already checked)
        _tile(br, "tile-q")
        _tile(bc, "tile-kv")
    if not 0.0 <= exp_emulated <= 1.0:
        raise RooflineError(f"{prefix}: the share of exponentials emulated must be from 0 to 1, got {exp_emulated!r}")
    if not 0.0 <= rescale <= 1.0:
        raise RooflineError(f"{prefix}: the share of key tiles that rescale must be from 0 to 1, got {rescale!r}")
    er, ec = min(br, nq * (h // g)), min(bc, nkv)
    n_pairs = float(b * h * pairs)
    by = q.dtype.bytes_per_element
    smem_qk = by * n_pairs * d * (1 / ec + 1 / er)
    smem_pv = v.dtype.bytes_per_element * n_pairs * dv / er
    footprint = er * d * by + STAGES * ec * (d * by + dv * v.dtype.bytes_per_element)
    tiles = (f"Br×Bc = {br}×{bc}{f' (clamped to {er}×{ec})' if (er, ec) != (br, bc) else ''}, "
             f"Q tile + {STAGES} stages of K and V tiles")
    exps = n_pairs * (1 - exp_emulated)
    soft_ops = {Unit.EXP: exps, Unit.VECTOR: n_pairs * exp_emulated * EXP_EMULATION_VECTOR_FLOP}
    # per key tile of the full width Bc (linear in the pairs, as a step model over shapes needs)
    fused = {Unit.VECTOR: rescale * n_pairs * dv / bc, Unit.EXP: rescale * n_pairs / bc}
    return [
        Op(f"{prefix}.qk", "attention_qk", (q, k), (scores,), {Unit.MATRIX: 2.0 * b * h * pairs * d}, count,
           formula=f"2·B·H·pairs·d = 2·{b}·{h}·{pairs}·{d}; pairs = {pair_text}", note=note,
           traffic={Level.SMEM: smem_qk, Level.L2: by * n_pairs * d / er + q.bytes},
           onchip=OnChip(smem_bytes=footprint, tiles=tiles, explicit=tile is not None)),
        Op(f"{prefix}.softmax", "softmax", (scores,), (probs,), {Unit.VECTOR: 5.0 * b * h * pairs}, count,
           formula=f"5·B·H·pairs = 5·{b}·{h}·{pairs}", note=note,
           onchip=OnChip({u: f for u, f in soft_ops.items() if f}, fused)),
        Op(f"{prefix}.pv", "attention_pv", (probs, v), (out,), {Unit.MATRIX: 2.0 * b * h * pairs * dv}, count,
           formula=f"2·B·H·pairs·dv = 2·{b}·{h}·{pairs}·{dv}", note=note,
           traffic={Level.SMEM: smem_pv, Level.L2: smem_pv + out.bytes}),
    ]


def attention_plans(prefix: str) -> dict[str, FusionPlan]:
    """none: each op its own kernel, scores and probabilities through memory (naive attention);
    flash: one kernel (FlashAttention), only q, k, v and out cross memory."""
    ops = (f"{prefix}.qk", f"{prefix}.softmax", f"{prefix}.pv")
    return {Plan.NONE: FusionPlan(Plan.NONE), Plan.FLASH: FusionPlan(Plan.FLASH, {prefix: ops})}


# --- one-kernel graphs for `roofline kernel` ---------------------------------------------------

def matmul_graph(m: int, n: int, k: int, dtype: str | DType = "bf16", b_dtype: str | DType | None = None,
                 out_dtype: str | DType | None = None, batch: int = 1,
                 tile: tuple[int, int, int] | None = None) -> Graph:
    """C[M, N] = A[M, K] @ B[K, N] (per batch): each operand read once, C written once."""
    for label, v in (("M", m), ("N", n), ("K", k), ("batch", batch)):
        require_positive_int(v, label)
    a_dt = storage_dtype(dtype)
    lead = (batch,) if batch > 1 else ()
    a = tensor("A", (*lead, m, k), a_dt)
    b = tensor("B", (*lead, k, n), storage_dtype(b_dtype or a_dt), Role.WEIGHT if batch == 1 else Role.ACTIVATION)
    c = tensor("C", (*lead, m, n), storage_dtype(out_dtype or a_dt))
    return Graph([matmul_op("matmul", a, b, c, tile=tile)], name="matmul")


def elementwise_graph(kind: str, rows: int, cols: int, dtype: str | DType = "bf16") -> Graph:
    """add: out = a + b; swiglu/geglu: out = act(gate) * up; others: out = f(x). rows×cols elements."""
    require_positive_int(rows, "rows")
    require_positive_int(cols, "cols")
    dt = storage_dtype(dtype)
    out = tensor("out", (rows, cols), dt)
    if kind in ("add", "mul"):
        ins = [tensor("a", (rows, cols), dt), tensor("b", (rows, cols), dt)]
    elif kind in ("swiglu", "geglu"):
        ins = [tensor("gate", (rows, cols), dt), tensor("up", (rows, cols), dt)]
    elif kind in ("rmsnorm", "layernorm"):
        gains = [tensor("gamma", (cols,), dt, Role.WEIGHT)]
        if kind == "layernorm":
            gains.append(tensor("beta", (cols,), dt, Role.WEIGHT))
        x = tensor("x", (rows, cols), dt)
        return Graph([norm_op(kind, kind, x, gains[0], out, extra=gains[1:])], name=kind)
    else:
        ins = [tensor("x", (rows, cols), dt)]
    return Graph([elementwise_op(kind, kind, ins, out)], name=kind)


def attention_graph(seq: int, head_dim: int, dtype: str | DType = "bf16", batch: int = 1, heads: int = 1,
                    kv_heads: int | None = None, causal: bool = False, kv_seq: int | None = None,
                    tile: tuple[int, int] | None = None, exp_emulated: float = 0.0,
                    rescale: float = 1.0) -> Graph:
    """One attention layer: q [B, H, N, d]; k, v [B, G, Nkv, d]. Apply attention_plans('attention').
    `tile`, `exp_emulated` and `rescale` as in `attention_ops`."""
    for label, size in (("seq", seq), ("head-dim", head_dim), ("batch", batch), ("heads", heads)):
        require_positive_int(size, label)
    g = require_positive_int(kv_heads, "kv-heads") if kv_heads is not None else heads
    nkv = require_positive_int(kv_seq, "kv-seq") if kv_seq is not None else seq
    dt = storage_dtype(dtype)
    q = tensor("q", (batch, heads, seq, head_dim), dt)
    k = tensor("k", (batch, g, nkv, head_dim), dt)
    v_ = tensor("v", (batch, g, nkv, head_dim), dt)
    o = tensor("o", (batch, heads, seq, head_dim), dt)
    return Graph(attention_ops("attention", q, k, v_, o, causal, tile=tile, exp_emulated=exp_emulated,
                               rescale=rescale), name="attention")

