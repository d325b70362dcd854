"""Fitting the expected-time model to measured rows: t = max(floor, compute · q) / e + t0.

With x = the stretched floor (roofline.expectation.model: the floor, or the matrix units' term times
the wave factor q where larger) and y = the measured time, a = 1/e and t0 minimise the squared
*relative* error, so a 5 µs kernel weighs as much as a 5 ms one:

    S(a, t0) = Σ ((a·x_i + t0 − y_i) / y_i)²

Setting u_i = x_i / y_i and w_i = 1 / y_i, S = Σ (a·u_i + t0·w_i − 1)², whose normal equations are

    a·Σu² + t0·Σuw = Σu          a·Σuw + t0·Σw² = Σw

solved by Cramer's rule. The constraints e ≤ 1 (a ≥ 1) and t0 ≥ 0 are kept by refitting on the
boundary: t0 = 0 gives a = Σu / Σu²; a = 1 gives t0 = Σ(1 − u)·w / Σw².

Three points x = 10, 20, 40 µs with y = 2x + 5 µs give a = 2, t0 = 5 µs exactly (e = 0.5).
Attention adds columns z_j (tile pairs and sequences × heads per SM) with costs c_j ≥ 0: the same
least squares over Σ(a·u + t0·w + Σ c_j·z_j/y − 1)², solved on every face of the constraints (each
coefficient free or held at its bound) and the admissible solution of least S kept.

The band: r_i = y_i / t_i, (r25, r75) its 25th and 75th percentiles (type 7, as
roofline.measure.calibration.quantile). Where the data say so, the tile of the wave term is chosen
among candidates by the smallest mean absolute percentage error (MAPE) of t.

Layering: imports roofline.errors, roofline.measure.calibration (quantile), roofline.expectation.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.errors import RooflineError
from roofline.expectation.model import Fit, Shape
from roofline.measure.calibration import quantile

# tiles the wave term may be counted in: CUTLASS/cuBLAS's common 128×128, 128×256 and 256×128 output tiles
GEMM_TILES: tuple[tuple[int, int] | None, ...] = (None, (128, 128), (128, 256), (256, 128))
# FlashAttention's 128-query tiles (the rows of shape_of already group the heads sharing K/V)
ATTENTION_TILES: tuple[tuple[int, int] | None, ...] = (None, (128, 0))


def solve(x: Sequence[float], y: Sequence[float], *extra: Sequence[float]) -> tuple[float, ...]:
    """(a, t0, c1, ...) minimising Σ((a·x + t0 + Σ c_j·z_j − y)/y)² with a ≥ 1, t0 ≥ 0 and every c_j ≥ 0
    (module docstring); `extra` are the z_j columns (per-tile and per-head counts)."""
    if len(x) != len(y) or not x or any(len(z) != len(y) for z in extra):
        raise RooflineError("a fit needs as many measured times as floors, at least one")
    if any(v <= 0 for v in y):
        raise RooflineError("a measured time must be above 0")
    cols = [[xi / yi for xi, yi in zip(x, y, strict=True)], [1 / yi for yi in y]]
    for z in extra:
        cols.append([zi / yi for zi, yi in zip(z, y, strict=True)])
    k = len(cols)

    def residual(coef: Sequence[float]) -> float:
        return sum((sum(c * col[i] for c, col in zip(coef, cols, strict=True)) - 1) ** 2 for i in range(len(y)))

    gram = [[sum(a * b for a, b in zip(ci, cj, strict=True)) for cj in cols] for ci in cols]
    rhs = [sum(ci) for ci in cols]
    best: tuple[float, list[float]] | None = None
    # every face of the constraints: a free or held at 1, each other coefficient free or held at 0
    for held in range(1 << k):
        fixed = {j: (1.0 if j == 0 else 0.0) for j in range(k) if held >> j & 1}
        free = [j for j in range(k) if j not in fixed]
        coef = [fixed.get(j, 0.0) for j in range(k)]
        if free:
            g = [[gram[i][j] for j in free] for i in free]
            r = [rhs[i] - sum(gram[i][j] * v for j, v in fixed.items()) for i in free]
            sol = _linear_solve(g, r)
            if sol is None:
                continue
            for j, v in zip(free, sol, strict=True):
                coef[j] = v
        if coef[0] < 1 - 1e-12 or any(c < -1e-18 for c in coef[1:]):
            continue
        s = residual(coef)
        if best is None or s < best[0]:
            best = (s, coef)
    if best is None:
        raise RooflineError("the fit found no admissible constants")
    c = best[1]
    return (max(c[0], 1.0), *(max(v, 0.0) for v in c[1:]))


def _linear_solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    n = len(b)
    m = [[*row, rhs] for row, rhs in zip(a, b, strict=True)]
    scale = max((abs(v) for row in a for v in row), default=0.0) or 1.0
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) <= 1e-14 * scale:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [v - f * w for v, w in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """mean |predicted − measured| / measured."""
    return sum(abs(p - m) / m for p, m in zip(predicted, measured, strict=True)) / len(measured)


def fit_kind(kind: str, shapes: Sequence[Shape], measured: Sequence[float],
             tiles: Sequence[tuple[int, int] | None] = (None,), per_tile: bool = False) -> Fit:
    """The fit of one kind: for each candidate tile, (a, t0) by `solve`; the tile of the smallest MAPE."""
    if not shapes:
        raise RooflineError(f"{kind}: no measured rows to fit")
    best: Fit | None = None
    for tile in tiles:
        probe = Fit(kind, 1.0, 0.0, 1.0, 1.0, len(shapes), tile)
        x = [probe.stretched_floor_s(s) for s in shapes]
        extra = [list(col) for col in zip(*(probe.per_sm(s) for s in shapes), strict=True)] if per_tile else []
        a, t0, *cs = solve(x, measured, *extra)
        c_tile, c_head = (cs[0], cs[1]) if per_tile else (0.0, 0.0)
        trial = Fit(kind, 1 / a, t0, 1.0, 1.0, len(shapes), tile, per_tile_s=c_tile, per_head_s=c_head)
        pred = [trial.expected_s(s) for s in shapes]
        err = mape(pred, measured)
        if best is None or err < (best.mape or 0.0):
            r = [m / p for m, p in zip(measured, pred, strict=True)]
            best = Fit(kind, 1 / a, t0, quantile(r, 0.25), quantile(r, 0.75), len(shapes), tile, err, c_tile, c_head)
    assert best is not None
    return best


__all__ = ["ATTENTION_TILES", "GEMM_TILES", "fit_kind", "mape", "solve"]
