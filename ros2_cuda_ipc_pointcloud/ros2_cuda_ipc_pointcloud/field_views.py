"""``FieldAccess``: per-field array views of one cloud in a block, shared by the writable frame and the read view."""

from __future__ import annotations

from ros2_cuda_ipc_core import ArrayView, StridedLayout

from .fields import CloudField
from .layout import CloudLayout


class FieldAccess:
    """``field(name)``, ``xyz`` and the cloud's metadata, over ``self.layout`` and ``self.array_view``.

    A field view is strided (``point_step`` between points, ``row_step`` between rows): it speaks
    DLPack when its offset and strides are whole elements, the CUDA Array Interface always, and numpy
    (``np.asarray``) for host memory.  It holds the block (a lease, for readers) while it lives.
    """

    layout: CloudLayout

    def array_view(self, layout: StridedLayout, name: str = "array") -> ArrayView:
        raise NotImplementedError

    def field(self, name: str) -> ArrayView:
        """Field ``name`` alone: (height, width) for organized clouds, (width,) otherwise; (..., count) when count > 1."""
        return self.array_view(self.layout.geometry(name), f"field {name!r}")

    @property
    def xyz(self) -> ArrayView:
        """(N, 3) float32 over consecutive x, y, z float32 fields, no copy; ValueError pointing to ``field()`` otherwise."""
        return self.array_view(self.layout.xyz_geometry, "xyz")

    @property
    def fields(self) -> tuple[CloudField, ...]:
        return self.layout.fields

    @property
    def field_names(self) -> tuple[str, ...]:
        return self.layout.field_names

    @property
    def height(self) -> int:
        return self.layout.height

    @property
    def width(self) -> int:
        return self.layout.width

    @property
    def point_count(self) -> int:
        return self.layout.point_count

    @property
    def point_step(self) -> int:
        return self.layout.point_step

    @property
    def row_step(self) -> int:
        return self.layout.row_step

    @property
    def is_dense(self) -> bool:
        return self.layout.is_dense

    @property
    def is_bigendian(self) -> bool:
        return self.layout.is_bigendian
