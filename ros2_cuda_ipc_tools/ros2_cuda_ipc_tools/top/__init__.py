"""``cuda_ipc_top``: what every ros2_cuda_ipc pool and reader on the graph is doing, from ``/diagnostics``.

``board``: the statuses joined per topic; ``main``: the command (``python -m ros2_cuda_ipc_tools.top``).
"""

from .board import Board, ReaderEntry, TopicRow, render_table

__all__ = ["Board", "ReaderEntry", "TopicRow", "render_table"]
