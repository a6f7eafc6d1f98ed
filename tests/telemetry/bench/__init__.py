"""Tests of telemetry.bench."""
