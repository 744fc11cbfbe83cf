"""The range of values mapped to black..white (images) or the colour ramp (clouds): fixed, or each frame's min/max.

``auto`` reads the frame's min and max where the frame lies: numpy for host memory, torch or cupy
(through DLPack, on the GPU; two numbers come back) for CUDA memory.  Without either on a CUDA frame
it falls back to the type's full range and says why once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ValueRange", "full_range"]


def full_range(dtype: np.dtype) -> tuple[float, float]:
    """What a type's values span: 0..max for unsigned integers, min..max for signed, 0..1 for floats."""
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return float(0 if dtype.kind == "u" else info.min), float(info.max)
    return 0.0, 1.0


@dataclass
class ValueRange:
    """``spec`` is ``""`` (the type's full range), ``"auto"`` (each frame's min/max) or ``"LO:HI"``."""

    spec: str = ""

    def __post_init__(self) -> None:
        self.fixed: tuple[float, float] | None = None
        self.fallback_reason: str | None = None
        self._absent: dict[str, str] = {}  # GPU libraries that failed to import: not looked for again each frame
        if self.spec in ("", "auto"):
            return
        try:
            lo_text, hi_text = self.spec.split(":")
            lo, hi = float(lo_text), float(hi_text)
        except ValueError:
            raise ValueError(f"range {self.spec!r} is not 'auto', '' or LO:HI (two numbers)") from None
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ValueError(f"range {self.spec!r} needs finite LO < HI")
        self.fixed = (lo, hi)

    def of(self, array: Any, memory: str, dtype: np.dtype) -> tuple[float, float]:
        """(lo, hi) in the values' own units for this frame; ``array`` is the leased view (host or CUDA)."""
        if self.fixed is not None:
            return self.fixed
        if self.spec == "auto":
            found = self._min_max(array, memory)
            if found is not None and found[1] > found[0]:
                return found
            if found is not None:
                return found[0], found[0] + 1.0  # a flat frame: its one value shows as black
        return full_range(dtype)

    def _min_max(self, array: Any, memory: str) -> tuple[float, float] | None:
        if memory == "host":
            values = np.asarray(array)
            finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
            return (float(finite.min()), float(finite.max())) if finite.size else None
        problems = [f"{name}: {why}" for name, why in self._absent.items()]
        if "torch" not in self._absent:
            try:
                import torch
            except ImportError as exc:
                self._absent["torch"] = str(exc)
                problems.append(f"torch: {exc}")
            else:
                try:
                    tensor = torch.from_dlpack(array).float()  # BufferError for a field DLPack cannot stride (packed points)
                    finite = tensor[torch.isfinite(tensor)]
                    if finite.numel() == 0:
                        return None
                    lo, hi = torch.aminmax(finite)
                    return float(lo), float(hi)
                except BufferError as exc:
                    problems.append(f"torch: {exc}")
        if "cupy" not in self._absent:
            try:
                import cupy
            except ImportError as exc:
                self._absent["cupy"] = str(exc)
                problems.append(f"cupy: {exc}")
            else:
                try:
                    values = cupy.asarray(array)  # the CUDA array interface: byte strides
                    return float(cupy.nanmin(values)), float(cupy.nanmax(values))
                except (ValueError, TypeError) as exc:
                    problems.append(f"cupy: {exc}")
        self.fallback_reason = f"no min/max on the GPU ({'; '.join(problems)}): the type's full range instead"
        self.spec = ""
        return None
