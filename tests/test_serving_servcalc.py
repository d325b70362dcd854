"""Our serving floors against servcalc's published decode formula, where the two overlap.

servcalc 0.1 (PyPI; its docs/design.md and servcalc/timing.py) times a decode step as
max(bytes / BW, FLOPs / peak) with bytes = the weights streamed per step (the embedding table is gathered,
not streamed) + every sequence's KV cache; its floor is that with the efficiencies at 1 and no
overhead. Our decode step reads the same weight and cache bytes, kernel by kernel, and also counts the
activations its kernels pass between them (servcalc leaves them out): equal on the shared terms, ~1%
above on the step.
"""

from __future__ import annotations

import pytest

from roofline.models import analyze_model, load_config
from roofline.serving import serve_model
from roofline.vocab import Role

H100_BW = 3.35e12  # hardware/data/h100-sxm.toml


def test_decode_floor_against_the_servcalc_formula() -> None:
    cfg = load_config("llama-3-8b")
    table = cfg.vocab_size * cfg.hidden_size * 2  # 128,256 × 4096 BF16: gathered, not streamed
    streamed = cfg.total_params * 2 - table  # servcalc's "weights streamed per step": 15.01 GB
    kv_per_token = 2 * 8 * 128 * 32 * 2  # K and V × 8 KV heads × 128 × 32 layers × BF16 = 131,072 B
    assert cfg.kv_cache_bytes_per_token(2) == kv_per_token
    a = analyze_model("llama-3-8b", "h100", "decode", 16, 1280)
    roles = a.bytes_by_role()
    assert roles[Role.WEIGHT] == pytest.approx(streamed, rel=1e-4)  # + the norm gains, 0.5 MB
    # the cache of 1280 tokens read and the new token's K and V written, for each of 16 sequences
    assert roles[Role.KV_CACHE] == pytest.approx(16 * (1280 + 1) * kv_per_token, rel=1e-9)
    # the step: servcalc's bytes / BW, plus our activations (1% here)
    servcalc = (streamed + 16 * 1280 * kv_per_token) / H100_BW
    assert servcalc <= a.time_s <= 1.02 * servcalc
    # serve's mean ITL over contexts 1025 … 1536 is the step at the mean context, 1280.5 (linear in L)
    r = serve_model("llama-3-8b", "h100", prompt=1024, output=512, batch=16)
    mean_servcalc = (streamed + 16 * 1280.5 * kv_per_token) / H100_BW
    assert mean_servcalc <= r.itl_mean.floor <= 1.02 * mean_servcalc


def test_llama_3_70b_decode_floor_within_one_percent_of_servcalc() -> None:
    # servcalc's decode floor (tests/test_serving_servcalc.py): (weights streamed + every sequence's KV cache)
    # / bandwidth. Llama 3 70B on one H200 (4.8 TB/s, hardware/data/h200.toml), batch 16, context 2304
    cfg = load_config("llama-3-70b")
    table = 128_256 * 8192 * 2  # the embedding table, gathered not streamed
    streamed = 70_553_706_496 * 2 - table  # 139.0 GB of BF16 weights a step
    kv_token = 2 * 8 * 128 * 80 * 2  # K and V × 8 KV heads × 128 × 80 layers × BF16 = 327,680 B
    assert cfg.total_params == 70_553_706_496 and cfg.kv_cache_bytes_per_token(2) == kv_token
    a = analyze_model("llama-3-70b", "h200", "decode", 16, 2304)
    roles = a.bytes_by_role()
    assert roles[Role.WEIGHT] == pytest.approx(streamed, rel=1e-4)
    servcalc = (streamed + 16 * 2304 * kv_token) / 4.8e12  # 31.48 ms
    assert servcalc <= a.time_s <= 1.01 * servcalc  # ours 31.66 ms: + the activations servcalc leaves out
