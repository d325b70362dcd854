"""Fitting the expected-time model (roofline.expectation.model) to measured rows.

Every term of the model is a time computed from the placed kernel times a constant, so for a fixed
choice of the nonlinear knobs (the wave tile, the compute ratio ρ) the constants are
linear. With x_i the roofline term max(memory, ρ·compute·q) of row i, z_ij the other terms' times
(t0's column is 1) and y_i the measured time, a = 1/e and the constants c_j minimise the squared
*relative* error, so a 5 µs kernel weighs as much as a 5 ms one:

    S(a, c) = Σ_i ((a·x_i + Σ_j c_j·z_ij − y_i) / y_i)²

With u_i = x_i / y_i and v_ij = z_ij / y_i, S = Σ (a·u_i + Σ c_j·v_ij − 1)², whose normal equations
are G·(a, c) = r with G the Gram matrix of the columns (u, v_1, ...) and r their sums. The
constraints a ≥ 1 (e ≤ 1) and c_j ≥ 0 make it a nonnegative least squares in (a − 1, c), solved by
Lawson and Hanson's active-set method.

Three points x = 10, 20, 40 µs with y = 2x + 5 µs give a = 2, t0 = 5 µs exactly (e = 0.5).

The terms fitted per kind:

    gemm.*           x = max(memory, ρ·compute·q); z = 1, I (activation read), O (output write);
                     with `deepgemm` (a block-scaled FP8 GEMM on Hopper) also q from DeepGEMM's blocks
                     and z = waves · ⌈k/128⌉ besides (roofline.expectation.deepgemm)
    *_attention.*    x = memory; z = 1, matrix (one column per head width with MIN_HEAD_ROWS rows), exp,
                     tile pairs / SMs, heads / SMs, K/V heads / SMs,
                     and, for decode, (H/G)·memory for groups beyond g_max (g_max among GROUPS, 0: none)
                     and memory on the rows of one query head per K/V head (MHA; where the rows mix both),
                     and decode's short stream min(memory, τ) (τ = L2 capacity / DRAM bandwidth),
                     and, beside a streaming roof (κ > 0), its long stream max(0, memory − τ/2) / K/V heads;
                     prefill's waves C·(q_k − 1) with k among WAVE_SLOTS;
                     prefill's matrix columns split by K/V narrower than Q (Shape.narrow_kv) where the
                     rows mix both, kept where that lowers the MAPE by NARROW_GAIN;
                     decode's x = max(memory, L, S, Q), the latency roof L with (λ_g, λ_h) on a grid
                     (LATENCIES), the streaming roof S with κ on a grid (STREAMS) and the query-tile
                     roof Q with λ_q on a grid (QUERY_TILES)

and around them the knobs, chosen by the smallest mean absolute percentage error (MAPE) of t: a GEMM's
wave tile among candidates (GEMM_TILES) and ρ on a grid (RATIOS: how much slower than its memory side
a kernel's matrix side runs); an attention's largest group g_max.

The constants of the best few knob settings are then refined to the least *absolute* relative error,
Σ |t_i − y_i| / y_i (the MAPE itself, `least_absolute`), and the setting of least MAPE kept.

The band: a tolerance interval of r = measured / t, each r from constants fitted without its row.
The rows are dealt into CV_FOLDS folds (a fixed permutation); each fold's t comes from the chosen
knobs' constants refitted on the other folds (cross-fitting: the residuals of new kernels, not of the
rows that made the constants, which are narrower; Lei, G'Sell, Rinaldo, Tibshirani and Wasserman,
"Distribution-free predictive inference for regression", JASA 2018, and Barber et al., "Predictive
inference with the jackknife+", Ann. Statist. 2021, for the K-fold form). Of n such ratios sorted, the
band is the r-th smallest and the r-th largest, r the largest rank at which the two hold at least
BAND_COVERAGE (half) of the kernels with probability BAND_CONFIDENCE (0.99): the coverage between
order statistics r and n + 1 − r is Beta(n + 1 − 2r, 2r) (Wilks, "Determination of sample sizes for
setting tolerance limits", Ann. Math. Statist. 1941), so

    P(coverage ≥ 1/2) = P(Binomial(n, 1/2) ≤ n − 2r) ≥ 0.99

(n = 20: r = 2, P = 0.994; n = 700: r = 159, about the 23rd and 77th percentiles). 0.99 and not 0.9:
the rows a fit takes are a stride through a table's grid of shapes, not a random sample of it; at 0.9
seven of the 81 GPU × engine × kind groups held 49-50% of all their rows (floors ≥ 10 µs), two of them
under half; at 0.99 the least holds 52% (bench/results/validate_done_when.txt). Rows whose floor is at
least BAND_SPLIT_S (10 µs) and those below each get their own band (each class with MIN_BAND_ROWS rows;
else the one band of all). Under CV_MIN_ROWS rows the in-sample ratios stand in; under 11 rows (no rank reaches 0.99)
the band is their range.

Layering: imports numpy, roofline.errors, roofline.frozen, roofline.expectation (model, deepgemm).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from functools import lru_cache

import numpy as np

from roofline.errors import RooflineError
from roofline.expectation.deepgemm import stretch_and_k_steps
from roofline.expectation.model import (
    ANY_PATH,
    BAND_SPLIT_S,
    HOST_PATHS,
    LATENCY_WIDTH,
    QUERY_TILE_HIDDEN,
    Fit,
    Shape,
    host_path,
    query_tile,
)
from roofline.frozen import frozen

# tiles the wave term may be counted in: CUTLASS/cuBLAS's common 128×128, 128×256 and 256×128 output tiles
GEMM_TILES: tuple[tuple[int, int] | None, ...] = (None, (128, 128), (128, 256), (256, 128))
# attention's waves are not counted apart: its matrix time is a term of its own (the tile pairs carry the
# per-step cost); kept for the callers that pass it
ATTENTION_TILES: tuple[tuple[int, int] | None, ...] = (None,)
# ρ = e / e_compute, 0.5 to 2.5 by 0.05: the matrix side at twice the memory side's efficiency to 2.5× below
RATIOS = tuple(round(0.5 + 0.05 * i, 2) for i in range(41))
MIN_BAND_ROWS = 20
BAND_COVERAGE = 0.5  # the band holds at least half of a class's kernels ...
BAND_CONFIDENCE = 0.99  # ... with this probability (module docstring: Wilks's tolerance ranks)
CV_FOLDS = 10  # the band's residuals are cross-fitted over this many folds
CV_MIN_ROWS = 40  # below this many rows the in-sample residuals stand in (a fold's fit would be too thin)
CV_PERMUTATION = 20  # the permutation that deals the rows into folds (fixed: a refit reproduces its file)
L1_PASSES = 20  # reweighted passes of least_absolute (the MAPE settles to 0.01 points within some 10)
L1_REFINED = 5  # the knob settings of least squared error refined to least absolute error
MIN_HEAD_ROWS = 30  # a head width with fewer rows takes the nearest width's matrix weight
# the largest group of query heads per K/V head a decode kernel shares one K/V stream over (0: none tried)
GROUPS = (0, 8, 16, 32, 64)
# decode's latency roof (roofline.expectation.model, Fit.latency_s): (λ_g, λ_h) per block on one SM, on a grid
# around what the short-KV rows show (H200 TRT-LLM: 4.8-7.3 µs a grouped block, 1.3-1.6 µs a query head's)
# The two latency knobs are searched only on fits of at least MIN_LATENCY_ROWS rows: on the 150-row fixtures
# (tests/fixtures/aiconfigurator) they overfit (H100 TRT-LLM decode bf16, fit on 70 rows: in-sample 17.2% ->
# 13.9%, out of sample on the other 69 14.6% -> 27.7%); on the tables' 1,500-4,000 rows out of sample tracks
MIN_LATENCY_ROWS = 500
# the host floor (roofline.expectation.model, Fit.host_s): alternating passes (h per path, then the device's
# constants on the rows the device sets), the candidates for h (quantiles of the path's measured times), and
# the least gain in MAPE that keeps it (a floor that changes nothing is left out)
HOST_PASSES = 8
HOST_QUANTILES = tuple(i / 50 for i in range(31))  # the 0th to the 60th percentile of the path's times
HOST_GAIN = 0.005
# decode's streaming roof (roofline.expectation.model, Fit.stream_s): κ, the sequences × K/V heads whose blocks
# pull DRAM's bandwidth, on a grid around what SGLang's Triton decode shows (κ = 87-108 on H200); 0: no roof.
# One knob, searched on fits of at least MIN_STREAM_ROWS rows (the split-off decode groups hold 115-301): on the
# 60-75-row fixture fits it overfits (H100 TRT-LLM decode fp8, fit on 63 rows: kappa = 16, out of sample 38.5%)
MIN_STREAM_ROWS = 100
# prefill's waves (roofline.expectation.model, Fit.waves_s): the query tiles an SM runs at once, k, tried
# among these (0: no wave term), as each group's data choose (the model's docstring)
WAVE_SLOTS = (0, 1, 2)
# prefill's matrix weight apart on rows whose K/V is narrower than Q (Fit.narrow_kv_weights): kept only where
# it lowers the fit's MAPE by this much (a split that changes nothing is left out, as the host floor's)
NARROW_GAIN = 0.005
STREAMS = (0.0, 16.0, 32.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0)
LATENCIES = tuple((g * 1e-6, h * 1e-6) for g in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
                  for h in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0))
# decode's query-tile roof (roofline.expectation.model, Fit.query_tile_s): λ_q per padded query head × 256 elements
# of a grouped block on one SM beyond its first QUERY_TILE_HIDDEN blocks, on a grid around what H200's and H100's
# FP8-cache TensorRT-LLM rows show (0.28-0.52 µs from 16 blocks an SM on); searched with the latency roof's knobs,
# on fits of MIN_LATENCY_ROWS rows
QUERY_TILES = (0.0, 0.1e-6, 0.15e-6, 0.2e-6, 0.3e-6, 0.4e-6)


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


def _solve_scaled(a_cols: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The constrained least squares of Σ w·(A·coef − 1)² (A already divided by y; w = 1 unless given):
    column 0 ≥ 1, the others ≥ 0. On columns scaled to unit length (their times span ten orders of
    magnitude), with coef_0 = 1 + z_0, it is a nonnegative least squares in z, solved by `_nnls`."""
    target = np.ones(a_cols.shape[0]) if weights is None else np.sqrt(weights)
    a_cols = a_cols * target[:, None]
    norms = np.linalg.norm(a_cols, axis=0)
    norms[norms == 0] = 1.0
    unit = a_cols / norms
    shift = np.zeros(unit.shape[1])
    shift[0] = norms[0]  # coef_0 = 1 in the unit columns' scale
    rhs = target - unit @ shift
    z = _nnls(unit.T @ unit, unit.T @ rhs)
    return (z + shift) / norms


