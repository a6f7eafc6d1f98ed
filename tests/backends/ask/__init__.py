"""Tests of backends.agent: the loop, consent, tools on each wire."""
