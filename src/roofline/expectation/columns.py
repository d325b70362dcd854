"""The expected-time model over columns: Fit.expected_s and Fit.band_around, term by term, for many kernels
at once (numpy arrays, one entry a kernel or a grid point). What `roofline validate` scores every row of
a table with and what the serving step model's bands are evaluated with; each term is the one
roofline.expectation.model states, and validate checks the two against each other on sampled rows
(roofline.calibration.validate.expected_columns).

Layering: imports numpy (lazily), roofline.frozen and this room's model, launch and deepgemm.
"""

from __future__ import annotations

from typing import Any

from roofline.expectation.deepgemm import stretch_and_k_steps
from roofline.expectation.launch import host_columns
from roofline.expectation.model import (
    BAND_SPLIT_S,
    LATENCY_WIDTH,
    LONG_STREAM_KNEE,
    QUERY_TILE_HEADS,
    QUERY_TILE_HIDDEN,
    QUERY_TILE_WIDTHS,
    Fit,
)
from roofline.frozen import frozen


@frozen
class Columns:
    """Shape's fields as numpy columns, one entry a kernel (or a grid point): what `expected_columns` reads."""

    floor_s: Any
    compute_s: Any
    memory_s: Any  # DRAM's time (a collective's: its link's)
    exp_s: Any
    m: Any  # gemm: output rows and columns; attention: query rows and 0 (tiles_of)
    n: Any
    tile_pairs: Any
    heads: Any
    kv_heads: Any
    head_dim: Any
    input_s: Any
    output_s: Any
    sms: int
    k: Any = None  # gemm: the depth (the host floor's launch path reads it; None: every entry's path unknown)
    l2_s: float = 0.0  # τ = L2 capacity / DRAM bandwidth (decode's short stream, Fit.short_stream_s)
    query_tiles: Any = None  # prefill attention: its CTAs (Fit.waves_s; None: no entry has them)
    narrow_kv: Any = None  # prefill attention: K/V narrower than Q (Shape.narrow_kv; None: no entry)


