"""Precision modes as a PyTorch user sets them (include/roofsim/precision_mode.hpp and
tools/validate/measure_pytorch.py): TF32 flags, autocast dtype, parameter/input dtype, and the
compute unit a GEMM or convolution of a given operand dtype runs on."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Precision:
    name: str
    matmul_tf32: bool        # torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32: bool         # torch.backends.cudnn.allow_tf32
    autocast: torch.dtype | None
    param_dtype: torch.dtype

    def gemm_unit(self, dtype: torch.dtype) -> str:
        return tensor_unit(dtype, "tf32-tensor" if self.matmul_tf32 else "fp32")

    def conv_unit(self, dtype: torch.dtype) -> str:
        return tensor_unit(dtype, "tf32-tensor" if self.cudnn_tf32 else "fp32")


MODES = {
    "fp32": Precision("fp32", False, True, None, torch.float32),
    "fp32-strict": Precision("fp32-strict", False, False, None, torch.float32),
    "tf32": Precision("tf32", True, True, None, torch.float32),
    "amp-bf16": Precision("amp-bf16", False, True, torch.bfloat16, torch.float32),
    "amp-fp16": Precision("amp-fp16", False, True, torch.float16, torch.float32),
    "bf16": Precision("bf16", False, True, None, torch.bfloat16),
}


def tensor_unit(dtype: torch.dtype, fp32_unit: str) -> str:
    """The tensor-core unit of a GEMM/convolution on `dtype` operands (precision_mode.hpp tensor_unit_for)."""
    if dtype == torch.bfloat16:
        return "bf16-tensor"
    if dtype == torch.float16:
        return "fp16-tensor"
    if dtype == torch.float64:
        return "fp64"
    if is_float8(dtype):
        return "fp8-tensor"
    if dtype in (torch.int8, torch.uint8):
        return "int8-tensor"
    return fp32_unit


def is_float8(dtype: torch.dtype) -> bool:
    return "float8" in str(dtype)


# docs/graph-format.md dtype keys. Types roofsim has no key for are written as the key of the same
# element size (their bytes are already counted in bytes_read / bytes_written).
_DTYPE_KEYS = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int64: "int64", torch.int32: "int32", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}


def dtype_key(dtype: torch.dtype) -> str:
    if dtype in _DTYPE_KEYS:
        return _DTYPE_KEYS[dtype]
    if is_float8(dtype):
        return "float8"
    size = itemsize(dtype)
    return {1: "uint8", 2: "float16", 4: "int32", 8: "int64"}.get(size, "float64")


def itemsize(dtype: torch.dtype) -> int:
    """Bytes per element, without creating a tensor (this runs inside the dispatch recorder)."""
    size = getattr(dtype, "itemsize", None)  # torch >= 2.1
    if isinstance(size, int):
        return size
    if dtype == torch.bool:
        return 1
    try:
        return torch.finfo(dtype).bits // 8
    except TypeError:
        pass
    try:
        return torch.iinfo(dtype).bits // 8
    except TypeError:
        return 8 if dtype.is_complex and "64" in str(dtype) else 16 if dtype.is_complex else 4


_ITEMSIZE_CACHE: dict = {}


def element_size(dtype: torch.dtype) -> int:
    size = _ITEMSIZE_CACHE.get(dtype)
    if size is None:
        size = _ITEMSIZE_CACHE[dtype] = itemsize(dtype)
    return size


def parse_dtype(text: str) -> torch.dtype:
    aliases = {"float": "float32", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "fp16": "float16",
               "long": "int64", "int": "int32", "double": "float64"}
    name = aliases.get(text, text)
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype '{text}' (float32, float16, bfloat16, float64, int64, int32, int8, uint8, bool)")
    return dtype
