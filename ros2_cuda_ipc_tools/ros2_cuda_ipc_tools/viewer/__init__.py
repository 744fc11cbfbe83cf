"""The viewer: GpuImage and GpuPointCloud2 topics drawn with OpenGL (moderngl), in a window or offscreen (EGL).

On a GPU machine each frame is copied on the GPU into a GL buffer registered with CUDA
(``cuda.core.GraphicsResource``), so nothing crosses to the host; host-memory frames, and machines
where CUDA-OpenGL interop is not there, are uploaded with ``glTexSubImage2D``.  Only the names are
imported here: moderngl, glfw and Pillow load when a viewer is made (the tools package's 'viewer' extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Viewer", "main"]

if TYPE_CHECKING:
    from .node import Viewer


def __getattr__(name: str) -> Any:
    if name == "Viewer":
        from .node import Viewer

        return Viewer
    if name == "main":
        from .cli import main

        return main
    raise AttributeError(name)
