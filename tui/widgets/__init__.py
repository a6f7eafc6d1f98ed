"""Reusable chat widgets: each takes data (snapshots, turn records, render-lag summaries), none computes a metric."""
