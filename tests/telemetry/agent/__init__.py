"""Tests of telemetry.agent: a tool-using turn's steps and split."""
