"""Tests of backends.transport."""
