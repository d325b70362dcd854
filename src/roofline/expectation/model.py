"""The expected-time model: a placed kernel's floor mapped to the band real kernels take.

The floor comes from placement alone (the machine's ceilings); this room never changes it. Measured
kernels take longer, and the measured tables (aiconfigurator-core's, `roofline.calibration`) show by
how much and why. Per GPU × engine × kernel kind the model is one sum of named terms, each a time this
module computes from the placed kernel times a fitted constant ≥ 0:

    t = max(M, ρ·C·q, L, S) / e                the roofline term: the slowest memory level's time M and
                                               the matrix units' time C, the matrix side ρ times slower
                                               (ρ = e / e_compute: the two efficiencies of one max) and
                                               stretched by wave quantization q (below); GEMMs;
                                               decode's latency roof L and streaming roof S (below)
          + a_mm·C + a_exp·X                   attention: the matrix units' and the exponential units'
                                               times added (FlashAttention's softmax and MMA overlap in
                                               part: a weight below 1 is the share that does not hide);
                                               a_mm per head width, as an engine picks its kernel by it
                                               (SGLang on B200: Triton at 192, TRT-LLM's kernels at 128)
          + t0                                 the fixed cost of a launch
          + c_in·I + c_out·O                   GEMMs: the activation's quantize pass and the output's
                                               epilogue, I = m·k·2 B and O = m·n·2 B over DRAM bandwidth
                                               (the BF16 activation read once; an FP8 or NVFP4 GEMM as
                                               an engine runs it first quantizes its BF16 input: 2 B
                                               read, 1 B (or ½ B + scales) written, read again: c_in ≥ 1.5
                                               at full bandwidth; a BF16 GEMM has none, c_in ≈ 0)
          + c_tile·P / SMs + c_head·H / SMs    attention: a fixed cost per (query tile, key tile) step
          + c_kv·G / SMs                       of 128 × 128 (P per kernel), per sequence × query head
                                               (H: its softmax state set up and its output written) and
                                               per sequence × K/V head (G: the blocks a decode kernel
                                               launches, one per K/V head of each sequence, each loading
                                               its queries and reducing its split)
          + c_g·(H/G)·M  if H/G > g_max       attention: a group of query heads per K/V head larger than
                                               the kernel takes (TRT-LLM's decode kernel: 32) falls back to
                                               one block per query head, each streaming the K/V itself
          + c_1·M  if H = G (decode)               attention: one query head per K/V head (MHA) runs on
                                                   another kernel than grouped heads: TensorRT-LLM decodes
                                                   MQA/GQA with its XQA kernels and MHA with its masked
                                                   multi-head attention kernel (TensorRT-LLM docs,
                                                   advanced/gpt-attention.md, "XQA Optimization"); the
                                                   measured tables show it on an FP8 cache (H200 TRT-LLM
                                                   decode: MHA rows 1.30x the grouped rows' fit, c_1 ≈ 0.6;
                                                   a BF16 cache c_1 = 0)

The host floor: an engine's table timed without CUDA graphs (vLLM's GEMM collector,
collector/vllm/collect_gemm.py, use_cuda_graph=False) times calls issued back to back, each a Python
dispatch and its launches; the launches queue, so a call takes the slower of the host's issue time h
and the device's time, not their sum:

    t = max(h, the sum above)                  h per launch path of the kernel (HOST_PATHS, host_path)

The tables' evidence, and the paths: roofline.expectation.launch.

Prefill's K/V read: an engine whose prefill reads K and V from its paged cache (16-token pages gathered
a tile at a time) streams them slower than Q and O; the K/V share of DRAM's time, M·G/(H + G) (K and
V of G heads beside Q and O of H, as wide), is added with its own weight:

    + c_kvr·M·G/(H + G)                        prefill only; fitted where it lowers the MAPE

What the tables show (vLLM 0.24.0 prefill, B200 FlashInfer's TRT-LLM kernels, H200 FlashAttention-3,
aiconfigurator-core 0.12.0): the fit without it ran MHA rows (G = H) 1.24x and groups of 2 1.31x, groups
of 32-64 0.85-0.87x (B200); with it, c_kvr = 6.9 (B200) and 3.1 (H200), MHA at 1.04x, the MAPE of floors
≥ 10 µs 17.2% -> 15.8% (B200), 15.1% -> 14.3% (H200). TensorRT-LLM's prefill (contiguous K/V) shows no
such trend by group (0.93-1.07x over groups 1-96 on B200).

Prefill's matrix weight by cache dtype: Triton compiles a kernel per argument dtype, and SGLang's
Triton extend kernel (triton_ops/extend_attention.py _fwd_kernel) takes the cache's K/V buffers beside
the BF16 query; a BF16 query over an FP8 cache (`narrow_kv`) is another binary at the same tiles
(Hopper: BLOCK_M × BLOCK_N 32 × 64 at a head of 512, 8 warps, 1 stage), so a_mm is fitted apart per
head width on such rows (`narrow_kv_weights`) where that lowers the MAPE by 0.5 points (fit.NARROW_GAIN):

    + a_mm,narrow(d)·C   in place of a_mm(d)·C on prefill rows with K/V narrower than Q

What the tables show (aiconfigurator-core 0.12.0, floors ≥ 10 µs): SGLang 0.5.14's Triton prefill takes
a median 1.64x (H100) and 1.63x (H200) as long over an FP8 cache at a head of 512, 0.73x at 256; the
pooled fit ran 21.5% (H100) and 21.4% (H200), split 8.9% and 7.7% (out of sample 23.9 -> 7.2%, 25.9 ->
10.2%). TensorRT-LLM's and vLLM's prefill depend on it too (H200, by head 64/128/256: 1.31, 0.87, 0.77x
and 1.19, 1.20, 1.55x): TRT-LLM 11.3 -> 7.3% (H100), 11.7 -> 7.5% (H200), vLLM 13.7 -> 11.7%, 11.6%.

Prefill's waves: a FlashAttention-style prefill kernel runs one CTA per sequence × query head × query
tile of 128 rows (T of them), k at a time on an SM; they fill ⌈T/(k·SMs)⌉ waves, the last one partly
idle, so the matrix units' time is stretched as a GEMM's is (q, above), with its own weight:

    + c_w·C·(q_k − 1),   q_k = ⌈T/(k·SMs)⌉·k·SMs/T      prefill only; k (`wave_slots`) 1 or 2, fitted

What the tables show (aiconfigurator-core 0.12.0, prefill attention, floors ≥ 10 µs, every row, the
fits with and without the term): where few sequences × heads fill few SMs the kernel runs long (B200
vLLM, FlashInfer's TRT-LLM kernels: rows of b·h = 1 ran a median 2.1× the fit without it; 16,384
tokens are 128 CTAs on 148 SMs); the MAPE falls in every prefill group, B200 vLLM BF16 15.5% -> 13.9%,
SGLang 8.1% -> 7.0%, TRT-LLM 10.3% -> 9.4%, H200 TRT-LLM 12.2% -> 11.7%, vLLM 14.1% -> 13.7%. k is
fitted per group: 2 for FlashAttention-3 under vLLM and SGLang on H100 and H200, 1 for TensorRT-LLM's
kernels on H200 and B200 (bench/results/validate_done_when.txt; the shipped files name each).

Decode's short stream: a decode kernel's first τ = L2 capacity / DRAM bandwidth of DRAM time costs
more per byte than the rest, as if a stream shorter than an L2's worth did not reach DRAM's bandwidth:

    + c_L2·min(M, τ)                           decode only (no query rows; K/V heads)

What the tables show (aiconfigurator-core 0.12.0, decode attention of TensorRT-LLM, vLLM and SGLang on
H100, H200 and B200, floors ≥ 10 µs): measured / t falls with M/τ (H200 TRT-LLM BF16: 1.17 at M = 1-2τ,
1.01 at 4-8τ, 0.89 beyond 8τ), and the term with its knee at τ lowers the cross-fitted MAPE of 16 of
the 18 groups (H200 TRT-LLM BF16 15.5% -> 11.8%, H100 13.7% -> 10.7%, H200 vLLM BF16 10.3% -> 8.1%) and
leaves the other two as they were; a knee at 2τ does within 0.5 points as well, at 4τ or 8τ worse,
and √(M·τ) or τ·ln(1 + M/τ) in its place worse. The tables do not pin down the mechanism (they are
timed by replaying one CUDA graph without flushing L2, aiconfigurator's collector/helper.py).

Decode's latency roof (Little's law): a decode kernel launches blocks (one per sequence × K/V head for
a grouped kernel, one per sequence × query head for MHA and for groups beyond g_max), each taking a
fixed time λ (set up, the query loaded, the split reduced) however short its K/V, SMs at a time:

    L = (λ_g·B_g + λ_h·B_h)·(1 + d/256) / SMs    B_g = sequences × K/V heads where 1 < H/G ≤ g_max
                                                  (any H/G > 1 when g_max = 0), B_h = sequences ×
                                                  query heads where H = G or H/G > g_max

It is a roof, not a sum: the blocks' fixed time overlaps the other blocks' streaming. The measured
tables show it (H200 TRT-LLM 1.3.0rc20 decode, KV length ≤ 63, batches 256-2048): the time is flat in
the KV length and linear in sequences × K/V heads, 36, 40 and 55 ns a block at head widths 64, 128 and
256 (1 + d/256 within 10%) for groups of 2-32, 12 ns for MHA's blocks and 9.8 ns a query head for
groups of 48-128; at long KV the same rows are DRAM-bound.

Decode's query-tile roof: TensorRT-LLM decodes a grouped cache (1 < H/G ≤ 32) on Hopper with one of two
XQA kernels, by the cache's dtype: an FP8 (E4M3) cache on sm90 takes the Hopper warp-specialized kernel
(kernels/xqa/mha_sm90.cu, launchHopperF8MHA), a BF16/FP16 cache the Ampere-style one
(kernels/xqa/mha.cu); H = G and H/G > 32 go to the masked multi-head attention kernel
(supportConfigQGMMA, supportConfigHMMA and supportConfigCommon in
cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQAImplJIT/kernelUtils.cpp,
NVIDIA/TensorRT-LLM: three stored versions, 2023-2026, agree; the v1.3.0rc20 tag's own was not among
them; aiconfigurator's collector/trtllm/collect_attn.py times decode with TRTLLM_ENABLE_XQA_JIT=1,
64-token pages, RoPE GPT-NeoX). The Hopper kernel's block (one sequence × K/V head) holds its query
heads padded to a multiple of 8 (mha_sm90.cu: ctaNbQHeads = roundUp(headGrpSize × beamWidth, 8), the
MMA's N) and each head padded to 64, 128 or 256 elements (kernels/xqa/mha.h: headElems; a head of 192 is
256), and its time grows with that padded query tile:

    Q = λ_q·max(0, B_g/SMs − n₀)·⌈H/G⌉₈·d₂₅₆   ⌈H/G⌉₈ = H/G rounded up to a multiple of 8 (QUERY_TILE_HEADS),
                                               d₂₅₆ = the padded head width / 256, n₀ = 2 blocks an SM
                                               (QUERY_TILE_HIDDEN); B_g as in L; inside the roofline max
                                               beside L and S, decode's grouped blocks only

What the tables show (aiconfigurator-core 0.12.0, TensorRT-LLM 1.3.0rc20, KV length ≤ 15, batches
512-2048): an FP8-cache block takes 1.3 µs an SM at ⌈H/G⌉₈·d₂₅₆ = 2, 1.7 at 4, 2.6 at 8, 5.5-7.4 at 16
and 12.1 at 32 on H200 (H100 1-11% slower), about the same at one product however it is split (8 × 256,
16 × 128 and 32 × 64 at 8: 2.5-3.0, 2.3-2.7 and 2.6 µs), where a BF16-cache block (the Ampere-style
kernel) takes 4.6-8.1 µs, within 16% of its time at H/G = 2 up to H/G = 16 and 6.2-11.1 µs at 32. The
time beyond t0 is (B_g/SMs − n₀)·⌈H/G⌉₈·d₂₅₆ times 0.28-0.52 µs from 16 blocks an SM on, with n₀ = 1-2
blocks an SM that take no more than the launch's fixed time (fewer blocks per SM cost less per block);
n₀ = 0, 1, 2, 3 cross-fit the H100 TRT-LLM FP8 rows at 14.8, 14.0, 13.7, 13.8% MAPE (floors ≥ 10 µs, the
fit's rows), H200's at 14.3, 14.0, 14.0, 13.9%, and the unpadded H/G·d₂₅₆ in place of the padded tile
does no better (H200 14.4% against 14.3% at n₀ = 0). The tables do not show why the tile costs what it
does (they time the kernel with its in-kernel RoPE, the BF16 query's conversion to FP8 and the new
token's K/V write: mha_sm90.cu's needInputCvt, decoderXQAImplJIT.cpp's applyRoPEInXqaKernel), only that
it does. λ_q is fitted with the latency roof's knobs wherever it lowers the MAPE, as they are: besides
TensorRT-LLM's Hopper FP8 rows (λ_q = 0.3 µs on H100, 0.2 on H200) 26 more decode fits take it (0.1-0.4 µs:
its BF16 rows on Hopper, whose kernel rises past 16 heads; SGLang's and vLLM's on Hopper; 12 of
Blackwell's; A100's BF16; 5 MLA fits); on those kernels the padding is this kernel's, not theirs, and
the term stands for what their tables show (every row, floors ≥ 10 µs: B200 TRT-LLM FP8 10.2% -> 7.1%,
B200 SGLang FP8 9.0% -> 6.5%, H200 SGLang FP8 10.4% -> 8.5%; bench/results/validate_done_when.txt).

Decode's streaming roof (Little's law for bytes): a kernel that gives each sequence × K/V head a fixed
number of blocks, each streaming its share of the K/V in order, pulls at most β bytes a second a block
(the bytes it keeps in flight over DRAM's latency); with fewer such blocks than DRAM's bandwidth needs,
the stream is the blocks', not DRAM's:

    S = κ·M / (sequences × K/V heads)          κ = bandwidth / (β × blocks per sequence × K/V head),
                                               inside the roofline max beside L

What the tables show (SGLang's Triton decode, split into a fixed number of K/V chunks a sequence ×
K/V head, aiconfigurator-core 0.12.0, h200_sxm/attention/sglang): at long KV and few sequences the
time is κ·M/(b·g) with κ = 87-108 over b·g = 1-8 (b1 h8/1 d512 KV 32767: 607 µs against a 7 µs DRAM
time, κ = 87; b2 h8/1 KV 65535: 1441 µs, 28 µs, κ = 103; b8 h2/1 KV 131071: 2919 µs, 224 µs, κ = 104),
and DRAM's M once b·g passes κ. Kernels that split the K/V by the SMs free (FlashAttention-3's,
TensorRT-LLM's multi-block mode) fit κ = 0.

Decode's long stream: beside a streaming roof (κ > 0: SGLang's Triton decode, whose stage 1 runs sequences ×
⌈H/min(16, H/G)⌉ × 8 blocks, each walking its split of the K/V in order: sglang triton_ops/decode_attention.py
_decode_grouped_att_m_fwd, _decode_att_m_fwd; metadata.py get_num_kv_splits_triton, capped at aiconfigurator's
triton_attention_num_kv_splits = 8, collector/sglang/collect_attn.py), the cache past half of L2 streams slower
per block (B200's L2 is split across its two dies: Chips and Cheese, hardware/data/b200.toml):

    + c_far·max(0, M − τ/2) / (sequences × K/V heads)     τ as c_L2's; decode, in fits with κ > 0 only

What the tables show (aiconfigurator-core 0.12.0, SGLang 0.5.14 Triton decode, B200, τ = 17.3 µs): one sequence
× K/V head's 8 blocks take 2.5 µs a 32-token step at KV 16,383-32,767, 3.2 at 65,535, 4.3 at 131,071 (BF16 b1
h8/1 d256: M = 4.4, 8.75, 17.5 µs against τ/2 = 8.6 µs; d192, 0.62 as wide, rises one KV length later).
Cross-fitted MAPE (10 folds, floors ≥ 10 µs, each fit's knobs with the column added): BF16 15.7 -> 11.6%, FP8
17.5 -> 13.4%; knees at τ/4 and 3τ/8 within 0.7 points, at τ 13.4 and 16.3%, at 2τ 14.9 and 17.3% (τ/2 is the
dies' reason, not the best of these). Every row, floors ≥ 10 µs (bench/validate_done_when.py, shipped fits):
B200 BF16 15.6 -> 11.5%, FP8 17.5 -> 13.3%; H200's and H100's Triton decode fits take it too (c_far 15-54:
FP8 14.2 -> 9.9% and 12.2 -> 10.9%, BF16 within 0.3 points). The tables replay one CUDA graph without
flushing L2 (collector/helper.py): a cache within L2 is read from it.

Wave quantization: an output of `tiles` thread-block tiles runs in ⌈tiles / SMs⌉ waves, each as long
as one full wave, so the matrix units' term is stretched by

    q = ⌈tiles / SMs⌉ · SMs / tiles                 (q = 1 when the tiles fill whole waves)

and, where the fit finds it (`tile_padded`: a kernel of one tile for every shape), by the last tile's
padding, each of its empty rows and columns computed as a full one:

    q · (⌈m / tm⌉·tm / m) · (⌈n / tn⌉·tn / n)       each side where the matrix spans more than one tile

(the tables' evidence: roofline.expectation.launch). A block-scaled FP8 GEMM DeepGEMM runs on Hopper
(SGLang's; `deepgemm_blocks`) takes q from the block DeepGEMM's heuristic picks per shape instead, and
a fixed cost λ_k per k-block each wave steps through (its WGMMAs drained, the accumulators promoted by
the scales):

    q_dg = waves · SMs · block_m · block_n / (m · n),    + λ_k · waves · ⌈k/128⌉

(the heuristic, the kernel and the tables' evidence: roofline.expectation.deepgemm)

Attention's tile pairs: causal prefill visits ⌈nq/128⌉·(⌈nq/128⌉+1)/2 per sequence and query head;
decode ⌈kv/128⌉ key tiles per sequence and K/V head. A term whose constant is 0 is absent (no host floors: no max): a
GEMM's fit has a_mm = a_exp = c_tile = c_head = c_kv = c_g = c_1 = 0, an attention fit ρ = c_in = c_out = 0.

    band = [t · r_lo, t · r_hi], never below the floor

with r_lo and r_hi a tolerance interval of measured / t, each ratio from constants fitted without its
row (cross-fitted over 10 folds): Wilks's order statistics that hold at least half of new kernels with
probability 0.99, for kernels whose floor is at least BAND_SPLIT_S (10 µs: their time is their work)
and for those below (their time is mostly fixed costs, which scatter otherwise) apart
(roofline.calibration.fit states the ranks). roofline.calibration.fit writes them; the
shipped files in expectation/data/ name their tables, package version, engine version and rows used.

Kinds (`kind_of`): gemm.<dtype> (bf16, fp8, fp8_block, nvfp4; `gemm_dtype_key`: an FP8 matmul whose
weights carry 128×128 block scales is fp8_block, the kernels the tables time for DeepSeek-V3's recipe),
context_attention.<dtype> (causal
prefill, FlashAttention-style), generation_attention.<kv dtype> (decode: one query per sequence). A
kernel of another kind (a norm, an elementwise op) takes the fit of the kind nearest its bound: a
compute-bound one the GEMM of its dtype, a memory-bound one decode attention (a streaming read of
the KV cache), and says so.

A placed kernel's Shape and band: roofline.expectation.placed; the same model over columns:
roofline.expectation.columns; a machine's fits by kind, the nearest kind's where one has no rows, and
their file: roofline.expectation.times.

Layering: imports roofline.errors, roofline.frozen, roofline.vocab and this room's launch (waves, tile
padding, launch paths) and deepgemm (DeepGEMM's blocks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from roofline.errors import RooflineError
from roofline.expectation.deepgemm import k_steps_one, stretch_one
from roofline.expectation.launch import ANY_PATH, HOST_PATHS, host_path, padding_factor, waves_factor
from roofline.frozen import frozen

BAND_SPLIT_S = 10e-6  # the band is measured apart below and above a 10 µs floor (module docstring)

# our dtype names -> the table's dtype key
DTYPE_KEY: Mapping[str, str] = {
    "bf16": "bf16", "fp16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "mxfp8": "fp8", "nvfp4": "nvfp4",
    "mxfp4": "nvfp4", "fp4": "nvfp4",
}
GEMM, CONTEXT, GENERATION = "gemm", "context_attention", "generation_attention"
FALLBACK_MEMORY = f"{GENERATION}.bf16"
ATTENTION_TILE = 128  # FlashAttention-3's 128 queries × 128 keys (roofline.kernels.ATTENTION_TILE)
LATENCY_WIDTH = 256  # decode's block latency grows as 1 + d/256 with the head width d (module docstring)
QUERY_TILE_HEADS = 8  # Hopper's FP8 XQA kernel pads a block's query heads to a multiple of 8 (module docstring)
QUERY_TILE_WIDTHS = (64, 128, 256)  # ... and a head to one of these widths (TensorRT-LLM kernels/xqa/mha.h)
LONG_STREAM_KNEE = 0.5  # decode's long stream starts past this share of τ (one of B200's two dies' L2)
QUERY_TILE_HIDDEN = 2.0  # n₀: the first blocks an SM runs within the launch's fixed time t0 (module docstring)
ACTIVATION_BYTES = 2  # the BF16 activation an engine's quantized GEMM reads before it quantizes it


def dtype_key(name: str) -> str:
    """The table's dtype key of one of our dtype names (DTYPE_KEY), the name itself where it has none."""
    return DTYPE_KEY.get(name, name)


