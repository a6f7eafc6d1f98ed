"""Tests of telemetry.log.turns."""
