"""Tests of backends.local (the real small model)."""