BLOCK_FP8 = "fp8_block"  # the tables' block-scaled FP8 GEMM (gemm_dtype fp8_block: 128×128 weight blocks)
NEAREST_KEY: Mapping[str, str] = {BLOCK_FP8: "fp8"}  # a file without a kind's rows: the nearer kind first


def gemm_dtype_key(compute: str, operands: tuple[str, ...]) -> str:
    """A matmul's table key: its compute dtype's (dtype_key), and fp8_block where it computes in FP8 and
    an operand is FP8 with 128×128 block scales (roofline.models.quantization's fp8_<fmt>_block128x128,
    a checkpoint's weight_block_size [128, 128]): what engines run such weights on (DeepGEMM in SGLang,
    TensorRT-LLM's fp8_block_scaling_gemm, vLLM's block FP8 path) and what the tables time as
    gemm_dtype fp8_block, its activation quantized per 1×128 group on the way."""
    key = dtype_key(compute)
    if key == "fp8" and any(n.startswith("fp8_") and n.endswith("_block128x128") for n in operands):
        return BLOCK_FP8
    return key


def l2_stream_time_s(l2_bytes: float | None, dram_bytes_per_s: float | None) -> float:
    """τ = L2 capacity / DRAM bandwidth: the time DRAM takes to stream one L2's worth (decode's short
    stream, Fit.short_stream_s); 0 where either figure is missing."""
    return l2_bytes / dram_bytes_per_s if l2_bytes and dram_bytes_per_s else 0.0


