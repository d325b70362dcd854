"""The step model's bytes inside the chip: shared memory and L2, over whole grids of (batch, length).

A step's shared-memory and L2 bytes are not linear in the step model's features: each tiled op
clamps its tile to the matrix (roofline.kernels), so a matmul's reuse changes when its rows pass
the tile, and attention's when its keys (or the query rows of a K/V head) pass theirs. Written with
the op's matrix FLOPs F (linear in the features, fitted as a kernel's are) and its clamped tiles:

    matmul        smem = L2 = bytes · F/2 · (1/min(tile_n, N) + 1/min(tile_m, M))
    attention qk  smem = bytes_q · F/2 · (1/min(Bc, Nkv) + 1/min(Br, Nq·H/G))
                  L2   = bytes_q · F/2 / min(Br, Nq·H/G) + bytes_q · F · Nq / (2 · pairs)
    attention pv  smem = bytes_v · F/2 / min(Br, Nq·H/G)
                  L2   = smem + bytes_out · F · Nq / (2 · pairs)

(roofline.kernels.matmul_onchip and attention_ops: bytes · M·N·K·(1/tile_n + 1/tile_m) with F = 2·M·N·K
per batch element; bytes · pairs · d · (1/Bc + 1/Br) with F = 2·B·H·pairs·d; the query and output
read once, scaled as the window scales the pairs: F·Nq / (2·pairs) = B·H·Nq·d × the pairs kept / the
causal pairs Nq·(Nkv − Nq) + Nq·(Nq + 1)/2). The op's dimensions M, N, Nq, Nkv are linear in a
small basis of (batch, length) (1, B, S, B·S and the keys a windowed, chunked or top-k layer reads),
fitted exactly on the sample graphs; what else a kernel moves on chip is fitted as the kernel's
other bytes are. The fit must reproduce every sample graph's bytes, or the step cannot be swept.
"""

from __future__ import annotations

from typing import Any

from roofline.errors import RooflineError
from roofline.frozen import frozen
from roofline.graph import Kernel
from roofline.kernels import ATTENTION_TILE, MATMUL_TILE
from roofline.models.transformer import AttentionKind, ModelConfig
from roofline.vocab import Level, Phase, Unit

ONCHIP_LEVELS = (Level.SMEM, Level.L2)
MATMUL, QK, PV = "matmul", "attention_qk", "attention_pv"
TILED = (MATMUL, QK, PV)
DIMS = ("m", "n", "rows", "b", "nq", "nkv")  # rows: a matmul's output rows over its batch dims (M × batch)


