"""Tests of backends.compare.runner."""