def expected_columns(fit: Fit, c: Columns) -> tuple[Any, Any, Any]:
    """(t, low, high) of every entry: Fit.terms_s summed and Fit.band_around, term by term, as columns."""
    import numpy as np

    def ceil(a: Any) -> Any:
        return np.ceil(np.asarray(a, dtype=np.float64) - 1e-9)  # dimensions fitted to 1e-6 are whole numbers

    q: Any = 1.0
    if fit.tile is not None and c.sms > 0:
        across = ceil(c.n / fit.tile[1]) if fit.tile[1] > 0 else np.ones_like(c.n, dtype=np.float64)
        tiles = np.where(c.m > 0, ceil(c.m / fit.tile[0]) * np.where(c.n > 0, across, 1.0), 0.0)
        q = np.where(tiles > 0, ceil(tiles / c.sms) * c.sms / np.maximum(tiles, 1.0), 1.0)
        if fit.tile_padded:
            mm, nn = np.asarray(c.m, dtype=np.float64), np.asarray(c.n, dtype=np.float64)
            tm, tn = fit.tile
            pad_m = np.where(mm > tm, ceil(mm / tm) * tm / np.maximum(mm, 1.0), 1.0)
            pad_n = np.where(nn > tn, ceil(nn / tn) * tn / np.maximum(nn, 1.0), 1.0)
            q = q * np.where(tiles > 0, pad_m * pad_n, 1.0)
    steps: Any = 0.0
    if fit.deepgemm_blocks and c.sms > 0:  # DeepGEMM's blocks set the waves (Fit.stretched_floor_s)
        q, steps = stretch_and_k_steps(c.m, c.n, c.k if c.k is not None else 0.0, c.sms)
    roofline = np.maximum(c.memory_s, fit.compute_ratio * c.compute_s * q)
    kv = np.asarray(c.kv_heads, dtype=np.float64)
    # entries without K/V heads (GEMMs, norms, collectives: a group holds one kind) take 0 for every K/V
    # term below; the scalar 0 is what each masked column holds there, so the sums are the same bits
    with_kv = bool((kv > 0).any())
    # query heads per K/V head (decode's latency and query-tile roofs read it)
    grp = np.where(kv > 0, c.heads / np.maximum(kv, 1e-300), 0.0) if with_kv else 0.0
    if (fit.block_latency_s or fit.head_latency_s) and c.sms > 0:  # decode's latency roof (Fit.latency_s)
        lat: Any = 0.0
        if with_kv:
            wide = (grp == 1) | ((fit.max_group > 0) & (grp > fit.max_group))
            blocks = np.where(wide, fit.head_latency_s * c.heads, fit.block_latency_s * kv)
            lat = np.where((c.m == 0) & (kv > 0), blocks * (1 + c.head_dim / LATENCY_WIDTH) / c.sms, 0.0)
        roofline = np.maximum(roofline, lat)
    if fit.query_tile_latency_s and c.sms > 0 and with_kv:  # decode's query-tile roof (Fit.query_tile_s)
        grouped = (c.m == 0) & (kv > 0) & (grp != 1) & ~((fit.max_group > 0) & (grp > fit.max_group))
        hd = np.asarray(c.head_dim, dtype=np.float64)
        width: Any
        if hd.size > 0 and np.shape(grp) == hd.shape and bool((hd == hd.flat[0]).all()):  # a group's one width:
            # the width np.select gives every entry, taken once (the same factor in every product below)
            width = next((float(w) for w in QUERY_TILE_WIDTHS if hd.flat[0] <= w), float(hd.flat[0]))
        else:
            width = np.select([hd <= w for w in QUERY_TILE_WIDTHS], QUERY_TILE_WIDTHS, hd)
        tile = ceil(grp / QUERY_TILE_HEADS) * QUERY_TILE_HEADS * width / QUERY_TILE_WIDTHS[-1]
        blocks = np.maximum(kv / c.sms - QUERY_TILE_HIDDEN, 0.0)
        roofline = np.maximum(roofline, np.where(grouped, fit.query_tile_latency_s * blocks * tile, 0.0))
    if fit.stream_blocks:  # decode's streaming roof (Fit.stream_s)
        roofline = np.maximum(roofline, np.where((c.m == 0) & (kv > 0), fit.stream_blocks * c.memory_s
                                                 / np.maximum(kv, 1e-300), 0.0) if with_kv else 0.0)
    roofline = roofline / fit.efficiency
    weight: Any
    if fit.head_dim_weights:
        widths = np.array([d for d, _ in fit.head_dim_weights], dtype=np.float64)
        weights = np.array([w for _, w in fit.head_dim_weights], dtype=np.float64)
        hd = np.asarray(c.head_dim, dtype=np.float64)
        one = hd.size > 0 and bool((hd == hd.flat[0]).all())  # one width over the entries (a group's usual case)
        each = hd.flat[:1] if one else np.unique(hd)  # a few widths over many entries: each looked up once
        nearest = np.abs(np.log(np.maximum(each, 1e-9)[..., None] / widths)).argmin(axis=-1)
        if one:
            weight = weights[nearest[0]] if hd.flat[0] > 0 else fit.matrix_weight
        else:
            weight = np.where(hd > 0, weights[nearest[np.searchsorted(each, hd)]], fit.matrix_weight)
    else:
        weight = fit.matrix_weight
    if fit.narrow_kv_weights and c.narrow_kv is not None:  # prefill over a narrower K/V (Fit.matrix_weight_for)
        nw = np.array([d for d, _ in fit.narrow_kv_weights], dtype=np.float64)
        nv = np.array([w for _, w in fit.narrow_kv_weights], dtype=np.float64)
        hd = np.maximum(np.asarray(c.head_dim, dtype=np.float64), 1.0)
        near = nv[np.abs(np.log(hd[..., None] / nw)).argmin(axis=-1)]
        weight = np.where(np.asarray(c.narrow_kv, dtype=bool) & (c.m > 0), near, weight)
    per_sm = 1.0 / c.sms if c.sms else 0.0
    group: Any = 0.0
    regroup: Any = 0.0
    single: Any = 0.0
    if with_kv:
        group = np.where(c.kv_heads > 0, c.heads / np.maximum(c.kv_heads, 1.0), 0.0)
        regroup = np.where((group > fit.max_group) & (fit.max_group > 0), group * c.memory_s, 0.0)
        # decode rows (no query rows, K/V heads) with one query head per K/V head (Fit.single_group_s)
        single = np.where((c.m == 0) & (c.kv_heads > 0) & (c.heads == c.kv_heads), c.memory_s, 0.0)
    t = (roofline + weight * c.compute_s + fit.exp_weight * c.exp_s + fit.t0_s + fit.per_input * c.input_s
         + fit.per_output * c.output_s + per_sm * (fit.per_tile_s * c.tile_pairs + fit.per_head_s * c.heads
                                                   + fit.per_kv_head_s * c.kv_heads) + fit.regroup_weight * regroup
         + fit.single_group_weight * single)
    if fit.kv_read_weight:  # prefill's K/V read (Fit.kv_read_s)
        t = t + fit.kv_read_weight * (np.where((c.m > 0) & (kv > 0) & (c.heads > 0),
                                               c.memory_s * kv / np.maximum(c.heads + kv, 1e-300), 0.0)
                                      if with_kv else 0.0)
    if fit.short_stream_weight and c.l2_s > 0 and with_kv:  # decode's short stream (Fit.short_stream_s)
        t = t + fit.short_stream_weight * np.where((c.m == 0) & (kv > 0), np.minimum(c.memory_s, c.l2_s), 0.0)
    if fit.long_stream_weight and c.l2_s > 0 and with_kv:  # decode's long stream (Fit.long_stream_s)
        t = t + fit.long_stream_weight * np.where((c.m == 0) & (kv > 0), np.maximum(
            c.memory_s - LONG_STREAM_KNEE * c.l2_s, 0.0) / np.maximum(kv, 1e-300), 0.0)
    if fit.wave_weight and fit.wave_slots and c.sms > 0 and c.query_tiles is not None:  # prefill's waves
        qts = ceil(c.query_tiles)
        slots = fit.wave_slots * c.sms
        qk = np.where(qts > 0, ceil(qts / slots) * slots / np.maximum(qts, 1.0), 1.0)
        t = t + fit.wave_weight * c.compute_s * (qk - 1)
    if fit.deepgemm_blocks and fit.k_step_s and c.sms > 0 and c.k is not None:  # Fit.k_steps_s
        t = t + fit.k_step_s * steps
    if fit.host_floors:  # t = max(host floor of the entry's launch path, the device's sum) (Fit.host_s)
        t = np.maximum(t, host_columns(fit.host_floors, c.m, c.n, c.k, np.shape(c.floor_s)))
    small = fit.small_band if fit.small_band else (fit.low, fit.high)
    below = c.floor_s < BAND_SPLIT_S
    low = np.maximum(c.floor_s, t * np.where(below, small[0], fit.low))
    return t, low, np.maximum(low, t * np.where(below, small[1], fit.high))


__all__ = ["Columns", "expected_columns"]
