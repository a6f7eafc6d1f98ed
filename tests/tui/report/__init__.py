"""Tests of tui.report."""
