"""One turn, the same under every front end: its plan, its run, and where its backend runs."""
