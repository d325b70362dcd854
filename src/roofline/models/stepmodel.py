"""The vectorised step model: a step's totals over whole grids of (batch, length) without
rebuilding the graph per point, and the crossover batch found with it.

Every FLOP and byte count of a step's kernels is a linear combination of a few features of
(batch B, length S): 1, B, B·S, B·S² (prefill), B·min(S, W) (windowed decode), B·pairs_W(S)
(windowed prefill) and the number of experts hit (MoE). The windowed and the MoE features are the
graph builder's own formulas (`ModelConfig.cached_tokens`, `roofline.models.formulas`), evaluated
on numpy arrays. `StepModel` builds the real graph at a handful of sample points (batches that
are multiples of `batch_unit`: dp, × tp when expert parallelism splits a replica's tokens over its
tp ranks): of a grid that separates every feature, the fewest whose features span the grid's, and
one more (`_spanning`: 4 graphs for a dense decode step where the grid has 30), solves for those
coefficients exactly, checks the fit reproduces every sample, and then evaluates any grid of (B, S)
with numpy: the same kernels, the same max(compute, memory) per kernel.

Within one split search (roofline.models.shared: `plan --output`, `serve` without a split) the check
point is built for the first layout of each sample grid alone, and the others are solved on the fewest
points (one graph build a layout fewer). What the check can find, a kernel cost that is not linear in the
features, comes from the model's config and the features its grid reads of the split (_split_key: dp,
ep, a sequence split's tp), which every layout of the grid shares; the tensor-parallel degree only
scales a layout's costs by constants (heads, widths and experts per device). Outside a search every fit
checks itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from roofline.dtypes import DType
from roofline.errors import RooflineError, T
from roofline.frozen import frozen
from roofline.graph import Kernel
from roofline.hardware import Machine
from roofline.models.build import DEFAULT_PLAN, as_phase, build_graph
from roofline.models.compressed import compressed_features
from roofline.models.dtypes import ModelDtypes
from roofline.models.formulas import experts_hit, experts_read_per_device, windowed_pairs
from roofline.models.shared import first_time, shared
from roofline.models.split import sequence_split
from roofline.models.stepchip import ChipModel, dims_basis, onchip_bandwidths
from roofline.models.transformer import AttentionKind, ModelConfig
from roofline.parallel import BUS_FACTOR, Collective, Split
from roofline.parallel.algorithms import Algorithm, AllReduceRule
from roofline.placement import crossover
from roofline.units import finite_or_none
from roofline.vocab import Level, Phase, Plan, Unit

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


ROUNDING = 1e-12  # a fitted term adding at most this share of a kernel's largest sample is the solve's rounding
CHECK_POINTS = 1  # sample points beyond the fewest that determine the fit, to check it reproduces them (_spanning)
# the resources StepModel.evaluate codes `bound` and `kernel_bound` by
RESOURCE_CODES = (Unit.MATRIX, Unit.VECTOR, Level.DRAM, Level.LINK, Level.NETWORK, Unit.EXP, Level.SMEM, Level.L2)


@frozen
class Crossover:
    """The smallest batch at which the step's intensity reaches the ridge, or None ("never")."""

    batch: int | None
    ridge_flop_per_byte: float
    limit_flop_per_byte: float  # the step's intensity as the batch grows without bound (graph totals)
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "never": self.batch is None, "ridge_flop_per_byte": self.ridge_flop_per_byte,
                "limit_flop_per_byte": finite_or_none(self.limit_flop_per_byte), "reason": self.reason}


def per_replica(batch: np.ndarray, dp: int) -> np.ndarray:
    """batch / dp, the sequences of one data-parallel replica: exact, so every batch must be a multiple of dp."""
    import numpy as np

    b = np.asarray(batch)
    if dp == 1:
        return b
    bad = np.asarray(b % dp != 0)
    if bad.any():
        raise RooflineError(f"{T.batch} {int(b[bad].flat[0])} is not a multiple of {T.dp} {dp} (each replica runs "
                            f"batch/dp sequences); give batches that are multiples of {dp}")
    return b // dp


def batch_unit(split: Split) -> int:
    """The step of the batches a split's step model takes: dp, × tp when the MoE splits a replica's
    tokens over its tp ranks (expert parallel with tensor-parallel attention), so every rank's share
    is whole and every feature stays linear in the batch."""
    return split.dp * (split.tp if sequence_split(split) else 1)


