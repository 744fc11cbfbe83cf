"""``CloudLayer``: one point-cloud topic as GL points, read straight from the cloud's own bytes.

The vertex buffer holds the points exactly as published (``point_step`` bytes each: 48 for an
Ouster, 16 for a plain xyz + intensity), so the GPU copy is one strided copy of whole points and
the vertex array reads x, y, z and the colour field at their offsets with that stride.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .orbit_camera import OrbitCamera
from .staging import FrameBytes, GpuStaging, HostStaging, UploadPath

__all__ = ["CloudLayer", "PointFormat"]

_VERTEX = """
#version 330
uniform mat4 camera;
uniform float lo;
uniform float hi;
uniform float point_size;
in vec3 in_position;
in float in_value;
out float level;
void main() {
    gl_Position = camera * vec4(in_position, 1.0);
    gl_PointSize = point_size;
    level = clamp((in_value - lo) / (hi - lo), 0.0, 1.0);
}
"""
_FRAGMENT = """
#version 330
in float level;
out vec4 colour;
void main() {
    // blue -> green -> yellow -> red: near values stay apart on a dark background
    vec3 ramp = clamp(vec3(2.0 * level - 0.5, 1.5 - abs(2.0 * level - 1.0) * 1.5, 1.0 - 2.0 * level), 0.0, 1.0);
    colour = vec4(ramp, 1.0);
}
"""
#: The widest vertex stride every OpenGL 4.4+ driver takes (GL_MAX_VERTEX_ATTRIB_STRIDE's least value).
MAX_VERTEX_STRIDE = 2048
#: moderngl attribute formats of the PointField types a colour can come from.
_ATTRIBUTE = {"f4": "f4", "f8": "f8", "u1": "u1", "u2": "u2", "u4": "u4", "i1": "i1", "i2": "i2", "i4": "i4"}


class PointFormat:
    """Where x, y, z and the colour field lie in a point of ``point_step`` bytes, as moderngl formats."""

    def __init__(self, point_step: int, xyz_offset: int, value_offset: int | None, value_dtype: np.dtype | None) -> None:
        if point_step > MAX_VERTEX_STRIDE:
            raise ValueError(f"points of {point_step} bytes are wider than a vertex stride ({MAX_VERTEX_STRIDE})")
        if xyz_offset < 0 or xyz_offset + 12 > point_step:
            raise ValueError(f"x, y, z at byte {xyz_offset} do not fit a point of {point_step} bytes")
        self.point_step = point_step
        self.position = self._format(xyz_offset, "3f4", 12)
        self.value: str | None = None
        if value_offset is not None and value_dtype is not None:
            code = _ATTRIBUTE.get(f"{value_dtype.kind}{value_dtype.itemsize}")
            if code is None or not value_dtype.isnative:
                raise ValueError(f"a colour field of type {value_dtype} cannot be a vertex attribute")
            self.value = self._format(value_offset, code, value_dtype.itemsize)

    def _format(self, offset: int, code: str, size: int) -> str:
        after = self.point_step - offset - size
        return " ".join(part for part in (f"{offset}x" if offset else "", code, f"{after}x" if after else "") if part)


class CloudLayer:
    """The latest cloud of one topic: ``show`` copies its points into the vertex buffer, ``draw`` renders them."""

    def __init__(self, ctx: Any, camera: OrbitCamera | None = None, point_size: float = 2.0) -> None:
        self.ctx = ctx
        self.camera = camera or OrbitCamera()
        self.point_size = point_size
        self._program = ctx.program(vertex_shader=_VERTEX, fragment_shader=_FRAGMENT)
        self._vbo: Any = None
        self._vao: Any = None
        self._gpu: GpuStaging | None = None
        self._key: tuple[Any, ...] | None = None
        self._count = 0
        self._range = (0.0, 1.0)
        self.host = HostStaging()
        self.upload = UploadPath("points")

    @property
    def point_count(self) -> int:
        return self._count

    def show(self, frame: FrameBytes, point: PointFormat, value_range: tuple[float, float]) -> None:
        """Copy ``frame`` (points of ``point.point_step`` bytes) into the vertex buffer; the lease may go after."""
        count = frame.nbytes // point.point_step
        key = (point.point_step, point.position, point.value, frame.memory, frame.device)
        if key != self._key or self._vbo.size < frame.nbytes:
            self._reshape(key, point, frame)
        if count:
            if self._gpu is not None:
                self._gpu.stage(frame)
            else:
                self._vbo.write(self.host.stage(frame))
        self._count = count
        self._range = value_range

    def _reshape(self, key: tuple[Any, ...], point: PointFormat, frame: FrameBytes) -> None:
        self._release_frame_objects()
        self._vbo = self.ctx.buffer(reserve=max(frame.nbytes, point.point_step))
        content = [(self._vbo, point.position, "in_position")]
        if point.value is not None:
            content.append((self._vbo, point.value, "in_value"))
        self._vao = self.ctx.vertex_array(self._program, content)
        self._key = key
        self._gpu = self.upload.choose(frame, self._vbo)

    def draw(self, viewport: tuple[int, int, int, int]) -> None:
        """Draw the points into ``viewport`` (x, y, width, height) as the camera sees them."""
        if self._vao is None or not self._count:
            return
        _, _, width, height = viewport
        self.ctx.viewport = viewport
        self.ctx.enable(self.ctx.PROGRAM_POINT_SIZE | self.ctx.DEPTH_TEST)
        self._program["camera"].write(self.camera.matrix(width / height).T.astype(np.float32).tobytes())
        self._program["lo"], self._program["hi"] = self._range
        self._program["point_size"] = self.point_size
        self._vao.render(mode=self.ctx.POINTS, vertices=self._count)
        self.ctx.disable(self.ctx.DEPTH_TEST)

    def _release_frame_objects(self) -> None:
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None
        for obj in (self._vao, self._vbo):
            if obj is not None:
                obj.release()
        self._vao = self._vbo = None

    def close(self) -> None:
        self._release_frame_objects()
        self._program.release()
