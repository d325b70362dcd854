"""Fitting the expected-time model (roofline.expectation.model) to measured rows.

Every term of the model is a time computed from the placed kernel times a constant, so for a fixed
choice of the nonlinear knobs (the wave tile, the compute ratio ρ) the constants are
linear. With x_i the roofline term max(memory, ρ·compute·q) of row i, z_ij the other terms' times
(t0's column is 1) and y_i the measured time, a = 1/e and the constants c_j minimise the squared
*relative* error, so a 5 µs kernel weighs as much as a 5 ms one:

    S(a, c) = Σ_i ((a·x_i + Σ_j c_j·z_ij − y_i) / y_i)²

With u_i = x_i / y_i and v_ij = z_ij / y_i, S = Σ (a·u_i + Σ c_j·v_ij − 1)², whose normal equations
are G·(a, c) = r with G the Gram matrix of the columns (u, v_1, ...) and r their sums. The
constraints a ≥ 1 (e ≤ 1) and c_j ≥ 0 are kept by solving on every face of the box (each constant
free or held at its bound: a at 1, c_j at 0) and keeping the admissible solution of least S.

Three points x = 10, 20, 40 µs with y = 2x + 5 µs give a = 2, t0 = 5 µs exactly (e = 0.5).

The terms fitted per kind:

    gemm.*           x = max(memory, ρ·compute·q); z = 1, I (activation read), O (output write)
    *_attention.*    x = memory; z = 1, matrix (one column per head width with MIN_HEAD_ROWS rows), exp,
                     tile pairs / SMs, heads / SMs, K/V heads / SMs,
                     and, for decode, (H/G)·memory for groups beyond g_max (g_max among GROUPS, 0: none)

and around them the knobs, chosen by the smallest mean absolute percentage error (MAPE) of t: a GEMM's
wave tile among candidates (GEMM_TILES) and ρ on a grid (RATIOS: how much slower than its memory side
a kernel's matrix side runs); an attention's largest group g_max.

The band: r_i = y_i / t_i, (r25, r75) its 25th and 75th percentiles (type 7, as
roofline.measure.calibration.quantile) over all rows, widened for the rows whose floor is at least
BAND_SPLIT_S (10 µs) and for those below to that class's own quartiles where they reach further
(each class with MIN_BAND_ROWS rows; else the one band).

Layering: imports numpy, roofline.errors, roofline.measure.calibration (quantile), roofline.expectation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from roofline.errors import RooflineError
from roofline.expectation.model import BAND_SPLIT_S, Fit, Shape
from roofline.measure.calibration import quantile

# tiles the wave term may be counted in: CUTLASS/cuBLAS's common 128×128, 128×256 and 256×128 output tiles
GEMM_TILES: tuple[tuple[int, int] | None, ...] = (None, (128, 128), (128, 256), (256, 128))
# attention's waves are not counted apart: its matrix time is a term of its own (the tile pairs carry the
# per-step cost); kept for the callers that pass it
ATTENTION_TILES: tuple[tuple[int, int] | None, ...] = (None,)
# ρ = e / e_compute, 0.5 to 2.5 by 0.05: the matrix side at twice the memory side's efficiency to 2.5× below
RATIOS = tuple(round(0.5 + 0.05 * i, 2) for i in range(41))
MIN_BAND_ROWS = 20
MIN_HEAD_ROWS = 30  # a head width with fewer rows takes the nearest width's matrix weight
# the largest group of query heads per K/V head a decode kernel shares one K/V stream over (0: none tried)
GROUPS = (0, 8, 16, 32, 64)


def solve(x: Sequence[float], y: Sequence[float], *extra: Sequence[float]) -> tuple[float, ...]:
    """(a, t0, c1, ...) minimising Σ((a·x + t0 + Σ c_j·z_j − y)/y)² with a ≥ 1, t0 ≥ 0 and every c_j ≥ 0
    (module docstring); `extra` are the z_j columns beside t0's column of ones."""
    if len(x) != len(y) or not len(x) or any(len(z) != len(y) for z in extra):
        raise RooflineError("a fit needs as many measured times as floors, at least one")
    yy = np.asarray(y, dtype=float)
    if np.any(yy <= 0):
        raise RooflineError("a measured time must be above 0")
    cols = np.column_stack([np.asarray(x, float), np.ones_like(yy), *(np.asarray(z, float) for z in extra)])
    return tuple(float(v) for v in _solve_scaled(cols / yy[:, None]))


