"""Values a person gives to ttft (flags, API arguments), checked once for every front end."""
