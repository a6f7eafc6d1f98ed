"""Tests of telemetry.export.formats."""
