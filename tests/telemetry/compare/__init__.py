"""Tests of telemetry.compare.stats."""