@frozen
class Shape:
    """What the expected-time model reads of a placed kernel (times in seconds, on its machine)."""

    kind: str  # gemm.bf16, context_attention.bf16, ...
    floor_s: float
    compute_s: float  # the FLOP units' term of the floor (what wave quantization stretches)
    m: int = 0  # gemm: output rows and columns; attention: query rows (all heads) and 0
    n: int = 0
    sms: int = 0
    tile_pairs: float = 0.0  # attention: (query tile, key tile) pairs of 128 × 128 the kernel visits
    heads: float = 0.0  # attention: sequences × query heads (each one a softmax state to set up and write)
    memory_s: float | None = None  # DRAM's time (None: the floor stands for it)
    exp_s: float = 0.0  # the exponential units' time (attention's softmax)
    kv_heads: float = 0.0  # attention: sequences × K/V heads (the blocks a decode kernel launches, one each)
    head_dim: int = 0  # attention: the width of a head (the kernel an engine picks depends on it)
    input_s: float = 0.0  # gemm: m·k BF16 activation bytes over DRAM bandwidth (the quantize pass reads it)
    output_s: float = 0.0  # gemm: m·n BF16 output bytes over DRAM bandwidth
    k: int = 0  # gemm: the depth (which kernel an engine launches, and so its host cost, depends on it)
    l2_s: float = 0.0  # decode: τ = L2 capacity / DRAM bandwidth of its machine (the short stream's knee)
    query_tiles: float = 0.0  # prefill attention: sequences × query heads × ⌈nq/128⌉ (its CTAs, waves_s)
    narrow_kv: bool = False  # prefill attention: K/V narrower than Q (a BF16 query over an FP8 cache)

    @property
    def dram_s(self) -> float:
        """DRAM's time M: memory_s, or the floor where none was given."""
        return self.floor_s if self.memory_s is None else self.memory_s


