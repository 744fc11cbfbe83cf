"""CPU per frame, as the producer and the consumer both count it: their own process's CPU time (user + system,
every thread, DDS's included) from the end of the first measured frame to the end of the last, over the frames
in between. Idle waits cost nothing; the executor's wake-ups and DDS's threads are counted, as ``top`` would."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["CpuSpan"]


@dataclass
class CpuSpan:
    first: float | None = None
    last: float = 0.0
    frames: int = 0

    def frame_done(self) -> None:
        """Call at the end of each measured frame's work."""
        now = time.process_time()
        if self.first is None:
            self.first = now
        self.last = now
        self.frames += 1

    def ms_per_frame(self) -> float | None:
        if self.first is None or self.frames < 2:
            return None
        return round((self.last - self.first) * 1e3 / (self.frames - 1), 4)
