"""Dtypes with their storage cost in bits, including block scales.

A block-scaled format stores one scale per block of values, and those scale bytes cross memory
too: MXFP4 is 4 bits per value plus one 8-bit scale per 32 values = 4.25 bits; NVFP4 is 4 bits
plus one FP8 scale per 16 values = 4.5 bits (its single FP32 per-tensor scale is negligible and
not counted). `peak_key` names the machine peak that a matmul in this dtype runs at.
"""

from __future__ import annotations

from functools import cached_property

from roofline.errors import RooflineError, unknown
from roofline.frozen import frozen


@frozen
class DType:
    """A storage or compute dtype: its bits a value, the machine peak its matmuls use, its shared scales."""

    name: str
    bits: int  # bits of one value, excluding shared scales
    peak_key: str  # which machine peak a matmul in this dtype uses
    scale_bits: int = 0  # bits of one shared scale
    block_size: int = 1  # values sharing one scale
    storable: bool = True  # tf32 is a compute mode: its tensors are stored as fp32
    description: str = ""

    @property
    def bits_per_element(self) -> float:
        """Storage bits per value: 4 + 8/32 = 4.25 for MXFP4."""
        if self.scale_bits == 0:
            return float(self.bits)
        return self.bits + self.scale_bits / self.block_size

    @cached_property  # read for every tensor's bytes: computed once per dtype (its fields never change)
    def bytes_per_element(self) -> float:
        """Storage bytes per value, scales included: 2 for bf16, 4.25/8 = 0.53125 for MXFP4."""
        return self.bits_per_element / 8

    def __str__(self) -> str:
        return self.name


_ALL = (
    DType("fp64", 64, "fp64", description="IEEE double"),
    DType("fp32", 32, "fp32", description="IEEE single"),
    DType("tf32", 32, "tf32", storable=False,
          description="TensorFloat-32: fp32 in memory, 10-bit mantissa in the tensor cores"),
    DType("bf16", 16, "bf16", description="bfloat16"),
    DType("fp16", 16, "fp16", description="IEEE half"),
    DType("fp8_e4m3", 8, "fp8", description="OCP FP8 E4M3 (per-tensor scale)"),
    DType("fp8_e5m2", 8, "fp8", description="OCP FP8 E5M2 (per-tensor scale)"),
    DType("mxfp8", 8, "fp8", scale_bits=8, block_size=32,
          description="OCP MX FP8: one E8M0 scale per 32 values"),
    DType("fp6_e2m3", 6, "fp6", description="OCP FP6 E2M3, no block scales"),
    DType("fp6_e3m2", 6, "fp6", description="OCP FP6 E3M2, no block scales"),
    DType("mxfp6", 6, "fp6", scale_bits=8, block_size=32,
          description="OCP MX FP6: one E8M0 scale per 32 values"),
    DType("int8", 8, "int8", description="8-bit integer"),
    DType("int4", 4, "int4", description="4-bit integer"),
    DType("fp4", 4, "fp4", description="FP4 E2M1, no block scales"),
    DType("mxfp4", 4, "fp4", scale_bits=8, block_size=32,
          description="OCP MX FP4: one E8M0 scale per 32 values"),
    DType("nvfp4", 4, "fp4", scale_bits=8, block_size=16,
          description="NVIDIA NVFP4: one FP8 E4M3 scale per 16 values"),
    # storage-only types a traced program holds (token ids, masks, RoPE's complex rotations): they
    # cost bytes; no machine lists a matrix peak for them
    DType("int64", 64, "int64", description="64-bit integer (token ids, indices)"),
    DType("int32", 32, "int32", description="32-bit integer"),
    DType("int16", 16, "int16", description="16-bit integer"),
    DType("bool", 8, "bool", description="boolean, one byte each (masks)"),
    DType("complex64", 64, "complex64", description="two fp32 values (RoPE rotations)"),
    DType("complex128", 128, "complex128", description="two fp64 values"),
)

DTYPES: dict[str, DType] = {d.name: d for d in _ALL}

ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp8": "fp8_e4m3", "e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "float8_e4m3fnuz": "fp8_e4m3",
    "e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "float8_e5m2fnuz": "fp8_e5m2",
    "fp6": "fp6_e2m3", "e2m3": "fp6_e2m3", "e3m2": "fp6_e3m2",
    "e2m1": "fp4", "float4_e2m1fn_x2": "fp4",
    "uint8": "int8",
}


def get_dtype(name: str | DType) -> DType:
    """Look up a dtype by name or alias ("bf16", "bfloat16", "fp8", "mxfp4")."""
    if isinstance(name, DType):
        return name
    key = name.strip().lower().removeprefix("torch.")
    key = ALIASES.get(key, key)
    if key in DTYPES:
        return DTYPES[key]
    raise unknown("dtype", name, list(DTYPES) + list(ALIASES))


def storage_dtype(name: str | DType) -> DType:
    """A dtype tensors can be stored in; tf32 is stored as fp32."""
    d = get_dtype(name)
    return d if d.storable else DTYPES["fp32"]


def require_storable(name: str | DType) -> DType:
    d = get_dtype(name)
    if not d.storable:
        raise RooflineError(f"{d.name} is a compute mode, not a storage format; "
                            f"its tensors are stored as fp32")
    return d
