"""The tracer's FLOP formulas, on shapes alone: no torch here, not even installed.

One registry keyed by ATen op name; a formula takes a shape-only `OpCall` (what a live call and a
recorded profiler shape both give), so each is checked on a hand-made record.
"""

from __future__ import annotations

import pytest

from roofline.dtypes import ALIASES, DTYPES, get_dtype
from roofline.graph import Op
from roofline.tracing.registry import FORMULAS, FUSED_ATTENTION, SDPA, Arg, ArgShape, OpCall, Registry, torch_dtype
from roofline.vocab import Unit

FP32 = get_dtype("fp32")
BF16 = get_dtype("bf16")


def shaped(*shape: int, dtype: str = "fp32", values: tuple[int, ...] | None = None) -> ArgShape:
    return ArgShape(shape, get_dtype(dtype), None, values)


def count(aten: str, args: tuple[Arg, ...], out: ArgShape, fused: bool = False) -> list[Op]:
    reads = tuple(a for a in args if isinstance(a, ArgShape))
    call = OpCall("op", aten, args, reads, (out,), fused)
    return FORMULAS[aten](call)


def test_a_name_registered_twice_is_refused() -> None:
    mine = Registry()
    mine.register("mm")(lambda call: [])
    with pytest.raises(RuntimeError, match="two FLOP formulas for aten::mm"):
        mine.register("mm")(lambda call: [])
    with pytest.raises(RuntimeError, match="aten::bmm"):
        mine.register("bmm", "bmm")  # twice in one registration, too
    with pytest.raises(RuntimeError, match="aten::mm"):
        FORMULAS.register("mm")  # the shared registry refuses as well
    assert list(mine) == ["mm"]


