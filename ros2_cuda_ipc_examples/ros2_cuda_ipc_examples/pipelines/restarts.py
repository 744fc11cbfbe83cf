"""``--restart on-failure``: a node whose process dies is started again, after a back-off, and counted
(``always``: one that ends with 0 unasked too, as a node stopped from outside by SIGINT does).

The nodes carry on by themselves: a restarted camera makes a new pool under a new name and its
readers import it as they would any new publisher's (the dead one's blocks are unmapped once no
view holds them); a restarted consumer subscribes again and its leases died with its process (the
kernel drops a dead process's OFD locks). The back-off doubles from 0.5 s up to 8 s for a node that
keeps dying within 10 s of its start, so a node that cannot run does not spin the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RESTART_POLICIES", "Restarts"]

RESTART_POLICIES = ("no", "on-failure", "always")
FIRST_DELAY = 0.5
LONGEST_DELAY = 8.0
SETTLED_AFTER = 10.0  # seconds a life must last for the back-off to start again from FIRST_DELAY


@dataclass
class Restarts:
    """Decides, for a child that ended with ``code``, whether to start it again and when.

    ``start(name)`` makes the new process (the runner's ``_start``); ``on_restart(name)`` is told once it
    is started (the live table counts it).
    """

    policy: str
    start: Callable[[str], Any]
    on_restart: Callable[[str], None]
    _due: dict[str, float] = field(default_factory=dict)
    _delay: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in RESTART_POLICIES:
            raise ValueError(f"restart policy {self.policy!r} is not one of {', '.join(RESTART_POLICIES)}")

    def handles(self, name: str, code: int, started: float) -> bool:
        """Whether the runner may carry on with ``name`` ended: it will be restarted (``code`` not 0 and the
        policy is on-failure, or any code and the policy is always). Otherwise its end is the run's failure."""
        if self.policy == "no" or (code == 0 and self.policy != "always"):
            return False
        if name not in self._due:
            now = time.monotonic()
            delay = FIRST_DELAY if now - started > SETTLED_AFTER else self._delay.get(name, FIRST_DELAY / 2) * 2
            self._delay[name] = min(delay, LONGEST_DELAY)
            self._due[name] = now + self._delay[name]
        return True

    def waiting(self, name: str) -> bool:
        """Whether ``name`` died and waits for its restart (its exit code is then not the run's failure)."""
        return name in self._due

    def start_due(self) -> list[tuple[str, Any]]:
        """Start every node whose back-off is over; the new (name, process handle) pairs."""
        now = time.monotonic()
        started = []
        for name, due in list(self._due.items()):
            if now >= due:
                del self._due[name]
                started.append((name, self.start(name)))
                self.on_restart(name)
        return started