def _features(cfg: ModelConfig, phase: Phase, batch: np.ndarray, seq: np.ndarray,
              hit_override: int | None, split: Split | None = None) -> np.ndarray:
    """The columns every kernel's FLOPs and bytes are linear in (see the module docstring). With a
    split, the batch is one replica's, batch / dp, and the experts hit are those a device reads:
    ⌈hit / ep⌉ of the experts the ep group's tokens hit (as the graph builder counts them: ep × the
    tokens a device routes, N, or N/tp with tensor-parallel attention)."""
    import numpy as np

    sp = split or Split()
    per = per_replica(batch, sp.dp)
    if sequence_split(sp):
        unit = batch_unit(sp)
        bad = np.asarray(per % sp.tp != 0)
        if bad.any():
            raise RooflineError(f"{T.batch} {int(np.asarray(batch)[bad].flat[0])} is not a multiple of tp × dp = "
                                f"{sp.tp} × {sp.dp} = {unit} (with {T.ep} and {T.tp} each tensor-parallel rank routes "
                                f"1/tp of a replica's tokens); give batches that are multiples of {unit}")
    b = per.astype(np.float64)
    s = seq.astype(np.float64)
    cols = [np.ones_like(b), b, b * s]
    window = cfg.sliding_window if cfg.attention_layers(AttentionKind.LOCAL) else None
    if phase == Phase.PREFILL:
        cols.append(b * s * s)
        if window:
            cols.append(b * windowed_pairs(s, window, cfg.attention_chunked))
    elif window:
        cols.append(b * cfg.read_tokens(AttentionKind.LOCAL, s))
    if cfg.indexer is not None:  # DSA: MLA's pairs and rows over the top-k (ModelConfig.read_tokens)
        topk = cfg.indexer.topk
        cols.append(b * (windowed_pairs(s, topk) if phase == Phase.PREFILL
                         else cfg.read_tokens(AttentionKind.GLOBAL, s)))
    if cfg.compressed is not None:  # DeepSeek-V4's compressed entries (roofline.models.compressed)
        cols.extend(compressed_features(cfg.compressed, phase == Phase.PREFILL, b, s))
    bs = cfg.block_sparse  # MiniMax-M3: the sparse layers' pairs and keys, the block scores ranked
    if bs is not None:
        cols.extend([b * bs.pairs(s), b * bs.block_sum(s), b * s * bs.blocks(s)] if phase == Phase.PREFILL
                    else [b * bs.keys(s), b * bs.blocks(s)])
    if cfg.is_moe:
        tokens = b * (s if phase == Phase.PREFILL else 1.0)
        if sequence_split(sp):
            tokens = tokens / sp.tp  # exact: b is a multiple of tp
        hit = np.asarray(experts_hit(cfg.num_experts, cfg.experts_per_token, tokens * sp.ep, hit_override),
                         dtype=np.float64)
        hit = experts_read_per_device(hit, cfg.num_experts, cfg.redundant_experts, sp.ep)
        cols.append(np.broadcast_to(hit, b.shape))
    return np.stack(cols, axis=1)


