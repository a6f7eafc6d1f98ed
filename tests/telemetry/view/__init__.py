"""Tests of telemetry.view."""
