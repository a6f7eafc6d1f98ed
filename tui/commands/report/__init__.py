"""``ttft report``: the command, what it reads, and ``--merge``."""
