"""What servers say of themselves: their own timings of a turn, and the KV cache's size."""
