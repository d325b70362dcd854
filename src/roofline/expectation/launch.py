"""How a kernel is launched, as the expected-time model (roofline.expectation.model) counts it: the
waves its output tiles run in, the padding of its last tile, and the launch path (and so the host
cost) an engine picks for a block-scaled FP8 GEMM. Each defined in the model's docstring; what the
measured tables show of them:

The host floor, t = max(h, the device's sum). What the tables show (vLLM 0.24.0 block-scaled FP8
GEMMs, every row's kernel_source): H200 rows of a
20-35 µs floor run flat at 84-94 µs (1024×2560×12288 88.8 µs, 1024×8192×4096 88.7 µs; the sum with a
fixed t0 put them at 123-130 µs, 1.4x over) while the long ones keep the device's slope (2048×51200×51200
8.7 ms); the flat level is the kernel's: 178 µs on CUTLASS's path (k % 128 or n % 64), 59 µs on FlashInfer's
(m ≤ 17 on Hopper), 89 µs on DeepGEMM's (H100: 180, 60, 91 µs; B200, DeepGEMM at every m: 165, 229 at
m ≤ 17, 184 µs). Fitted there it takes the MAPE of floors ≥ 10 µs from 18.2% to 8.0% (H200), 16.3% to
7.8% (H100), 15.1% to 10.9% (B200); as a sum (a t0 per path) only to 16.8% (H200). Other kinds fit no
host floor (vLLM's per-tensor FP8 and BF16 GEMMs: t0 = 3-7 µs, none host-bound).

The last tile's padding. What the tables show (vLLM 0.24.0 per-tensor FP8 GEMMs on H200,
aiconfigurator-core 0.12.0): rows of
m = 2^j + 1 run 1.3-2.1x the unpadded fit (257×51200×2560: 135 µs against 63 µs; 513×12288×65536:
1330 µs against 626 µs), the rows of m = 2^j at it; padded, the fit of floors ≥ 10 µs goes from 14.5%
to 13.2% MAPE (H100 vLLM 15.0% to 13.9%, H200 SGLang 13.7% to 12.1%; TRT-LLM's GEMMs, whose kernels
pick their tile per shape, fit no wave term either way).

Layering: imports only the standard library; numpy lazily.
"""

from __future__ import annotations

import math
from typing import Any

# the launch paths of a block-scaled FP8 GEMM (vLLM's, as its tables' kernel_source names them on every row:
# CutlassFp8BlockScaledMMKernel when k is not a multiple of 128 or n not of 64, FlashInferFp8BlockScaledMMKernel
# at m <= 17 on Hopper, DeepGemmFp8BlockScaledMMKernel otherwise; H200 vLLM 0.24.0, 1,407 of 1,407 rows of
# the 4000-row stride so assigned): each path its own host floor (module docstring)
ANY_PATH = "any"
HOST_PATHS = ("cutlass", "small_m", "deepgemm")
SMALL_M = 17  # the most rows vLLM's block-scaled FP8 GEMM hands to FlashInfer on Hopper (H100/H200 tables)


def host_path(m: int, n: int, k: int) -> str:
    """The launch path of a block-scaled FP8 GEMM of m × n × k (HOST_PATHS; ANY_PATH for an unknown
    depth): 'cutlass' when k % 128 or n % 64, 'small_m' at m <= 17, else 'deepgemm'. Only a fit whose
    host floors are split by path (the fitter splits gemm.fp8_block's) reads it."""
    if k <= 0:
        return ANY_PATH
    if k % 128 or n % 64:
        return HOST_PATHS[0]
    return HOST_PATHS[1] if m <= SMALL_M else HOST_PATHS[2]


def padding_factor(m: int, n: int, tile: tuple[int, int] | None) -> float:
    """p = (⌈m / tm⌉·tm / m)·(⌈n / tn⌉·tn / n): the last tile's empty rows (columns) computed as full ones,
    each side counted where the matrix spans more than one tile (a kernel picks no tile taller than its
    matrix); 1 without a tile. 257 rows in 128-row tiles: 3·128/257 = 1.494."""
    if tile is None or m <= 0:
        return 1.0
    pm = math.ceil(m / tile[0]) * tile[0] / m if m > tile[0] else 1.0
    pn = math.ceil(n / tile[1]) * tile[1] / n if n > tile[1] else 1.0
    return pm * pn


def waves_factor(tiles: int, sms: int) -> float:
    """q = ⌈tiles / SMs⌉ · SMs / tiles: 1 for whole waves; 132 SMs and 133 tiles give 2·132/133 = 1.985."""
    if tiles <= 0 or sms <= 0:
        return 1.0
    return math.ceil(tiles / sms) * sms / tiles


def host_columns(host_floors: tuple[tuple[str, float], ...], m: Any, n: Any, k: Any, size: Any) -> Any:
    """The host floor of every entry's launch path (host_path, as columns; Fit.host_s): the one floor where
    `host_floors` is ANY_PATH's, the path fitted first where k is unknown (None, or 0 in an entry)."""
    import numpy as np

    by_path = dict(host_floors)
    first = host_floors[0][1]
    if ANY_PATH in by_path or k is None:
        return np.full(size, by_path.get(ANY_PATH, first))
    k, m, n = (np.rint(np.asarray(x, dtype=np.float64)).astype(np.int64) for x in (k, m, n))
    cutlass = (k % 128 != 0) | (n % 64 != 0)
    path_h = [by_path.get(p, first) for p in HOST_PATHS]
    h = np.where(cutlass, path_h[0], np.where(m <= SMALL_M, path_h[1], path_h[2]))
    return np.where(k > 0, h, first)


__all__ = ["ANY_PATH", "HOST_PATHS", "SMALL_M", "host_columns", "host_path", "padding_factor", "waves_factor"]
