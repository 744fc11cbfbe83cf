"""``cuda_ipc_top``: what every ros2_cuda_ipc pool and reader on the graph is doing, from ``/diagnostics``.

``board``: the statuses joined per pool; ``render``: the board as a table or strict JSON, nothing raw;
``hearing``: who has been heard; ``main``: the command (``python -m ros2_cuda_ipc_tools.top``).
"""

from .board import Board, ReaderEntry, TopicRow
from .render import printable, render_json, render_screen, render_table

__all__ = ["Board", "ReaderEntry", "TopicRow", "printable", "render_json", "render_screen", "render_table"]
