"""DeepGEMM's block-scaled FP8 GEMM on Hopper, as the expected-time model (roofline.expectation.model)
counts it: the output block DeepGEMM's heuristic picks for each shape, the waves those blocks run in,
and the k-blocks each wave steps through.

What SGLang runs. aiconfigurator's SGLang collector times a block-scaled FP8 GEMM as SGLang's
per-token-group quantization of the BF16 activation (sglang_per_token_group_quant_fp8, group 128)
followed by sglang.srt.layers.deep_gemm_wrapper.gemm_nt_f8f8bf16 (collector/sglang/collect_gemm.py,
ai-dynamo/aiconfigurator: fp8_gemm_deepgemm; every row's kernel_source is
sglang_deepgemm_gemm_nt_f8f8bf16, 29,526 of 29,526 rows on H100 and H200), replayed in a CUDA graph
after warm-up (collector/helper.py benchmark_with_power: JIT compilation excluded). DeepGEMM (the
sgl-project/DeepGEMM fork SGLang's sgl-kernel pins, commit f4adba8, 2025-10-22) runs an FP8 × FP8 → BF16
NT GEMM with 1 × 128 activation scales and 128 × 128 weight scales on sm90 with its Kernel1D2D
(csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp), its block sizes chosen per shape by get_best_config
(csrc/jit_kernels/heuristics/common.hpp, sm90.hpp; block_config below, line for line):

    block_m in (64, 128, 256), block_n in (16, 32, ..., 256), block_k = 128; legal where block_n ≤ 128
    or block_n in (144, 160, 192) (Kernel1D2D's B scales), and block_m ≤ 128 or block_n ≤ 128; the
    fewest waves ⌈⌈m/block_m⌉·⌈n/block_n⌉ / SMs⌉, then the fullest last wave, then on a tie the smaller
    block of the same block_m (block_n), or the larger block_n where both differ (block_n ≤ n, block_m ≤ m)

Each block runs on one SM, so the matrix units' time is stretched to the waves' (the padding of the
last block and the last wave's idle SMs counted):

    q_dg = waves · SMs · block_m · block_n / (m · n)          in place of the fixed tile's q

and each block steps through ⌈k/128⌉ k-blocks, each a fixed cost λ_k beside its MMAs: Kernel1D2D's
math warp-groups issue one k-block's WGMMAs, wait for all of them (warpgroup_wait<0>), then promote
the FP32 accumulators by the two scales on the CUDA cores before the next k-block's WGMMAs
(deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh, the math loop: the tensor cores' pipeline
drains once per k-block):

    + λ_k · waves · ⌈k/128⌉                                   (Fit.k_step_s)

What the tables show (aiconfigurator-core 0.12.0, SGLang 0.5.14, gemm.fp8_block, floors ≥ 10 µs, every
row, fitted on calibrate's 4000-row stride, bench/validate_done_when.py --fits fresh): thin outputs with
a deep k, whose few blocks each step through hundreds of k-blocks, ran 3.6-6.6x the fit without the
terms (m ≤ 17, n = 768, k = 65,536: 48 blocks of 64 × 16, 512 k-blocks, 73-132 µs against 19-20 µs);
with both the MAPE goes from 15.3% to 12.5% on H200 (53% in the band; out of sample 14.5% -> 12.7%) and
13.8% to 11.9% on H100 (12.6% out of sample), λ_k = 107 and 103 ns a k-block. Either term alone does
less (q_dg alone 14.1% on H200), and the fixed tiles (128 × 128, 128 × 256, 256 × 128, padded or not)
did not lower the MAPE at all. The same two terms fit the other engines' Hopper block-scaled GEMMs with
λ_k = 91-109 ns: vLLM 0.24.0's (DeepGemmFp8BlockScaledMMKernel on 23,882 of H200's 35,741 rows; its host
floors kept) 7.7% -> 6.1% (H200), 7.7% -> 6.6% (H100), and TensorRT-LLM 1.3.0rc20's (fp8_block_scaling_gemm,
a DeepGEMM-derived kernel with its own older heuristic, cpp/tensorrt_llm/deep_gemm; here approximated by
this one) 12.0% -> 8.6% (H200), 12.9% -> 9.8% (H100). What neither term explains: one-wave shapes
on large blocks (256 × 96, 256 × 128, 128 × 192; 6% of H200's rows of floors ≥ 10 µs) run a median 2.2-2.9x
the fit, the same at every k (k = 2560 to 65,536: 1.9-2.2x on average), where the same blocks in two
waves or more run at 0.9-0.95x (n = k = 8192: 31.7 µs at m = 256 on 128 × 128 blocks, 147.8 µs at
m = 257 on 128 × 192, 152.7 µs at m = 512 on 256 × 128, 100 µs at m = 768 on 128 × 192 in two waves);
the kernel is the same code (m is not compiled in), so the DeepGEMM the tables timed may pick another
block for them than this heuristic does. A term for those rows (their q_dg·C again, fitted) takes H200
to 12.1% (out of sample 12.0%) and is not in the model: it names a regime, not a mechanism.

Layering: imports only the standard library; numpy lazily.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

BLOCK_MS = (64, 128, 256)  # get_best_config's block_m candidates (heuristics/common.hpp)
BLOCK_NS = tuple(range(16, 257, 16))  # SM90ArchSpec::get_block_n_candidates for a BF16 output
WIDE_BLOCK_NS = (144, 160, 192)  # the block_n > 128 Kernel1D2D takes (SM90ArchSpec::is_block_size_legal)
BLOCK_K = 128  # an FP8 k-block: 128 / sizeof(e4m3), one scale of A and of B each


def legal(block_m: int, block_n: int) -> bool:
    """SM90ArchSpec::is_block_size_legal for Kernel1D2D with a BF16 output."""
    if block_n > 128 and block_n not in WIDE_BLOCK_NS:
        return False
    return block_m <= 128 or block_n <= 128


CANDIDATES = tuple((bm, bn) for bm in BLOCK_MS for bn in BLOCK_NS if legal(bm, bn))  # in the heuristic's order


def block_config(m: Any, n: Any, sms: int) -> tuple[Any, Any, Any]:
    """(block_m, block_n, waves) DeepGEMM's sm90 heuristic picks for outputs of m × n on `sms` SMs (module
    docstring), as numpy arrays of m's shape; m·n = 0 gives (0, 0, 0). 8192 × 8192 at m = 256 on 132 SMs:
    128 × 128 blocks, 64 · 2 = 128 of them, one wave."""
    import numpy as np

    mm = np.atleast_1d(np.rint(np.asarray(m, dtype=np.float64))).astype(np.int64)
    nn = np.broadcast_to(np.rint(np.asarray(n, dtype=np.float64)).astype(np.int64), mm.shape)
    best_m = np.zeros(mm.shape, dtype=np.int64)
    best_n = np.zeros(mm.shape, dtype=np.int64)
    best_w = np.zeros(mm.shape, dtype=np.int64)
    best_u = np.zeros(mm.shape, dtype=np.int64)
    for bm, bn in CANDIDATES:
        blocks = -(-mm // bm) * -(-nn // bn)
        waves = -(-blocks // sms)
        last = np.where(blocks % sms == 0, sms, blocks % sms)
        tie = (waves == best_w) & (last == best_u)
        wins = ((best_m == 0) | (waves < best_w) | ((waves == best_w) & (last > best_u))
                | (tie & (bm == best_m) & (bn < best_n)) | (tie & (bn == best_n) & (bm < best_m))
                | (tie & (bm != best_m) & (bn > best_n) & (bn <= nn) & (bm <= mm)))
        best_m, best_n = np.where(wins, bm, best_m), np.where(wins, bn, best_n)
        best_w, best_u = np.where(wins, waves, best_w), np.where(wins, last, best_u)
    empty = (mm <= 0) | (nn <= 0)
    return tuple(np.where(empty, 0, a).reshape(np.shape(m)) for a in (best_m, best_n, best_w))  # type: ignore[return-value]


def stretch(m: Any, n: Any, sms: int) -> Any:
    """q_dg = waves · SMs · block_m · block_n / (m · n) (module docstring); 1 where m·n = 0 or no SMs.
    257 × 8192 on 132 SMs: one wave of 128 × 192 blocks, 132·128·192 / (257·8192) = 1.54."""
    return stretch_and_k_steps(m, n, 0.0, sms)[0]


def k_steps(m: Any, n: Any, k: Any, sms: int) -> Any:
    """waves · ⌈k/128⌉: the k-blocks one SM steps through in turn (module docstring); 0 where m·n·k = 0.
    15 × 768 × 65536 on 132 SMs: one wave (48 blocks of 64 × 16), 512 k-blocks."""
    return stretch_and_k_steps(m, n, k, sms)[1]


def stretch_and_k_steps(m: Any, n: Any, k: Any, sms: int) -> tuple[Any, Any]:
    """(stretch, k_steps) of the same shapes, DeepGEMM's blocks picked once for both (the fit's columns and
    expected_columns read the two terms together)."""
    import numpy as np

    if sms <= 0:
        return np.ones(np.shape(m)), np.zeros(np.shape(m))
    bm, bn, waves = block_config(m, n, sms)
    area = np.asarray(m, dtype=np.float64) * np.asarray(n, dtype=np.float64)
    kk = np.asarray(k, dtype=np.float64)
    return (np.where(area > 0, waves * sms * bm * bn / np.maximum(area, 1.0), 1.0),
            np.where(kk > 0, waves * np.ceil(kk / BLOCK_K - 1e-9), 0.0))


@lru_cache(maxsize=4096)
def block_config_one(m: int, n: int, sms: int) -> tuple[int, int, int]:
    """block_config for one shape, in plain Python (Fit.expected_s runs it once a kernel): the same rule."""
    best = (0, 0, 0, 0)  # block_m, block_n, waves, blocks in the last wave
    if m <= 0 or n <= 0 or sms <= 0:
        return 0, 0, 0
    for bm, bn in CANDIDATES:
        blocks = -(-m // bm) * -(-n // bn)
        waves, last = -(-blocks // sms), blocks % sms or sms
        bbm, bbn, bw, bu = best
        tie = waves == bw and last == bu
        if (bbm == 0 or waves < bw or (waves == bw and last > bu) or (tie and bm == bbm and bn < bbn)
                or (tie and bn == bbn and bm < bbm) or (tie and bm != bbm and bn > bbn and bn <= n and bm <= m)):
            best = (bm, bn, waves, last)
    return best[0], best[1], best[2]


def stretch_one(m: int, n: int, sms: int) -> float:
    """stretch for one shape."""
    bm, bn, waves = block_config_one(m, n, sms)
    return waves * sms * bm * bn / (m * n) if waves else 1.0


def k_steps_one(m: int, n: int, k: int, sms: int) -> float:
    """k_steps for one shape."""
    return float(block_config_one(m, n, sms)[2] * math.ceil(k / BLOCK_K - 1e-9)) if k > 0 else 0.0


__all__ = ["BLOCK_K", "CANDIDATES", "block_config", "block_config_one", "k_steps", "k_steps_one", "legal", "stretch",
           "stretch_and_k_steps", "stretch_one"]
