"""Tests of telemetry.server."""
