"""Side-by-side comparison: per-pane statistics, rankings, bootstrap verdicts and their files."""
