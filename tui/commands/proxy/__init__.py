"""``ttft proxy``: the command, its flags read into a plan, and the lines it prints."""
