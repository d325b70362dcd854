from __future__ import annotations

import pytest

from roofline.dtypes import get_dtype, storage_dtype
from roofline.errors import RooflineError
from roofline.units import UnitError, format_bytes, format_bytes_per_s, format_flop_per_s, format_time, parse_quantity


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("3.35 TB/s", "bytes_per_s", 3.35e12),  # rates are decimal
    ("989 TFLOP/s", "flop_per_s", 989e12),
    ("2.25 PFLOP/s", "flop_per_s", 2.25e15),
    ("1978.9 TOP/s", "flop_per_s", 1978.9e12),  # int8 "TOPS" share the axis
    ("80 GiB", "bytes", 80 * 2**30),
    ("80 GB", "bytes", 80e9),
    ("320 KiB", "bytes", 327_680),  # the seed's KV cache per token: 320·1024
    ("320 KB", "bytes", 320_000),  # ... which "320 KB" is not
    ("50 MiB", "bytes", 50 * 2**20),
    ("80 us", "time_s", 80e-6),
    ("4.4e11", "flop", 4.4e11),
    (7, "bytes", 7.0),
])
def test_parse_quantity(text: str, kind: str, value: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "kind"), [
    ("3.35 TB/s", "flop_per_s"),  # wrong kind
    ("3.35 TiB/s", "bytes_per_s"),  # rates are decimal only
    ("fast", "bytes"),
    ("3 furlongs", "bytes"),
])
def test_parse_quantity_rejects(text: str, kind: str) -> None:
    with pytest.raises(UnitError):
        parse_quantity(text, kind)  # type: ignore[arg-type]


def test_formatting_names_its_prefix() -> None:
    assert format_bytes_per_s(3.35e12) == "3.35 TB/s"
    assert format_flop_per_s(989.4e12, 4) == "989.4 TFLOP/s"
    assert format_bytes(327_680, binary=True) == "320 KiB"
    assert format_bytes(327_680) == "328 kB"  # never "320 KB" for 320 KiB
    assert format_time(80.1e-6) == "80.1 µs"
    assert format_time(3.9e-3) == "3.9 ms"


@pytest.mark.parametrize(("name", "bits_per_element"), [
    ("fp64", 64), ("fp32", 32), ("bf16", 16), ("fp16", 16), ("fp8_e4m3", 8), ("fp8_e5m2", 8), ("int8", 8),
    ("int4", 4), ("fp4", 4),
    ("mxfp8", 8 + 8 / 32),  # one 8-bit E8M0 scale per 32 values
    ("mxfp4", 4 + 8 / 32),  # 4.25 bits
    ("nvfp4", 4 + 8 / 16),  # one FP8 scale per 16 values: 4.5 bits
])
def test_dtype_bits_include_block_scales(name: str, bits_per_element: float) -> None:
    assert get_dtype(name).bits_per_element == bits_per_element
    assert get_dtype(name).bytes_per_element == bits_per_element / 8


def test_dtype_aliases_and_peak_keys() -> None:
    assert get_dtype("bfloat16").name == "bf16"
    assert get_dtype("torch.float8_e4m3fn").name == "fp8_e4m3"
    assert get_dtype("fp8").peak_key == "fp8"
    assert get_dtype("nvfp4").peak_key == "fp4"
    assert storage_dtype("tf32").name == "fp32"  # tf32 is a compute mode, stored as fp32


def test_unknown_dtype_names_close_matches() -> None:
    with pytest.raises(RooflineError, match=r"did you mean.*bf16"):
        get_dtype("bf61")
