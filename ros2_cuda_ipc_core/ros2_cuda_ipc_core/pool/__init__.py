"""A pool shared between processes: the publisher's :class:`BlockManager` and its FD server, the descriptor a
message carries, leases, and the reader's side (the handout, the imported pool, a leased block's handle)."""
