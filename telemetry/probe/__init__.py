"""``ttft probe``'s figures: the fit of latency against work, its saved form, and its split of a turn's wait."""
