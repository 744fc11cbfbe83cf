"""``ImageLayer``: one image topic's frame as a GL texture, converted to RGB by the fragment shader.

The texture holds the frame's raw values (8-bit normalized, 16-bit normalized or 32-bit float, 1, 3 or
4 channels); a texture swizzle turns bgr into rgb and mono into grey, and the shader maps the value
range to 0..1.  So every encoding is a plain copy of the frame's bytes, whichever path brings them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .staging import FrameBytes, GpuStaging, HostStaging, UploadPath

__all__ = ["ImageLayer", "TextureFormat", "texture_format"]

_VERTEX = """
#version 330
in vec2 in_corner;
out vec2 uv;
void main() {
    uv = vec2(in_corner.x, 1.0 - in_corner.y);  // the frame's first row at the top
    gl_Position = vec4(in_corner * 2.0 - 1.0, 0.0, 1.0);
}
"""
_FRAGMENT = """
#version 330
uniform sampler2D frame;
uniform float lo;
uniform float hi;
in vec2 uv;
out vec4 colour;
void main() {
    vec3 value = texture(frame, uv).rgb;
    colour = vec4(clamp((value - lo) / (hi - lo), 0.0, 1.0), 1.0);
}
"""


@dataclass(frozen=True)
class TextureFormat:
    """How a frame's pixels sit in a texture: channels, moderngl dtype, swizzle, and raw units per sampled unit."""

    components: int
    dtype: str
    swizzle: str
    scale: float  #: a raw value ``v`` samples as ``v / scale`` (normalized integer textures)


_BY_TYPE = {
    ("u1", 1): TextureFormat(1, "f1", "RRR1", 255.0),
    ("u1", 3): TextureFormat(3, "f1", "RGB1", 255.0),
    ("u1", 4): TextureFormat(4, "f1", "RGB1", 255.0),
    ("u2", 1): TextureFormat(1, "nu2", "RRR1", 65535.0),
    ("f4", 1): TextureFormat(1, "f4", "RRR1", 1.0),
}


def texture_format(encoding: str, dtype: np.dtype, channels: int) -> TextureFormat:
    """The texture for an image of ``dtype`` x ``channels`` (``bgr*`` encodings swap red and blue)."""
    found = _BY_TYPE.get((f"{dtype.kind}{dtype.itemsize}", channels))
    if found is None or not dtype.isnative:
        shown = ", ".join(f"{kind} x{n}" for kind, n in _BY_TYPE)
        raise ValueError(f"{encoding or 'an image'} of {dtype} x{channels} is not drawn: the viewer draws 8-bit "
                         f"1/3/4-channel, 16-bit mono and float32 mono images ({shown}, native byte order)")
    if encoding.startswith("bgr"):
        return TextureFormat(found.components, found.dtype, "BGR1", found.scale)
    return found


class ImageLayer:
    """The latest frame of one topic: ``show`` copies it into the texture (GPU path or host path), ``draw`` fits it."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self._program = ctx.program(vertex_shader=_VERTEX, fragment_shader=_FRAGMENT)
        corners = np.array([0, 0, 1, 0, 0, 1, 1, 1], dtype=np.float32)
        self._quad = ctx.buffer(corners.tobytes())
        self._vao = ctx.vertex_array(self._program, [(self._quad, "2f", "in_corner")])
        self._texture: Any = None
        self._key: tuple[Any, ...] | None = None
        self._gpu: GpuStaging | None = None
        self.host = HostStaging()
        self.upload = UploadPath("frames")
        self._range = (0.0, 1.0)

    @property
    def size(self) -> tuple[int, int] | None:
        return None if self._texture is None else tuple(self._texture.size)

    def show(self, frame: FrameBytes, fmt: TextureFormat, value_range: tuple[float, float]) -> None:
        """Copy ``frame`` (rows, cols of ``element_bytes``-byte pixels) into the texture; the lease may go after."""
        rows, cols = frame.shape
        largest = int(self.ctx.info["GL_MAX_TEXTURE_SIZE"])
        if not (0 < rows <= largest and 0 < cols <= largest):
            raise ValueError(f"a {cols}x{rows} image does not fit this GL's textures (at most {largest} a side)")
        key = (rows, cols, fmt.components, fmt.dtype, frame.memory, frame.device)
        if key != self._key:
            self._reshape(key, fmt, frame)
        self._texture.swizzle = fmt.swizzle
        if self._gpu is not None:
            self._gpu.stage(frame)
            self._texture.write(self._gpu.buffer, alignment=1)  # pixel-unpack buffer to texture, on the GPU
        else:
            self._texture.write(self.host.stage(frame), alignment=1)  # glTexSubImage2D from host memory
        self._range = (value_range[0] / fmt.scale, value_range[1] / fmt.scale)

    def _reshape(self, key: tuple[Any, ...], fmt: TextureFormat, frame: FrameBytes) -> None:
        self._release_frame_objects()
        rows, cols = frame.shape
        self._texture = self.ctx.texture((cols, rows), fmt.components, dtype=fmt.dtype, alignment=1)
        self._key = key
        pixel_buffer = self.ctx.buffer(reserve=frame.nbytes) if frame.memory == "cuda" else None
        self._gpu = self.upload.choose(frame, pixel_buffer)
        if self._gpu is None and pixel_buffer is not None:
            pixel_buffer.release()

    def draw(self, viewport: tuple[int, int, int, int]) -> None:
        """Draw the frame in ``viewport`` (x, y, width, height), aspect kept, centred; nothing before a frame."""
        if self._texture is None:
            return
        x, y, width, height = viewport
        cols, rows = self._texture.size
        scale = min(width / cols, height / rows)
        shown_w, shown_h = max(1, round(cols * scale)), max(1, round(rows * scale))
        self.ctx.viewport = (x + (width - shown_w) // 2, y + (height - shown_h) // 2, shown_w, shown_h)
        import moderngl

        self._texture.filter = (moderngl.NEAREST, moderngl.NEAREST) if scale >= 1 else (moderngl.LINEAR,
                                                                                         moderngl.LINEAR)
        self._texture.use(0)
        self._program["frame"] = 0
        self._program["lo"], self._program["hi"] = self._range
        self._vao.render(mode=self.ctx.TRIANGLE_STRIP)

    def _release_frame_objects(self) -> None:
        if self._gpu is not None:
            self._gpu.close()
            self._gpu.buffer.release()
            self._gpu = None
        if self._texture is not None:
            self._texture.release()
            self._texture = None

    def close(self) -> None:
        self._release_frame_objects()
        for obj in (self._vao, self._quad, self._program):
            obj.release()
