"""The runner's end of a child's report-request pipe: how it asks the nodes it started for a report now.

Each child gets a pipe of its own at its start (a restarted one a fresh pipe); its read end goes to the child
(``pass_fds``, its number in :data:`~..nodes.report_requests.REPORT_REQUESTS_VARIABLE`), the write end stays
here.  No other process holds it, so no DDS participant can make the nodes spend anything on requests (see
:mod:`..nodes.report_requests`, the child's side).
"""

from __future__ import annotations

import os

from ..nodes.report_requests import MAX_LINE_BYTES, REPORT_REQUESTS_VARIABLE

__all__ = ["RequestPipe"]


class RequestPipe:
    """A pipe to one child: :meth:`environment` and :attr:`child_end` for its start, then :meth:`ask`, :meth:`close`.

    The write end does not block: a child that does not read (stuck, or not a node) loses requests, the runner
    never waits on it."""

    def __init__(self) -> None:
        self.child_end, self._fd = os.pipe()
        os.set_blocking(self._fd, False)
        self._child_end_open = True

    def environment(self) -> dict[str, str]:
        """The variable that names the child's end, for the child's environment."""
        return {REPORT_REQUESTS_VARIABLE: str(self.child_end)}

    def started(self) -> None:
        """The child has its copy of its end (or did not start): the runner's copy goes."""
        if self._child_end_open:
            os.close(self.child_end)
            self._child_end_open = False

    def ask(self, node: str) -> bool:
        """Ask for ``node``'s report (its fully qualified name, or ``*``: all the child's nodes).  False when the
        request was not written whole: the child is gone, not reading, or ``node`` is not one line."""
        line = node.encode("utf-8", "replace") + b"\n"
        if self._fd < 0 or b"\n" in line[:-1] or len(line) > MAX_LINE_BYTES:
            return False
        try:
            return os.write(self._fd, line) == len(line)  # below PIPE_BUF: whole or not at all
        except OSError:  # BrokenPipeError (the child ended), BlockingIOError (it does not read)
            return False

    def close(self) -> None:
        """Close the runner's ends: the child's reader sees EOF and ends."""
        self.started()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