def _solve_scaled(a_cols: np.ndarray) -> np.ndarray:
    """The constrained least squares of Σ(A·coef − 1)² (A already divided by y): column 0 ≥ 1, the others ≥ 0.
    Solved on columns scaled to unit length (their times span ten orders of magnitude), then unscaled."""
    k = a_cols.shape[1]
    norms = np.linalg.norm(a_cols, axis=0)
    norms[norms == 0] = 1.0
    unit = a_cols / norms
    gram = unit.T @ unit
    rhs = unit.sum(axis=0)
    best: tuple[float, np.ndarray] | None = None
    for held in range(1 << k):  # every face: a free or held at 1, each other constant free or held at 0
        coef = np.zeros(k)  # in the unit columns' scale: coef_j · norm_j of the constant
        fixed = [j for j in range(k) if held >> j & 1]
        if held & 1:
            coef[0] = norms[0]
        free = [j for j in range(k) if not held >> j & 1]
        if free:
            g = gram[np.ix_(free, free)]
            r = rhs[free] - (gram[np.ix_(free, fixed)] @ coef[fixed] if fixed else 0.0)
            sol, _, rank, _ = np.linalg.lstsq(g, r, rcond=1e-12)
            if rank < len(free):  # a singular face (a column of zeros, two equal columns): its neighbours cover it
                continue
            coef[free] = sol
        const = coef / norms
        if const[0] < 1 - 1e-9 or np.any(const[1:] < -1e-12 * np.abs(const).max()):
            continue
        s = float(np.sum((unit @ coef - 1) ** 2))
        if best is None or s < best[0] - 1e-15:
            best = (s, const)
    if best is None:
        raise RooflineError("the fit found no admissible constants")
    c = best[1]
    return np.concatenate([[max(c[0], 1.0)], np.maximum(c[1:], 0.0)])


