"""What a bench sends: length distributions, shared prefixes, conversations, datasets and traces (pure)."""
