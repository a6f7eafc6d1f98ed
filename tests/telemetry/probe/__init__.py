"""Tests of telemetry.probe."""
