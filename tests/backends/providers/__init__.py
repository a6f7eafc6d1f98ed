"""Tests of backends.providers.registry."""
