"""Run a callback once an object is garbage: what the read path uses instead of ``weakref.finalize``.

``weakref.finalize`` keeps a registry and atexit bookkeeping per object, which costs several times
a plain weak reference with a callback on a path that runs for every frame.  Callbacks do not run
at interpreter exit: the leases they would give back go with the process anyway.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

#: Keeps each weak reference, and so its callback, alive; by id, since a weak reference hashes as its
#: object does and numpy arrays do not hash.
_pending: dict[int, weakref.ref[Any]] = {}


def when_collected(obj: object, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once ``obj`` has been collected."""

    def fire(ref: weakref.ref[Any]) -> None:
        del _pending[id(ref)]
        callback()

    ref = weakref.ref(obj, fire)
    _pending[id(ref)] = ref
