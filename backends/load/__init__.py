"""``ttft bench``'s driver: many concurrent turns, their prompts, workers, pacing and the capacity search."""
