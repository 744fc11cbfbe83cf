"""``DLPackDType``: an element type as DLPack names it (code, bits, lanes), including those numpy lacks.

bfloat16 and the float8 formats have DLPack codes (DLPack 1.1's ``DLDataTypeCode``) and torch dtypes but
no numpy dtype: such a type is stored as the unsigned integer of its size (``storage``), which holds its
bits, and travels to frameworks under its own code.  Lanes other than 1 (vector types) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidDescriptorError

#: DLDataTypeCode values (dlpack.h, DLPack 1.1).
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = 0, 1, 2, 4, 5, 6
_FLOAT8_CODES = {7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz", 10: "float8_e4m3fn",
                 11: "float8_e4m3fnuz", 12: "float8_e5m2", 13: "float8_e5m2fnuz", 14: "float8_e8m0fnu"}

#: Every (code, bits) supported, by name.  Names are numpy's where numpy has the type, else torch's.
_NAMES: dict[tuple[int, int], str] = {
    **{(KDL_INT, bits): f"int{bits}" for bits in (8, 16, 32, 64)},
    **{(KDL_UINT, bits): f"uint{bits}" for bits in (8, 16, 32, 64)},
    **{(KDL_FLOAT, bits): f"float{bits}" for bits in (16, 32, 64)},
    (KDL_BFLOAT, 16): "bfloat16",
    (KDL_COMPLEX, 64): "complex64",
    (KDL_COMPLEX, 128): "complex128",
    (KDL_BOOL, 8): "bool",
    **{(code, 8): name for code, name in _FLOAT8_CODES.items()},
}
_BY_NAME = {name: key for key, name in _NAMES.items()}
_KINDS = {"i": KDL_INT, "u": KDL_UINT, "f": KDL_FLOAT, "c": KDL_COMPLEX, "b": KDL_BOOL}


@dataclass(frozen=True)
class DLPackDType:
    """One supported element type: ``code`` (DLDataTypeCode), ``bits`` and ``lanes`` (always 1)."""

    code: int
    bits: int
    lanes: int = 1

    def __post_init__(self) -> None:
        if self.lanes != 1 or (self.code, self.bits) not in _NAMES:
            raise ValueError(f"DLPack dtype {self.triple} is not supported: one of {sorted(_BY_NAME)} with 1 lane")

    @property
    def triple(self) -> tuple[int, int, int]:
        return (self.code, self.bits, self.lanes)

    @property
    def name(self) -> str:
        """numpy's name where numpy has the type (``float16``), torch's otherwise (``bfloat16``, ``float8_e4m3fn``)."""
        return _NAMES[(self.code, self.bits)]

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    @property
    def numpy(self) -> np.dtype | None:
        """The numpy dtype of these values, or None where numpy has none (bfloat16, float8)."""
        return None if self.code == KDL_BFLOAT or self.code in _FLOAT8_CODES else np.dtype(self.name)

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype a block views these elements as: :attr:`numpy`, or the unsigned integer holding their bits."""
        numpy = self.numpy
        return numpy if numpy is not None else np.dtype(f"uint{self.bits}")

    @property
    def numpy_refusal(self) -> str:
        """Why numpy cannot hold this type, and the ways around it (empty when it can)."""
        if self.numpy is not None:
            return ""
        return (f"numpy has no {self.name} dtype: take the values through DLPack (torch.from_dlpack(view)), or "
                f"their raw bits as {self.storage} through view.array")

    @classmethod
    def of(cls, dtype: Any) -> DLPackDType:
        """From a numpy dtype (or anything ``np.dtype`` takes), a torch dtype, a name (``"bfloat16"``) or a
        ``(code, bits, lanes)`` triple; ValueError naming what was given when it is none of the supported types."""
        if isinstance(dtype, DLPackDType):
            return dtype
        if isinstance(dtype, tuple):
            if len(dtype) not in (2, 3):  # the dataclass's own TypeError would not name what was given
                raise ValueError(f"{dtype!r} is not a DLPack (code, bits, lanes) triple")
            return cls(*(int(n) for n in dtype))
        name = str(dtype).removeprefix("torch.")  # torch dtypes by name: no torch import
        if name in _BY_NAME:
            return cls(*_BY_NAME[name])
        try:
            numpy_dtype = np.dtype(dtype)
        except TypeError:
            raise ValueError(f"{dtype!r} is not a dtype this package carries: one of {sorted(_BY_NAME)}") from None
        code = _KINDS.get(numpy_dtype.kind)
        if code is None or (code, numpy_dtype.itemsize * 8) not in _NAMES or not numpy_dtype.isnative:
            raise ValueError(f"numpy dtype {numpy_dtype} has no DLPack equivalent carried here")
        return cls(code, numpy_dtype.itemsize * 8)

    @classmethod
    def from_fields(cls, code: int, bits: int, lanes: int, what: str = "") -> DLPackDType:
        """From a message's ``dtype_code``, ``dtype_bits`` and ``dtype_lanes``: InvalidDescriptorError naming the
        field that is wrong (``what`` prefixes the message: the message type, say)."""
        code, bits, lanes = int(code), int(bits), int(lanes)
        prefix = f"{what} " if what else ""
        if not any(known == code for known, _ in _NAMES):
            raise InvalidDescriptorError(f"{prefix}dtype_code {code} is not a DLPack type code carried here "
                                         f"(0-2 and 4-14 of DLPack 1.1's DLDataTypeCode)")
        if (code, bits) not in _NAMES:
            allowed = sorted(b for c, b in _NAMES if c == code)
            raise InvalidDescriptorError(f"{prefix}dtype_bits {bits} is not valid for dtype_code {code}: one of {allowed}")
        if lanes != 1:
            raise InvalidDescriptorError(f"{prefix}dtype_lanes {lanes} is not supported: only 1 (no vector types)")
        return cls(code, bits)

    def __str__(self) -> str:
        return self.name
