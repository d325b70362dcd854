"""Expected bands over the step model's grids: each kernel's calibrated band (roofline.expectation)
at every (batch, length), with numpy, as `roofline kernel` and `roofline model` give it one placed
kernel at a time.

The expected-time model reads of a placed kernel its kind, its floor, its FLOP units' term and its
shape (roofline.expectation.placed.shape_of). The step model has all four for every point: the floor
and the compute term from StepModel.evaluate, the kind from the kernel's ops (a lone matmul is a GEMM
of its dtype; a kernel holding attention's q·kᵀ is context attention, or generation attention of the
K/V dtype when each sequence has one query), and the shape from the tiled op's dimensions, fitted
exactly on the sample graphs (roofline.models.stepchip):

    GEMM         M = the output's rows over its batch dims, N = its columns: waves over ⌈M/tm⌉·⌈N/tn⌉ tiles
    attention    decode:  tile pairs = B·G·⌈Nkv/128⌉, heads = B·H
                 prefill: rows = B·G·⌈Nq·(H/G)/128⌉·128, tile pairs = B·H·qt(qt+1)/2 (qt = ⌈Nq/128⌉; qt·kt
                          when the keys are not the queries), heads = B·H

and each kernel takes the fit of its kind, or of the kind nearest its bound (ExpectedTimes.fit_for):

    t = Σ of Fit.terms_s: max(DRAM, ρ·compute·waves) / e + a_mm(head width)·compute + a_exp·exp + t0
        + c_in·(the BF16 activation read) + c_out·(the BF16 output written) + per tile pair, per head and per
        K/V head costs / SMs + c_g·(the K/V stream reread per query head beyond the kernel's group)
    band = [max(floor, t · r_lo), max(low, t · r_hi)], the small floors' band below 10 µs  (Fit.band_around)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType, get_dtype
from roofline.errors import RooflineError
from roofline.expectation.columns import Columns, expected_columns
from roofline.expectation.model import (
    ACTIVATION_BYTES,
    ATTENTION_TILE,
    CONTEXT,
    GEMM,
    GENERATION,
    dtype_key,
    gemm_dtype_key,
)
from roofline.expectation.placed import expect, l2_stream_s
from roofline.expectation.shipped import for_machine
from roofline.expectation.times import ExpectedTimes
from roofline.frozen import frozen
from roofline.hardware import Machine
from roofline.models.stepchip import dims_basis
from roofline.vocab import Bound, Level

if TYPE_CHECKING:  # pragma: no cover
    from roofline.models.stepmodel import StepModel
    from roofline.placement import Placement

BOUNDS = (Bound.COMPUTE, Bound.MEMORY, Bound.COMMUNICATION)
# the bound class (an index into BOUNDS) of each of RESOURCE_CODES (matrix, vector, dram, link, network, exp,
# smem, l2), as roofline.vocab.bound_class gives it
CLASS_OF_CODE = (0, 0, 1, 2, 2, 0, 1, 1)


# the shape columns expected_band builds for expected_columns (Columns' fields, its names)
SHAPE_COLUMNS = ("rows", "n", "pairs", "heads", "kv_heads", "input_s", "output_s", "head_dim", "k", "qtiles",
                 "narrow")
Band = Callable[["Placement"], tuple[float, float]]  # a placed kernel's expected (low, high), one run


def shipped_band(machine_id: str) -> Band:
    """A placed kernel's (low, high) under the device's shipped fit (roofline.expectation), as `roofline
    model` gives it without --calibration."""
    times = for_machine(machine_id)

    def band(p: Placement) -> tuple[float, float]:
        e = expect(p, times)
        return e.low_s, e.high_s

    return band


def shipped_description(machine_id: str) -> dict[str, Any]:
    """The shipped fit's file and source, as roofline.calibration.choose.Chosen.describe words it."""
    t = for_machine(machine_id)
    return {"file": t.file, "machine": t.machine, "engine": t.engine, "engine_version": t.engine_version,
            "note": t.origin}


def step_total(placements: Any, band: Band) -> dict[str, float]:
    """A step's expected time: Σ runs × each kernel's band (calibration.choose.total's sum)."""
    lo = hi = 0.0
    for p in placements:
        a, b = band(p)
        lo += p.count * a
        hi += p.count * b
    return {"low": lo, "high": hi}


