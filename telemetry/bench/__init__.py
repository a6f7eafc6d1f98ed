"""A load run's figures: its typed requests, per-level aggregates, objectives, capacity, merge and files."""
