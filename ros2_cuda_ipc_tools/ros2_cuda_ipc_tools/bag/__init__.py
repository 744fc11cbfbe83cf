"""``bag_record`` and ``bag_play``: GPU topics into ordinary rosbag2 bags (MCAP, SQLite3) and any bag back into
GPU pools, through rosbags (no rosbag2 install needed)."""

from .bag_errors import BagError
from .message_types import MessageTypes
from .split_writer import STORAGES, SplitBagWriter

__all__ = ["STORAGES", "BagError", "MessageTypes", "SplitBagWriter"]
