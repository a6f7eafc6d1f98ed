"""Tests of backends.otel.push."""
