"""The columnar floors of `roofline validate` (roofline.calibration.floors, join.join_table), by hand.

Each expected value is the roofline's arithmetic on datasheet figures: the H100 SXM's 989.4 TFLOP/s
dense BF16 (NVIDIA H100 datasheet; = 132 SMs × 4096 FLOP/clk × 1.83 GHz), its 3.35 TB/s HBM3, its
16 exponentials/clk/SM (CUDA C++ Programming Guide, arithmetic instruction throughput, cc 9.0) and
128 B/clk/SM of shared memory; the L40S's 362.05 TFLOP/s dense BF16 and 864 GB/s (L40S datasheet).
No table package needed: the tables are made here, a few rows each.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from roofline.calibration.join import join, join_table
from roofline.calibration.mla import join_mla
from roofline.calibration.moe import join_moe
from roofline.calibration.tables import Row, Table
from roofline.calibration.validate import expected_columns, explain, split
from roofline.expectation.model import Fit

H100_BF16 = 989.4e12  # dense BF16, the datasheet figure (132 SMs × 4096 FLOP/clk × 1.83 GHz = 989.43e12)
H100_DRAM = 3.35e12
H100_EXP = 16 * 132 * 1.83e9  # MUFU.EX2, 16 a clock a SM
H100_SMEM = 128 * 132 * 1.83e9
FIXTURES = Path(__file__).parent / "fixtures" / "aiconfigurator"


def table(kind: str, machine: str = "h100-sxm", **cols: list[object]) -> Table:
    n = len(next(iter(cols.values())))
    arrays = {k: np.array(v, dtype=object if isinstance(v[0], str) else float) for k, v in cols.items()}
    return Table("h100_sxm", machine, "trtllm", "1.3.0rc20", kind, arrays, np.full(n, 1e-3))


def test_h100_bf16_gemm_8192_cubed_is_the_datasheet_compute_floor() -> None:
    jt = join_table(table("gemm", gemm_dtype=["bfloat16"], m=[8192], n=[8192], k=[8192]))
    # 2·8192³ FLOP / 989.4e12 FLOP/s = 1.1113 ms, compute-bound
    assert jt.floors.floor_s[0] == pytest.approx(2 * 8192**3 / 989.4e12, rel=1e-12)
    assert jt.floors.floor_s[0] == pytest.approx(1.1113e-3, rel=1e-4)
    # DRAM: A, B and C once each, 3·8192²·2 bytes = 402,653,184 B, 120.2 µs at 3.35 TB/s
    assert jt.floors.dram_bytes[0] == 3 * 8192**2 * 2 == 402_653_184
    assert jt.floors.dram_s[0] == pytest.approx(402_653_184 / H100_DRAM, rel=1e-12)
    assert not jt.floors.memory_bound[0] and jt.kinds[0] == "gemm.bf16"


def test_the_small_gemm_of_the_l2_example_is_dram_bound_at_11_3_us() -> None:
    # H100 bf16 32768×64×512 (REFERENCES.md: 8.8 µs measured against an 11.3 µs DRAM floor):
    # 2·(32768·512 + 512·64 + 32768·64) = 37,814,272 B / 3.35e12 = 11.29 µs
    jt = join_table(table("gemm", gemm_dtype=["bfloat16"], m=[32768], n=[64], k=[512]))
    assert jt.floors.dram_bytes[0] == 2 * (32768 * 512 + 512 * 64 + 32768 * 64) == 37_814_272
    assert jt.floors.floor_s[0] == pytest.approx(37_814_272 / H100_DRAM, rel=1e-12)
    assert jt.floors.floor_s[0] == pytest.approx(11.29e-6, rel=1e-3)
    assert jt.floors.memory_bound[0]
    # shared memory, 256×256 tiles clamped to 256×64: 2·m·n·k·(1/64 + 1/256) = 41,943,040 B, 1.36 µs: not binding
    assert 2 * 32768 * 64 * 512 * (1 / 64 + 1 / 256) / H100_SMEM < jt.floors.floor_s[0]


def test_fp8_gemm_reads_one_byte_operands_and_writes_bf16() -> None:
    # 16×4096×4096 in FP8 on an H100: (16·4096 + 4096·4096)·1 + 16·4096·2 = 16,973,824 B, 5.07 µs
    jt = join_table(table("gemm", gemm_dtype=["fp8"], m=[16], n=[4096], k=[4096]))
    assert jt.floors.dram_bytes[0] == 16 * 4096 + 4096 * 4096 + 16 * 4096 * 2 == 16_973_824
    assert jt.floors.floor_s[0] == pytest.approx(16_973_824 / H100_DRAM, rel=1e-12)
    assert jt.kinds[0] == "gemm.fp8"


def test_decode_attention_streams_its_kv_cache() -> None:
    # one query per sequence, b 8, 32 query heads over 8 K/V heads of 128, 4096 cached keys, FP8 KV:
    # q and out 8·32·128·2 B each, K and V 2·8·8·4096·128·1 B: 67,239,936 B / 3.35e12 = 20.07 µs
    jt = join_table(table("generation_attention", batch_size=[8], isl=[1], num_heads=[32], num_key_value_heads=[8],
                          head_dim=[128], step=[4096], attn_dtype=["bfloat16"], kv_cache_dtype=["fp8"]))
    want = 2 * 8 * 32 * 128 * 2 + 2 * 8 * 8 * 4096 * 128
    assert jt.floors.dram_bytes[0] == want == 67_239_936
    assert jt.floors.floor_s[0] == pytest.approx(want / H100_DRAM, rel=1e-12)
    assert jt.kinds[0] == "generation_attention.fp8"
    # the shape the expected-time model reads: 8·8·⌈4096/128⌉ key tiles, 8·32 sequences × heads
    assert (jt.floors.tile_pairs[0], jt.floors.heads[0]) == (8 * 8 * 32, 8 * 32)


def test_causal_prefill_is_bound_by_the_matrix_units() -> None:
    # b 2, h 32/8, d 128, 2048 tokens: pairs = 2048·2049/2 per head, P = 2·32·pairs = 134,283,264;
    # 4·P·128 = 68,753,031,168 FLOP / 989.4e12 = 69.49 µs; P + P/128 exponentials / 3.865e12 = 35.0 µs
    jt = join_table(table("context_attention", batch_size=[2], isl=[2048], num_heads=[32], num_key_value_heads=[8],
                          head_dim=[128], step=[0], attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"]))
    p = 2 * 32 * 2048 * 2049 // 2
    assert p == 134_283_264
    assert jt.floors.floor_s[0] == pytest.approx(4 * p * 128 / H100_BF16, rel=1e-12)
    assert jt.floors.floor_s[0] > (p + p / 128) / H100_EXP
    assert jt.floors.floor_s[0] == pytest.approx(69.49e-6, rel=1e-3)


def test_a_machine_without_per_sm_data_has_its_datasheet_roofs_only() -> None:
    # L40S: 362.05 TFLOP/s dense BF16, 864 GB/s; 8192³ is compute-bound: 2·8192³ / 362.05e12 = 3.037 ms
    jt = join_table(table("gemm", "l40s", gemm_dtype=["bfloat16", "bfloat16"], m=[8192, 16], n=[8192, 4096],
                          k=[8192, 4096]))
    assert jt.floors.floor_s[0] == pytest.approx(2 * 8192**3 / 362.05e12, rel=1e-12)
    # 16×4096×4096: (16·4096 + 4096² + 16·4096)·2 B / 864e9
    assert jt.floors.floor_s[1] == pytest.approx((16 * 4096 * 2 + 4096 * 4096) * 2 / 864e9, rel=1e-12)


def test_rows_that_cannot_be_joined_are_counted_by_why() -> None:
    jt = join_table(table("gemm", gemm_dtype=["bfloat16", "int4_wo", "bfloat16"], m=[16, 16, 1.5], n=[64, 64, 64],
                          k=[64, 64, 64]))
    assert len(jt.keep) == 1
    assert jt.left_out == {"dtype 'int4_wo' has no counterpart here": 1, "column m is not a whole number": 1}
    windowed = join_table(table("context_attention", batch_size=[1], isl=[4096], num_heads=[8],
                                num_key_value_heads=[8], head_dim=[128], step=[0], window_size=[1024],
                                attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"]))
    assert len(windowed.keep) == 0 and windowed.left_out == {"sliding window": 1}


def _fixture(kind: str) -> tuple[Table, list[Row]]:
    lines = (FIXTURES / f"h100_sxm.trtllm.{kind}.csv").read_text().splitlines()
    raw = list(csv.DictReader(lines[1:]))
    cols = {k: np.array([r[k] if k.endswith("dtype") else float(r[k]) if r[k] not in ("", "None") else np.nan
                         for r in raw], dtype=object if k.endswith("dtype") else float)
            for k in raw[0] if k != "latency"}
    seconds = np.array([float(r["latency"]) * 1e-3 for r in raw])
    rows = [Row("h100_sxm", "h100-sxm", "trtllm", "1.3.0rc20", kind,
                {k: (v if k.endswith("dtype") else float(v) if v not in ("", "None") else None) for k, v in r.items()},
                float(r["latency"]) * 1e-3) for r in raw]
    return Table("h100_sxm", "h100-sxm", "trtllm", "1.3.0rc20", kind, cols, seconds), rows


@pytest.mark.parametrize("kind", ["gemm", "context_attention", "generation_attention"])
def test_the_columnar_join_places_each_fixture_row_as_the_graph_does(kind: str) -> None:
    # beyond the hand cases above: on 300 measured rows a table (tests/fixtures/aiconfigurator), the
    # columnar floors agree with a graph, a kernel and a placement per shape, and so does the name
    t, rows = _fixture(kind)
    jt = join_table(t)
    assert len(jt.keep) >= 250
    for i, r in enumerate(jt.keep):
        j = join(rows[int(r)])
        assert jt.floors.floor_s[i] == pytest.approx(j.floor_s, rel=1e-12)
        assert jt.floors.compute_s[i] == pytest.approx(j.shape.compute_s, rel=1e-12)
        assert (jt.kinds[i], jt.name(i)) == (j.kind, j.placement.name)


def test_the_columnar_expected_time_is_the_models() -> None:
    # t = max(floor, compute·q)/e + t0 + c_tile·pairs/SMs + c_head·heads/SMs, by hand for one decode row:
    # floor 20.07 µs (above), e 0.5, t0 5 µs, 10 ns a tile pair, 2 ns a head, 132 SMs
    jt = join_table(table("generation_attention", batch_size=[8], isl=[1], num_heads=[32], num_key_value_heads=[8],
                          head_dim=[128], step=[4096], attn_dtype=["bfloat16"], kv_cache_dtype=["fp8"]))
    rows = split(jt)[0]
    fit = Fit("generation_attention.fp8", 0.5, 5e-6, 0.9, 1.2, 1, None, per_tile_s=10e-9, per_head_s=2e-9)
    t, low, high = expected_columns(fit, rows)
    want = 67_239_936 / H100_DRAM / 0.5 + 5e-6 + 10e-9 * 2048 / 132 + 2e-9 * 256 / 132
    assert t[0] == pytest.approx(want, rel=1e-12)
    assert (low[0], high[0]) == pytest.approx((want * 0.9, want * 1.2), rel=1e-12)


# ---- MLA, MoE, the K-only decode tables and the explanations -------------------------------------

A100_DRAM = 2.039e12  # A100 SXM4 80GB: 2,039 GB/s (A100 datasheet)


def test_a100_trtllm_1_0_decode_rows_stream_one_cache_tensor() -> None:
    # TRT-LLM 1.0.0 rows were timed on a K-only pool (the collector's CacheType.SELFKONLY): b 64, h 64/64,
    # d 128, step 255: q and out 64·64·128·2 B each, K 64·64·255·128·2 B = 267,386,880: 269,484,032 B, 132.2 µs
    cols = dict(batch_size=[64], isl=[1], num_heads=[64], num_key_value_heads=[64], head_dim=[128], step=[255],
                attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"])
    old = table("generation_attention", "a100-sxm-80gb", **cols)
    old = Table(old.system, old.machine, "trtllm", "1.0.0", old.table, old.columns, old.measured_s)
    k_only = 2 * 64 * 64 * 128 * 2 + 64 * 64 * 255 * 128 * 2
    assert k_only == 269_484_032
    assert join_table(old).floors.floor_s[0] == pytest.approx(k_only / A100_DRAM, rel=1e-12)
    # the same shape timed by 1.3.0rc20 (CacheType.SELF): K and V, 536,870,912 B, 263.3 µs
    new = Table(old.system, old.machine, "trtllm", "1.3.0rc20", old.table, old.columns, old.measured_s)
    both = 2 * 64 * 64 * 128 * 2 + 2 * 64 * 64 * 255 * 128 * 2
    assert join_table(new).floors.floor_s[0] == pytest.approx(both / A100_DRAM, rel=1e-12)
    # the row itself ran 230 µs (aiconfigurator-core 0.12.0, a100_sxm/attention/trtllm/1.0.0): above the
    # K-only floor, 13% under the K-and-V one
    assert k_only / A100_DRAM < 230e-6 < both / A100_DRAM


def mla(kind: str, **cols: list[object]) -> Table:
    base = dict(mla_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"], tp_size=[1], kernel_source=["default"])
    return table(kind, **{**base, **cols})


def test_absorbed_mla_decode_streams_the_latent_cache_once() -> None:
    # b 64, 128 heads, step 4095 (4096 keys): q 64·128·576·2 + latent 64·4096·576·2 + out 64·128·512·2 bytes
    # = 319,815,680 B / 3.35e12 = 95.47 µs; FLOPs 2·P·(576 + 512), P = 64·128·4096, take 73.8 µs: DRAM binds
    jt = join_mla(mla("generation_mla", batch_size=[64], num_heads=[128], isl=[1], step=[4095]))
    want = 64 * 128 * 576 * 2 + 64 * 4096 * 576 * 2 + 64 * 128 * 512 * 2
    assert jt.floors.dram_bytes[0] == want == 319_815_680
    assert jt.floors.floor_s[0] == pytest.approx(want / H100_DRAM, rel=1e-12)
    assert jt.floors.compute_s[0] == pytest.approx(2 * 64 * 128 * 4096 * (576 + 512) / H100_BF16, rel=1e-12)
    # and it is the attention kernel our DeepSeek-V3 decode step counts at batch 64, context 4096 on one H100
    from roofline.models import analyze_model

    attn = next(p for p in analyze_model("deepseek-v3", "h100", "decode", 64, 4096).placements if p.name == "attn")
    assert jt.floors.floor_s[0] == pytest.approx(attn.time_s, rel=1e-12)


def test_decompressed_mla_prefill_is_causal_attention_of_192_and_128() -> None:
    # TRT-LLM prefill, b 1, 128 heads, 4096 tokens: P = 128·4096·4097/2; FLOPs 2·P·192 + 2·P·128 = 640·P
    # = 687.4e9 / 989.4e12 = 694.7 µs
    jt = join_mla(mla("context_mla", batch_size=[1], num_heads=[128], isl=[4096], step=[0]))
    p = 128 * 4096 * 4097 // 2
    assert jt.floors.floor_s[0] == pytest.approx(640 * p / H100_BF16, rel=1e-12)
    assert jt.floors.floor_s[0] == pytest.approx(694.7e-6, rel=1e-3)
    assert jt.name(0) == "context_mla decompressed b1 h128 isl 4096"


def test_moe_floor_streams_the_weights_of_the_experts_hit() -> None:
    # Mixtral-shaped bf16 layer on an H100, 1 token, top-2 of 8 experts: experts hit = max(2, min(8, 2,
    # round(8·(1 − 6/8)))) = 2; gate_up+act reads 1·4096·2 + 2·4096·2·14336·2 and writes 2·14336·2 bytes,
    # down reads 2·14336·2 + 2·14336·4096·2 and writes 2·4096·2, combine reads 2·4096·2 and writes 4096·2:
    # 704,806,912 B / 3.35e12 = 210.4 µs (FLOPs negligible)
    jt = join_moe(table("moe", moe_dtype=["bfloat16"], num_tokens=[1], hidden_size=[4096], inter_size=[14336],
                        topk=[2], num_experts=[8], moe_tp_size=[1], moe_ep_size=[1], distribution=["balanced"],
                        kernel_source=["moe_torch_flow"]))
    want = (4096 * 2 + 2 * 4096 * 2 * 14336 * 2 + 2 * 14336 * 2) + (2 * 14336 * 2 + 2 * 14336 * 4096 * 2
                                                                    + 2 * 4096 * 2) + (2 * 4096 * 2 + 4096 * 2)
    assert want == 704_806_912
    assert jt.floors.floor_s[0] == pytest.approx(want / H100_DRAM, rel=1e-9)
    # the relaxed floor: the fewest experts any router hits, ⌈k/ep⌉ = 2 here too
    assert jt.floors.relaxed_s[0] == pytest.approx(jt.floors.floor_s[0], rel=1e-12)
    assert jt.kinds[0] == "moe.bfloat16"


def test_non_gated_experts_read_half_the_up_projection() -> None:
    # TRT-LLM's moe_torch_flow_nongated (ReLU², up alone): the gate_up weights are h·f, not h·2f
    cols = dict(moe_dtype=["bfloat16"], num_tokens=[1], hidden_size=[4096], inter_size=[14336], topk=[2],
                num_experts=[8], moe_tp_size=[1], moe_ep_size=[1], distribution=["balanced"])
    gated = join_moe(table("moe", kernel_source=["moe_torch_flow"], **cols)).floors.dram_bytes[0]
    plain = join_moe(table("moe", kernel_source=["moe_torch_flow_nongated"], **cols)).floors.dram_bytes[0]
    assert gated - plain == 2 * 4096 * 14336 * 2  # one h×f matrix of each of the 2 experts, bf16


def test_explanations_of_points_faster_than_the_floor() -> None:
    # within 2% of the floor: timing scatter
    assert explain("k", 9.9e-6, 10e-6, 1e9, 10e-6, 50 * 2**20, True, 1e-6, "h100-sxm").explained
    # a compute-bound row faster than its own FLOPs at the dense peak: the table's error
    above = explain("k", 47.1e-3, 60e-3, 9.76e9, 3e-3, 50 * 2**20, False, 60e-3, "h100-sxm")
    assert above.explained and "the table's error" in above.why
    # a DRAM-bound stream beyond L2, 10% under: our error
    assert not explain("k", 9e-6, 10e-6, 1e9, 10e-6, 50 * 2**20, True, 1e-6, "h100-sxm").explained
    # MoE: under the uniform-routing floor, above the fewest-experts one
    moe = explain("k", 2e-3, 3e-3, 1e10, 3e-3, 50 * 2**20, True, 1e-6, "h100-sxm", relaxed_s=1e-3, kind="moe.fp8")
    assert moe.explained and "fewer experts" in moe.why


def test_sglang_head_dim_192_has_a_128_wide_v() -> None:
    # MiMo-V2-Flash's attention (SGLang's only head_dim 192): b 32, h 2/1, 131,071 cached keys, bf16:
    # q 32·2·192·2 + K 32·131071·192·2 + V 32·131071·128·2 + out 32·2·128·2 = 2,684,375,040 B, 801 µs;
    # the row ran 907 µs, above it (a 192-wide V would make the floor 962 µs, above the measurement)
    cols = dict(batch_size=[32], isl=[1], num_heads=[2], num_key_value_heads=[1], head_dim=[192], step=[131071],
                attn_dtype=["bfloat16"], kv_cache_dtype=["bfloat16"])
    t = table("generation_attention", **cols)
    t = Table(t.system, t.machine, "sglang", "0.5.14", t.table, t.columns, t.measured_s)
    want = 32 * 2 * 192 * 2 + 32 * 131071 * (192 + 128) * 2 + 32 * 2 * 128 * 2
    assert want == 2_684_375_040
    floor = join_table(t).floors.floor_s[0]
    assert floor == pytest.approx(want / H100_DRAM, rel=1e-12)
    assert floor < 907e-6


def test_a_model_term_the_columns_lack_is_scored_by_the_model_itself() -> None:
    # a Fit whose expected_s adds 1 µs the columnar formula does not know: validation follows the model
    class Shifted(Fit):
        def expected_s(self, shape):  # type: ignore[no-untyped-def]
            return super().expected_s(shape) + 1e-6

    jt = join_table(table("gemm", gemm_dtype=["bfloat16"], m=[8192], n=[8192], k=[8192]))
    fit = Shifted("gemm.bf16", 0.5, 0.0, 1.0, 1.0, 1)
    t, _, _ = expected_columns(fit, split(jt)[0])
    assert t[0] == pytest.approx(2 * 8192**3 / 989.4e12 / 0.5 + 1e-6, rel=1e-12)


def test_kernels_timing_the_same_shapes_are_split_into_their_own_kinds() -> None:
    # SGLang on B200 times some attention shapes on TRT-LLM's kernels and on Triton (the model's backend
    # chooses, not the shape): a kernel_source that times a shape another also times, other than the one with
    # the most rows, is its own kind; a kernel the shape selects (no shared shape) stays pooled; a window as
    # long as the sequence (1024 at isl 512) is the same shape as no window
    import numpy as np

    from roofline.calibration.tables import kernel_groups

    def cols(sources: list[str], isl: list[int], window: list[int]) -> dict[str, object]:
        n = len(sources)
        return {"kernel_source": np.array(sources, dtype=object), "batch_size": np.ones(n), "isl": np.array(isl),
                "num_heads": np.full(n, 32), "num_key_value_heads": np.full(n, 8), "head_dim": np.full(n, 256),
                "attn_dtype": np.array(["bfloat16"] * n, dtype=object),
                "kv_cache_dtype": np.array(["bfloat16"] * n, dtype=object), "window_size": np.array(window)}

    shared = kernel_groups("context_attention", cols(["trtllm_mha", "trtllm_mha", "triton"], [512, 1024, 512],
                                                     [0, 0, 1024]))
    assert shared.tolist() == ["", "", "@triton"]
    apart = kernel_groups("context_attention", cols(["trtllm_mha", "trtllm_mha", "triton"], [512, 1024, 64],
                                                    [0, 0, 0]))
    assert apart.tolist() == ["", "", ""]
    # a real window shorter than the sequence is another shape: not shared
    windowed = kernel_groups("context_attention", cols(["trtllm_mha", "trtllm_mha", "triton"], [512, 1024, 512],
                                                       [0, 0, 128]))
    assert windowed.tolist() == ["", "", ""]


def test_trtllm_flashinfer_prefill_on_an_fp8_cache_multiplies_in_fp8() -> None:
    # TensorRT-LLM's FlashInfer backend (trtllm-gen, as aiconfigurator pins it) casts the BF16 query to an FP8
    # cache's dtype before prefill (flashinfer.py forward_impl: the QkvE4m3OBfloat16 context cubins), so its
    # matrix units run at B200's dense FP8 rate, 4.5 PFLOP/s, not BF16's 2.25 (B200 datasheet; join.FP8_QUERY_CAST).
    # The measured rows (B200, 1.3.0rc20, aiconfigurator-core 0.12.0): b1 isl 8192 h16/2 d512 took 954.2 µs on
    # an FP8 cache and 1547.8 µs on a BF16 one; b8 isl 16384 h16/2 d512 24.9 ms and 43.1 ms.
    # P = 16·8192·8193/2 = 536,936,448 pairs; FLOPs 2·P·512 + 2·P·512 = 1,099,645,845,504
    from roofline.calibration.tables import KERNEL_GROUP

    src = ["torch_flow_flashinfer", "torch_flow_flashinfer", "torch_flow"]
    cols: dict[str, list[object]] = dict(
        batch_size=[1, 1, 1], isl=[8192] * 3, num_heads=[16] * 3, num_key_value_heads=[2] * 3, head_dim=[512] * 3,
        step=[0] * 3, attn_dtype=["bfloat16"] * 3, kv_cache_dtype=["fp8", "bfloat16", "fp8"], kernel_source=src)
    t = table("context_attention", "b200", **cols)
    t.columns[KERNEL_GROUP] = np.array(["@torch_flow_flashinfer"] * 2 + [""], dtype=object)
    jt = join_table(t)
    p = 16 * 8192 * 8193 // 2
    assert p == 536_936_448
    flops = 4 * p * 512
    assert jt.floors.compute_s[0] == pytest.approx(flops / 4.5e15, rel=1e-12)  # 244.4 µs: FP8's rate
    assert jt.floors.compute_s[1] == pytest.approx(flops / 2.25e15, rel=1e-12)  # 488.7 µs: a BF16 cache, BF16's
    # TensorRT-LLM's own kernel (torch_flow) keeps a BF16 query over an FP8 cache: BF16's rate
    assert jt.floors.compute_s[2] == pytest.approx(flops / 2.25e15, rel=1e-12)
    assert jt.kinds.tolist() == ["context_attention.fp8@torch_flow_flashinfer",
                                 "context_attention.bf16@torch_flow_flashinfer", "context_attention.bf16"]
    # the query read in FP8 (1 B), K and V of 2 heads in FP8, the BF16 output: 8192·(16·512 + 2·2·512 + 16·512·2) B
    assert jt.floors.dram_bytes[0] == 8192 * (16 * 512 + 2 * 2 * 512 + 16 * 512 * 2) == 218_103_808
    # the row-at-a-time join places it the same, and decode on the same backend is left as it was
    row = Row("b200_sxm", "b200", "trtllm", "1.3.0rc20", "context_attention",
              {k: v[0] for k, v in cols.items()}, 954.2e-6)
    j = join(row)
    assert (j.kind, j.shape.compute_s) == ("context_attention.fp8", pytest.approx(flops / 4.5e15, rel=1e-12))
    gen = join(Row("b200_sxm", "b200", "trtllm", "1.3.0rc20", "generation_attention",
                   {**{k: v[0] for k, v in cols.items()}, "isl": 1, "step": 8192}, 1e-4))
    assert gen.placement.dtype.name == "bf16"
