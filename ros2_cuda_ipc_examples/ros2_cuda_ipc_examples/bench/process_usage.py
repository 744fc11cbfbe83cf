"""A soak's resource sample of one live process: its open fds and resident memory, read from /proc."""

from __future__ import annotations

import os

__all__ = ["process_usage"]


def process_usage(pid: int) -> dict[str, float] | None:
    """Open fds and resident memory of a live process, from /proc; None once it is gone."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status") as status:
            rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None
    return {"fds": float(fds), "rss_mib": rss_kib / 1024}
