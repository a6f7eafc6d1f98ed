"""Tests of tui.widgets."""