def dims_basis(cfg: ModelConfig, batch: Any, seq: Any, phase: Phase) -> Any:
    """[points, columns]: 1, B, S, B·S (prefill: a matmul's rows are the B·S tokens; a decode step's are
    the B sequences, so it has no such column, and its fit one sample graph fewer) and the keys a decode
    query of a windowed (or chunked) and a top-k layer reads (ModelConfig.read_tokens): every op
    dimension is linear in these."""
    import numpy as np

    b = np.asarray(batch, dtype=np.float64)
    s = np.asarray(seq, dtype=np.float64)
    cols = [np.ones_like(b), b, s, *([b * s] if phase is Phase.PREFILL else [])]
    if cfg.sliding_window and cfg.attention_layers(AttentionKind.LOCAL):
        cols.append(np.asarray(cfg.read_tokens(AttentionKind.LOCAL, s), dtype=np.float64))
    if cfg.indexer is not None:
        cols.append(np.asarray(cfg.read_tokens(AttentionKind.GLOBAL, s), dtype=np.float64))
    if cfg.block_sparse is not None:  # MiniMax-M3: the keys a sparse layer's decode query reads, its blocks
        cols.extend([np.asarray(cfg.block_sparse.keys(s), dtype=np.float64), -(-s // cfg.block_sparse.block)])
    cp = cfg.compressed
    if cp is not None:  # DeepSeek-V4: the entries a decode query reads, and the index keys
        for m in cp.kinds:
            cols.extend([np.asarray(cp.read_entries(m, s), dtype=np.float64), s // m, b * (s // m)])
    return np.stack(cols, axis=1)


@frozen
class TiledOp:
    """One tiled op of a kernel, as the sample graphs show it: its constants and, per sample, its
    matrix FLOPs and dimensions."""

    kernel: int
    kind: str  # MATMUL, QK or PV
    bytes_in: float  # the operand's bytes per element (a matmul: the wider operand's; qk: q's; pv: v's)
    bytes_out: float  # pv: the output's bytes per element
    group: int  # attention: the query heads per K/V head, H/G
    heads: int  # attention: query heads H, and K/V heads G
    kv_heads: int
    kv_dtype: str  # attention: the K/V dtype (what generation attention's fit is keyed by)
    head_dim: int = 0  # attention: the width of a query head (q·kᵀ's; an engine picks its kernel by it)
    operands: tuple[str, ...] = ()  # a matmul: its operands' dtypes (gemm_dtype_key reads block-scaled FP8)

    def moved(self, kernel: int) -> TiledOp:
        """This op as kernel `kernel`'s (replace(self, kernel=kernel), without its per-call field walk)."""
        return TiledOp(kernel, self.kind, self.bytes_in, self.bytes_out, self.group, self.heads, self.kv_heads,
                       self.kv_dtype, self.head_dim, self.operands)

    @staticmethod
    def of(kernel_index: int, op: Any) -> TiledOp | None:
        if op.kind == MATMUL and op.traffic:
            a, b = op.inputs[0], op.inputs[1]
            return TiledOp(kernel_index, MATMUL, max(a.dtype.bytes_per_element, b.dtype.bytes_per_element), 0.0, 1,
                           0, 0, "", 0, (a.dtype.name, b.dtype.name))
        if op.kind in (QK, PV) and op.traffic:
            q_or_p, k_or_v = op.inputs[0], op.inputs[1]
            h, g = q_or_p.shape[1], k_or_v.shape[1]
            first = q_or_p.dtype.bytes_per_element if op.kind == QK else k_or_v.dtype.bytes_per_element
            return TiledOp(kernel_index, op.kind, first, op.outputs[0].dtype.bytes_per_element, h // g, h, g,
                           k_or_v.dtype.name, q_or_p.shape[3] if op.kind == QK else 0)
        return None

    @staticmethod
    def dims(op: Any) -> list[float]:
        """(M, N, rows, B, Nq, Nkv) of one sample's op (0 where the kind has no such dimension)."""
        if op.kind == MATMUL:
            a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
            m, n = a.shape[-2], b.shape[-1]
            rows = out.shape[-2] * (int(out.elements // (out.shape[-2] * out.shape[-1])) if m * n else 0)
            return [float(m), float(n), float(rows), 0.0, 0.0, 0.0]
        q, k = op.inputs[0], op.inputs[1]
        return [0.0, 0.0, 0.0, float(q.shape[0]), float(q.shape[2]), float(k.shape[2])]


def _least(a: Any, tile: int) -> Any:
    import numpy as np

    return np.minimum(a, float(tile))


@frozen
class KernelKind:
    """What the expected-time model reads of a kernel besides its times (roofline.expectation.shape_of):
    a lone matmul (a GEMM), a kernel holding attention's q·kᵀ, or another kind; the tiled op that gives
    its shape (an index into ChipModel.ops, -1 for none); its own compute dtype (None: the step's)."""

    family: str  # "gemm", "attention" or "other"
    op: int
    dtype: str | None

    @staticmethod
    def of(kernel: Kernel, first_op: int, ops: tuple[TiledOp, ...]) -> KernelKind:
        kinds = [op.kind for op in kernel.ops]
        mine = [i for i, t in enumerate(ops) if i >= first_op and t.kernel == ops[first_op].kernel] \
            if first_op < len(ops) else []
        dtype = kernel.compute_dtype.name if kernel.compute_dtype is not None else None
        if kinds == [MATMUL] and mine:
            return KernelKind("gemm", mine[0], dtype)
        qk = [i for i in mine if ops[i].kind == QK]
        if QK in kinds and qk:
            return KernelKind("attention", qk[0], dtype)
        return KernelKind("other", -1, dtype)


@frozen
class ChipModel:
    """The on-chip bytes of a step's kernels: per tiled op its FLOPs' coefficients (on the step
    model's features) and its dimensions' (on dims_basis), and per kernel the rest, linear; and each
    kernel's kind, for its expected band (roofline.models.stepband)."""

    ops: tuple[TiledOp, ...]
    coef_flop: Any  # [features, ops]
    coef_dims: Any  # [basis, ops, DIMS]
    coef_rest: Any  # {level: [features, kernels]}
    kernels: int
    kinds: tuple[KernelKind, ...] = ()

    @classmethod
    def fit(cls, cfg: ModelConfig, kernels_at: list[list[Kernel]], x: Any, basis: Any,
            solve: Any) -> ChipModel:
        """From the sample graphs' kernels (one list a sample, the same kernels each time), their
        features `x`, the dims basis and the exact solver the step model uses (`solve(x, y)`)."""
        import numpy as np

        first = kernels_at[0]
        ops = tuple(t for j, k in enumerate(first) for op in k.ops if (t := TiledOp.of(j, op)) is not None)
        flops, dims = [], []
        for kernels in kernels_at:
            tiled = [op for k in kernels for op in k.ops if op.kind in TILED and op.traffic]  # TiledOp.of's
            flops.append([op.flop_by_unit.get(Unit.MATRIX, 0.0) for op in tiled])
            dims.append([TiledOp.dims(op) for op in tiled])
        n_ops = len(ops)
        coef_flop = solve(x, np.array(flops, dtype=np.float64).reshape(len(kernels_at), n_ops))
        d = np.array(dims, dtype=np.float64).reshape(len(kernels_at), n_ops * len(DIMS))
        coef_dims = solve(basis, d).reshape(basis.shape[1], n_ops, len(DIMS))
        bare = cls(ops, coef_flop, coef_dims, {}, len(first))
        modelled = bare.tiled_bytes(x, basis)
        y = np.hstack([np.array([[k.cost.bytes_by_level.get(level, 0.0) for k in kernels] for kernels in kernels_at],
                                dtype=np.float64) for level in ONCHIP_LEVELS])
        both = solve(x, y - np.hstack([modelled[level] for level in ONCHIP_LEVELS]), y)  # the levels solved at once
        rest = dict(zip(ONCHIP_LEVELS, np.split(both, len(ONCHIP_LEVELS), axis=1), strict=True))
        starts = {t.kernel: i for i, t in reversed(list(enumerate(ops)))}
        kinds = tuple(KernelKind.of(k, starts.get(j, len(ops)), ops) for j, k in enumerate(first))
        return cls(ops, coef_flop, coef_dims, rest, len(first), kinds)

    def kernels_only(self, keep: list[int]) -> ChipModel:
        """The on-chip model of the kernels `keep` (indices, in order) alone, their ops renumbered."""
        at = {j: i for i, j in enumerate(keep)}
        mine = [i for i, t in enumerate(self.ops) if t.kernel in at]
        op_at = {i: n for n, i in enumerate(mine)}
        kinds = tuple(KernelKind(k.family, op_at.get(k.op, -1), k.dtype) for k in (self.kinds[j] for j in keep)) \
            if self.kinds else ()
        return ChipModel(tuple(self.ops[i].moved(at[self.ops[i].kernel]) for i in mine),
                         self.coef_flop[:, mine], self.coef_dims[:, mine], {lv: c[:, keep] for lv, c in
                                                                           self.coef_rest.items()}, len(keep), kinds)

    def tiled_bytes(self, x: Any, basis: Any, dims: Any = None) -> dict[Level, Any]:
        """{SMEM, L2: [points, kernels]} of the tiled ops alone (the module docstring's formulas); `dims`:
        self.dims(basis) when already taken."""
        import numpy as np

        n = x.shape[0]
        out = {level: np.zeros((n, self.kernels)) for level in ONCHIP_LEVELS}
        if not self.ops:
            return out
        f = x @ self.coef_flop  # [points, ops]
        dims = self.dims(basis) if dims is None else dims
        m, nn, nq, nkv = dims[..., 0], dims[..., 1], dims[..., 4], dims[..., 5]
        tm, tn, _ = MATMUL_TILE
        br, bc = ATTENTION_TILE
        # the matmuls' bytes all at once (elementwise, so each column is what the op alone gives), added
        # below in the ops' order as the attention ops' are
        mm = [i for i, op in enumerate(self.ops) if op.kind == MATMUL]
        column = {i: c for c, i in enumerate(mm)}
        if mm:
            bytes_in = np.array([self.ops[i].bytes_in for i in mm], dtype=np.float64)
            matmul = bytes_in * (f[:, mm] / 2) * (1 / _least(nn[:, mm], tn) + 1 / _least(m[:, mm], tm))
        for i, op in enumerate(self.ops):
            if op.kind == MATMUL:
                smem = l2 = matmul[:, column[i]]
            else:
                half = f[:, i] / 2
                q, kv = np.maximum(nq[:, i], 1.0), np.maximum(nkv[:, i], 1.0)
                er, ec = _least(q * op.group, br), _least(kv, bc)
                pairs = q * (kv - q) + q * (q + 1) / 2  # the causal pairs before a window keeps some
                once = half * q / pairs  # the query (or output) read once, as the window scales it
                if op.kind == QK:
                    smem = op.bytes_in * half * (1 / ec + 1 / er)
                    l2 = op.bytes_in * half / er + op.bytes_in * once
                else:
                    smem = op.bytes_in * half / er
                    l2 = smem + op.bytes_out * once
            out[Level.SMEM][:, op.kernel] += smem
            out[Level.L2][:, op.kernel] += l2
        return out

    def bytes(self, x: Any, basis: Any, dims: Any = None) -> dict[Level, Any]:
        """{SMEM, L2: [points, kernels]}: the tiled ops' bytes plus each kernel's other on-chip bytes
        (`dims`: self.dims(basis) when already taken)."""
        tiled = self.tiled_bytes(x, basis, dims)
        return {level: tiled[level] + x @ self.coef_rest[level] for level in ONCHIP_LEVELS}

    def dims(self, basis: Any) -> Any:
        """[points, ops, DIMS]: every tiled op's dimensions at the points."""
        import numpy as np

        b, o, d = self.coef_dims.shape  # Σ_b basis[p, b] · coef[b, o, d], as one matrix product (einsum's is slow)
        return (np.asarray(basis, dtype=np.float64) @ self.coef_dims.reshape(b, o * d)).reshape(-1, o, d)


def onchip_bandwidths(machine: Any) -> dict[Level, float]:
    """The on-chip levels a kernel's bytes are placed on, as roofline.placement.place takes them: a
    level the machine file measures, else the per-SM figure of its [chip] (none without one)."""
    out = {lv.name: lv.bytes_per_s for lv in machine.memory.values() if lv.bytes_per_s and lv.name in ONCHIP_LEVELS}
    chip = machine.chip
    if chip is not None:
        if chip.smem_bytes_per_s:
            out.setdefault(Level.SMEM, chip.smem_bytes_per_s)
        if chip.l2_bytes_per_s:
            out.setdefault(Level.L2, chip.l2_bytes_per_s)
    return out


def check_reproduces(name: str, fitted: Any, y: Any) -> None:
    import numpy as np

    err = np.abs(fitted - y) / np.maximum(np.abs(y), 1.0)
    if err.size and float(err.max()) > 1e-6:
        raise RooflineError(f"{name}: the sweep model does not reproduce the graph's on-chip bytes "
                            f"(error {float(err.max()):.2g}); use the graph path")


__all__ = ["DIMS", "ONCHIP_LEVELS", "ChipModel", "KernelKind", "TiledOp", "dims_basis", "onchip_bandwidths"]