def _ceil(a: Any) -> Any:
    import numpy as np

    return np.ceil(np.asarray(a, dtype=np.float64) - 1e-9)  # dimensions fitted to 1e-6: whole numbers


def share_band(r: dict[str, Any], shares: Mapping[str, tuple[float, float]], where: str,
               otherwise: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """(low, high) [points, kernels] = floor / [high share, low share] of each kernel's bound class: a
    bench calibration's measured shares of the roof (roofline.calibration.choose's bench band). A
    class the file lacks takes `otherwise` (low, high) where given, else is an error naming it."""
    import numpy as np

    cls = np.array(CLASS_OF_CODE)[np.asarray(r["kernel_bound"])]
    lo, hi = np.ones(len(BOUNDS)), np.ones(len(BOUNDS))
    have = np.ones(len(BOUNDS), dtype=bool)
    for i, bound in enumerate(BOUNDS):
        if str(bound) in shares:
            lo[i], hi[i] = shares[str(bound)]
        elif (cls == i).any():
            if otherwise is None:
                raise RooflineError(f"--calibration {where} has no {bound} class (it has "
                                    f"{', '.join(shares) or 'none'})")
            have[i] = False
    kt = r["kernel_time_s"]
    low, high = kt / hi[cls], kt / lo[cls]
    if otherwise is not None:
        low, high = np.where(have[cls], low, otherwise[0]), np.where(have[cls], high, otherwise[1])
    return low, high


@frozen
class _Kinds:
    """What expected_band reads of a step model's kernels that no point changes: each kernel's kind (its
    code into `names`; attention's two, chosen per point), the GEMMs' and the attention kernels' tiled ops
    and constants, and the machine's SMs, DRAM bandwidth and τ."""

    counts: Any
    names: tuple[str, ...]
    static: Any  # [kernels] each kernel's kind where it is one at every point
    along: tuple[tuple[int, int, int, int], ...]  # attention kernels: (kernel, its op, generation's, context's code)
    gemm_js: tuple[int, ...]
    gemm_ops: tuple[int, ...]
    attention_js: tuple[int, ...]
    attention_ops: tuple[int, ...]
    heads_of: Any
    kv_of: Any
    group_of: Any
    head_dims: Any
    narrow_of: Any  # 1 where the attention's K/V is narrower than its query (Shape.narrow_kv), else 0
    sms: int
    bw: float
    tau: float


def _kinds(sm: StepModel, machine: Machine, dtype: DType) -> _Kinds:
    import numpy as np

    sms = machine.chip.sms if machine.chip is not None else 0
    level = machine.memory.get(Level.DRAM)
    bw = level.bytes_per_s if level is not None and level.bytes_per_s else 0.0
    chip = sm.chip
    tiled_dims = chip is not None and bool(chip.ops)  # the tiled ops' dimensions are there to read
    kinds = chip.kinds if chip is not None else ()
    names: list[str] = []  # the kinds' names; `kind` [points, kernels] indexes them
    static: list[int] = []  # each kernel's kind where it is one at every point (attention's is set per point)

    def code(name: str) -> int:
        if name not in names:
            names.append(name)
        return names.index(name)

    gemms: list[tuple[int, int]] = []  # (kernel, its tiled op)
    attentions: list[tuple[int, int]] = []
    along: list[tuple[int, int, int, int]] = []
    for j in range(len(sm.counts)):
        k = kinds[j] if j < len(kinds) else None
        dt = dtype_key(k.dtype if k is not None and k.dtype else dtype.name)
        family = k.family if k is not None and tiled_dims and chip is not None else "other"
        if family == "gemm" and k is not None and chip is not None:
            static.append(code(f"{GEMM}.{gemm_dtype_key(k.dtype or dtype.name, chip.ops[k.op].operands)}"))
            gemms.append((j, k.op))
        elif family != "other" and k is not None and chip is not None and tiled_dims:
            static.append(0)
            attentions.append((j, k.op))
            op = chip.ops[k.op]
            # one query a sequence: generation attention, of the K/V dtype (the codes in the kernels' order)
            along.append((j, k.op, code(f"{GENERATION}.{dtype_key(op.kv_dtype)}"), code(f"{CONTEXT}.{dt}")))
        else:
            static.append(code(f"other.{dt}"))
    tiled = [chip.ops[o] for _, o in attentions] if chip is not None else []
    return _Kinds(np.array(sm.counts, dtype=np.float64), tuple(names), np.array(static, dtype=np.int64), tuple(along),
                  tuple(j for j, _ in gemms), tuple(o for _, o in gemms), tuple(j for j, _ in attentions),
                  tuple(o for _, o in attentions), np.array([t.heads for t in tiled]),
                  np.array([t.kv_heads for t in tiled]), np.array([t.group for t in tiled]),
                  np.array([float(t.head_dim) for t in tiled]),
                  np.array([float(get_dtype(t.kv_dtype).bytes_per_element < t.bytes_in) for t in tiled]),
                  sms, bw, l2_stream_s(machine))


def expected_band(sm: StepModel, r: dict[str, Any], batch: Any, seq: Any, machine: Machine, dtype: DType,
                  times: ExpectedTimes, memo: dict[Any, Any] | None = None) -> tuple[Any, Any]:
    """(low, high) [points, kernels] over all of each kernel's runs, from `r` = sm.evaluate(batch, seq,
    machine, dtype).

    Every entry (point, kernel) takes its kind's fit for its bound class; the shape columns are built for
    all kernels of a family at once ([points, kernels]), and each (kind, class) is one call of
    expected_columns over all the entries it holds: the expected-time model is elementwise, so this is
    the kernel-by-kernel band entry for entry, in a handful of numpy calls instead of dozens a kernel.
    `memo`: a dict the caller keeps for one step model, machine and fit (serving.decode.Decode asks for
    its bands several times): the kernels' kinds and each kind's fit are worked out once into it."""
    import numpy as np

    memo = {} if memo is None else memo
    got = memo.get("kinds")
    if got is None:
        got = memo["kinds"] = _kinds(sm, machine, dtype)
    ks: _Kinds = got
    fits: dict[int, Any] = memo.setdefault("fits", {})  # (kind code × classes + class) -> its fit
    b = np.asarray(batch)
    s = np.asarray(seq)
    counts = ks.counts
    floor = r["kernel_time_s"] / counts
    compute, exp = r["kernel_compute_s"], r["kernel_exp_s"]
    cls = np.array(CLASS_OF_CODE)[np.asarray(r["kernel_bound"])]
    # a collective's memory term is its link's time (shape_of); every other kernel's, DRAM's
    bound = np.asarray(r["kernel_bound"])
    dram = np.where((bound == 3) | (bound == 4), floor, r["kernel_dram_s"])  # the link, the network
    sms, bw, tau = ks.sms, ks.bw, ks.tau
    chip = sm.chip
    dims = None
    if chip is not None and chip.ops:  # the tiled ops' dimensions: evaluate's when it took them
        dims = r["op_dims"] if "op_dims" in r else chip.dims(dims_basis(sm.config, b // sm.split.dp, s, sm.phase))
    grid: dict[str, Any] = {}  # the shape columns a family sets [points, kernels]; the others are 0 everywhere

    def column(name: str) -> Any:
        if name not in grid:
            grid[name] = np.zeros_like(floor)
        return grid[name]

    kind = np.repeat(ks.static[None, :], floor.shape[0], axis=0)
    if dims is not None:
        for j, op, generation, context in ks.along:
            kind[:, j] = np.where(np.rint(dims[:, op, 4]) == 1, generation, context)
    if ks.gemm_js and dims is not None:
        js, ops = list(ks.gemm_js), list(ks.gemm_ops)
        d = dims[:, ops]
        rows, n = np.rint(d[..., 2]), np.rint(d[..., 1])
        column("rows")[:, js], column("n")[:, js] = rows, n
        if bw:  # a GEMM's 2·M·N·K FLOPs: the M·K activation read, and the M·N output written, in BF16
            column("input_s")[:, js] = np.where(n > 0, r["kernel_matrix_flop"][:, js] / np.maximum(n, 1.0), 0.0) / bw
            column("output_s")[:, js] = rows * n * ACTIVATION_BYTES / bw
        # k = 2·M·N·K / (2·M·N): the depth, whose launch path a host floor reads (model.host_path)
        column("k")[:, js] = np.where(rows * n > 0, r["kernel_matrix_flop"][:, js] / np.maximum(2 * rows * n, 1.0),
                                      0.0)
    if ks.attention_js and dims is not None and chip is not None:
        js, ops = list(ks.attention_js), list(ks.attention_ops)
        heads_of, kv_of, group_of = ks.heads_of, ks.kv_of, ks.group_of
        d = dims[:, ops]
        bq, nq, nkv = np.rint(d[..., 3]), np.rint(d[..., 4]), np.rint(d[..., 5])
        kt = _ceil(nkv / ATTENTION_TILE)
        qt = _ceil(nq / ATTENTION_TILE)
        decode = nq == 1
        heads = bq * heads_of
        column("heads")[:, js] = heads
        column("kv_heads")[:, js] = bq * kv_of
        column("head_dim")[:, js] = ks.head_dims
        pre_pairs = np.where(nq == nkv, qt * (qt + 1) / 2, qt * kt)
        column("pairs")[:, js] = np.where(decode, bq * kv_of * kt, heads * pre_pairs)
        column("qtiles")[:, js] = np.where(decode, 0.0, heads * qt)  # prefill's CTAs (Shape.query_tiles)
        # prefill with K/V narrower than Q (Shape.narrow_kv): q·kᵀ's K/V bytes per element below q's
        column("narrow")[:, js] = np.where(decode, 0.0, ks.narrow_of)
        column("rows")[:, js] = np.where(decode, 0.0, bq * kv_of * _ceil(nq * group_of / ATTENTION_TILE)
                                         * ATTENTION_TILE)
    nk = floor.shape[1]
    key = (kind * len(BOUNDS) + cls).ravel()

    def band_of(k: int, col: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        fit = fits.get(k)
        if fit is None:
            i, c = divmod(k, len(BOUNDS))
            fit = fits[k] = times.fit_for(ks.names[i], BOUNDS[c])[0]
        return expected_columns(fit, Columns(
            col["floor"], col["compute"], col["dram"], col["exp"], col["rows"], col["n"], col["pairs"], col["heads"],
            col["kv_heads"], col["head_dim"], col["input_s"], col["output_s"], sms, col["k"], tau, col["qtiles"],
            col["narrow"] > 0))

    zero = np.zeros(key.size)
    if key.size and bool((key == key[0]).all()):  # one (kind, class) holds every entry: the columns as they are
        whole = {name: a.ravel() for name, a in (("floor", floor), ("compute", compute), ("dram", dram),
                                                 ("exp", exp))}
        whole |= {name: grid[name].ravel() if name in grid else zero for name in SHAPE_COLUMNS}
        low, high = np.empty(key.size), np.empty(key.size)
        _, low[:], high[:] = band_of(int(key[0]), whole)
        return low.reshape(floor.shape) * counts, high.reshape(floor.shape) * counts
    # one group an (kind, class): entries sorted by it, each group a slice, taken in the order the kernels
    # meet them (j, then the point: so a kind without a fit is named as the kernel-by-kernel walk names it)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = np.append(starts[1:], key.size)
    # every column gathered once in the groups' order: each group is then a slice (a view), its band
    # written back in place of the entries it holds; a shape column no family set is 0 everywhere
    flat = {name: a.ravel()[order] for name, a in (("floor", floor), ("compute", compute), ("dram", dram),
                                                    ("exp", exp))}
    flat |= {name: grid[name].ravel()[order] if name in grid else zero for name in SHAPE_COLUMNS}
    low_g, high_g = np.empty(key.size), np.empty(key.size)
    first = np.minimum.reduceat((order % nk) * key.size + order, starts) if key.size else np.zeros(0)
    for g in np.argsort(first, kind="stable").tolist():
        a, z = int(starts[g]), int(ends[g])
        _, low_g[a:z], high_g[a:z] = band_of(int(key[order[a]]), {name: v[a:z] for name, v in flat.items()})
    low, high = np.empty(key.size), np.empty(key.size)
    low[order], high[order] = low_g, high_g
    low, high = low.reshape(floor.shape), high.reshape(floor.shape)
    return low * counts, high * counts


__all__ = ["BOUNDS", "CLASS_OF_CODE", "Band", "expected_band", "share_band", "shipped_band", "shipped_description",
           "step_total"]
