"""Tests of tui.screens: the modal screens."""
