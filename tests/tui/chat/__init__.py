"""Tests of tui.chat."""
