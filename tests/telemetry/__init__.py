"""Tests of the telemetry package, mirroring its folders."""
