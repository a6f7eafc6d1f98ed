"""Tests of tui.proxy."""
