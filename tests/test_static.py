"""Static checks in CI: mypy (configured in pyproject.toml) and ruff must be clean over the project.

They run here so that the README's one test command covers them; each failure shows the tool's
own output.
"""

import subprocess
import sys

import pytest
from mypy import api as mypy_api

from tests.support.paths import ROOT


def test_mypy_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    # mypy reads [tool.mypy] (files, per-package strictness) from the pyproject.toml in the cwd.
    monkeypatch.chdir(ROOT)
    stdout, stderr, status = mypy_api.run([])
    assert status == 0, f"mypy found errors:\n{stdout}{stderr}"


@pytest.mark.parametrize("args", [["check"], ["format", "--check", "--diff"]], ids=["check", "format"])
def test_ruff_is_clean(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"ruff {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
