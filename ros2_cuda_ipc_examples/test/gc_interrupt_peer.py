"""Test peer (not shipped): SIGINTs, one at a time, into a main thread that collects garbage all the time.

The GC-pause callback runs at almost every allocation here (threshold 1), so most SIGINTs are handled while
it runs.  Each SIGINT waits for the KeyboardInterrupt of the one before: a SIGINT lost in the callback stops
the count, and the peer exits 1 saying which.  Prints ``caught N of N`` and exits 0 when none was lost.
"""

import gc
import os
import signal
import sys
import threading

from ros2_cuda_ipc_examples.nodes.frame_stats import gc_pauses

SIGNALS = int(sys.argv[1])
caught = threading.Semaphore(0)
lost: list[int] = []


def send() -> None:
    for number in range(SIGNALS):
        os.kill(os.getpid(), signal.SIGINT)
        if not caught.acquire(timeout=10):
            lost.append(number)
            os._exit(1)


pauses = gc_pauses()
gc.set_threshold(1)
sender = threading.Thread(target=send, daemon=True)
count = 0
started = False
while count < SIGNALS:
    try:
        if not started:
            started = True
            sender.start()
        while True:
            garbage: list = []
            garbage.append(garbage)
    except KeyboardInterrupt:
        count += 1
        caught.release()
gc.set_threshold(700)
print(f"caught {count} of {SIGNALS} SIGINTs; {pauses.count} collections timed", flush=True)
