"""The in-process engine's tests: only where a model load can run in this process (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import LLAMA_FIRST


@pytest.fixture(autouse=True)
def _llama_before_numpy() -> None:
    if not LLAMA_FIRST:
        pytest.skip(
            "a pytest plugin imported numpy before llama.cpp, and a CUDA build's model load then segfaults: "
            "run with -p no:jaxtyping (or PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p pytest_asyncio.plugin)"
        )
