"""The installed ttft's version, as its package metadata says: the one answer for ``ttft --version``,
the report page and the spans' ``service.version``."""

from __future__ import annotations


def package_version() -> str:
    """Read only when asked: the metadata costs about 10 ms, which no start should pay."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ttft")
    except PackageNotFoundError:  # run from a tree that was never installed
        return "0+unknown"
