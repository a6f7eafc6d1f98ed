"""Tests of tui.compare.app."""
