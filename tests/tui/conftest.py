"""The UI tests' own fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder of the test's own unless the test chose one: the chat writes its prompt history and
    drafts there, and a test must neither read the person's nor leave its prompts in it."""
    import os

    if os.environ.get("TTFT_DATA_DIR"):
        return Path(os.environ["TTFT_DATA_DIR"])
    path = tmp_path_factory.mktemp("ttft-data")
    monkeypatch.setenv("TTFT_DATA_DIR", str(path))
    return path


@pytest.fixture
def fresh_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Data and config folders of this test alone (a module asks for it with ``pytestmark``): its sessions,
    tool consent and config never meet another test's."""
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
