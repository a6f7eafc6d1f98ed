"""Helpers the tests share: scripted backends, hand-made event sequences, paths."""