def mape(predicted: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray) -> float:
    """mean |predicted − measured| / measured."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    return float(np.mean(np.abs(p - m) / m))


@dataclass(frozen=True)
class _Columns:
    """The per-row times the terms multiply, as arrays (module docstring's x and z)."""

    floor: np.ndarray
    memory: np.ndarray
    compute: np.ndarray
    exp: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    tiles: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray

    @staticmethod
    def of(shapes: Sequence[Shape]) -> _Columns:
        def col(f: object) -> np.ndarray:
            return np.array([f(s) for s in shapes], dtype=float)  # type: ignore[operator]

        return _Columns(col(lambda s: s.floor_s), col(lambda s: s.floor_s if s.memory_s is None else s.memory_s),
                        col(lambda s: s.compute_s), col(lambda s: s.exp_s), col(lambda s: s.input_s),
                        col(lambda s: s.output_s), col(lambda s: Fit.per_sm(s)[0]), col(lambda s: Fit.per_sm(s)[1]),
                        col(Fit.kv_heads_per_sm), col(lambda s: s.head_dim))


def _waves(shapes: Sequence[Shape], tile: tuple[int, int] | None) -> np.ndarray:
    probe = Fit("probe", 1.0, 0.0, 1.0, 1.0, 1, tile, compute_ratio=1.0)
    return np.array([probe.stretched_floor_s(replace(s, memory_s=0.0)) / s.compute_s if s.compute_s > 0 else 1.0
                     for s in shapes], dtype=float)


def _linear(kind: str, x: np.ndarray, extra: Sequence[np.ndarray], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(constants, t of every row): a = 1/e on x, t0 on ones, a constant ≥ 0 on each extra column."""
    cols = np.column_stack([x, np.ones_like(x), *extra])
    coef = _solve_scaled(cols / y[:, None])
    return coef, cols @ coef


def fit_kind(kind: str, shapes: Sequence[Shape], measured: Sequence[float],
             tiles: Sequence[tuple[int, int] | None] = (None,), per_tile: bool = False) -> Fit:
    """The fit of one kind (module docstring): the GEMM terms, or the attention terms when `per_tile`
    (or the kind is an attention's); the knobs chosen by the smallest MAPE; the band from the residuals."""
    if not shapes:
        raise RooflineError(f"{kind}: no measured rows to fit")
    if len(shapes) != len(measured) or any(v <= 0 for v in measured):
        raise RooflineError(f"{kind}: a fit needs one measured time above 0 per row")
    y = np.asarray(measured, dtype=float)
    c = _Columns.of(shapes)
    attention = per_tile or "attention" in kind
    n = len(y)
    trials = (_attention_trials(kind, shapes, c, y, n) if attention else _gemm_trials(kind, shapes, c, y, n, tiles))
    best: tuple[float, Fit] | None = None
    for trial, t_gpu in trials:
        err = mape(t_gpu, y)
        if best is None or err < best[0]:
            best = (err, trial)
    if best is None:
        raise RooflineError(f"{kind}: the fit found no admissible constants")
    err, fit = best
    pred = np.array([fit.expected_s(s) for s in shapes])
    low, high, small = _bands(pred, y, c.floor)
    return replace(fit, mape=mape(pred, y), low=low, high=high, small_band=small)


def _gemm_trials(kind: str, shapes: Sequence[Shape], c: _Columns, y: np.ndarray, n: int,
                 tiles: Sequence[tuple[int, int] | None]) -> list[tuple[Fit, np.ndarray]]:
    out = []
    for tile in tiles:
        q = _waves(shapes, tile) if tile is not None else np.ones(n)
        for rho in RATIOS:
            x = np.maximum(c.memory, rho * c.compute * q)
            coef, pred = _linear(kind, x, (c.inputs, c.outputs), y)
            a, t0, c_in, c_out = coef
            out.append((Fit(kind, 1 / a, t0, 1.0, 1.0, n, tile, compute_ratio=rho, per_input=c_in,
                            per_output=c_out), pred))
    return out


def _head_dims(c: _Columns) -> list[int]:
    """The head widths with MIN_HEAD_ROWS rows (each gets its own a_mm; the others take the nearest's)."""
    widths, counts = np.unique(c.head_dim[c.head_dim > 0], return_counts=True)
    return [int(w) for w, k in zip(widths, counts, strict=True) if k >= MIN_HEAD_ROWS]


def _attention_trials(kind: str, shapes: Sequence[Shape], c: _Columns, y: np.ndarray,
                      n: int) -> list[tuple[Fit, np.ndarray]]:
    widths = _head_dims(c)
    if len(widths) >= 2:  # the matrix term split by head width: each row to the nearest width fitted
        near = np.array([min(widths, key=lambda w: abs(np.log(d / w))) if d > 0 else widths[0] for d in c.head_dim])
        matrix = [c.compute * (near == w) for w in widths]
    else:
        widths, matrix = [], [c.compute]
    out = []
    # the group limit is a decode kernel's (one block per sequence × K/V head); prefill tiles the queries
    for group in GROUPS if kind.startswith("generation") else (0,):
        probe = Fit(kind, 1.0, 0.0, 1.0, 1.0, 1, max_group=group, regroup_weight=1.0)
        extra = [c.exp, c.tiles, c.heads, c.kv_heads, *matrix]
        if group:
            extra.append(np.array([probe.regrouped_s(s) for s in shapes]))
            if not np.any(extra[-1] > 0):
                continue
        coef, pred = _linear(kind, c.memory, extra, y)
        a, t0, a_exp, c_tile, c_head, c_kv = coef[:6]
        a_mm = coef[6:6 + len(matrix)]
        c_g = float(coef[6 + len(matrix)]) if group else 0.0
        by_width = tuple((w, float(v)) for w, v in zip(widths, a_mm, strict=True)) if widths else ()
        # for a shape without a head width (another kind borrowing this fit): the most common width's a_mm
        common = float(a_mm[int(np.argmax([np.sum(m > 0) for m in matrix]))])
        out.append((Fit(kind, 1 / a, t0, 1.0, 1.0, n, None, per_tile_s=c_tile, per_head_s=c_head, per_kv_head_s=c_kv,
                        compute_ratio=0.0, matrix_weight=common, exp_weight=a_exp,
                        max_group=group if c_g > 0 else 0, regroup_weight=c_g, head_dim_weights=by_width), pred))
    return out


def _bands(pred: np.ndarray, y: np.ndarray, floor: np.ndarray) -> tuple[float, float, tuple[float, float] | None]:
    """The band of measured / t: its quartiles over all rows, widened for each size class (floors of at
    least 10 µs, and below) to that class's own quartiles where they reach further, so that a band holds
    at least the middle half of the kernels of its class; one band where a class is thin."""
    r = y / pred

    def q(sel: np.ndarray) -> tuple[float, float]:
        vals = [float(v) for v in r[sel]]
        return quantile(vals, 0.25), quantile(vals, 0.75)

    everyone = q(np.ones(len(r), dtype=bool))
    big = floor >= BAND_SPLIT_S
    if int(big.sum()) < MIN_BAND_ROWS or int((~big).sum()) < MIN_BAND_ROWS:
        return everyone[0], everyone[1], None
    (bl, bh), (sl, sh) = q(big), q(~big)
    return min(bl, everyone[0]), max(bh, everyone[1]), (min(sl, everyone[0]), max(sh, everyone[1]))


__all__ = ["ATTENTION_TILES", "GEMM_TILES", "RATIOS", "fit_kind", "mape", "solve"]
