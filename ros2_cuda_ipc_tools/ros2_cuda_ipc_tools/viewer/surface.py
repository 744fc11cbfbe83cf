"""Where the viewer draws: a window (GLFW) or an offscreen framebuffer (EGL, no X server), one interface.

Both give a moderngl context and a framebuffer of the asked size; the window's is the screen, the
offscreen one a colour renderbuffer.  Everything the viewer draws goes through :class:`Surface`, so
``--headless`` renders with the very code the window runs, and ``read_pixels`` is what was drawn.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

__all__ = ["GL_REQUIRED", "NVIDIA_EGL_VENDOR", "Surface", "SurfaceError", "open_surface"]

#: OpenGL 3.3 core: texture swizzles, R16 / R32F textures, and what Mesa's llvmpipe offers everywhere.
GL_REQUIRED = 330
#: Where the NVIDIA driver of a container puts its EGL vendor file (glvnd picks Mesa's otherwise).
NVIDIA_EGL_VENDOR = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json"


class SurfaceError(RuntimeError):
    """No OpenGL surface could be made (no display, no EGL, GL too old, a library missing): says which."""


class Surface:
    """A moderngl context and the framebuffer the viewer draws into; ``close()`` frees both."""

    def __init__(self, ctx: Any, framebuffer: Any, window: Any = None) -> None:
        self.ctx = ctx
        self.framebuffer = framebuffer
        self._window = window
        self._thread = threading.get_ident()
        self.closed = False

    @property
    def headless(self) -> bool:
        return self._window is None

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels of what is drawn."""
        width, height = self.framebuffer.size
        return int(width), int(height)

    @property
    def renderer(self) -> str:
        info = self.ctx.info
        return f"{info.get('GL_RENDERER', '?')} (OpenGL {info.get('GL_VERSION', '?')}, {info.get('GL_VENDOR', '?')})"

    def make_current(self) -> None:
        """Make the context current on the calling thread (a multi-threaded executor moves callbacks around)."""
        if threading.get_ident() == self._thread:
            return
        self._thread = threading.get_ident()
        if self._window is not None:
            import glfw

            glfw.make_context_current(self._window)
        else:
            self.ctx.__enter__()

    def begin(self) -> None:
        """Start a frame: the framebuffer bound, its whole area the viewport, cleared to dark grey."""
        self.make_current()
        if self._window is not None:
            import glfw

            width, height = glfw.get_framebuffer_size(self._window)
            self.framebuffer.viewport = (0, 0, width, height)
        self.framebuffer.use()
        self.framebuffer.clear(0.08, 0.08, 0.08, 1.0)

    def finish(self) -> None:
        """End a frame: on screen (swap) or complete offscreen, so a read or a latency stamp sees it."""
        if self._window is not None:
            import glfw

            glfw.swap_buffers(self._window)
        else:
            self.ctx.finish()

    def poll(self) -> bool:
        """Handle window events; False once the user closed the window (always True offscreen)."""
        if self._window is None:
            return True
        import glfw

        glfw.poll_events()
        return not glfw.window_should_close(self._window)

    @property
    def window(self) -> Any:
        """The GLFW window (None offscreen), for input callbacks."""
        return self._window

    def read_pixels(self) -> np.ndarray:
        """What the last frame drew, (height, width, 4) uint8 RGBA, top row first (glReadPixels)."""
        self.make_current()
        width, height = self.size
        raw = self.framebuffer.read(viewport=(0, 0, width, height), components=4, alignment=1)
        return np.frombuffer(raw, dtype=np.uint8).reshape(height, width, 4)[::-1].copy()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.make_current()
        if self._window is None:
            self.framebuffer.release()
        self.ctx.release()
        if self._window is not None:
            import glfw

            glfw.destroy_window(self._window)
            glfw.terminate()


def open_surface(size: tuple[int, int], headless: bool, title: str = "viewer") -> Surface:
    """A window of ``size`` on the display, or an offscreen EGL framebuffer of ``size`` when ``headless``."""
    try:
        import moderngl
    except ImportError as exc:
        raise SurfaceError(f"the viewer needs moderngl ({exc}); install the tools package's 'viewer' extra "
                           "(pip install 'ros2_cuda_ipc_tools[viewer]')") from None
    return _offscreen(moderngl, size) if headless else _window(moderngl, size, title)


def _offscreen(moderngl: Any, size: tuple[int, int]) -> Surface:
    if "__EGL_VENDOR_LIBRARY_FILENAMES" not in os.environ and os.path.exists(NVIDIA_EGL_VENDOR):
        os.environ["__EGL_VENDOR_LIBRARY_FILENAMES"] = NVIDIA_EGL_VENDOR  # before libEGL loads: the GPU's EGL
    try:
        ctx = moderngl.create_standalone_context(require=GL_REQUIRED, backend="egl")
    except Exception as exc:  # glcontext raises plain Exceptions naming the EGL call that failed
        raise SurfaceError(f"no headless OpenGL {GL_REQUIRED // 100}.{GL_REQUIRED % 100 // 10} context through "
                           f"EGL: {exc} (libEGL.so.1 and a vendor library, Mesa's or the GPU driver's, are needed)"
                           ) from None
    framebuffer = ctx.simple_framebuffer(size, components=4)
    return Surface(ctx, framebuffer)


def _window(moderngl: Any, size: tuple[int, int], title: str) -> Surface:
    try:
        import glfw
    except ImportError as exc:
        raise SurfaceError(f"a window needs glfw ({exc}); install the 'viewer' extra, or use --headless") from None
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        raise SurfaceError("no display (DISPLAY and WAYLAND_DISPLAY are unset): use --headless to render offscreen")
    if not glfw.init():
        raise SurfaceError("GLFW could not start (no usable display connection)")
    glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, GL_REQUIRED // 100)
    glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, GL_REQUIRED % 100 // 10)
    glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
    glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
    window = glfw.create_window(size[0], size[1], title, None, None)
    if not window:
        glfw.terminate()
        raise SurfaceError(f"GLFW could not open a {size[0]}x{size[1]} OpenGL {GL_REQUIRED / 100:.1f} core window")
    glfw.make_context_current(window)
    glfw.swap_interval(0)  # frames are drawn when they arrive; the executor paces the loop, not vsync
    ctx = moderngl.create_context(require=GL_REQUIRED)
    return Surface(ctx, ctx.detect_framebuffer(), window)