def _sample_points(cfg: ModelConfig, phase: Phase) -> list[tuple[int, int]]:
    """(batch, length) points that separate every feature: small and large lengths, both sides of
    the window, and small token counts where the experts hit still grow with the batch."""
    lengths = {1, 2, 3, 5, 9, 33}
    if cfg.sliding_window and cfg.attention_layers(AttentionKind.LOCAL):
        w = cfg.sliding_window
        lengths |= {max(1, w // 2), w + 1, w + 7, 2 * w + 3}
    if cfg.indexer is not None:
        k = cfg.indexer.topk
        lengths |= {k // 2, k + 1, k + 7, 2 * k + 3}
    if cfg.compressed is not None:  # both sides of each ratio, and of the top-k's k·m
        cp = cfg.compressed
        lengths |= {cp.csa, cp.csa + 3, 3 * cp.hca + 5, cp.hca - 1, cp.topk * cp.csa + 9, 2 * cp.topk * cp.csa + 1,
                    cp.hca + 1, 7 * cp.csa + 2}
    if cfg.block_sparse is not None:  # both sides of a block and of the k·b keys a query attends in full
        blk, span = cfg.block_sparse.block, cfg.block_sparse.span
        lengths |= {blk - 1, blk + 1, 3 * blk + 5, span - 1, span + 1, span + blk // 2 + 1, 2 * span + 3, 3 * span + 7}
    # top-1 routing over many experts (Llama 4: 1 of 128) hits one expert a token up to batch 8: the
    # experts column equals the batch's there, so larger batches separate them
    batches = (1, 2, 3, 5, 8, 32, 100) if cfg.is_moe and cfg.experts_per_token == 1 else (1, 2, 3, 5, 8)
    return [(b, s) for b in batches for s in sorted(lengths)]


def _spanning(blocks: list[Any], points: list[tuple[int, int]], extra: int) -> tuple[list[int], list[int]]:
    """(indices of the fewest sample points whose rows of each of `blocks` (the features, the dims basis:
    each solved on its own, each column scaled to 1) span that block's rows at all of them, and of `extra`
    more to check the fit on), each in their order.

    Every kernel's FLOPs, bytes and dimensions are exact linear combinations of those columns (the module
    docstring), so the coefficients solved on such a subset are the ones solved on every point: the rows
    are picked as pivoted QR picks them (the first point, then each time the row farthest from the span of
    those taken, summed over the blocks not yet spanned), and the checks are the points farthest, in log
    batch and log length, from those taken. Each point saved is a graph build saved."""
    import numpy as np

    rest, ranks, sizes = [], [], []
    for x in blocks:
        scale = np.abs(x).max(axis=0)
        scale[scale == 0] = 1.0
        rest.append(x / scale)
        ranks.append(int(np.linalg.matrix_rank(rest[-1])))
        sizes.append(np.maximum(np.linalg.norm(rest[-1], axis=1), 1e-300))
    taken: list[int] = []
    have = [0] * len(blocks)
    i = 0
    while any(h < r for h, r in zip(have, ranks, strict=True)):
        taken.append(i)
        score = np.zeros(len(points))
        for j, r in enumerate(rest):
            norm = float(np.linalg.norm(r[i]))
            if have[j] < ranks[j] and norm > 1e-9 * float(sizes[j][i]):
                v = r[i] / norm
                rest[j] = r - np.outer(r @ v, v)
                have[j] += 1
            if have[j] < ranks[j]:
                score += np.linalg.norm(rest[j], axis=1) / sizes[j]
        score[taken] = -1.0
        i = int(np.argmax(score))
    where = np.log(np.array(points, dtype=np.float64))
    fewest = len(taken)
    for _ in range(min(extra, len(points) - len(taken))):
        gap = np.abs(where[:, None, :] - where[None, taken, :]).sum(axis=2).min(axis=1)
        gap[taken] = -1.0
        taken.append(int(np.argmax(gap)))
    return sorted(taken[:fewest]), sorted(taken[fewest:])


@frozen
class StepModel:
    """Per-kernel coefficients: flop_matrix, flop_vector and bytes = features · coefficients.

    With a split (`split`, on nodes of `devices_per_node`), the kernels are one device's, the batch
    features one replica's (batch / dp), and the collectives' bytes on the node's link and on the
    network are fitted too: a collective's time there is α + bytes / bandwidth (the alpha-beta model
    `roofline.placement` applies), on a machine with those levels (`System.device_machine`). The node
    link's all-reduces are fitted as rings (the bus bytes 2(n−1)/n · S, linear in the features) and
    evaluated as the algorithm `config.allreduce` and `nvls` run for each point's S
    (`AllReduceRule.factors`, the graph builder's `AllReduceRule.pick` over numpy arrays), since which
    algorithm runs changes with the size."""

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
    split: Split = field(default_factory=Split)
    devices_per_node: int | None = None
    coef_link: Any = None  # [features, kernels] bytes on the node's link, and on the network (None: one device)
    coef_network: Any = None
    link_mask: Any = None  # [kernels] True for the kernels that move bytes over that level (collectives)
    network_mask: Any = None
    coef_exp: Any = None  # [features, kernels] exponentials, and the vector ops beyond the FLOPs (None: none)
    coef_vector_ops: Any = None
    chip: ChipModel | None = None  # shared-memory and L2 bytes (roofline.models.stepchip)
    nvls: bool = False  # the system's switch reduces (Deployment.nvls)
    all_reduces: tuple[tuple[int, int], ...] = ()  # (kernel index, group) of the all-reduces on the node's link

    @classmethod
    def fit(cls, cfg: ModelConfig, phase: Phase | str, dtypes: ModelDtypes, plan: Plan = DEFAULT_PLAN,
            experts_hit_override: int | None = None, split: Split | None = None,
            devices_per_node: int | None = None, nvls: bool = False) -> StepModel:
        import numpy as np

        phase = as_phase(phase)
        sp = split or Split()
        ring = cfg if cfg.allreduce is Algorithm.RING else shared(("ring", id(cfg)),
                                                                  lambda: replace(cfg, allreduce=Algorithm.RING), cfg)
        all_reduces: tuple[tuple[int, int], ...] = ()
        unit = batch_unit(sp)  # the sample batches: multiples of dp (× tp under a sequence split)
        points = _sample_points(cfg, phase)

        def spanning() -> tuple[list[int], list[int]]:
            grid = np.array([p[0] * unit for p in points]), np.array([p[1] for p in points])
            blocks = [_features(cfg, phase, *grid, experts_hit_override, sp),
                      dims_basis(cfg, per_replica(grid[0], sp.dp), grid[1], phase)]
            return _spanning(blocks, points, CHECK_POINTS)

        # the same for every layout of a search whose features read the same of the split (_split_key); the
        # check points are built for the first of them alone (the module docstring)
        key = ("spanning", id(cfg), phase, experts_hit_override, _split_key(sp))
        fewest, checks = shared(key, spanning, cfg)
        points = [points[i] for i in (sorted(fewest + checks) if first_time(key, cfg) else fewest)]
        names: tuple[str, ...] = ()
        counts: tuple[int, ...] = ()
        rows_m, rows_v, rows_b, rows_l, rows_n, rows_e, rows_o = [], [], [], [], [], [], []
        kernels_at: list[list[Kernel]] = []
        for b, s in points:
            mg = build_graph(ring, phase, b * unit, s, dtypes, experts_hit_override, sp,
                             devices_per_node if not sp.trivial else None)
            kernels: list[Kernel] = mg.graph.kernels(mg.plan(plan))
            if not names:
                names = tuple(k.name for k in kernels)
                counts = tuple(k.count for k in kernels)
                all_reduces = tuple((i, c.group) for i, k in enumerate(kernels)
                                    if (c := mg.collectives.get(k.name)) is not None
                                    and c.kind is Collective.ALL_REDUCE and c.level is Level.LINK)
            elif tuple(k.name for k in kernels) != names:
                raise RooflineError(f"{cfg.name}: the kernels of the step change with its shape; cannot sweep")
            kernels_at.append(kernels)
            rows_m.append([k.cost.flop_by_unit.get(Unit.MATRIX, 0.0) for k in kernels])
            rows_v.append([k.cost.flop_by_unit.get(Unit.VECTOR, 0.0) for k in kernels])
            rows_b.append([k.cost.bytes_by_level.get(Level.DRAM, 0.0) for k in kernels])
            rows_l.append([k.cost.bytes_by_level.get(Level.LINK, 0.0) for k in kernels])
            rows_n.append([k.cost.bytes_by_level.get(Level.NETWORK, 0.0) for k in kernels])
            rows_e.append([k.cost.work(Unit.EXP) for k in kernels])  # exponentials (roofline.hardware.chip)
            rows_o.append([k.cost.ops_by_unit.get(Unit.VECTOR, 0.0) for k in kernels])  # online-softmax work
        batches = np.array([p[0] * unit for p in points])
        seqs = np.array([p[1] for p in points])
        x = _features(cfg, phase, batches, seqs, experts_hit_override, sp)
        _check_experts_column(cfg, sp, x, experts_hit_override)

        def solve(cols: Any, y: Any, reference: Any = None) -> Any:  # the features' or the dims basis's
            return _solve(cfg.name, cols, y, reference, shared(("inverse", cols.shape, cols.tobytes()),
                                                             lambda: _inverse(cols)))

        links = (rows_l, rows_n) if not sp.trivial else ()
        every = (rows_m, rows_v, rows_b, rows_e, rows_o, *links)  # solved at once, one column a kernel and kind
        coefs = np.split(solve(x, np.hstack([np.array(rows, dtype=np.float64) for rows in every])), len(every), axis=1)
        link: dict[str, Any] = {}
        if links:
            link = {"coef_link": coefs[5], "coef_network": coefs[6], "link_mask": _traffic_mask(rows_l, cfg.name),
                    "network_mask": _traffic_mask(rows_n, cfg.name)}
        chip = ChipModel.fit(cfg, kernels_at, x, dims_basis(cfg, per_replica(batches, sp.dp), seqs, phase), solve)
        return cls(cfg, phase, dtypes, plan, names, counts, coefs[0], coefs[1], coefs[2], experts_hit_override,
                   sp, devices_per_node, coef_exp=coefs[3], coef_vector_ops=coefs[4], chip=chip, nvls=nvls,
                   all_reduces=all_reduces, **link)

    def evaluate(self, batch: Iterable[int], seq: Iterable[int], machine: Machine, dtype: DType,
                 totals: bool = True) -> dict[str, Any]:
        """Totals for every (batch[i], seq[i]): flop, bytes, time_s (Σ of the kernels' floors),
        memory_bound_time_s, flop_per_byte, as numpy arrays; per kernel kernel_time_s (all its runs),
        kernel_compute_s (one run's matrix or vector term) and kernel_bound, codes into RESOURCE_CODES
        (matrix, vector, dram, link, network, exp, smem, l2), as `bound` is; op_dims, the tiled ops'
        dimensions [points, ops, DIMS] where the on-chip bytes took them (the band reads them again).
        `totals` False: the per-kernel entries alone (what a band over the kernels reads; serving.decode
        sums its own)."""
        import numpy as np

        b = np.asarray(list(batch) if not hasattr(batch, "__array__") else batch)
        s = np.asarray(list(seq) if not hasattr(seq, "__array__") else seq)
        x = _features(self.config, self.phase, b, s, self.experts_hit_override, self.split)
        fm = x @ self.coef_matrix
        fv = x @ self.coef_vector
        by = x @ self.coef_bytes
        peak_m = machine.peak_flop_per_s(dtype, Unit.MATRIX)
        peak_v = machine.peak_flop_per_s(dtype, Unit.VECTOR)
        bw = machine.memory_bytes_per_s
        counts = np.array(self.counts, dtype=np.float64)
        t_matrix, t_dram = fm / peak_m, by / bw
        # the exp units and the online softmax's vector ops, as `roofline.placement.place` times them:
        # only on a machine with per-SM data, the exponentials only where it has their rate
        exp_rate = machine.chip.exp_per_s if machine.chip is not None else None
        ops = x @ self.coef_vector_ops if machine.chip is not None and self.coef_vector_ops is not None else 0.0
        t_vector = (fv + ops) / peak_v
        t_exp = (x @ self.coef_exp) / exp_rate if exp_rate and self.coef_exp is not None else np.zeros_like(fm)
        unit_codes = np.array([0, 1, 5])  # matrix, vector, exp (SWEPT_RESOURCES)
        compute, which = _first_max([t_matrix, t_vector, t_exp])
        unit = unit_codes[which]  # ties to the first, as `binding` meets them
        # each level's time (a link's: α + bytes / bandwidth, for the kernels that use it; shared memory
        # and L2 where the machine places them); the slowest level, ties to the first (DRAM, the link,
        # the network, shared memory, L2), as `binding` meets them in a placement's bytes
        level_times, level_codes = [t_dram], [2]
        if self.coef_link is not None:
            level_times += [self._link_time(x, machine, Level.LINK), self._link_time(x, machine, Level.NETWORK)]
            level_codes += [3, 4]
        onchip = onchip_bandwidths(machine)
        op_dims = None  # the tiled ops' dimensions [points, ops, DIMS], kept for the band (stepband)
        if self.chip is not None and onchip:
            b_rep = per_replica(b, self.split.dp)
            basis = dims_basis(self.config, b_rep, s, self.phase)
            op_dims = self.chip.dims(basis) if self.chip.ops else None
            moved = self.chip.bytes(x, basis, op_dims)
            for lv, code in ((Level.SMEM, 6), (Level.L2, 7)):
                if lv in onchip:
                    level_times.append(moved[lv] / onchip[lv])
                    level_codes.append(code)
        codes = np.array(level_codes)
        memory, slowest = _first_max(level_times)
        t = np.maximum(compute, memory) * counts
        # `binding` per kernel (ties go to memory), then per point over the kernels' times
        kernel_bound = np.where(memory >= compute, codes[slowest], unit)
        kernels = {"kernel_time_s": t, "kernel_bound": kernel_bound,
                   "kernel_compute_s": np.maximum(t_matrix, t_vector),  # one run's FLOP units' term (no exp)
                   "kernel_dram_s": t_dram, "kernel_exp_s": t_exp, "kernel_matrix_flop": fm,  # one run's, each
                   **({} if op_dims is None else {"op_dims": op_dims})}
        if not totals:
            return kernels
        per = np.stack([np.where(kernel_bound == i, t, 0.0).sum(axis=1) for i in range(len(RESOURCE_CODES))], axis=1)
        level_per = per[:, codes]
        unit_per = per[:, unit_codes]
        step_bound = np.where(level_per.max(axis=1) >= unit_per.max(axis=1), codes[level_per.argmax(axis=1)],
                              unit_codes[unit_per.argmax(axis=1)])
        flop = (fm + fv) @ counts
        byt = by @ counts
        memory_bound = per[:, [2, 6, 7]].sum(axis=1)  # the memory class: DRAM, shared memory and L2 (bound_class)
        return {"flop": flop, "bytes": byt, "time_s": t.sum(axis=1), "memory_bound_time_s": memory_bound,
                "flop_per_byte": flop / byt, "bound": step_bound, **kernels}

    def _link_time(self, x: Any, machine: Machine, level: Level) -> Any:
        """α + bytes / bandwidth on `level` for the kernels that move bytes over it, 0 for the others."""
        import numpy as np

        coef, mask = (self.coef_link, self.link_mask) if level is Level.LINK else (self.coef_network, self.network_mask)
        if not mask.any():
            return np.zeros((x.shape[0], mask.size))
        lv = machine.memory.get(level)
        if lv is None or not lv.bytes_per_s:
            raise RooflineError(f"{machine.id} has no bandwidth for memory level {level!r} (a split's collectives "
                                f"cross it): give a system, or a device with its [interconnect]")
        moved = x @ coef
        if level is Level.LINK and self.all_reduces:  # each all-reduce's bytes as its algorithm moves them
            rule = AllReduceRule(self.config.allreduce, self.nvls)
            groups: dict[int, list[int]] = {}
            for j, n in self.all_reduces:
                groups.setdefault(n, []).append(j)
            for n, js in groups.items():  # the all-reduces over one group size at once (elementwise)
                # S is a whole number of bytes: rounded, so the fit's last digits never cross a threshold
                s = np.rint(moved[:, js] / BUS_FACTOR[Collective.ALL_REDUCE](n))
                moved[:, js] = rule.factors(s, n, False) * s
        return np.where(mask, lv.latency_s + moved / lv.bytes_per_s, 0.0)

    def all_reduce_regimes(self, unit: int, most: int, seq: int) -> list[tuple[int, int]]:
        """The runs [first, last] of n in [1, most] (batches n × unit, at length `seq`) over which every
        node-link all-reduce runs one algorithm (`AllReduceRule.factors`): within one the step is as
        linear in the batch as without the choice; [(1, most)] when there is no choice to make."""
        import numpy as np

        if not self.all_reduces or most < 2 or self.coef_link is None:
            return [(1, max(most, 1))]
        n = np.arange(1, most + 1)
        x = _features(self.config, self.phase, n * unit, np.full(n.size, seq), self.experts_hit_override, self.split)
        moved = x @ self.coef_link
        rule = AllReduceRule(self.config.allreduce, self.nvls)
        codes = np.stack([rule.factors(np.rint(moved[:, j] / BUS_FACTOR[Collective.ALL_REDUCE](g)), g, False)
                          for j, g in self.all_reduces], axis=1)
        starts = [0, *(int(i) + 1 for i in np.flatnonzero((codes[1:] != codes[:-1]).any(axis=1)))]
        ends = [*(s - 1 for s in starts[1:]), most - 1]
        return [(int(n[a]), int(n[b])) for a, b in zip(starts, ends, strict=True)]

    def length_free(self) -> Any:
        """[kernels] True for a kernel nothing of which grows with the length (a decode step's GEMMs, norms
        and collectives: their terms are all in the features that do not vary with it, _length_columns):
        its times are the same at every context of a batch."""
        import numpy as np

        cfg, sp, override = self.config, self.split, self.experts_hit_override
        xs, basis = shared(("length columns", id(cfg), self.phase, override, _split_key(sp)),
                           lambda: _length_columns(cfg, self.phase, sp, override), cfg)
        coefs = [c for c in (self.coef_matrix, self.coef_vector, self.coef_bytes, self.coef_exp, self.coef_vector_ops,
                             self.coef_link, self.coef_network) if c is not None]
        if self.chip is not None:
            coefs += list(self.chip.coef_rest.values())
        free = ~(np.vstack([c[xs] for c in coefs]) != 0).any(axis=0)  # every coefficient kind at once
        if self.chip is not None and self.chip.ops:  # an op whose FLOPs or dimensions vary with the length
            grows = (self.chip.coef_flop[xs] != 0).any(axis=0) | (self.chip.coef_dims[basis] != 0).any(axis=(0, 2))
            free[[op.kernel for op, g in zip(self.chip.ops, grows.tolist(), strict=True) if g]] = False
        return free

    def kernels_only(self, keep: Any) -> StepModel:
        """The step model of the kernels `keep` (indices, in order) alone: evaluate() gives their columns."""
        import numpy as np

        k = [int(j) for j in keep]
        at = {j: i for i, j in enumerate(k)}

        def cols(c: Any) -> Any:
            return None if c is None else c[:, k]

        return replace(self, names=tuple(self.names[j] for j in k), counts=tuple(self.counts[j] for j in k),
                       coef_matrix=cols(self.coef_matrix), coef_vector=cols(self.coef_vector),
                       coef_bytes=cols(self.coef_bytes), coef_link=cols(self.coef_link),
                       coef_network=cols(self.coef_network), coef_exp=cols(self.coef_exp),
                       coef_vector_ops=cols(self.coef_vector_ops),
                       link_mask=None if self.link_mask is None else np.asarray(self.link_mask)[k],
                       network_mask=None if self.network_mask is None else np.asarray(self.network_mask)[k],
                       chip=None if self.chip is None else self.chip.kernels_only(k),
                       all_reduces=tuple((at[j], g) for j, g in self.all_reduces if j in at))

    def limit(self, seq: int) -> tuple[float, float, float]:
        """(FLOPs, bytes, FLOP/B) per extra sequence (of a replica, with data parallelism) as the batch
        grows without bound."""
        import numpy as np

        unit = batch_unit(self.split)
        big = np.array([1 << 30, 1 << 31]) * unit
        x = _features(self.config, self.phase, big, np.array([seq, seq]), self.experts_hit_override, self.split)
        counts = np.array(self.counts, dtype=np.float64)
        flop = (x @ (self.coef_matrix + self.coef_vector)) @ counts
        byt = (x @ self.coef_bytes) @ counts
        df, db = float(flop[1] - flop[0]), float(byt[1] - byt[0])
        per = (1 << 30) * (unit // self.split.dp)
        return df / per, db / per, df / db if db else math.inf


def _split_key(split: Split) -> tuple[int, int, int]:
    """What _features and dims_basis read of a split: dp, ep, and tp under a sequence split (batch_unit)."""
    return split.dp, split.ep, split.tp if sequence_split(split) else 1


def _length_columns(cfg: ModelConfig, phase: Phase, split: Split, override: int | None) -> tuple[Any, Any]:
    """([features], [dims basis]) True for the columns that vary with the length at some batch: each taken
    at the sample batches over the sample lengths and powers of 4 up to 2^20 (every window, top-k and
    compression ratio is passed on the way)."""
    import numpy as np

    points = _sample_points(cfg, phase)
    batches = sorted({b for b, _ in points})
    lengths = sorted({s for _, s in points} | {4 ** k for k in range(11)})
    b = np.repeat(np.array(batches) * batch_unit(split), len(lengths))
    s = np.tile(np.array(lengths), len(batches))
    shape = (len(batches), len(lengths), -1)
    x = _features(cfg, phase, b, s, override, split).reshape(shape)
    basis = dims_basis(cfg, per_replica(b, split.dp), s, phase).reshape(shape)
    return np.ptp(x, axis=1).any(axis=0), np.ptp(basis, axis=1).any(axis=0)


def _first_max(arrays: list[Any]) -> tuple[Any, Any]:
    """(the elementwise max of `arrays`, the index of the first array holding it): np.stack(arrays).max(axis=0)
    and .argmax(axis=0), without stacking (a reduction across arrays is numpy's slow axis)."""
    import numpy as np

    best = arrays[0]
    index = np.zeros(best.shape, dtype=np.int64)
    for i, a in enumerate(arrays[1:], 1):
        index[a > best] = i  # strictly: a tie stays with the first, as argmax keeps it
        best = np.maximum(best, a)  # a NaN carries through, as max(axis=0) carries it
    return best, index


def _inverse(x: Any) -> tuple[Any, Any, Any]:
    """(the columns' scales, x with each column scaled to 1, its pseudo-inverse): what _solve applies to every
    right-hand side at the same samples (a layout's kernels and kinds, the on-chip bytes; within a split
    search, every layout whose samples are the same: roofline.models.shared)."""
    import numpy as np

    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    xs = x / scale
    return scale, xs, np.linalg.pinv(xs)


def _solve(name: str, x: Any, y: Any, reference: Any = None, inverse: tuple[Any, Any, Any] | None = None) -> Any:
    """Coefficients c with x · c = y at every sample: the least-squares solution (columns scaled to 1, x's
    pseudo-inverse applied, then one step of iterative refinement: the window or chunk pairs column is
    nearly collinear with B·S² below the window, and the residual's solve recovers the digits the first one
    lost); a coefficient whose column adds at most ROUNDING of `reference` (default y) at every sample is
    the solve's rounding and is set to 0 (a kernel that does not grow with the length then has no length
    terms at all: Decode evaluates it once a batch); an error when the fit misses a sample by more than 1e-6
    of `reference`. `inverse`: _inverse(x), when already taken."""
    import numpy as np

    scale, xs, pinv = _inverse(x) if inverse is None else inverse
    c = pinv @ y
    c = c + pinv @ (y - xs @ c)
    ref = y if reference is None else reference
    c[np.abs(c) <= ROUNDING * np.abs(ref).max(axis=0, initial=0.0)] = 0.0  # columns scaled to 1: c is what each adds
    c = c / scale[:, None]
    err = np.abs(x @ c - y) / np.maximum(np.abs(ref), 1.0)
    if err.size and float(err.max()) > 1e-6:
        raise RooflineError(f"{name}: the sweep model does not reproduce the graph "
                            f"(error {float(err.max()):.2g}); use the graph path")
    return c


def _traffic_mask(y: Any, name: str) -> Any:
    """Per kernel: whether it moves bytes over the level at every sample point (a collective); a kernel
    that does at some points and not at others cannot be swept (its α would come and go)."""
    import numpy as np

    moves = np.array(y, dtype=np.float64) != 0
    some, every = moves.any(axis=0), moves.all(axis=0)
    if (some != every).any():
        raise RooflineError(f"{name}: a kernel's traffic on a level comes and goes with the shape; cannot sweep")
    return np.asarray(every)


def _check_experts_column(cfg: ModelConfig, split: Split, x: Any, override: int | None) -> None:
    """The experts a device reads, ⌈hit / ep⌉, must vary over the samples unless it is at its largest
    at the fewest tokens (then, growing with the tokens, it is constant everywhere): a constant column
    cannot be told apart from the constant term."""
    import numpy as np

    if not cfg.is_moe or override is not None:
        return
    col = x[:, -1]
    most = experts_read_per_device(cfg.num_experts, cfg.num_experts, cfg.redundant_experts, split.ep)
    if np.ptp(col) == 0 and float(col[0]) != most:
        raise RooflineError(f"{cfg.name} with {split}: the experts read per device do not vary over the sample "
                            f"shapes; cannot sweep (use the graph path)")


def find_crossover(model: StepModel, seq: int, machine: Machine, dtype: DType) -> Crossover:
    """The smallest batch whose step reaches the ridge (with data parallelism, a multiple of dp, × tp
    under a sequence split: the search runs over multiples of `batch_unit`)."""
    ridge = machine.ridge_flop_per_byte(dtype)
    flop_seq, bytes_seq, limit = model.limit(seq)
    unit = batch_unit(model.split)

    def intensity(b: int) -> float:
        return float(model.evaluate([b * unit], [seq], machine, dtype)["flop_per_byte"][0])

    found = crossover(intensity, ridge, 1, 1 << 24) if limit >= ridge or intensity(1 << 24) >= ridge else None
    batch = None if found is None else found * unit
    reason = crossover_reason(model.phase, batch, None if found is None else intensity(found), ridge, limit,
                              flop_seq, bytes_seq)
    return Crossover(batch, ridge, limit, reason)


def crossover_reason(phase: Phase, batch: int | None, at: float | None, ridge: float, limit: float,
                     flop_seq: float, bytes_seq: float) -> str:
    """Why the crossover is where it is: the intensity `at` the batch found, or why it never comes."""
    if batch is not None:
        return f"at batch {batch} the step's intensity {at:.1f} FLOP/B reaches the ridge {ridge:.0f} FLOP/B"
    what = "KV cache and activation" if phase == Phase.DECODE else "activation"
    return (f"never: as the batch grows the intensity tends to {limit:.1f} FLOP/B, below the ridge "
            f"{ridge:.0f} FLOP/B, because each sequence adds {bytes_seq:.4g} bytes of {what} traffic "
            f"for {flop_seq:.4g} FLOPs: the bytes grow with the batch as fast as the FLOPs")


__all__ = ["RESOURCE_CODES", "Crossover", "StepModel", "batch_unit", "crossover_reason", "find_crossover"]
