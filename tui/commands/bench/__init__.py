"""``ttft bench``: the command, its flags, its capacity search's options and what it prints."""
