"""A hostile peer on a pipeline's ``pipeline_stats``: ``python report_forger.py NAMESPACE NODE ROUNDS [FLOOD]``.

Its publisher exists before the runner starts.  Once it has read a genuine report of ``NODE`` it sends, ROUNDS
times (0: until SIGINT; one round every 0.3 s), every message of :func:`forgeries`: not JSON, a JSON list, that report with
``"in": "x"``, ``{"pid": 1}``, that report with ``"bad": 7`` (its signature kept, and dropped), its node
renamed with an ESC sequence, and a report of a node the pipeline does not have.  With FLOOD, each round also sends
that many report requests naming NODE on ``pipeline_report_request``, the topic the runner once asked its nodes on
(none subscribes now).  It prints ``ready`` when its publisher is up, ``flooding`` when the first round starts, and
when SIGINT or SIGTERM ends it ``request subscribers N`` (the most that topic had in any round) and ``sent N``.
The environment may pick some forgeries (``FORGERIES=0,3``: their indexes; ``-``: none) and make the publisher only
once a genuine report came (``FORGER_LATE=1``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import rclpy
from std_msgs.msg import String


def forgeries(genuine: str) -> list[str]:
    report = json.loads(genuine)
    unsigned = {key: value for key, value in report.items() if key != "signature"}
    namespace = report["node"].rsplit("/", 1)[0]
    return ["not json", "[1, 2]", json.dumps({**unsigned, "in": "x"}), json.dumps({"pid": 1}),
            json.dumps({**report, "bad": 7}), json.dumps({**unsigned, "bad": 7}),
            json.dumps({**unsigned, "node": namespace + "/\x1b[31mvoxel\x1b[0m"}),
            json.dumps({**unsigned, "node": namespace + "/intruder"}), "{" * 100_000]


def main() -> int:
    namespace, target, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    flood = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # SIGINT: a KeyboardInterrupt, the context up
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # and SIGTERM (a script's `&` job ignores SIGINT)
    node = rclpy.create_node("forger", namespace=namespace)
    late = os.environ.get("FORGER_LATE") == "1"
    stats = None if late else node.create_publisher(String, "pipeline_stats", 10)
    chosen = os.environ.get("FORGERIES", "")
    picked = [int(index) for index in chosen.split(",") if index] if chosen != "-" else []
    requests = node.create_publisher(String, "pipeline_report_request", 10)
    genuine: list[str] = []

    def on_stats(msg: String) -> None:
        if not genuine and f'"node": "{namespace}/{target}"' in msg.data:
            genuine.append(msg.data)

    reading = node.create_subscription(String, "pipeline_stats", on_stats, 10)
    print("ready", flush=True)
    sent = 0
    subscribers = 0
    try:
        while not genuine:
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_subscription(reading)  # its own forgeries would come back to it
        if stats is None:
            stats = node.create_publisher(String, "pipeline_stats", 10)
        texts = forgeries(genuine[0])
        texts = [texts[index] for index in picked] if picked or chosen == "-" else texts
        request = String(data=f"{namespace}/{target}")
        print("flooding", flush=True)
        done = 0
        while not rounds or done < rounds:
            done += 1
            for text in texts:
                stats.publish(String(data=text))
                sent += 1
            for _ in range(flood):
                requests.publish(request)
                sent += 1
            subscribers = max(subscribers, requests.get_subscription_count())
            time.sleep(0.3)
    except KeyboardInterrupt:
        pass
    print(f"request subscribers {subscribers}", flush=True)
    print(f"sent {sent}", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
