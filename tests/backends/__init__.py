"""Tests of the backends package, mirroring its folders."""
