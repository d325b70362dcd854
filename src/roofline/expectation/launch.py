"""How a kernel is launched, as the expected-time model (roofline.expectation.model) counts it: the
waves its output tiles run in, the padding of its last tile, and the launch path (and so the host
cost) an engine picks for a block-scaled FP8 GEMM. Each derived in the model's docstring.

Layering: imports only the standard library.
"""

from __future__ import annotations

import math

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


__all__ = ["ANY_PATH", "HOST_PATHS", "SMALL_M", "host_path", "padding_factor", "waves_factor"]