def test_the_registry_is_read_only() -> None:
    def f(call: OpCall) -> list[Op]:
        return []

    with pytest.raises(TypeError):
        FORMULAS["mm"] = f  # type: ignore[index]
    with pytest.raises(TypeError):
        del FORMULAS["mm"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        FORMULAS.update({"mm": f})  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        FORMULAS.__dict__  # noqa: B018  # no instance dict to patch behind the Mapping's back
    assert FORMULAS["mm"] is FORMULAS["bmm"]  # one formula, several names


def test_in_place_variants_are_counted_under_their_op() -> None:
    assert FORMULAS.key("add_") == "add" and FORMULAS.key("mul_") == "mul"
    assert FORMULAS.key("_softmax") == "_softmax"  # a leading underscore is part of the name
    assert FORMULAS.key("lgamma_") == "lgamma_"  # no formula for lgamma: the name stays as it ran


def test_mm_on_a_hand_made_record() -> None:
    (op,) = count("mm", (shaped(64, 128), shaped(128, 32)), shaped(64, 32))
    assert op.flop == 524_288  # [64, 128] @ [128, 32]: 2·64·32·128 = 524,288
    assert op.kind == "matmul" and op.formula == "2·M·N·K = 2·64·32·128"


def test_addmm_and_baddbmm_read_their_second_and_third_arguments() -> None:
    bias = shaped(32)
    (op,) = count("addmm", (bias, shaped(64, 128), shaped(128, 32), 1, 1), shaped(64, 32))
    assert op.flop == 2 * 64 * 32 * 128  # the bias add is not a matmul FLOP
    (op,) = count("baddbmm", (shaped(4, 8, 16), shaped(4, 8, 10), shaped(4, 10, 16), 1, 1), shaped(4, 8, 16))
    assert op.flop == 10_240  # 4 batches of [8, 10] @ [10, 16]: 2·4·8·16·10 = 10,240


def test_linear_folds_leading_dims_into_rows() -> None:
    (op,) = count("linear", (shaped(2, 8, 64, dtype="bf16"), shaped(32, 64, dtype="bf16"), None),
                  shaped(2, 8, 32, dtype="bf16"))
    assert op.flop == 65_536  # rows M = 2·8 = 16, weight [32, 64]: 2·16·32·64 = 65,536


def test_causal_attention_on_a_hand_made_record() -> None:
    q = k = v = shaped(1, 2, 16, 8)
    # scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
    args = (q, k, v, None, 0.0, True, None, False)
    for fused in (True, False):
        qk, sm, pv = count(SDPA, args, shaped(1, 2, 16, 8), fused=fused)
        # causal pairs per (batch, head): 16·17/2 = 136
        assert qk.flop == 4_352  # 2·B·H·pairs·d = 2·1·2·136·8 = 4,352
        assert sm.flop == 1_360  # 5·B·H·pairs = 5·1·2·136 = 1,360
        assert pv.flop == qk.flop
        assert ("ran fused" in qk.note) is fused


def test_every_fused_variant_shares_the_attention_formula() -> None:
    assert SDPA not in FUSED_ATTENTION
    assert all(FORMULAS[name] is FORMULAS[SDPA] for name in FUSED_ATTENTION)


def test_conv2d_on_a_hand_made_record() -> None:
    # conv2d(input, weight, bias, stride, padding, dilation, groups): 3 -> 8 channels, 3x3, padding 1
    args = (shaped(2, 3, 10, 10), shaped(8, 3, 3, 3), shaped(8), (1, 1), (1, 1), (1, 1), 1)
    (op,) = count("conv2d", args, shaped(2, 8, 10, 10))
    assert op.flop == 86_400  # 2·output elements·C_in·3·3 = 2·1600·27 = 86,400


def test_complex_multiply_is_six_real_flops() -> None:
    a = shaped(10, dtype="complex64")
    (op,) = count("mul", (a, a), a)
    assert op.kind == "complex_mul" and op.flop == 60  # 6 real FLOPs per complex element: 6·10
    (op,) = count("mul", (shaped(10), shaped(10)), shaped(10))
    assert op.kind == "mul" and op.flop == 10  # FLOP_PER_ELEMENT["mul"] = 1


def test_torch_dtype_names_follow_dtypes_aliases() -> None:
    """One table: a torch dtype's name resolves through roofline.dtypes (ALIASES, then DTYPES)."""
    for name in (*ALIASES, *DTYPES):
        ours = get_dtype(name)
        if not ours.storable or ours.bits_per_element % 8:
            continue  # tf32 is a compute mode; sub-byte formats never match a torch element size
        assert torch_dtype(f"torch.{name}", int(ours.bytes_per_element)) == ours, name
    # storage a name does not match falls back by width: float4_e2m1fn_x2 packs two values per byte
    assert torch_dtype("float4_e2m1fn_x2", 1) == get_dtype("int8")
    assert torch_dtype("uint16", 2) == get_dtype("int16")


def test_the_cuda_forward_variants_read_the_blhe_layout() -> None:
    """_flash_attention_forward takes [B, L, H, E] (a CUDA path no CPU run reaches): the same call as
    [1, 2, 16, 8] in [B, H, L, E] counts the same FLOPs, and it always runs fused."""
    q = k = v = shaped(1, 16, 2, 8)
    # (query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, ...)
    args = (q, k, v, None, None, 16, 16, 0.0, True, False)
    qk, sm, pv = count("_flash_attention_forward", args, shaped(1, 16, 2, 8), fused=True)
    assert qk.flop == pv.flop == 4_352  # 2·B·H·pairs·d = 2·1·2·136·8, as in [B, H, L, E]
    assert sm.flop == 1_360 and all("ran fused" in o.note for o in (qk, sm, pv))
    assert "_flash_attention_forward" in FUSED_ATTENTION


def test_grouped_mm_without_offset_values_counts_every_row_and_group() -> None:
    a, b, offs = shaped(64, 512, dtype="bf16"), shaped(8, 512, 256, dtype="bf16"), shaped(8, dtype="int32")
    call = OpCall("moe", "_grouped_mm", (a, b, offs, None, None), (a, b, offs), (shaped(64, 256, dtype="bf16"),))
    (op,) = FORMULAS["_grouped_mm"](call)
    assert op.flop_by_unit[Unit.MATRIX] == 2 * 64 * 512 * 256  # 2·rows·K·N = 16,777,216
    # a recorded profile has no offsets' values: the whole [8, 512, 256] bf16 weight is read
    assert sum(t.bytes for t in op.inputs) == 64 * 512 * 2 + 8 * 512 * 256 * 2 + 8 * 4


def test_grouped_mm_reads_only_the_groups_its_offsets_give_rows() -> None:
    a, b = shaped(64, 512, dtype="bf16"), shaped(8, 512, 256, dtype="bf16")
    offs = shaped(8, dtype="int32", values=(32, 32, 64, 64, 64, 64, 64, 64))  # groups 0 and 2 have rows
    call = OpCall("moe", "_grouped_mm", (a, b, offs, None, None), (a, b, offs), (shaped(64, 256, dtype="bf16"),))
    (op,) = FORMULAS["_grouped_mm"](call)
    assert op.flop_by_unit[Unit.MATRIX] == 2 * 64 * 512 * 256
    weights = [t for t in op.inputs if t.shape[-2:] == (512, 256)]
    assert [t.bytes for t in weights] == [2 * 512 * 256 * 2]  # 2 of 8 experts' [512, 256] bf16 slices


def test_an_in_place_variant_with_its_own_formula_is_counted_under_it() -> None:
    assert FORMULAS.key("index_copy_") == "index_copy_"  # rows written, not index_copy's full copy
    assert FORMULAS.key("add_") == "add"  # no formula of its own: its op's


def test_index_put_with_a_boolean_mask_writes_what_the_mask_covers() -> None:
    dest = shaped(4, 8, 16)
    mask = shaped(4, 8, dtype="bool")
    call = OpCall("w", "index_put_", (dest, (mask,), shaped(1), False), (mask,), (dest,))
    (op,) = FORMULAS["index_put_"](call)
    assert op.outputs[0].elements == 4 * 8 * 16  # the mask's [4, 8] and the unindexed 16: an upper bound