def _nnls(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """min ‖A·z − b‖² with z ≥ 0, from G = AᵀA and r = Aᵀb: Lawson and Hanson's active set (Solving
    Least Squares Problems, 1974, ch. 23): free the variable of steepest descent, solve on the free
    set, step back to the boundary where a variable would turn negative, until no descent is left."""
    k = len(rhs)
    z = np.zeros(k)
    free = np.zeros(k, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(rhs).max()))
    for _ in range(4 * k + 8):
        w = rhs - gram @ z
        if free.all() or float(np.max(np.where(free, -np.inf, w))) <= tol:
            break
        free[int(np.argmax(np.where(free, -np.inf, w)))] = True
        while True:
            idx = np.flatnonzero(free)
            trial = np.zeros(k)
            trial[idx] = np.linalg.lstsq(gram[np.ix_(idx, idx)], rhs[idx], rcond=None)[0]
            if np.all(trial[idx] > 0):
                z = trial
                break
            neg = idx[trial[idx] <= 0]
            alpha = float(np.min(z[neg] / (z[neg] - trial[neg])))
            z = z + alpha * (trial - z)
            free &= z > tol
            z[~free] = 0.0
            if not free.any():
                break
    return np.maximum(z, 0.0)


def mape(predicted: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray) -> float:
    """mean |predicted − measured| / measured."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    return float(np.mean(np.abs(p - m) / m))


@frozen
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
    short: np.ndarray  # decode's short stream min(M, τ) (Fit.short_stream_s)
    query_tiles: np.ndarray  # prefill's CTAs (Fit.waves_s)
    narrow: np.ndarray  # prefill rows whose K/V is narrower than Q, 1.0 (Shape.narrow_kv)

    @staticmethod
    def of(shapes: Sequence[Shape]) -> _Columns:
        def col(f: object) -> np.ndarray:
            return np.array([f(s) for s in shapes], dtype=float)  # type: ignore[operator]

        return _Columns(col(lambda s: s.floor_s), col(lambda s: s.dram_s),
                        col(lambda s: s.compute_s), col(lambda s: s.exp_s), col(lambda s: s.input_s),
                        col(lambda s: s.output_s), col(lambda s: Fit.per_sm(s)[0]), col(lambda s: Fit.per_sm(s)[1]),
                        col(Fit.kv_heads_per_sm), col(lambda s: s.head_dim), col(Fit.short_stream_s),
                        col(lambda s: s.query_tiles), col(lambda s: float(s.narrow_kv and s.m > 0)))


def _waves(shapes: Sequence[Shape], tile: tuple[int, int] | None, padded: bool = False) -> np.ndarray:
    probe = Fit("probe", 1.0, 0.0, 1.0, 1.0, 1, tile, compute_ratio=1.0, tile_padded=padded)
    return np.array([probe.stretched_floor_s(replace(s, memory_s=0.0)) / s.compute_s if s.compute_s > 0 else 1.0
                     for s in shapes], dtype=float)


def _linear(kind: str, x: np.ndarray, extra: Sequence[np.ndarray], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(constants, t of every row): a = 1/e on x, t0 on ones, a constant ≥ 0 on each extra column."""
    cols = np.column_stack([x, np.ones_like(x), *extra])
    coef = _solve_scaled(cols / y[:, None])
    return coef, cols @ coef


