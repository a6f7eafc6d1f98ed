"""Tests of backends.load.driver."""
