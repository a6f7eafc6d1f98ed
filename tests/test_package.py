"""``import ttft``: its top level is the Python API, each name the one ``backends/api.py`` defines, and
none of it is loaded until it is used (the command line imports ``ttft`` first and must not pay for it)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ttft.backends import api

import ttft
from tests.support.paths import ROOT


def test_the_top_level_is_the_api_name_for_name() -> None:
    assert ttft.__all__ == api.__all__
    for name in api.__all__:
        assert getattr(ttft, name) is getattr(api, name)
    assert set(api.__all__) <= set(dir(ttft))


def test_a_name_the_api_lacks_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        ttft.nosuch  # noqa: B018


def test_importing_the_package_loads_no_api() -> None:
    code = "import sys, ttft, ttft.tui.cli; print(sorted(m for m in sys.modules if m.startswith('ttft.backends.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ttft.backends.api" not in done.stdout