def query_tile(group: float, head_dim: int) -> float:
    """⌈H/G⌉₈·d₂₅₆: a decode block's query heads rounded up to a multiple of QUERY_TILE_HEADS times its head
    width padded to the next of QUERY_TILE_WIDTHS (a wider head as it is), over 256 (the query-tile roof)."""
    width = next((w for w in QUERY_TILE_WIDTHS if head_dim <= w), head_dim)
    return math.ceil(group / QUERY_TILE_HEADS - 1e-9) * QUERY_TILE_HEADS * width / QUERY_TILE_WIDTHS[-1]


def tiles_of(shape: Shape, tile: tuple[int, int]) -> int:
    """Output tiles: ⌈m / tile_m⌉ · ⌈n / tile_n⌉ (attention: ⌈query rows / tile_m⌉, n = 0)."""
    if shape.m <= 0:
        return 0
    return math.ceil(shape.m / tile[0]) * (math.ceil(shape.n / tile[1]) if shape.n > 0 else 1)


@frozen
class Fit:
    """One kind's fitted constants (module docstring): efficiency e in (0, 1], fixed cost t0 ≥ 0 s, the
    tile the waves are counted in (None: no wave term), the residual band (r_lo, r_hi) of floors of at
    least 10 µs and `small_band` of those below (None: the one band), how many rows made it, and the
    terms' constants, each ≥ 0 (a GEMM's attention terms and an attention's GEMM terms are 0)."""

    kind: str
    efficiency: float
    t0_s: float
    low: float
    high: float
    rows: int
    tile: tuple[int, int] | None = None
    mape: float | None = None  # in-sample mean |t − measured| / measured
    per_tile_s: float = 0.0  # attention: the fixed cost of one (query tile, key tile) step on one SM
    per_head_s: float = 0.0  # attention: the fixed cost of one sequence × query head on one SM
    per_kv_head_s: float = 0.0  # attention: the fixed cost of one sequence × K/V head (one block) on one SM
    compute_ratio: float = 1.0  # ρ = e / e_compute: the matrix units' time weighs ρ/e inside the max
    matrix_weight: float = 0.0  # a_mm: attention's matrix-unit time added beside the memory term
    exp_weight: float = 0.0  # a_exp: attention's exponential-unit time added
    per_input: float = 0.0  # c_in: the quantize pass, in reads of the BF16 activation at DRAM bandwidth
    per_output: float = 0.0  # c_out: the epilogue, in writes of the BF16 output at DRAM bandwidth
    small_band: tuple[float, float] | None = None  # (r_lo, r_hi) of floors below BAND_SPLIT_S
    max_group: int = 0  # attention: the most query heads a block shares one K/V head's stream with (0: no limit)
    regroup_weight: float = 0.0  # c_g: the K/V stream reread per query head beyond max_group
    head_dim_weights: tuple[tuple[int, float], ...] = ()  # attention: a_mm per head width (nearest width used)
    single_group_weight: float = 0.0  # c_1: decode with one query head per K/V head (MHA), in memory times
    block_latency_s: float = 0.0  # λ_g: decode's fixed time of a grouped block (a sequence × K/V head) on one SM
    head_latency_s: float = 0.0  # λ_h: the same of a block of one query head (MHA; groups beyond max_group)
    # h: the host's time per call by launch path (HOST_PATHS; ("any", h) where one floor serves every
    # shape): t = max(h, the device's sum); () for none
    host_floors: tuple[tuple[str, float], ...] = ()
    kv_read_weight: float = 0.0  # c_kv_read: prefill's K/V read again, in its share of DRAM's time
    tile_padded: bool = False  # the wave term counts the last tile's padding too (padding_factor)
    stream_blocks: float = 0.0  # κ: decode's sequences × K/V heads that pull DRAM's bandwidth (0: no such roof)
    short_stream_weight: float = 0.0  # c_L2: decode's first τ of DRAM time again (short_stream_s)
    wave_weight: float = 0.0  # c_w: prefill's last wave of CTAs, in matrix-unit time (waves_s)
    wave_slots: int = 0  # k: the query tiles an SM runs at once (0: no wave term)
    # λ_q: decode's time per padded query head × 256 elements of a grouped block on one SM (query_tile_s)
    query_tile_latency_s: float = 0.0
    deepgemm_blocks: bool = False  # q from DeepGEMM's sm90 block choice, not `tile` (roofline.expectation.deepgemm)
    k_step_s: float = 0.0  # λ_k: a DeepGEMM wave's fixed cost per k-block of 128 (k_steps_s)
    # prefill: a_mm per head width on rows whose K/V is narrower than Q (Shape.narrow_kv); (): a_mm as the rest
    narrow_kv_weights: tuple[tuple[int, float], ...] = ()
    long_stream_weight: float = 0.0  # c_far: decode's blocks' share of the cache past τ/2 (long_stream_s)

    def __post_init__(self) -> None:
        if not 0 < self.efficiency <= 1:
            raise RooflineError(f"{self.kind}: efficiency must be in (0, 1], got {self.efficiency:g}")
        terms = (("cost per tile", self.per_tile_s), ("cost per head", self.per_head_s),
                 ("cost per K/V head", self.per_kv_head_s),
                 ("compute ratio", self.compute_ratio), ("matrix weight", self.matrix_weight),
                 ("exp weight", self.exp_weight), ("input weight", self.per_input),
                 ("output weight", self.per_output), ("regroup weight", self.regroup_weight),
                 ("single-group weight", self.single_group_weight), ("block latency", self.block_latency_s),
                 ("head latency", self.head_latency_s), ("streaming blocks", self.stream_blocks),
                 ("K/V read weight", self.kv_read_weight), ("short-stream weight", self.short_stream_weight),
                 ("wave weight", self.wave_weight), ("wave slots", self.wave_slots),
                 ("query-tile latency", self.query_tile_latency_s), ("k-block cost", self.k_step_s),
                 ("long-stream weight", self.long_stream_weight),
                 ("largest group", self.max_group), ("t0", self.t0_s))
        for what, v in terms:
            if v < 0 or not math.isfinite(v):
                raise RooflineError(f"{self.kind}: the {what} must be finite and ≥ 0, got {v:g}")
        if any(h < 0 or not math.isfinite(h) or path not in (ANY_PATH, *HOST_PATHS) for path, h in self.host_floors):
            raise RooflineError(f"{self.kind}: a host floor must be finite and ≥ 0, on a path among "
                                f"{', '.join((ANY_PATH, *HOST_PATHS))}")
        if any(w < 0 or not math.isfinite(w) or d <= 0 for d, w in (*self.head_dim_weights, *self.narrow_kv_weights)):
            raise RooflineError(f"{self.kind}: a matrix weight per head width must be finite and ≥ 0")
        for low, high in ((self.low, self.high), *((self.small_band,) if self.small_band else ())):
            if not 0 < low <= high:
                raise RooflineError(f"{self.kind}: the band needs 0 < low ≤ high, got {low:g}, {high:g}")

    def stretched_floor_s(self, shape: Shape) -> float:
        """max(memory, ρ·compute·q, L, S, Q): the roofline term with the last wave's idle SMs counted and
        decode's latency, streaming and query-tile roofs (latency_s, stream_s, query_tile_s)."""
        memory = shape.dram_s
        q = waves_factor(tiles_of(shape, self.tile), shape.sms) if self.tile is not None else 1.0
        if self.tile_padded:
            q *= padding_factor(shape.m, shape.n, self.tile)
        if self.deepgemm_blocks:
            q = stretch_one(shape.m, shape.n, shape.sms)
        return max(memory, self.compute_ratio * shape.compute_s * q, self.latency_s(shape), self.stream_s(shape),
                   self.query_tile_s(shape))

    def stream_s(self, shape: Shape) -> float:
        """Decode's streaming roof S = κ·M / (sequences × K/V heads) (module docstring); 0 for a kernel
        with query rows (prefill, a GEMM), without K/V heads, or where κ = 0."""
        if not self.stream_blocks or shape.m != 0 or shape.kv_heads <= 0:
            return 0.0
        memory = shape.dram_s
        return self.stream_blocks * memory / shape.kv_heads

    def latency_s(self, shape: Shape) -> float:
        """Decode's latency roof L = (λ_g·B_g + λ_h·B_h)·(1 + d/256) / SMs (module docstring); 0 for a
        kernel with query rows (prefill, a GEMM) or without per-SM data."""
        if not (self.block_latency_s or self.head_latency_s) or shape.m != 0 or shape.kv_heads <= 0 or not shape.sms:
            return 0.0
        group = shape.heads / shape.kv_heads
        wide = group == 1 or (self.max_group > 0 and group > self.max_group)
        blocks = self.head_latency_s * shape.heads if wide else self.block_latency_s * shape.kv_heads
        return blocks * (1 + shape.head_dim / LATENCY_WIDTH) / shape.sms

    def grouped(self, shape: Shape) -> bool:
        """A decode shape whose blocks each serve a group of query heads (1 < H/G, within max_group where the
        fit has one): the blocks latency_s counts by K/V head and query_tile_s by their padded query tile."""
        if shape.m != 0 or shape.kv_heads <= 0:
            return False
        group = shape.heads / shape.kv_heads
        return group != 1 and not (self.max_group > 0 and group > self.max_group)

    def query_tile_s(self, shape: Shape) -> float:
        """Decode's query-tile roof Q = λ_q·max(0, B_g/SMs − n₀)·⌈H/G⌉₈·d₂₅₆ (module docstring); 0 for a
        kernel with query rows (prefill, a GEMM), one of one query head per K/V head or beyond max_group,
        without per-SM data, or where λ_q = 0."""
        if not self.query_tile_latency_s or not shape.sms or not self.grouped(shape):
            return 0.0
        blocks = max(0.0, shape.kv_heads / shape.sms - QUERY_TILE_HIDDEN)
        return self.query_tile_latency_s * blocks * query_tile(shape.heads / shape.kv_heads, shape.head_dim)

    @staticmethod
    def per_sm(shape: Shape) -> tuple[float, float]:
        """(tile pairs, sequences × heads) per SM (0 without per-SM data)."""
        return (shape.tile_pairs / shape.sms, shape.heads / shape.sms) if shape.sms else (0.0, 0.0)

    @staticmethod
    def kv_heads_per_sm(shape: Shape) -> float:
        """sequences × K/V heads per SM (0 without per-SM data)."""
        return shape.kv_heads / shape.sms if shape.sms else 0.0

    def matrix_weight_for(self, shape: Shape) -> float:
        """a_mm of the shape's head width, or of the nearest width fitted (by ratio), from narrow_kv_weights
        for a prefill shape with K/V narrower than Q where the fit has them; matrix_weight without."""
        if shape.narrow_kv and self.narrow_kv_weights and shape.m > 0:
            return min(self.narrow_kv_weights, key=lambda dw: abs(math.log(max(shape.head_dim, 1) / dw[0])))[1]
        if not self.head_dim_weights or shape.head_dim <= 0:
            return self.matrix_weight
        return min(self.head_dim_weights, key=lambda dw: abs(math.log(shape.head_dim / dw[0])))[1]

    def regrouped_s(self, shape: Shape) -> float:
        """The K/V stream read once per query head, (H / G)·memory, when a group of H / G query heads
        per K/V head is larger than the kernel takes (max_group); 0 otherwise."""
        memory = shape.dram_s
        group = shape.heads / shape.kv_heads if shape.kv_heads else 0.0
        return group * memory if self.max_group and group > self.max_group else 0.0

    def single_group_s(self, shape: Shape) -> float:
        """DRAM's time when each K/V head serves one query head (MHA: H = G), decode only; 0 otherwise."""
        memory = shape.dram_s
        decode = shape.m == 0 and shape.kv_heads > 0  # no query rows tiled: one query per sequence
        return memory if decode and shape.heads == shape.kv_heads else 0.0

    def terms_s(self, shape: Shape) -> dict[str, float]:
        """Each term of t in seconds, by name (the module docstring's sum)."""
        tiles, heads = self.per_sm(shape)
        return {"roofline": self.stretched_floor_s(shape) / self.efficiency,
                "matrix": self.matrix_weight_for(shape) * shape.compute_s, "exp": self.exp_weight * shape.exp_s,
                "launch": self.t0_s, "quantize": self.per_input * shape.input_s,
                "epilogue": self.per_output * shape.output_s, "tiles": self.per_tile_s * tiles,
                "heads": self.per_head_s * heads, "kv_heads": self.per_kv_head_s * self.kv_heads_per_sm(shape),
                "regroup": self.regroup_weight * self.regrouped_s(shape),
                "single_group": self.single_group_weight * self.single_group_s(shape),
                "kv_read": self.kv_read_weight * self.kv_read_s(shape),
                "short_stream": self.short_stream_weight * self.short_stream_s(shape),
                "waves": self.wave_weight * self.waves_s(shape), "k_steps": self.k_steps_s(shape),
                "long_stream": self.long_stream_weight * self.long_stream_s(shape)}

    def k_steps_s(self, shape: Shape) -> float:
        """λ_k · waves · ⌈k/128⌉: a DeepGEMM GEMM's fixed cost per k-block, each wave in turn (module
        docstring; roofline.expectation.deepgemm); 0 without deepgemm_blocks or λ_k."""
        if not (self.deepgemm_blocks and self.k_step_s):
            return 0.0
        return self.k_step_s * k_steps_one(shape.m, shape.n, shape.k, shape.sms)

    @staticmethod
    def kv_read_s(shape: Shape) -> float:
        """Prefill's K/V share of DRAM's time, M·G/(H + G) (K and V of G heads beside Q and O of H, each
        as wide); 0 for decode, a GEMM, or a kernel without heads."""
        memory = shape.dram_s
        if shape.m <= 0 or shape.kv_heads <= 0 or shape.heads <= 0:
            return 0.0
        return memory * shape.kv_heads / (shape.heads + shape.kv_heads)

    @staticmethod
    def short_stream_s(shape: Shape) -> float:
        """Decode's short stream min(M, τ), τ = L2 capacity / DRAM bandwidth (module docstring); 0 for a
        kernel with query rows (prefill, a GEMM), without K/V heads, or on a machine without an L2 figure."""
        if shape.m != 0 or shape.kv_heads <= 0 or shape.l2_s <= 0:
            return 0.0
        return min(shape.dram_s, shape.l2_s)

    @staticmethod
    def long_stream_s(shape: Shape) -> float:
        """Decode's long stream max(0, M − τ/2) / (sequences × K/V heads) (module docstring): a block's share
        of the DRAM time past LONG_STREAM_KNEE·τ; 0 for a kernel with query rows, without K/V heads, or on a
        machine without an L2 figure."""
        if shape.m != 0 or shape.kv_heads <= 0 or shape.l2_s <= 0:
            return 0.0
        memory = shape.dram_s
        return max(0.0, memory - LONG_STREAM_KNEE * shape.l2_s) / shape.kv_heads

    def waves_s(self, shape: Shape) -> float:
        """Prefill's idle share of its last wave, C·(q_k − 1), q_k = ⌈T/(k·SMs)⌉·k·SMs/T (module docstring:
        prefill's waves); 0 without query tiles, per-SM data or wave slots."""
        if not self.wave_slots or shape.query_tiles <= 0 or not shape.sms:
            return 0.0
        return shape.compute_s * (waves_factor(math.ceil(shape.query_tiles - 1e-9), self.wave_slots * shape.sms) - 1)

    def host_s(self, shape: Shape) -> float:
        """The host floor h of the shape's launch path (host_path), or of the path fitted first (the one
        of most rows) where the fit has none for it; 0 without host floors."""
        if not self.host_floors:
            return 0.0
        by_path = dict(self.host_floors)
        path = ANY_PATH if ANY_PATH in by_path else host_path(shape.m, shape.n, shape.k)
        return by_path.get(path, self.host_floors[0][1])

    def expected_s(self, shape: Shape) -> float:
        """t = max(host floor, the sum of the terms)."""
        return max(self.host_s(shape), sum(self.terms_s(shape).values()))

    def band_s(self, shape: Shape) -> tuple[float, float]:
        """(low, high) = t · (r_lo, r_hi), each at least the floor."""
        return self.band_around(self.expected_s(shape), shape.floor_s)

    def band_around(self, t: float, floor_s: float) -> tuple[float, float]:
        """(low, high) = t · (r_lo, r_hi) for an expected time t already computed, each at least the floor;
        the band of floors below 10 µs where the fit has one."""
        lo, hi = self.small_band if self.small_band and floor_s < BAND_SPLIT_S else (self.low, self.high)
        low = max(floor_s, t * lo)
        return low, max(low, t * hi)

    def to_dict(self) -> dict[str, Any]:
        return {"efficiency": self.efficiency, "t0_s": self.t0_s, "band": [self.low, self.high],
                "small_band": list(self.small_band) if self.small_band else None,
                "tile": list(self.tile) if self.tile else None, "compute_ratio": self.compute_ratio,
                "matrix_weight": self.matrix_weight, "exp_weight": self.exp_weight, "per_input": self.per_input,
                "per_output": self.per_output,
                "per_tile_s": self.per_tile_s, "per_head_s": self.per_head_s, "per_kv_head_s": self.per_kv_head_s,
                "max_group": self.max_group, "regroup_weight": self.regroup_weight,
                "single_group_weight": self.single_group_weight, "block_latency_s": self.block_latency_s,
                "head_latency_s": self.head_latency_s, "host_floors_s": dict(self.host_floors),
                "stream_blocks": self.stream_blocks, "tile_padded": self.tile_padded,
                "kv_read_weight": self.kv_read_weight, "short_stream_weight": self.short_stream_weight,
                "wave_weight": self.wave_weight, "wave_slots": self.wave_slots,
                "query_tile_latency_s": self.query_tile_latency_s,
                "deepgemm_blocks": self.deepgemm_blocks, "k_step_s": self.k_step_s,
                "long_stream_weight": self.long_stream_weight,
                "head_dim_weights": {str(d): w for d, w in self.head_dim_weights},
                "narrow_kv_weights": {str(d): w for d, w in self.narrow_kv_weights}, "rows": self.rows,
                "mape": self.mape}


__all__ = [
    "ANY_PATH",
    "BAND_SPLIT_S",
    "HOST_PATHS",
    "LONG_STREAM_KNEE",
    "Fit",
    "Shape",
    "dtype_key",
    "gemm_dtype_key",
    "host_path",
    "l2_stream_time_s",
    "query_tile",
    "tiles_of",
    "waves_factor",
]