def least_absolute(cols: np.ndarray, y: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The constants minimising Σ |cols·coef − y| / y, the MAPE itself (under the same bounds), by
    iteratively reweighted least squares from `start`: each pass weighs row i by 1 / max(|r_i|, 0.1%),
    r_i its relative error at the last constants (Schlossmacher 1973). Robust to the few rows an engine
    runs on another code path, which squared errors let pull every constant."""
    scaled = cols / y[:, None]
    coef = start
    for _ in range(L1_PASSES):
        r = np.abs(scaled @ coef - 1)
        coef = _solve_scaled(scaled, 1 / np.maximum(r, 1e-3))
    return coef


def fit_kind(kind: str, shapes: Sequence[Shape], measured: Sequence[float],
             tiles: Sequence[tuple[int, int] | None] = (None,), per_tile: bool = False,
             deepgemm: bool = False) -> Fit:
    """The fit of one kind (module docstring): the GEMM terms, or the attention terms when `per_tile`
    (or the kind is an attention's); the knobs chosen by the smallest MAPE; the band from the residuals.
    `deepgemm`: a GEMM's waves may also be DeepGEMM's sm90 blocks', with its cost per k-block."""
    if not shapes:
        raise RooflineError(f"{kind}: no measured rows to fit")
    if len(shapes) != len(measured) or any(v <= 0 for v in measured):
        raise RooflineError(f"{kind}: a fit needs one measured time above 0 per row")
    y = np.asarray(measured, dtype=float)
    c = _Columns.of(shapes)
    attention = per_tile or "attention" in kind
    n = len(y)
    trials = (_attention_trials(kind, shapes, c, y, n) if attention
              else _gemm_trials(kind, shapes, c, n, tiles) + (_deepgemm_trials(kind, shapes, c, n) if deepgemm else []))
    ranked = sorted(trials, key=lambda t: mape(t.cols @ _solve_scaled(t.cols / y[:, None]), y))
    best = _refined(ranked, y)
    if best is not None and best[2].narrow:  # the split by K/V dtype only where it lowers the MAPE by NARROW_GAIN
        plain = _refined([t for t in ranked if not t.narrow], y)
        if plain is not None and plain[0] < best[0] + NARROW_GAIN:
            best = plain
    if best is None:
        raise RooflineError(f"{kind}: the fit found no admissible constants")
    if not attention:
        best = _with_host_floor(kind, shapes, y, ranked[:L1_REFINED], best)
    _, fit, trial, path = best
    pred = np.array([fit.expected_s(s) for s in shapes])
    held_out = _cross_fitted(trial, path, y) if n >= CV_MIN_ROWS else pred
    low, high, small = _bands(held_out, y, c.floor)
    return replace(fit, mape=mape(pred, y), low=low, high=high, small_band=small)


def _refined(ranked: Sequence[_Trial], y: np.ndarray) -> _Best | None:
    """Of the L1_REFINED first trials, the one of least MAPE with its constants at least absolute error."""
    best: _Best | None = None
    for trial in ranked[:L1_REFINED]:
        coef = least_absolute(trial.cols, y, _solve_scaled(trial.cols / y[:, None]))
        err = mape(trial.cols @ coef, y)
        if best is None or err < best[0]:
            best = (err, trial.make(coef), trial, None)
    return best


def _cross_fitted(trial: _Trial, path: np.ndarray | None, y: np.ndarray) -> np.ndarray:
    """t of every row from the trial's constants refitted on the other CV_FOLDS − 1 folds (module
    docstring): least_absolute, or host_fit on the same launch paths where the fit has a host floor."""
    fold = np.random.default_rng(CV_PERMUTATION).permutation(len(y)) % CV_FOLDS
    out = np.empty(len(y))
    for f in range(CV_FOLDS):
        train, test = fold != f, fold == f
        cols = trial.cols[train]
        start = _solve_scaled(cols / y[train, None])
        if path is None:
            out[test] = trial.cols[test] @ least_absolute(cols, y[train], start)
        else:
            coef, h = host_fit(cols, y[train], path[train], start)
            out[test] = np.maximum(trial.cols[test] @ coef, h[path[test]])
    return out


@frozen
class _Trial:
    """One setting of the knobs: the columns of its linear part and how its constants make a Fit."""

    cols: np.ndarray
    make: Callable[[np.ndarray], Fit]
    narrow: bool = False  # its matrix columns split by K/V narrower than Q (Fit.narrow_kv_weights)


# the best fit so far: (its MAPE, the fit, the knob setting it came from, its rows' launch paths or None)
_Best = tuple[float, Fit, _Trial, np.ndarray | None]


def _gemm_trials(kind: str, shapes: Sequence[Shape], c: _Columns, n: int,
                 tiles: Sequence[tuple[int, int] | None]) -> list[_Trial]:
    out = []
    for tile, padded in ((t, p) for t in tiles for p in ((False, True) if t is not None else (False,))):
        q = _waves(shapes, tile, padded) if tile is not None else np.ones(n)
        for rho in RATIOS:
            cols = np.column_stack([np.maximum(c.memory, rho * c.compute * q), np.ones(n), c.inputs, c.outputs])

            def make(coef: np.ndarray, tile: tuple[int, int] | None = tile, rho: float = rho,
                     padded: bool = padded) -> Fit:
                a, t0, c_in, c_out = (float(v) for v in coef)
                return Fit(kind, 1 / a, t0, 1.0, 1.0, n, tile, compute_ratio=rho, per_input=c_in, per_output=c_out,
                           tile_padded=padded)

            out.append(_Trial(cols, make))
    return out


def _deepgemm_trials(kind: str, shapes: Sequence[Shape], c: _Columns, n: int) -> list[_Trial]:
    """The GEMM trials with DeepGEMM's waves (q_dg) and its k-blocks (waves · ⌈k/128⌉) as a column
    (roofline.expectation.deepgemm), one per ρ."""
    sms = shapes[0].sms if shapes else 0
    m, nn, k = (np.array([getattr(s, f) for s in shapes], dtype=float) for f in ("m", "n", "k"))
    q, steps = stretch_and_k_steps(m, nn, k, sms)
    out = []
    for rho in RATIOS:
        cols = np.column_stack([np.maximum(c.memory, rho * c.compute * q), np.ones(n), c.inputs, c.outputs, steps])

        def make(coef: np.ndarray, rho: float = rho) -> Fit:
            a, t0, c_in, c_out, lam = (float(v) for v in coef)
            return Fit(kind, 1 / a, t0, 1.0, 1.0, n, None, compute_ratio=rho, per_input=c_in, per_output=c_out,
                       deepgemm_blocks=True, k_step_s=lam)

        out.append(_Trial(cols, make))
    return out


def _head_dims(c: _Columns) -> list[int]:
    """The head widths with MIN_HEAD_ROWS rows (each gets its own a_mm; the others take the nearest's)."""
    widths, counts = np.unique(c.head_dim[c.head_dim > 0], return_counts=True)
    return [int(w) for w, k in zip(widths, counts, strict=True) if k >= MIN_HEAD_ROWS]


_PROBE = Fit("probe", 1.0, 0.0, 1.0, 1.0, 1)


def _attention_trials(kind: str, shapes: Sequence[Shape], c: _Columns, y: np.ndarray, n: int) -> list[_Trial]:
    widths = _head_dims(c)
    if len(widths) >= 2:  # the matrix term split by head width: each row to the nearest width fitted
        near = np.array([min(widths, key=lambda w: abs(np.log(d / w))) if d > 0 else widths[0] for d in c.head_dim])
        matrix = [c.compute * (near == w) for w in widths]
    else:
        widths, matrix = [], [c.compute]
    # for a shape without a head width (another kind borrowing this fit): the most common width's a_mm
    common = int(np.argmax([np.sum(m > 0) for m in matrix]))
    # prefill rows over a narrower K/V (Fit.narrow_kv_weights): a_mm apart per width where the rows mix both
    mixed = not kind.startswith("generation") and bool(np.any(c.narrow > 0)) and bool(np.any(c.narrow == 0))
    dims = c.head_dim[c.head_dim > 0]
    narrow_widths = widths or ([int(np.bincount(dims.astype(int)).argmax())] if dims.size else [1])
    out = []
    # the group limit is a decode kernel's (one block per sequence × K/V head); prefill tiles the queries
    # decode's MHA column (Fit.single_group_s): only where the rows mix one and several query heads per
    # K/V head (on MHA rows alone it would be the memory column again)
    one = np.array([Fit.single_group_s(_PROBE, s) for s in shapes])
    single = kind.startswith("generation") and bool(np.any(one > 0)) and bool(np.any(one == 0))
    decode = kind.startswith("generation")
    grp = np.where(c.kv_heads > 0, c.heads / np.maximum(c.kv_heads, 1e-300), 0.0)
    width = 1 + c.head_dim / LATENCY_WIDTH
    q_tile = np.array([query_tile(g, int(d)) for g, d in zip(grp, c.head_dim, strict=True)])
    kv = np.array([s.kv_heads for s in shapes], dtype=float)  # sequences × K/V heads (not per SM)
    kv_read = np.array([Fit.kv_read_s(s) for s in shapes], dtype=float)
    short = decode and bool(np.any(c.short > 0))
    # decode's long stream (Fit.long_stream_s): a column beside the streaming roof's κ > 0 trials only, on decode
    # attention (MLA's kinds, generation_mla.*, are left as they were: their tables were not examined for it)
    far_kind = kind.startswith("generation_attention") and n >= MIN_STREAM_ROWS
    far_col = np.array([Fit.long_stream_s(s) for s in shapes]) if far_kind else None
    long_stream = far_col if far_col is not None and bool(np.any(far_col > 0)) else None
    # prefill with and without its K/V read (Fit.kv_read_s): the setting of least MAPE is kept
    # prefill's waves of query tiles on k·SMs slots (Fit.waves_s), k among WAVE_SLOTS (0: none)
    slots_tried = WAVE_SLOTS if not decode and bool(np.any(c.query_tiles > 0)) else (0,)
    waves = {k: np.array([Fit(kind, 1.0, 0.0, 1.0, 1.0, 1, wave_slots=k).waves_s(s) for s in shapes])
             for k in slots_tried if k}  # each k's column, the same with and without the K/V read
    for group, with_kv, slots, split in ((gr, False, 0, False) for gr in GROUPS) if decode else (
            (0, kvr, k, sp) for kvr in (False, True) for k in slots_tried for sp in ((False, True)[:1 + mixed])):
        probe = Fit(kind, 1.0, 0.0, 1.0, 1.0, 1, max_group=group, regroup_weight=1.0)
        mats = [m * (1 - c.narrow) for m in matrix] + [m * c.narrow for m in matrix] if split else matrix
        extra = [c.exp, c.tiles, c.heads, c.kv_heads, *mats]
        if group:
            extra.append(np.array([probe.regrouped_s(s) for s in shapes]))
            if not np.any(extra[-1] > 0):
                continue
        if single:
            extra.append(one)
        if with_kv:  # prefill's K/V read (Fit.kv_read_s)
            extra.append(kv_read)
        if short:  # decode's short stream (Fit.short_stream_s)
            extra.append(c.short)
        if slots:  # prefill's waves (Fit.waves_s)
            if not np.any(waves[slots] > 0):
                continue
            extra.append(waves[slots])
        # decode's latency roof per block time (Fit.latency_s), blocks per SM (the columns are per SM)
        wide = (grp == 1) | ((group > 0) & (grp > group))
        per_head = np.where(decode & (c.kv_heads > 0) & wide, c.heads * width, 0.0)
        per_block = np.where(decode & (c.kv_heads > 0) & ~wide, c.kv_heads * width, 0.0)
        # decode's query-tile roof per λ_q (Fit.query_tile_s): the grouped blocks' padded query tiles per SM
        # beyond the first QUERY_TILE_HIDDEN blocks an SM
        per_tile = np.where(decode & (c.kv_heads > 0) & ~wide,
                            np.maximum(c.kv_heads - QUERY_TILE_HIDDEN, 0.0) * q_tile, 0.0)
        latencies = LATENCIES if decode and n >= MIN_LATENCY_ROWS else ((0.0, 0.0),)
        streams = STREAMS if decode and n >= MIN_STREAM_ROWS else (0.0,)
        query_tiles = QUERY_TILES if decode and n >= MIN_LATENCY_ROWS else (0.0,)
        for (lam_g, lam_h), kappa, lam_q in ((lat, k, lq) for lat in latencies for k in streams for lq in query_tiles):
            roof = np.maximum(c.memory, lam_g * per_block + lam_h * per_head)
            if kappa:
                roof = np.maximum(roof, np.where(decode & (kv > 0), kappa * c.memory / np.maximum(kv, 1e-300), 0.0))
            if lam_q:
                roof = np.maximum(roof, lam_q * per_tile)
            far = bool(kappa) and long_stream is not None  # decode's long stream, beside a streaming roof
            cols = np.column_stack([roof, np.ones(n), *extra, *((long_stream,) if far else ())])

            def make(coef: np.ndarray, group: int = group, lam_g: float = lam_g, lam_h: float = lam_h,
                     kappa: float = kappa, with_kv: bool = with_kv, slots: int = slots,
                     lam_q: float = lam_q, split: bool = split, far: bool = far) -> Fit:
                c_far = float(coef[-1]) if far else 0.0
                coef = coef[:-1] if far else coef
                a, t0, a_exp, c_tile, c_head, c_kv = (float(v) for v in coef[:6])
                nm = len(matrix) * (2 if split else 1)
                a_mm = [float(v) for v in coef[6:6 + len(matrix)]]
                narrow = tuple(zip(narrow_widths, (float(v) for v in coef[6 + len(matrix):6 + nm]), strict=True)
                               ) if split else ()
                c_g = float(coef[6 + nm]) if group else 0.0
                c_1 = float(coef[6 + nm + (1 if group else 0)]) if single else 0.0
                # the last columns: prefill's K/V read then its waves; decode's short stream (never both kinds)
                c_w = float(coef[-1]) if slots else 0.0
                c_kvr = float(coef[-1 - (1 if slots else 0)]) if with_kv else 0.0
                c_l2 = float(coef[-1]) if short else 0.0
                by_width = tuple(zip(widths, a_mm, strict=True)) if widths else ()
                return Fit(kind, 1 / a, t0, 1.0, 1.0, n, None, per_tile_s=c_tile, per_head_s=c_head,
                           per_kv_head_s=c_kv, compute_ratio=0.0, matrix_weight=a_mm[common], exp_weight=a_exp,
                           max_group=group if c_g > 0 or lam_h > 0 or lam_q > 0 else 0, regroup_weight=c_g,
                           head_dim_weights=by_width, single_group_weight=c_1, block_latency_s=lam_g,
                           head_latency_s=lam_h, stream_blocks=kappa, kv_read_weight=c_kvr,
                           short_stream_weight=c_l2, wave_weight=c_w, wave_slots=slots if c_w > 0 else 0,
                           query_tile_latency_s=lam_q, narrow_kv_weights=narrow, long_stream_weight=c_far)

            out.append(_Trial(cols, make, split))
    return out


def _paths(kind: str, shapes: Sequence[Shape]) -> list[np.ndarray]:
    """The ways to split the rows by launch path for a host floor: one path, and for gemm.fp8_block
    its kernels' (roofline.expectation.model.host_path), each as a path index per row (-1: unknown)."""
    one = [np.zeros(len(shapes), dtype=int)]
    if kind != "gemm.fp8_block":
        return one
    names = [host_path(s.m, s.n, s.k) for s in shapes]
    if any(p == ANY_PATH for p in names):
        return one
    return [*one, np.array([HOST_PATHS.index(p) for p in names])]


def host_fit(cols: np.ndarray, y: np.ndarray, path: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the device's constants, h per path) minimising Σ |max(h_path, cols·coef) − y| / y: alternating
    passes (HOST_PASSES), each h the best of its path's candidates (HOST_QUANTILES of its measured times,
    and 0) given the device's times, then the constants refitted (least_absolute) on the rows whose time
    the device sets. The measured time of a call timed back to back without CUDA graphs is the slower of
    the host's issue time and the device's (the launches queue; model docstring)."""
    coef = start
    npath = int(path.max()) + 1
    h = np.zeros(npath)
    for _ in range(HOST_PASSES):
        dev = cols @ coef
        for p in range(npath):
            sel = path == p
            if not sel.any():
                continue
            cand = np.r_[0.0, np.quantile(y[sel], HOST_QUANTILES)]
            errs = [float(np.sum(np.abs(np.maximum(c, dev[sel]) - y[sel]) / y[sel])) for c in cand]
            h[p] = cand[int(np.argmin(errs))]
        device = dev >= h[path]
        if int(device.sum()) <= cols.shape[1]:
            break
        coef = least_absolute(cols[device], y[device], coef)
    return coef, h


def _with_host_floor(kind: str, shapes: Sequence[Shape], y: np.ndarray, trials: Sequence[_Trial],
                     best: _Best) -> _Best:
    """`best`, or the fit with a host floor (host_fit) on one of `trials` where that lowers the MAPE by
    at least HOST_GAIN (with the trial and the launch path of each row it was fitted with)."""
    out = best
    for path in _paths(kind, shapes):
        for trial in trials:
            coef, h = host_fit(trial.cols, y, path, _solve_scaled(trial.cols / y[:, None]))
            err = mape(np.maximum(trial.cols @ coef, h[path]), y)
            if err < out[0] - (HOST_GAIN if out is best else 0.0):
                counts = np.bincount(path, minlength=len(h))
                order = sorted(range(len(h)), key=lambda p: -counts[p])
                names = [ANY_PATH] if len(h) == 1 else list(HOST_PATHS)
                floors = tuple((names[p], float(h[p])) for p in order if counts[p] > 0)
                out = (err, replace(trial.make(coef), host_floors=floors), trial, path)
    return out


@lru_cache(maxsize=256)
def tolerance_rank(n: int, confidence: float = BAND_CONFIDENCE) -> int:
    """r: the largest rank at which the r-th smallest and r-th largest of n values hold at least
    BAND_COVERAGE of the population with probability `confidence`, P(Binomial(n, 1/2) ≤ n − 2r) ≥ confidence
    (Wilks 1941; module docstring), in exact integers; 1 (the range) where none does (n < 11 at 0.99)."""
    if BAND_COVERAGE != 0.5:
        raise RooflineError("the tolerance ranks are counted for a coverage of one half")
    need = math.ceil(Fraction(str(confidence)) * 2 ** n)  # confidence · 2^n, exactly
    term, cdf = 1, 0  # C(n, j) and Σ_{i ≤ j} C(n, i)
    for j in range(n + 1):
        cdf += term
        if cdf >= need:  # the least j that reaches it; rank r needs n − 2r ≥ j
            return max(1, (n - j) // 2)
        term = term * (n - j) // (j + 1)
    return 1


def _tolerance(r: np.ndarray) -> tuple[float, float]:
    vals = np.sort(r)
    k = tolerance_rank(len(vals))
    return float(vals[k - 1]), float(vals[len(vals) - k])


def _bands(pred: np.ndarray, y: np.ndarray, floor: np.ndarray) -> tuple[float, float, tuple[float, float] | None]:
    """The band of measured / t (module docstring): the tolerance interval of the rows whose floor is at
    least 10 µs and, apart, of those below; the one interval of all rows where a class is thin."""
    r = y / pred
    big = floor >= BAND_SPLIT_S
    if int(big.sum()) < MIN_BAND_ROWS or int((~big).sum()) < MIN_BAND_ROWS:
        low, high = _tolerance(r)
        return low, high, None
    (bl, bh), small = _tolerance(r[big]), _tolerance(r[~big])
    return bl, bh, small


__all__ = ["ATTENTION_TILES", "GEMM_TILES", "RATIOS", "fit_kind", "host_fit", "mape", "solve", "tolerance_rank"]
