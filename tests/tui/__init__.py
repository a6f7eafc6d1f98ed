"""Tests of the tui package: Textual pilots and snapshots."""
