"""``Overlay``: a few lines of text (topic, fps, latency, lease stats) drawn over a tile's top-left corner.

Pillow draws the text into an RGBA image, uploaded as a texture only when the text changes (about once
a second), and blended over the tile, so the overlay costs nothing per frame beyond one small quad.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Overlay"]

_VERTEX = """
#version 330
in vec2 in_corner;
out vec2 uv;
void main() {
    uv = vec2(in_corner.x, 1.0 - in_corner.y);
    gl_Position = vec4(in_corner * 2.0 - 1.0, 0.0, 1.0);
}
"""
_FRAGMENT = """
#version 330
uniform sampler2D text;
in vec2 uv;
out vec4 colour;
void main() { colour = texture(text, uv); }
"""


class Overlay:
    """Text over a viewport's top-left corner; ``text`` is re-rendered only when it changes."""

    def __init__(self, ctx: Any, font_size: int = 14) -> None:
        from PIL import ImageFont

        self.ctx = ctx
        try:
            self._font: Any = ImageFont.load_default(size=font_size)
        except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
            self._font = ImageFont.load_default()
        self._program = ctx.program(vertex_shader=_VERTEX, fragment_shader=_FRAGMENT)
        self._quad = ctx.buffer(np.array([0, 0, 1, 0, 0, 1, 1, 1], dtype=np.float32).tobytes())
        self._vao = ctx.vertex_array(self._program, [(self._quad, "2f", "in_corner")])
        self._texture: Any = None
        self.text = ""

    def set_text(self, text: str) -> None:
        if text == self.text and self._texture is not None:
            return
        from PIL import Image, ImageDraw

        self.text = text
        probe = ImageDraw.Draw(Image.new("RGBA", (1, 1)))
        left, top, right, bottom = probe.multiline_textbbox((0, 0), text, font=self._font)
        image = Image.new("RGBA", (int(right - left) + 12, int(bottom - top) + 10), (0, 0, 0, 160))
        ImageDraw.Draw(image).multiline_text((6 - left, 5 - top), text, font=self._font, fill=(255, 255, 255, 255))
        if self._texture is not None:
            self._texture.release()
        self._texture = self.ctx.texture(image.size, 4, image.tobytes(), alignment=1)

    def draw(self, viewport: tuple[int, int, int, int]) -> None:
        """Blend the text over the top-left corner of ``viewport`` (x, y, width, height)."""
        if self._texture is None:
            return
        x, y, width, height = viewport
        text_w, text_h = self._texture.size
        shown_w, shown_h = min(text_w, width), min(text_h, height)
        self.ctx.viewport = (x, y + height - shown_h, shown_w, shown_h)
        self.ctx.enable(self.ctx.BLEND)
        self.ctx.blend_func = self.ctx.SRC_ALPHA, self.ctx.ONE_MINUS_SRC_ALPHA
        self._texture.use(0)
        self._program["text"] = 0
        self._vao.render(mode=self.ctx.TRIANGLE_STRIP)
        self.ctx.disable(self.ctx.BLEND)

    def close(self) -> None:
        for obj in (self._texture, self._vao, self._quad, self._program):
            if obj is not None:
                obj.release()
