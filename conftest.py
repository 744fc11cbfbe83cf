"""Test-wide settings: every run gets its own DDS domain, kept on this host."""

import os
import random

# Child processes inherit these, so real multi-process tests never see another run's traffic.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 100)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "0")
